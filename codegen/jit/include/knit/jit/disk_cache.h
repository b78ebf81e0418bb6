// Knit's one disk cache (docs/jit.md, "The disk cache"): the JIT's compiled objects, the C++
// kernel files' objects, kernel lists and manifests, and (through knit._core) Python's traced
// and lowered programs are all entries of a DiskCache.
//
// An entry is a file `<dir>/<key><suffix>` that records the key it was written for and a SHA-256
// of its bytes:
//
//   "KNITENT1" | SHA-256 of everything after it (32 bytes) | u32 key length | key | payload
//
// Writes are atomic (a temporary file in the same folder renamed into place), so concurrent
// processes never see half an entry. A load reads only a regular file (not a symbolic link, FIFO
// or device) of at most kMaxEntryBytes, and returns its payload only if the checksum holds and
// the recorded key is the one asked for: a truncated, corrupted, other-format, swapped or copied
// entry is a miss, removed (so that it is rebuilt) with a one-line warning on stderr. A cache
// that cannot be written (read-only, full) is only slower: the first failed write of a process
// prints one warning and the process stops writing there.
//
// The cache's folders (objects/, programs/, pch/ of the cache directory) share a size cap,
// KNIT_CACHE_MAX_MB (cache_size_cap): after each write, least-recently-used files go until the
// total is under the cap. A load that hits marks its entry used (its modification time).
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace knit::codegen {

// $KNIT_CACHE_DIR, else $XDG_CACHE_HOME/knit, else ~/.cache/knit; "" when caching is off
// (KNIT_CACHE=0, or no home directory).
std::string cache_directory();

// Hex SHA-256 of `bytes`.
std::string content_hash(std::string_view bytes);

// The entry format's magic. Keys include it (Specializer, the C++ kernel files' keys), so that Knit
// builds with different formats sharing one directory use different file names instead of
// removing each other's entries.
inline constexpr std::string_view kEntryFormat = "KNITENT1";

// Larger files are not read (a cache entry is an object or a program, far below this).
constexpr uint64_t kMaxEntryBytes = uint64_t{1} << 30;

// Whether this process failed to write into cache directory `root` (then it writes no more
// there); note_cache_unwritable records such a failure (errno `error`), with one warning.
bool cache_unwritable(const std::string& root);
void note_cache_unwritable(const std::string& root, int error);

// The cap on the bytes of a cache directory's folders: $KNIT_CACHE_MAX_MB mebibytes, default
// kDefaultCacheMaxMB; 0 means no cap. Any other value (not a whole number) gets one warning and
// the default.
inline constexpr uint64_t kDefaultCacheMaxMB = 1024;
uint64_t cache_size_cap();

// A file Knit wrote in a cache folder: an entry `<64 hex digits>.<o|knp|pch>` or the temporary
// file of a write (`<entry>.tmp.*`). Other files in the folders are not Knit's and never touched.
struct CacheFile {
  std::string path;
  uint64_t bytes = 0;
  int64_t used_ns = 0;  // last written or loaded (modification time)
  bool temporary = false;
};
bool is_cache_file_name(std::string_view name);
// Knit's files in the folders objects/, programs/ and pch/ of the cache directory `root`.
std::vector<CacheFile> cache_files(const std::string& root);
// Removes least-recently-used files of `root` until at most 90% of `cap` bytes remain, if
// they are over `cap` (the margin spares a scan-and-remove on every write). Temporary files
// younger than an hour are writes in progress: counted, never removed. Returns files removed.
int64_t evict_least_recently_used(const std::string& root, uint64_t cap);

class DiskCache {
 public:
  // Entries live in `dir` (created on first write), named key + `suffix`.
  DiskCache(std::string dir, std::string suffix);

  // The payload stored under `key`, or nothing (missing, or rejected as above).
  std::optional<std::string> load(std::string_view key);
  // Writes the entry atomically, then keeps the cache directory under its cap; false when it
  // could not be written (after the first such failure in a process, with one warning, the
  // process writes no more entries into this cache directory).
  bool store(std::string_view key, std::string_view payload) { return store(key, std::span(&payload, 1)); }
  // The same, for a payload given in pieces (their concatenation), which are written as they are:
  // a large entry (a program cache entry is about 170 bytes an instruction) is never copied whole.
  bool store(std::string_view key, std::span<const std::string_view> payload);
  // Whether a file exists under `key` (not checked: load() may still reject it).
  bool contains(std::string_view key) const;

  std::string path(std::string_view key) const;
  const std::string& directory() const { return dir_; }

  std::atomic<int64_t> hits = 0, misses = 0, rejected = 0;  // `rejected`: bad entries removed

 private:
  void reject(const std::string& file, const std::string& why);
  std::string dir_, suffix_, root_;  // root_: the cache directory, dir_'s parent
};

// The entry format alone, for tests and tools: the bytes of an entry for `key` and `payload`, and
// the payload of entry bytes if they are a sound entry for `key` (else nothing, `why` says why).
std::string encode_entry(std::string_view key, std::string_view payload);
std::optional<std::string> decode_entry(std::string_view bytes, std::string_view key, std::string* why = nullptr);

}  // namespace knit::codegen
