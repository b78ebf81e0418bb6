// PSUM spilling (codegen/spill.h) and iteration-local live ranges (ir/liveness.h), fed from IR
// text. Expectations are worked out by hand from the kernels: PSUM has 8 banks of 2 KiB per
// partition and a [128, 512] fp32 tile fills one.
#include <string>

#include <catch2/catch.hpp>

#include "knit/codegen/allocate.h"
#include "knit/codegen/spill.h"
#include "knit/ir/error.h"
#include "knit/ir/liveness.h"
#include "knit/ir/text.h"

using namespace knit;

namespace {

const std::string kTile = "@0[[512,128],[1,512]]";

// n PSUM tiles, each set whole by a memset (t0 .. t(n-1) in order), then each copied to SBUF in
// order: n tiles live at once after the last memset.
std::string fill_then_read(int n) {
  std::string text = "kernel \"k\" target=trn2 {\n  tensor %0 \"out\" shared_hbm float32[128, 512]\n";
  for (int i = 0; i < n; ++i)
    text += "  tensor %" + std::to_string(i + 1) + " \"t" + std::to_string(i) +
            "\" psum float32[128, 512] @ \"k.py\":" + std::to_string(10 + i) + "\n";
  text += "  tensor %" + std::to_string(n + 1) + " \"o\" sbuf float32[128, 512]\n";
  for (int i = 0; i < n; ++i)
    text += "  memset dst=%" + std::to_string(i + 1) + kTile + " value=1 @ \"k.py\":" + std::to_string(20 + i) + "\n";
  for (int i = 0; i < n; ++i)
    text += "  tensor_copy dst=%" + std::to_string(n + 1) + kTile + " src=%" + std::to_string(i + 1) + kTile +
            " @ \"k.py\":" + std::to_string(40 + i) + "\n";
  text += "  dma_copy dst=%0" + kTile + " src=%" + std::to_string(n + 1) + kTile + "\n  return %0\n}\n";
  return text;
}

}  // namespace

TEST_CASE("a kernel whose PSUM fits is not changed by spill_psum", "[spill]") {
  const ir::Kernel k = ir::parse(fill_then_read(8));
  CHECK(codegen::spill_to_fit(k) == k);
  CHECK(codegen::spill_warnings(k).empty());
}

TEST_CASE("spill_psum copies out the live tile used last and back in before its use", "[spill]") {
  const ir::Kernel k = ir::parse(fill_then_read(9));
  const ir::Kernel s = codegen::spill_to_fit(k);
  // t8's memset (body 8) finds t0..t7 in the 8 banks; of those, t7 is read last (body 16):
  // it goes out right after its memset (body 7) and comes back before its read.
  REQUIRE(s.tensors.size() == k.tensors.size() + 2);
  const ir::TensorDecl& spill = s.tensors[k.tensors.size()];
  const ir::TensorDecl& back = s.tensors[k.tensors.size() + 1];
  CHECK(spill.name == "t7.spill");
  CHECK(spill.buffer == ir::Buffer::sbuf);
  CHECK(spill.spill_of == 8);  // %8 is t7
  CHECK(back.name == "t7");
  CHECK(back.buffer == ir::Buffer::psum);
  CHECK(back.loc.line == 17);
  REQUIRE(s.body.size() == k.body.size() + 2);
  const std::string text = ir::print(s);
  CHECK_THAT(text, Catch::Contains("tensor_copy dst=%11" + kTile + " src=%8" + kTile + " @ \"k.py\":27"));
  CHECK_THAT(text, Catch::Contains("tensor_copy dst=%12" + kTile + " src=%11" + kTile + " @ \"k.py\":47"));
  CHECK_THAT(text, Catch::Contains("tensor_copy dst=%10" + kTile + " src=%12" + kTile + " @ \"k.py\":47"));
  CHECK(ir::parse(text) == s);  // spill_of= round-trips
  const auto live = ir::live_ranges(s, ir::match_blocks(s));
  codegen::AllocationFailure failure;
  codegen::try_allocate(s, live, failure);
  CHECK(failure.tensor == -1);
  const auto warnings = codegen::spill_warnings(s);
  REQUIRE(warnings.size() == 1);
  CHECK_THAT(warnings[0], Catch::Contains("[psum-spill] PSUM tensor 't7' (k.py:17)") &&
                              Catch::Contains("after line 27 and back to PSUM before line 47"));
}

TEST_CASE("a tile used only inside a loop and first overwritten whole is live per iteration", "[liveness]") {
  const ir::Kernel k = ir::parse(R"(kernel "loop" target=trn2 {
  param %0 "x" hbm float32[128, 64]
  tensor %1 "out" shared_hbm float32[128, 64]
  tensor %2 "fresh" sbuf float32[128, 64]
  tensor %3 "carried" sbuf float32[128, 64]
  tensor %4 "acc" psum float32[128, 64]
  memset dst=%3@0[[64,128],[1,64]] value=0
  loop iv=r0 start=0 stop=4
    dma_copy dst=%2@0[[64,128],[1,64]] src=%0@0[[64,128],[1,64]]
    tensor_tensor dst=%3@0[[64,128],[1,64]] data1=%3@0[[64,128],[1,64]] data2=%2@0[[64,128],[1,64]] op=add
    tensor_copy dst=%4@0[[64,128],[1,64]] src=%3@0[[64,128],[1,64]]
    tensor_scalar dst=%4@0[[64,128],[1,64]] data=%4@0[[64,128],[1,64]] op0=add operand0=1
  end
  tensor_copy dst=%3@0[[64,128],[1,64]] src=%3@0[[64,128],[1,64]]
  dma_copy dst=%1@0[[64,128],[1,64]] src=%3@0[[64,128],[1,64]]
  return %1
}
)");
  const auto live = ir::live_ranges(k, ir::match_blocks(k));
  // fresh: written whole by the DMA (2), last read at 3: no value crosses iterations.
  CHECK(live[2].first == 2);
  CHECK(live[2].last == 3);
  // acc: written whole by tensor_copy (4), updated in place at 5: also per iteration.
  CHECK(live[4].first == 4);
  CHECK(live[4].last == 5);
  // carried: read before written in the body and used after it: the whole loop and beyond.
  CHECK(live[3].first == 0);
  CHECK(live[3].last == 8);
}

TEST_CASE("a loop tile first read, or first written by an accumulating matmul, spans the loop", "[liveness]") {
  const ir::Kernel k = ir::parse(R"(kernel "loop2" target=trn2 {
  param %0 "x" hbm float32[128, 128]
  tensor %1 "out" shared_hbm float32[128, 128]
  tensor %2 "w" sbuf float32[128, 128]
  tensor %3 "acc" psum float32[128, 128]
  tensor %4 "o" sbuf float32[128, 128]
  dma_copy dst=%2@0[[128,128],[1,128]] src=%0@0[[128,128],[1,128]]
  loop iv=r0 start=0 stop=2
    nc_matmul dst=%3@0[[128,128],[1,128]] stationary=%2@0[[128,128],[1,128]] moving=%2@0[[128,128],[1,128]]
    tensor_copy dst=%4@0[[128,128],[1,128]] src=%3@0[[128,128],[1,128]]
    dma_copy dst=%1@0[[128,128],[1,128]] src=%4@0[[128,128],[1,128]]
  end
  return %1
}
)");
  const auto live = ir::live_ranges(k, ir::match_blocks(k));
  // acc's matmul keeps accumulate=auto: its flags carry into the next iteration.
  CHECK(live[3].first == 1);
  CHECK(live[3].last == 5);
  // o is written whole by tensor_copy: per iteration.
  CHECK(live[4].first == 3);
  CHECK(live[4].last == 4);
}
