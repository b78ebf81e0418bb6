// Fuzz target: the disk cache's entry reader, as the JIT's object cache uses it
// (DiskObjectCache::load: a file read, the checksum and the recorded key checked) and as the
// program cache uses it (DiskCache::load, through knit._core.cache_load). The input is written
// as the entry file of key "k"; a load must give either nothing (the entry rejected and removed)
// or exactly the payload that decode_entry finds in the same bytes. The first input byte, when
// odd, asks instead for a sound entry built around the rest, whose load must return it whole.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <llvm/Support/MemoryBuffer.h>
#include <unistd.h>

#include "fuzz_util.h"
#include "knit/jit/disk_cache.h"
#include "knit/jit/object_cache.h"

namespace {

// A folder of this process's own, removed at exit (never destroyed before that: the exit handler
// reads it).
const std::string& scratch_directory() {
  static const std::string* dir = [] {
    auto* d = new std::string(
        (std::filesystem::temp_directory_path() / ("knit-fuzz-cache-" + std::to_string(::getpid()))).string());
    std::filesystem::create_directories(*d);
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(scratch_directory(), ec);
    });
    return d;
  }();
  return *dir;
}

void write_file(const std::string& path, std::string_view bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace knit;
  const std::string key = "k";
  std::string_view input = fuzz::text_of(data, size);
  const bool wrap = !input.empty() && (input[0] & 1);
  const std::string bytes = wrap ? codegen::encode_entry(key, input.substr(1)) : std::string(input);
  const std::optional<std::string> decoded = codegen::decode_entry(bytes, key);
  if (wrap && decoded != input.substr(1)) fuzz::finding("a sound entry does not decode to its payload", "");

  codegen::DiskObjectCache objects(scratch_directory());
  write_file(scratch_directory() + "/" + key + ".o", bytes);
  const std::unique_ptr<llvm::MemoryBuffer> object = objects.load(key);
  if (static_cast<bool>(object) != decoded.has_value() || (object && object->getBuffer() != *decoded))
    fuzz::finding("the object cache's load disagrees with decode_entry", "");

  codegen::DiskCache programs(scratch_directory(), ".knp");
  write_file(programs.path(key), bytes);
  if (programs.load(key) != decoded) fuzz::finding("the program cache's load disagrees with decode_entry", "");
  return 0;
}
