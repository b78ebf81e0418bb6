// Fuzz target: the C++ kernel files' manifest reader (frontend/cpp/src/kernel_key.h,
// key_by_manifest). A manifest is a cache entry's payload: lines "file <hash> <path>" and
// "dir <ns> <path>" that it checks against the file system. Any text gives a key or nothing;
// it never throws, and a key comes only from a manifest that names at least one file (fields may
// be separated by any whitespace: the reader splits them with >>).
#include "fuzz_util.h"
#include "kernel_key.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace knit;
  const std::string_view text = fuzz::text_of(data, size);
  fuzz::must_succeed("the manifest reader threw", [&] {
    const std::optional<std::string> key = frontend::key_by_manifest("knit fuzz\n",
                                                                     llvm::StringRef(text.data(), text.size()));
    if (key && text.find("file") == std::string_view::npos)
      fuzz::finding("a key from a manifest that names no file", std::string(text).c_str());
  });
  return 0;
}
