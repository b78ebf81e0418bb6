// The disk cache (knit/jit/disk_cache.h): entry format, safe reads, atomic writes.
#include "knit/jit/disk_cache.h"

#include "knit/jit/object_cache.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <llvm/ADT/StringExtras.h>
#include <llvm/IR/Module.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/SHA256.h>

namespace knit::codegen {

namespace {

constexpr size_t kDigest = 32;
constexpr size_t kHeader = kEntryFormat.size() + kDigest + 4;  // magic, checksum, key length

std::array<uint8_t, 32> sha256(std::string_view bytes) {
  llvm::SHA256 h;
  h.update(llvm::StringRef(bytes.data(), bytes.size()));
  return h.final();
}

// The whole of a regular file of at most kMaxEntryBytes; nothing, with `why`, for anything else.
// O_NOFOLLOW refuses a symbolic link; O_NONBLOCK keeps a FIFO from blocking the open, and the
// fstat then refuses it (and devices) before a byte is read.
// A successful read marks the file used (its modification time: the eviction's recency; access
// times are often not kept). In a folder this process may not write that fails, harmlessly.
std::optional<std::string> read_regular_file(const std::string& file, std::string& why, bool& missing) {
  missing = false;
  const int fd = ::open(file.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    missing = errno == ENOENT || errno == ENOTDIR;
    why = errno == ELOOP ? "it is a symbolic link" : std::string("it cannot be opened (") + std::strerror(errno) + ")";
    return std::nullopt;
  }
  std::optional<std::string> bytes;
  struct stat st{};
  if (::fstat(fd, &st) != 0) {
    why = "it cannot be examined";
  } else if (!S_ISREG(st.st_mode)) {
    why = "it is not a regular file";
  } else if (static_cast<uint64_t>(st.st_size) > kMaxEntryBytes) {
    why = "it is larger than " + std::to_string(kMaxEntryBytes) + " bytes";
  } else {
    std::string data(static_cast<size_t>(st.st_size), '\0');
    size_t at = 0;
    while (at < data.size()) {
      const ssize_t n = ::read(fd, data.data() + at, data.size() - at);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      at += static_cast<size_t>(n);
    }
    char extra;
    if (at != data.size() || ::read(fd, &extra, 1) != 0) {
      why = "it changed size while being read";
    } else {
      bytes = std::move(data);
      (void)::futimens(fd, nullptr);
    }
  }
  ::close(fd);
  return bytes;
}

// Writes `pieces`, one after another, to a fresh temporary file beside `file`, then renames it
// over `file`. Returns 0, or the errno of the step that failed.
int write_atomically(const std::string& file, std::span<const std::string_view> pieces) {
  static std::atomic<uint64_t> sequence = 0;
  const std::string temp = file + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(sequence++);
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return errno;
  int error = 0;
  for (const std::string_view bytes : pieces)
    for (size_t at = 0; at < bytes.size() && !error;) {
      const ssize_t n = ::write(fd, bytes.data() + at, bytes.size() - at);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) error = errno;
      else if (n == 0) error = ENOSPC;
      else at += static_cast<size_t>(n);
    }
  if (::close(fd) != 0 && !error) error = errno;                           // (NFS reports a full disk only here)
  if (!error && ::rename(temp.c_str(), file.c_str()) != 0) error = errno;  // readers see all or nothing
  if (error) ::unlink(temp.c_str());
  return error;
}

// Cache directories this process could not write: it writes no more entries there. Both of
// Knit's extension modules (knit._core, knit._cppc) have a copy of this file, so the last one
// recorded is also in the process's environment, tagged with its pid (a child process checks for
// itself): the process warns once, and neither module keeps trying.
std::mutex unwritable_mutex;
std::set<std::string> unwritable_roots;
constexpr const char* kUnwritableVariable = "KNIT_UNWRITABLE_CACHE";

bool unwritable_locked(const std::string& root) {
  if (unwritable_roots.contains(root)) return true;
  const char* noted = std::getenv(kUnwritableVariable);
  if (!noted || std::string(noted) != std::to_string(::getpid()) + " " + root) return false;
  unwritable_roots.insert(root);
  return true;
}

constexpr std::string_view kFolders[] = {"objects", "programs", "pch"};
constexpr std::string_view kSuffixes[] = {".o", ".knp", ".pch"};
constexpr int64_t kAbandonedTempNs = int64_t{3600} * 1'000'000'000;

int64_t modification_ns(const struct stat& st) {
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
}

// Where the payload of a sound entry for `key` starts in `bytes`; nothing, with `why`, otherwise.
std::optional<size_t> payload_offset(std::string_view bytes, std::string_view key, std::string* why) {
  auto fail = [&](const char* reason) -> std::optional<size_t> {
    if (why) *why = reason;
    return std::nullopt;
  };
  if (bytes.size() < kHeader || !bytes.starts_with(kEntryFormat))
    return fail("it is not a cache entry of this Knit version");
  const std::string_view body = bytes.substr(kEntryFormat.size() + kDigest);
  if (std::memcmp(bytes.data() + kEntryFormat.size(), sha256(body).data(), kDigest) != 0)
    return fail("it is truncated or corrupt (checksum mismatch)");
  uint32_t n = 0;
  std::memcpy(&n, body.data(), 4);
  if (n > body.size() - 4) return fail("it is truncated or corrupt (key length)");
  if (body.substr(4, n) != key) return fail("it was written for another key (a swapped or copied entry)");
  return kHeader + n;
}

}  // namespace

std::string content_hash(std::string_view bytes) {
  const auto digest = sha256(bytes);
  return llvm::toHex(llvm::ArrayRef<uint8_t>(digest.data(), digest.size()), /*LowerCase=*/true);
}

bool cache_unwritable(const std::string& root) {
  std::lock_guard lock(unwritable_mutex);
  return unwritable_locked(root);
}

void note_cache_unwritable(const std::string& root, int error) {
  std::lock_guard lock(unwritable_mutex);
  if (unwritable_locked(root)) return;
  unwritable_roots.insert(root);
  ::setenv(kUnwritableVariable, (std::to_string(::getpid()) + " " + root).c_str(), 1);
  std::fprintf(stderr,
               "knit: warning: cannot write the cache directory %s (%s); this process continues without "
               "caching what it compiles (free space or fix its permissions, or set KNIT_CACHE_DIR)\n",
               root.c_str(), std::strerror(error));
}

uint64_t cache_size_cap() {
  const char* text = std::getenv("KNIT_CACHE_MAX_MB");
  if (!text || !*text) return kDefaultCacheMaxMB << 20;
  char* end = nullptr;
  errno = 0;
  const unsigned long long mb = std::strtoull(text, &end, 10);
  if (errno || *end || *text == '-' || mb > (UINT64_MAX >> 20)) {
    static std::once_flag warned;
    std::call_once(warned, [&] {
      std::fprintf(stderr,
                   "knit: warning: KNIT_CACHE_MAX_MB=%s is not a whole number of mebibytes; using the default "
                   "%llu (0 means no cap)\n",
                   text, static_cast<unsigned long long>(kDefaultCacheMaxMB));
    });
    return kDefaultCacheMaxMB << 20;
  }
  return static_cast<uint64_t>(mb) << 20;
}

bool is_cache_file_name(std::string_view name) {
  constexpr size_t kHex = 64;
  if (name.size() <= kHex || !std::all_of(name.begin(), name.begin() + kHex,
                                          [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }))
    return false;
  const std::string_view rest = name.substr(kHex);
  for (std::string_view suffix : kSuffixes)
    if (rest == suffix || rest.starts_with(std::string(suffix) + ".tmp.")) return true;
  return false;
}

std::vector<CacheFile> cache_files(const std::string& root) {
  std::vector<CacheFile> files;
  if (root.empty()) return files;
  for (std::string_view folder : kFolders) {
    const std::filesystem::path dir = std::filesystem::path(root) / folder;
    std::error_code ec;
    for (auto it = std::filesystem::directory_iterator(dir, ec); !ec && it != std::filesystem::directory_iterator();
         it.increment(ec)) {
      const std::string name = it->path().filename().string();
      struct stat st{};
      if (!is_cache_file_name(name) || ::lstat(it->path().c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
      files.push_back({it->path().string(), static_cast<uint64_t>(st.st_size), modification_ns(st),
                       name.find(".tmp.") != std::string::npos});
    }
  }
  return files;
}

int64_t evict_least_recently_used(const std::string& root, uint64_t cap) {
  if (cap == 0) return 0;
  std::vector<CacheFile> files = cache_files(root);
  uint64_t total = 0;
  for (const CacheFile& f : files) total += f.bytes;
  if (total <= cap) return 0;
  std::sort(files.begin(), files.end(), [](const CacheFile& a, const CacheFile& b) { return a.used_ns < b.used_ns; });
  const int64_t now =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  const uint64_t target = cap / 10 * 9;
  int64_t removed = 0;
  for (const CacheFile& f : files) {
    if (total <= target) break;
    if (f.temporary && now - f.used_ns < kAbandonedTempNs) continue;
    if (::unlink(f.path.c_str()) == 0) ++removed;
    total -= f.bytes;  // (or another process removed it first)
  }
  return removed;
}

std::string cache_directory() {
  if (const char* off = std::getenv("KNIT_CACHE"); off && std::string(off) == "0") return "";
  if (const char* dir = std::getenv("KNIT_CACHE_DIR"); dir && *dir) return dir;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return std::string(xdg) + "/knit";
  if (const char* home = std::getenv("HOME"); home && *home) return std::string(home) + "/.cache/knit";
  return "";
}

namespace {

// An entry's bytes before its payload: the format, the checksum of everything after it (the key's
// length and the key, then the payload's pieces), the key's length and the key.
std::string entry_head(std::string_view key, std::span<const std::string_view> payload) {
  std::string key_part(4, '\0');
  const auto n = static_cast<uint32_t>(key.size());
  std::memcpy(key_part.data(), &n, 4);
  key_part.append(key);
  llvm::SHA256 h;
  h.update(llvm::StringRef(key_part));
  for (const std::string_view piece : payload) h.update(llvm::StringRef(piece.data(), piece.size()));
  const auto digest = h.final();
  std::string head(kEntryFormat);
  head.append(reinterpret_cast<const char*>(digest.data()), kDigest);
  return head + key_part;
}

}  // namespace

std::string encode_entry(std::string_view key, std::string_view payload) {
  return entry_head(key, std::span(&payload, 1)) + std::string(payload);
}

std::optional<std::string> decode_entry(std::string_view bytes, std::string_view key, std::string* why) {
  const std::optional<size_t> at = payload_offset(bytes, key, why);
  if (!at) return std::nullopt;
  return std::string(bytes.substr(*at));
}

DiskCache::DiskCache(std::string dir, std::string suffix)
    : dir_(std::move(dir)),
      suffix_(std::move(suffix)),
      root_(std::filesystem::path(dir_).lexically_normal().parent_path().string()) {}

std::string DiskCache::path(std::string_view key) const { return dir_ + "/" + std::string(key) + suffix_; }

bool DiskCache::contains(std::string_view key) const {
  struct stat st{};
  return ::lstat(path(key).c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

void DiskCache::reject(const std::string& file, const std::string& why) {
  ++rejected;
  const bool removed = ::unlink(file.c_str()) == 0;  // a link or FIFO itself, never what it points at
  std::fprintf(stderr, "knit: warning: ignored%s the cache entry %s: %s; %s\n", removed ? " and removed" : "",
               file.c_str(), why.c_str(), removed ? "it will be rebuilt" : "remove it so that it can be rebuilt");
}

std::optional<std::string> DiskCache::load(std::string_view key) {
  const std::string file = path(key);
  std::string why;
  bool missing = false;
  std::optional<std::string> bytes = read_regular_file(file, why, missing);
  const std::optional<size_t> at = bytes ? payload_offset(*bytes, key, &why) : std::nullopt;
  if (!at) {
    if (!missing) reject(file, why);
    ++misses;
    return std::nullopt;
  }
  ++hits;
  bytes->erase(0, *at);  // the payload, without a copy
  return bytes;
}

bool DiskCache::store(std::string_view key, std::span<const std::string_view> payload) {
  if (cache_unwritable(root_)) return false;
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  int error = ec.value();
  if (!ec) {
    const std::string head = entry_head(key, payload);
    std::vector<std::string_view> pieces{head};
    pieces.insert(pieces.end(), payload.begin(), payload.end());
    error = write_atomically(path(key), pieces);
  }
  // ENOENT: the temporary file went (`knit cache clear` meanwhile); the folder itself is fine.
  if (error && error != ENOENT) note_cache_unwritable(root_, error);
  if (error) return false;
  evict_least_recently_used(root_, cache_size_cap());
  return true;
}

DiskObjectCache::DiskObjectCache(std::string dir) : entries_(std::move(dir), ".o") {}

void DiskObjectCache::notifyObjectCompiled(const llvm::Module* module, llvm::MemoryBufferRef object) {
  store(module->getModuleIdentifier(), object.getBuffer());
}

std::unique_ptr<llvm::MemoryBuffer> DiskObjectCache::getObject(const llvm::Module* module) {
  return load(module->getModuleIdentifier());
}

void DiskObjectCache::store(const std::string& key, llvm::StringRef object) {
  entries_.store(key, std::string_view(object.data(), object.size()));
}

std::unique_ptr<llvm::MemoryBuffer> DiskObjectCache::load(const std::string& key) {
  std::optional<std::string> object = entries_.load(key);
  if (!object) return nullptr;
  return llvm::MemoryBuffer::getMemBufferCopy(*object, key);
}

}  // namespace knit::codegen
