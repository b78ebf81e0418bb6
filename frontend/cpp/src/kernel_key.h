// The disk-cache key of a kernel file's compiled object: a hash of everything that changes the
// object (Knit's and LLVM's versions, the target, the command line, and the contents of every
// file the compile reads besides system headers).
#pragma once

#include <string>
#include <vector>

#include "clang_session.h"

namespace knit::codegen {
class DiskObjectCache;
class OrcJit;
}  // namespace knit::codegen

namespace knit::frontend {

// Which files a compile reads is only known by preprocessing the file (tens of milliseconds,
// most of a warm start). So the list is kept in the cache too, in a manifest for the command
// line, with each file's content hash and the modification time of each folder an #include
// could have searched. While every file still has its recorded contents and no folder changed
// (no header added, removed or renamed that could now be found first), preprocessing would read
// the same files again, and the key is computed without it. Otherwise the file is preprocessed
// and the manifest rewritten. "" if preprocessing failed (`diags` says why).
std::string kernel_file_key(const std::vector<std::string>& args, const codegen::OrcJit& jit,
                            codegen::DiskObjectCache& cache, CollectingConsumer& diags);

}  // namespace knit::frontend
