// The JIT's llvm::ObjectCache on disk: a DiskCache (knit/jit/disk_cache.h) of ".o" entries.
#pragma once

#include <memory>
#include <string>

#include <llvm/ADT/StringRef.h>
#include <llvm/ExecutionEngine/ObjectCache.h>

#include "knit/jit/disk_cache.h"

namespace knit::codegen {

// The JIT's llvm::ObjectCache over a DiskCache of ".o" entries, keyed by each module's
// identifier, which Knit sets to a content hash of everything that changes the code (see
// Specializer and the C++ kernel compiler).
class DiskObjectCache : public llvm::ObjectCache {
 public:
  explicit DiskObjectCache(std::string dir);

  void notifyObjectCompiled(const llvm::Module* module, llvm::MemoryBufferRef object) override;
  std::unique_ptr<llvm::MemoryBuffer> getObject(const llvm::Module* module) override;

  // The same, by key: the object stored under `key`, or null.
  std::unique_ptr<llvm::MemoryBuffer> load(const std::string& key);
  void store(const std::string& key, llvm::StringRef object);
  bool contains(const std::string& key) const { return entries_.contains(key); }

  DiskCache& entries() { return entries_; }

 private:
  DiskCache entries_;
};

}  // namespace knit::codegen
