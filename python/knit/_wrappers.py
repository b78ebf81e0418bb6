"""nl.* convenience wrappers (being written)."""
