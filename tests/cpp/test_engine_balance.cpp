// Engine assignment of instructions whose engine the kernel leaves open (ir::open_engines,
// codegen::assign_engines): which engines each may use, from the nki.isa engine rules, and where
// the least-loaded rule puts a sequence of them, with loads worked out by hand from the
// documented instruction costs (docs/simulator.md "Instruction costs").
#include <catch2/catch.hpp>

#include "knit/codegen/lower.h"
#include "knit/ir/op_traits.h"
#include "knit/ir/text.h"

using namespace knit;
using ir::Engine;

namespace {

// One [128, 512] float32 SBUF tile %2 (and a PSUM tile %3, an int32 tile %4) and `body`.
ir::Kernel kernel_with(const std::string& target, const std::string& body) {
  return ir::parse(R"(kernel "k" target=)" + target + R"( {
  param %0 "x" hbm float32[128, 512]
  tensor %1 "out" shared_hbm float32[128, 512]
  tensor %2 "t" sbuf float32[128, 512]
  tensor %3 "p" psum float32[128, 512]
  tensor %4 "i" sbuf int32[128, 512]
  dma_copy dst=%2@0[[512,128],[1,512]] src=%0@0[[512,128],[1,512]]
)" + body + R"(
  dma_copy dst=%1@0[[512,128],[1,512]] src=%2@0[[512,128],[1,512]]
  return %1
}
)");
}

std::vector<Engine> engines_of(const std::string& target, const std::string& line) {
  const ir::Kernel k = kernel_with(target, line);
  const ir::EngineChoice c = ir::open_engines(k, k.body[1]);
  return {c.engines.begin(), c.engines.begin() + c.count};
}

constexpr const char* kT = "%2@0[[512,128],[1,512]]";
std::string tile() { return kT; }

}  // namespace

TEST_CASE("open_engines follows the ALU engine table and each engine's limits", "[codegen][engines]") {
  using E = Engine;
  const std::string t = tile();
  // add / multiply: VectorE, ScalarE, GpSimd.
  CHECK(engines_of("trn1", "tensor_scalar dst=" + t + " data=" + t + " op0=add operand0=1") ==
        std::vector<E>{E::vector, E::scalar, E::gpsimd});
  // subtract: VectorE only.
  CHECK(engines_of("trn1", "tensor_scalar dst=" + t + " data=" + t + " op0=subtract operand0=1") ==
        std::vector<E>{E::vector});
  // (add, multiply) is not one of ScalarE's pairs before NC-v4; GpSimd runs both ops.
  CHECK(engines_of("trn1", "tensor_scalar dst=" + t + " data=" + t + " op0=add operand0=1 op1=multiply operand1=2") ==
        std::vector<E>{E::vector, E::gpsimd});
  CHECK(engines_of("trn3", "tensor_scalar dst=" + t + " data=" + t + " op0=add operand0=1 op1=multiply operand1=2") ==
        std::vector<E>{E::vector, E::scalar, E::gpsimd});
  // reciprocal: VectorE and ScalarE, but ScalarE's tensor_scalar takes it only from NC-v4.
  CHECK(engines_of("trn1", "tensor_scalar dst=" + t + " data=" + t + " op0=reciprocal") == std::vector<E>{E::vector});
  CHECK(engines_of("trn3", "tensor_scalar dst=" + t + " data=" + t + " op0=reciprocal") ==
        std::vector<E>{E::vector, E::scalar});
  // tensor_tensor: never ScalarE; GpSimd not with a PSUM operand, nor for non-float data.
  CHECK(engines_of("trn1", "tensor_tensor dst=" + t + " data1=" + t + " data2=" + t + " op=multiply") ==
        std::vector<E>{E::vector, E::gpsimd});
  CHECK(engines_of("trn1", "tensor_tensor dst=" + t + " data1=%3@0[[512,128],[1,512]] data2=" + t + " op=add") ==
        std::vector<E>{E::vector});
  const std::string i = "%4@0[[512,128],[1,512]]";
  CHECK(engines_of("trn1", "tensor_tensor dst=" + i + " data1=" + i + " data2=" + i + " op=add") ==
        std::vector<E>{E::vector});
  // tensor_copy on ScalarE from NC-v3.
  CHECK(engines_of("trn1", "tensor_copy dst=" + t + " src=" + t) == std::vector<E>{E::vector, E::gpsimd});
  CHECK(engines_of("trn2", "tensor_copy dst=" + t + " src=" + t) == std::vector<E>{E::vector, E::scalar, E::gpsimd});
  // An explicit engine is the only one.
  CHECK(engines_of("trn1", "tensor_scalar dst=" + t + " data=" + t + " op0=add operand0=1 engine=gpsimd") ==
        std::vector<E>{E::gpsimd});
}

namespace {

// A load of %2, then `body` on trn1; %3..%8 are more [128, 512] float32 SBUF tiles.
std::vector<codegen::Queue> queues_for(const std::string& body) {
  const std::string t = tile();
  std::string decls;
  for (int id = 3; id <= 8; ++id)
    decls += "  tensor %" + std::to_string(id) + " \"t" + std::to_string(id) + "\" sbuf float32[128, 512]\n";
  const ir::Kernel k = ir::parse(R"(kernel "k" target=trn1 {
  param %0 "x" hbm float32[128, 512]
  tensor %1 "out" shared_hbm float32[128, 512]
  tensor %2 "t" sbuf float32[128, 512]
)" + decls + "  dma_copy dst=" + t +
                                 " src=%0@0[[512,128],[1,512]]\n" + body +
                                 "  dma_copy dst=%1@0[[512,128],[1,512]] src=" + t + "\n  return %1\n}\n");
  return codegen::assign_engines(k);
}

std::string add(int dst, int src, const std::string& extra = "") {
  auto v = [](int id) { return "%" + std::to_string(id) + "@0[[512,128],[1,512]]"; };
  return "  tensor_scalar dst=" + v(dst) + " data=" + v(src) + " op0=add operand0=1" + extra + "\n";
}

}  // namespace

// Estimated cost of a [128, 512] fp32 add on trn1 (cycles + 60 of overhead, at each engine's clock):
//   VectorE (512 + 60) / 1.12 GHz = 510.7 ns; ScalarE (512 + 60) / 1.4 = 408.6 ns;
//   GpSimd (150 + 512 + 60) / 1.4 = 515.7 ns.
// Every add below reads %2, which the load makes ready at the same time R on every engine.
TEST_CASE("assign_engines gives an open instruction the engine where it finishes first", "[codegen][engines]") {
  using codegen::Queue;
  SECTION("independent adds spread") {
    // 1st: ScalarE (R + 408.6 first). 2nd: VectorE (R + 510.7 < ScalarE's R + 817.1).
    // 3rd: GpSimd (R + 515.7). 4th: ScalarE (R + 817.1 < VectorE's R + 1021.4, GpSimd's 1031.4).
    const std::vector<Queue> q = queues_for(add(5, 2) + add(6, 2) + add(7, 2) + add(8, 2));
    CHECK(q[1] == Queue::act);
    CHECK(q[2] == Queue::dve);
    CHECK(q[3] == Queue::pool);
    CHECK(q[4] == Queue::act);
  }
  SECTION("a dependent chain stays on one engine") {
    // 1st: ScalarE, done at R + 408.6. 2nd reads its result: R + 817.1 on ScalarE, against
    // R + 408.6 + 100 (ScalarE's 140-cycle pipeline) + 75 (semaphore) + 510.7 on VectorE; and so on.
    const std::vector<Queue> q = queues_for(add(5, 2) + add(5, 5) + add(5, 5) + add(5, 5));
    for (size_t i = 1; i <= 4; ++i) CHECK(q[i] == Queue::act);
  }
  SECTION("an instruction in a loop stands for its trips") {
    // The first add runs 3 times: ScalarE until R + 1225.7 (3 x 408.6). Then: VectorE (R + 510.7),
    // GpSimd (R + 515.7), and VectorE again (R + 1021.4, before GpSimd's 1031.4 and ScalarE's
    // 1634.3). Counted once, the loop's add would leave ScalarE free at R + 408.6 and the last add
    // would go there (R + 817.1).
    const std::vector<Queue> q = queues_for("  loop iv=r0 start=0 stop=3\n" + add(5, 2) + "  end\n" + add(6, 2) +
                                            add(7, 2) + add(8, 2));
    CHECK(q[2] == Queue::act);
    CHECK(q[4] == Queue::dve);
    CHECK(q[5] == Queue::pool);
    CHECK(q[6] == Queue::dve);
  }
  SECTION("an explicit engine is never moved and counts towards its engine's time") {
    // Two named ScalarE adds take it to R + 817.1; the open one then finishes first on VectorE
    // (R + 510.7, before GpSimd's R + 515.7).
    const std::string named = " engine=scalar";
    const std::vector<Queue> q = queues_for(add(5, 2, named) + add(6, 2, named) + add(7, 2));
    CHECK(q[1] == Queue::act);
    CHECK(q[2] == Queue::act);
    CHECK(q[3] == Queue::dve);
  }
}
