// The disk cache (knit/jit/disk_cache.h): entry format, safe reads, atomic writes.
#include "knit/jit/disk_cache.h"

#include "knit/jit/object_cache.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

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
    if (at != data.size() || ::read(fd, &extra, 1) != 0) why = "it changed size while being read";
    else bytes = std::move(data);
  }
  ::close(fd);
  return bytes;
}

// Writes `bytes` to a fresh temporary file beside `file`, then renames it over `file`.
bool write_atomically(const std::string& file, std::string_view bytes) {
  static std::atomic<uint64_t> sequence = 0;
  const std::string temp = file + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(sequence++);
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  size_t at = 0;
  while (at < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + at, bytes.size() - at);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    at += static_cast<size_t>(n);
  }
  const bool written = ::close(fd) == 0 && at == bytes.size();
  if (!written || ::rename(temp.c_str(), file.c_str()) != 0) {  // rename: readers see all or nothing
    ::unlink(temp.c_str());
    return false;
  }
  return true;
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

std::string cache_directory() {
  if (const char* off = std::getenv("KNIT_CACHE"); off && std::string(off) == "0") return "";
  if (const char* dir = std::getenv("KNIT_CACHE_DIR"); dir && *dir) return dir;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return std::string(xdg) + "/knit";
  if (const char* home = std::getenv("HOME"); home && *home) return std::string(home) + "/.cache/knit";
  return "";
}

std::string encode_entry(std::string_view key, std::string_view payload) {
  std::string body(4, '\0');
  const auto n = static_cast<uint32_t>(key.size());
  std::memcpy(body.data(), &n, 4);
  body.append(key);
  body.append(payload);
  const auto digest = sha256(body);
  std::string out(kEntryFormat);
  out.append(reinterpret_cast<const char*>(digest.data()), kDigest);
  return out + body;
}

std::optional<std::string> decode_entry(std::string_view bytes, std::string_view key, std::string* why) {
  const std::optional<size_t> at = payload_offset(bytes, key, why);
  if (!at) return std::nullopt;
  return std::string(bytes.substr(*at));
}

DiskCache::DiskCache(std::string dir, std::string suffix) : dir_(std::move(dir)), suffix_(std::move(suffix)) {}

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

bool DiskCache::store(std::string_view key, std::string_view payload) {
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec) return false;
  return write_atomically(path(key), encode_entry(key, payload));
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
