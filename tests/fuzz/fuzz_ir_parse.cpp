// Fuzz target: the tile-IR text parser (ir::parse), then the verifier on what it accepts. Text
// the parser accepts must print and parse back to the same text (knit/ir/text.h: print and parse
// are inverses), and verifying it gives a Knit error or nothing.
#include "fuzz_util.h"
#include "knit/ir/text.h"
#include "knit/ir/verifier.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace knit;
  fuzz::accept_knit_errors([&] {
    const ir::Kernel kernel = ir::parse(fuzz::text_of(data, size));
    const std::string printed = ir::print(kernel);
    fuzz::must_succeed("printed IR does not parse back to the same text", [&] {
      const std::string again = ir::print(ir::parse(printed));
      if (again != printed)
        fuzz::finding("printed IR does not parse back to the same text",
                      (printed + "\n--- reprinted:\n" + again).c_str());
    });
    ir::verify(kernel);
  });
  return 0;
}
