#include "knit/jit/disk_cache.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <unistd.h>

#include <llvm/ADT/StringExtras.h>
#include <llvm/IR/Module.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/SHA256.h>

namespace knit::codegen {

namespace {

// Entry layout: magic, then the SHA-256 of the object (32 bytes), then the object.
constexpr char kMagic[8] = {'K', 'N', 'I', 'T', 'O', 'B', 'J', '1'};
constexpr size_t kHeader = sizeof kMagic + 32;

std::array<uint8_t, 32> sha256(llvm::StringRef bytes) {
  llvm::SHA256 h;
  h.update(bytes);
  return h.final();
}

}  // namespace

std::string content_hash(llvm::StringRef bytes) {
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

DiskObjectCache::DiskObjectCache(std::string dir) : dir_(std::move(dir)) {}

std::string DiskObjectCache::path(const std::string& key) const { return dir_ + "/" + key + ".o"; }

bool DiskObjectCache::contains(const std::string& key) const {
  std::error_code ec;
  return std::filesystem::exists(path(key), ec);
}

void DiskObjectCache::notifyObjectCompiled(const llvm::Module* module, llvm::MemoryBufferRef object) {
  store(module->getModuleIdentifier(), object.getBuffer());
}

std::unique_ptr<llvm::MemoryBuffer> DiskObjectCache::getObject(const llvm::Module* module) {
  return load(module->getModuleIdentifier());
}

void DiskObjectCache::store(const std::string& key, llvm::StringRef object) {
  // A cache that cannot be written is only slower: failures are ignored.
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec) return;
  const std::string final_path = path(key);
  const std::string temp = final_path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    if (!out) return;
    const auto digest = sha256(object);
    out.write(kMagic, sizeof kMagic);
    out.write(reinterpret_cast<const char*>(digest.data()), 32);
    out.write(object.data(), static_cast<std::streamsize>(object.size()));
    if (!out) {
      std::filesystem::remove(temp, ec);
      return;
    }
  }
  std::filesystem::rename(temp, final_path, ec);  // atomic on POSIX: readers see all or nothing
  if (ec) std::filesystem::remove(temp, ec);
}

std::unique_ptr<llvm::MemoryBuffer> DiskObjectCache::load(const std::string& key) {
  const std::string file = path(key);
  auto buffer = llvm::MemoryBuffer::getFile(file, /*IsText=*/false, /*RequiresNullTerminator=*/false);
  if (!buffer) {
    ++misses;
    return nullptr;
  }
  const llvm::StringRef bytes = (*buffer)->getBuffer();
  const bool ok = bytes.size() > kHeader && std::memcmp(bytes.data(), kMagic, sizeof kMagic) == 0 &&
                  std::memcmp(bytes.data() + sizeof kMagic, sha256(bytes.drop_front(kHeader)).data(), 32) == 0;
  if (!ok) {  // truncated or corrupted: drop it, the caller compiles again
    std::error_code ec;
    std::filesystem::remove(file, ec);
    ++rejected;
    ++misses;
    return nullptr;
  }
  ++hits;
  return llvm::MemoryBuffer::getMemBufferCopy(bytes.drop_front(kHeader), key);
}

}  // namespace knit::codegen
