"""Knit's version (a leaf module: the package and the program cache both read it)."""
__version__ = "0.1.0"
