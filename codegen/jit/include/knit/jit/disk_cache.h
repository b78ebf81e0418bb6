// The on-disk cache of JIT-compiled objects: an llvm::ObjectCache keyed by each module's
// identifier, which Knit sets to a content hash of everything that changes the code (see
// Specializer). Entries are written atomically (a temporary file renamed into place), so
// concurrent processes never see half an entry; each carries a checksum of its bytes, and an
// entry that fails it (truncated, corrupted) is deleted and the module compiled again.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include <llvm/ADT/StringRef.h>
#include <llvm/ExecutionEngine/ObjectCache.h>

namespace knit::codegen {

// $KNIT_CACHE_DIR, else $XDG_CACHE_HOME/knit, else ~/.cache/knit; "" when caching is off
// (KNIT_CACHE=0, or no home directory).
std::string cache_directory();

class DiskObjectCache : public llvm::ObjectCache {
 public:
  // Entries live in `dir` (created on first write).
  explicit DiskObjectCache(std::string dir);

  void notifyObjectCompiled(const llvm::Module* module, llvm::MemoryBufferRef object) override;
  std::unique_ptr<llvm::MemoryBuffer> getObject(const llvm::Module* module) override;

  // The same, by key: the object stored under `key`, or null (missing or failing its checksum).
  std::unique_ptr<llvm::MemoryBuffer> load(const std::string& key);
  void store(const std::string& key, llvm::StringRef object);
  // Whether an entry exists under `key` (not checked: load() may still reject it).
  bool contains(const std::string& key) const;

  std::atomic<int64_t> hits = 0, misses = 0, rejected = 0;  // `rejected`: corrupt entries deleted

 private:
  std::string path(const std::string& key) const;
  std::string dir_;
};

// Hex SHA-256 of `bytes`.
std::string content_hash(llvm::StringRef bytes);

}  // namespace knit::codegen
