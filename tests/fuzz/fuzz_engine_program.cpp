// Fuzz target: the engine-program text reader (EngineProgram::from_text), the decoder behind the
// program cache (python/knit/_program_cache.py loads an entry's program through it) and
// knit._core.EngineProgram.from_text. Whatever it accepts has been checked against its kernel
// (every index, count and allocation in range), so it must print and parse back unchanged.
#include "fuzz_util.h"
#include "knit/codegen/engine_program.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace knit;
  fuzz::accept_knit_errors([&] {
    const codegen::EngineProgram program = codegen::EngineProgram::from_text(fuzz::text_of(data, size));
    const std::string printed = program.to_text();
    fuzz::must_succeed("an accepted engine program does not read back", [&] {
      const std::string again = codegen::EngineProgram::from_text(printed).to_text();
      if (again != printed)
        fuzz::finding("an engine program does not print back the same",
                      (printed + "\n--- reprinted:\n" + again).c_str());
    });
  });
  return 0;
}
