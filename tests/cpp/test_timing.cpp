// The cycle-approximate timing model (simulator/include/knit/sim/timing.h): per-instruction costs
// (instruction_cost, codegen/src/cost.cpp) and the event replay of an engine program
// (simulate_timing, simulator/src/timing.cpp), fed from IR text written here.
//
// Every expectation is worked out by hand from the cost formulas of
// docs/simulator.md, "Instruction costs" (matmul `max(N, 64) * dt` PE cycles, VectorE / ScalarE
// `max(64, N) + OVH`, GpSimd `150 + N + OVH`, the 16-byte stride rule, DMA `fixed + bytes / bw`)
// and the replay rules of timing.h (queues in order, a wait is satisfied `sync_ns` after the
// producer's result is visible, DMA data phases share the core's bandwidth, barriers drain every
// queue, total = slowest core + launch). Constants are read from machine_config(target), never
// written down a second time.

#include <algorithm>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "knit/codegen/lower.h"
#include "knit/ir/text.h"
#include "knit/ir/verifier.h"
#include "knit/sim/interpreter.h"
#include "knit/sim/machine_config.h"
#include "knit/sim/timing.h"
#include "test_util.h"

using namespace knit;
using codegen::Queue;
using sim::HostTensor;
using sim::InstrCost;
using sim::MachineConfig;
using sim::TimedInstruction;
using sim::TimingReport;

namespace {

const ir::Target kTargets[] = {ir::Target::trn1, ir::Target::trn2, ir::Target::trn3};

const char* target_name(ir::Target t) {
  switch (t) {
    case ir::Target::trn1: return "trn1";
    case ir::Target::trn2: return "trn2";
    default: return "trn3";
  }
}

int q(Queue queue) { return static_cast<int>(queue); }

// A kernel of `decls` (tensor declarations) and `body` (instructions) for `target`, parsed and
// verified.
ir::Kernel parse_kernel(ir::Target target, const std::string& decls, const std::string& body,
                        const std::string& ret = "") {
  const std::string text = std::string("kernel \"timing\" target=") + target_name(target) + " {\n" + decls + body +
                           "  return" + (ret.empty() ? "" : " " + ret) + "\n}\n";
  ir::Kernel k = ir::parse(text, "timing.ir");
  ir::verify(k);
  return k;
}

// The cost of the single instruction of `body` on `queue`.
InstrCost cost_of(ir::Target target, const std::string& decls, const std::string& inst, Queue queue) {
  const ir::Kernel k = parse_kernel(target, decls, "  " + inst + "\n");
  REQUIRE(k.body.size() == 1);
  return sim::instruction_cost(k, k.body[0], queue, sim::machine_config(target));
}

// A lowered program, the order its regions and barriers ran in, and its timing report.
struct Timed {
  codegen::EngineProgram program;
  std::vector<sim::Executed> executed;
  TimingReport report;
  const MachineConfig* config = nullptr;

  // The timeline entries of body instruction `ir` (one per executed trip).
  std::vector<TimedInstruction> at(uint32_t ir) const {
    std::vector<TimedInstruction> out;
    for (const TimedInstruction& t : report.timeline)
      if (t.ir == ir) out.push_back(t);
    return out;
  }
  const TimedInstruction& once(uint32_t ir) const {
    for (const TimedInstruction& t : report.timeline)
      if (t.ir == ir) return t;
    FAIL("body instruction " << ir << " never ran");
    throw;  // unreachable
  }
  codegen::Queue queue_of(uint32_t ir) const {
    for (const codegen::Region& r : program.regions)
      for (const auto& queue : r.queues)
        for (const codegen::EngineInstr& e : queue)
          if (e.ir == ir) return e.queue;
    FAIL("body instruction " << ir << " is on no queue");
    throw;  // unreachable
  }
  // The cost model's figure for body instruction `ir` on the queue the program gave it.
  InstrCost cost(uint32_t ir) const {
    return sim::instruction_cost(program.kernel, program.kernel.body[ir], queue_of(ir), *config);
  }
};

// Lowers `k`, walks it timing-only (shape-only arguments) and times it.
Timed time_kernel(const ir::Kernel& k) {
  Timed t;
  t.program = codegen::lower(k);
  t.config = &sim::machine_config(t.program.kernel.target);
  std::vector<HostTensor> args;
  for (int id : t.program.kernel.params) {
    const ir::TensorDecl& d = t.program.kernel.tensor(id);
    args.push_back(HostTensor{d.dtype, d.shape, {}});
  }
  sim::InterpretOptions options;
  options.record_execution = true;
  options.timing_only = true;
  options.schedule = sim::Schedule::program_order;
  t.executed = sim::run_program(t.program, args, options).executed;
  t.report = sim::simulate_timing(t.program, t.executed, /*keep_timeline=*/true);
  return t;
}

void check_same_report(const TimingReport& a, const TimingReport& b) {
  CHECK(a.total_ns == b.total_ns);
  CHECK(a.busy_ns == b.busy_ns);
  CHECK(a.instructions == b.instructions);
  CHECK(a.stall_ns == b.stall_ns);
  CHECK(a.barriers == b.barriers);
  CHECK(a.dma_bytes == b.dma_bytes);
  CHECK(a.flops == b.flops);
  CHECK(a.pe_array_ns == b.pe_array_ns);
  CHECK(a.dma_active_ns == b.dma_active_ns);
  REQUIRE(a.timeline.size() == b.timeline.size());
  for (size_t i = 0; i < a.timeline.size(); ++i) {
    INFO("timeline entry " << i);
    CHECK(a.timeline[i].ir == b.timeline[i].ir);
    CHECK(a.timeline[i].queue == b.timeline[i].queue);
    CHECK(a.timeline[i].start_ns == b.timeline[i].start_ns);
    CHECK(a.timeline[i].end_ns == b.timeline[i].end_ns);
    CHECK(a.timeline[i].issue_ns == b.timeline[i].issue_ns);
    CHECK(a.timeline[i].stall_ns == b.timeline[i].stall_ns);
    CHECK(a.timeline[i].stalled_on == b.timeline[i].stalled_on);
    CHECK(a.timeline[i].waited_row == b.timeline[i].waited_row);
    CHECK(a.timeline[i].dma_bytes == b.timeline[i].dma_bytes);
  }
}

// ---- shared declarations --------------------------------------------------------------------

// Matmul operands: stationary [K=128, M=128], moving [128, N], PSUM [128, N] (fp32).
std::string matmul_decls(const char* dtype, int n) {
  const std::string N = std::to_string(n);
  return std::string("  tensor %0 \"s\" sbuf ") + dtype + "[128, 128]\n" +  //
         "  tensor %1 \"m\" sbuf " + dtype + "[128, " + N + "]\n" +         //
         "  tensor %2 \"p\" psum float32[128, " + N + "]\n";
}
std::string matmul_inst(int n) {
  const std::string N = std::to_string(n);
  return "nc_matmul dst=%2@0[[" + N + ",128],[1," + N + "]] stationary=%0@0[[128,128],[1,128]] moving=%1@0[[" + N +
         ",128],[1," + N + "]]";
}

// Two SBUF tiles %0, %1 of dtype[128, n] and a PSUM tile %2 float32[128, n].
std::string tile_decls(const char* dtype, int n) {
  const std::string N = std::to_string(n);
  return std::string("  tensor %0 \"a\" sbuf ") + dtype + "[128, " + N + "]\n" +  //
         "  tensor %1 \"b\" sbuf " + dtype + "[128, " + N + "]\n" +               //
         "  tensor %2 \"p\" psum float32[128, " + N + "]\n";
}
// A full [128, n] view of tensor %id whose rows are `row` elements apart.
std::string full(int id, int n, int row = -1) {
  return "%" + std::to_string(id) + "@0[[" + std::to_string(row < 0 ? n : row) + ",128],[1," + std::to_string(n) + "]]";
}

}  // namespace

// ---- instruction_cost ---------------------------------------------------------------------

TEST_CASE("nc_matmul costs max(N, 64) PE cycles, x4 for fp32, at the PE clock", "[timing]") {
  for (ir::Target target : kTargets) {
    const MachineConfig& c = sim::machine_config(target);
    INFO(target_name(target));
    // bf16, N = 512: 512 cycles; LoadStationary (max(128/4, 16) = 32) hides behind it.
    InstrCost bf16 = cost_of(target, matmul_decls("bfloat16", 512), matmul_inst(512), Queue::pe);
    CHECK(bf16.busy_ns == Approx(512 / c.pe_ghz));
    CHECK(bf16.latency_ns == Approx(c.pe_pipe_cycles / c.pe_ghz));
    CHECK(bf16.flops == 2.0 * 128 * 128 * 512);
    CHECK(bf16.pe_array_ns == Approx(512 / c.pe_ghz));
    CHECK(bf16.dma_bytes == 0);
    CHECK(bf16.act_table == -1);

    // N = 32: the MM_INIT_LATENCY floor of 64 cycles; the array streams only 32 columns.
    InstrCost small = cost_of(target, matmul_decls("bfloat16", 32), matmul_inst(32), Queue::pe);
    CHECK(c.mm_min_cycles == 64);
    CHECK(small.busy_ns == Approx(64 / c.pe_ghz));
    CHECK(small.pe_array_ns == Approx(32 / c.pe_ghz));
    CHECK(small.flops == 2.0 * 128 * 128 * 32);

    // fp32 operands: 4x the bf16 time, same FLOPs.
    CHECK(c.fp32_factor == 4);
    InstrCost fp32 = cost_of(target, matmul_decls("float32", 512), matmul_inst(512), Queue::pe);
    CHECK(fp32.busy_ns == Approx(4 * 512 / c.pe_ghz));
    CHECK(fp32.busy_ns == Approx(4 * bf16.busy_ns));
    CHECK(fp32.flops == bf16.flops);
    InstrCost fp32_small = cost_of(target, matmul_decls("float32", 32), matmul_inst(32), Queue::pe);
    CHECK(fp32_small.busy_ns == Approx(4 * 64 / c.pe_ghz));
  }
  // The clocks: bf16 PE time on trn1 vs trn2 is the clock ratio 2.4 / 2.8.
  const double t1 = cost_of(ir::Target::trn1, matmul_decls("bfloat16", 512), matmul_inst(512), Queue::pe).busy_ns;
  const double t2 = cost_of(ir::Target::trn2, matmul_decls("bfloat16", 512), matmul_inst(512), Queue::pe).busy_ns;
  CHECK(t1 / t2 == Approx(2.4 / 2.8));
}

TEST_CASE("VectorE tensor_tensor: max(64, 2N) + OVH, N when one input is in PSUM", "[timing]") {
  for (ir::Target target : kTargets) {
    const MachineConfig& c = sim::machine_config(target);
    INFO(target_name(target));
    for (int n : {16, 32, 64, 100, 512}) {
      INFO("N = " << n);
      // fp32 SBUF + SBUF: 2 cycles per element, never below MIN_II.
      const std::string tt = "tensor_tensor dst=" + full(1, n) + " data1=" + full(0, n) + " data2=" + full(1, n) +
                             " op=add";
      InstrCost sb = cost_of(target, tile_decls("float32", n), tt, Queue::dve);
      CHECK(sb.busy_ns == Approx((std::max(64.0, 2.0 * n) + 60) / c.dve_ghz));
      CHECK(sb.latency_ns > 0);
      // One input in PSUM, the other in SBUF: one cycle per element.
      const std::string mixed = "tensor_tensor dst=" + full(1, n) + " data1=" + full(0, n) + " data2=" + full(2, n) +
                                " op=add";
      InstrCost mx = cost_of(target, tile_decls("float32", n), mixed, Queue::dve);
      CHECK(mx.busy_ns == Approx((std::max(64.0, 1.0 * n) + 60) / c.dve_ghz));
    }
    CHECK(c.min_ii == 64);
    CHECK(c.overhead_cycles == 60);
  }
  // All-bf16 contiguous SBUF: one cycle per element; NC-v3+ perf mode halves it.
  const int n = 512;
  const std::string tt = "tensor_tensor dst=" + full(1, n) + " data1=" + full(0, n) + " data2=" + full(1, n) +
                         " op=add";
  const MachineConfig& c1 = sim::machine_config(ir::Target::trn1);
  const MachineConfig& c2 = sim::machine_config(ir::Target::trn2);
  CHECK_FALSE(c1.dve_perf_mode);
  CHECK(c2.dve_perf_mode);
  CHECK(cost_of(ir::Target::trn1, tile_decls("bfloat16", n), tt, Queue::dve).busy_ns ==
        Approx((512 + 60) / c1.dve_ghz));
  CHECK(cost_of(ir::Target::trn2, tile_decls("bfloat16", n), tt, Queue::dve).busy_ns ==
        Approx((512 / 2 + 60) / c2.dve_ghz));
}

TEST_CASE("VectorE tensor_scalar and ScalarE activation: max(64, N) + OVH at their clocks", "[timing]") {
  for (ir::Target target : kTargets) {
    const MachineConfig& c = sim::machine_config(target);
    INFO(target_name(target));
    for (int n : {1, 8, 64, 65, 300, 2048}) {
      INFO("N = " << n);
      const double cycles = std::max(64.0, 1.0 * n) + 60;
      const std::string ts = "tensor_scalar dst=" + full(1, n) + " data=" + full(0, n) + " op0=add operand0=1";
      CHECK(cost_of(target, tile_decls("float32", n), ts, Queue::dve).busy_ns == Approx(cycles / c.dve_ghz));
      const std::string act = "activation dst=" + full(1, n) + " data=" + full(0, n) + " op=relu";
      InstrCost a = cost_of(target, tile_decls("float32", n), act, Queue::act);
      CHECK(a.busy_ns == Approx(cycles / c.act_ghz));
      CHECK(a.act_table == -1);  // relu is in every function set
      // exp needs a function table; the scale/bias fields do not change the cost.
      const std::string exp = "activation dst=" + full(1, n) + " data=" + full(0, n) + " op=exp scale=0.5";
      InstrCost e = cost_of(target, tile_decls("float32", n), exp, Queue::act);
      CHECK(e.busy_ns == Approx(cycles / c.act_ghz));
      CHECK(e.act_table >= 0);
    }
  }
  // bf16 tensor_scalar, SBUF -> SBUF contiguous: /4 in the NC-v3 perf mode; bf16 activation:
  // 2 elements per cycle on NC-v4 only.
  const int n = 1024;
  const std::string ts = "tensor_scalar dst=" + full(1, n) + " data=" + full(0, n) + " op0=multiply operand0=3";
  const std::string act = "activation dst=" + full(1, n) + " data=" + full(0, n) + " op=copy";
  for (ir::Target target : kTargets) {
    const MachineConfig& c = sim::machine_config(target);
    INFO(target_name(target));
    const double dve = (c.dve_perf_mode ? n / 4.0 : n) + 60;
    CHECK(cost_of(target, tile_decls("bfloat16", n), ts, Queue::dve).busy_ns == Approx(dve / c.dve_ghz));
    const double scalar = (target == ir::Target::trn3 ? n / 2.0 : n) + 60;
    CHECK(c.act_16bit_factor == (target == ir::Target::trn3 ? 2 : 1));
    CHECK(cost_of(target, tile_decls("bfloat16", n), act, Queue::act).busy_ns == Approx(scalar / c.act_ghz));
    // A small bf16 tensor_scalar: the perf mode cannot go below MIN_II (64 cycles).
    const int small = 128;
    const std::string ts_small = "tensor_scalar dst=" + full(1, small) + " data=" + full(0, small) +
                                 " op0=multiply operand0=3";
    CHECK(cost_of(target, tile_decls("bfloat16", small), ts_small, Queue::dve).busy_ns ==
          Approx((std::max(64.0, c.dve_perf_mode ? small / 4.0 : small) + 60) / c.dve_ghz));
  }
}

TEST_CASE("an innermost SBUF stride over 16 bytes runs at half rate", "[timing]") {
  const ir::Target target = ir::Target::trn1;
  const MachineConfig& c = sim::machine_config(target);
  // %0: float32[128, 2048], read as 256 elements per partition with steps of 1, 4 (16 bytes),
  // 5 (20 bytes) and 8 (32 bytes).
  const std::string decls =
      "  tensor %0 \"a\" sbuf float32[128, 2048]\n"
      "  tensor %1 \"b\" sbuf float32[128, 256]\n"
      "  tensor %2 \"h\" sbuf bfloat16[128, 2048]\n";
  auto ts = [&](int step) {
    const std::string src = "%0@0[[2048,128],[" + std::to_string(step) + ",256]]";
    return cost_of(target, decls, "tensor_scalar dst=" + full(1, 256) + " data=" + src + " op0=add operand0=1",
                   Queue::dve)
        .busy_ns;
  };
  const double plain = (256 + 60) / c.dve_ghz;
  CHECK(ts(1) == Approx(plain));
  CHECK(ts(4) == Approx(plain));  // exactly 16 bytes: full rate
  CHECK(ts(5) > 1.5 * plain);     // 20 bytes: half rate
  CHECK(ts(8) == Approx(ts(5)));
  // bf16 at a step of 8 is 16 bytes: full rate; a step of 9 is 18 bytes: half rate.
  auto ts16 = [&](int step) {
    const std::string src = "%2@0[[2048,128],[" + std::to_string(step) + ",128]]";
    return cost_of(target, decls, "tensor_scalar dst=%1@0[[256,128],[1,128]] data=" + src + " op0=add operand0=1",
                   Queue::dve)
        .busy_ns;
  };
  CHECK(ts16(8) == Approx((128 + 60) / c.dve_ghz));
  CHECK(ts16(9) > 1.5 * ts16(8));
  // The rule looks at the innermost dim with more than one element: a trailing [.., 1] dim does not
  // hide the stride of the dim before it, nor does a strided outer dim make a contiguous one slow.
  CHECK(cost_of(target, decls,
                "tensor_scalar dst=%1@0[[256,128],[1,256],[1,1]] data=%0@0[[2048,128],[8,256],[1,1]] op0=add "
                "operand0=1",
                Queue::dve)
            .busy_ns == Approx(ts(8)));
  CHECK(cost_of(target, decls,
                "tensor_scalar dst=%1@0[[256,128],[64,4],[1,64]] data=%0@0[[2048,128],[512,4],[1,64]] op0=add "
                "operand0=1",
                Queue::dve)
            .busy_ns == Approx(plain));
  // The write port counts too: a strided destination.
  CHECK(cost_of(target, decls,
                "tensor_scalar dst=%0@0[[2048,128],[8,256]] data=" + full(1, 256) + " op0=add operand0=1", Queue::dve)
            .busy_ns == Approx(ts(8)));
  // ScalarE and GpSimd follow the same rule.
  const double act1 =
      cost_of(target, decls, "activation dst=" + full(1, 256) + " data=%0@0[[2048,128],[1,256]]", Queue::act).busy_ns;
  const double act8 =
      cost_of(target, decls, "activation dst=" + full(1, 256) + " data=%0@0[[2048,128],[8,256]]", Queue::act).busy_ns;
  CHECK(act1 == Approx((256 + 60) / c.act_ghz));
  CHECK(act8 > 1.5 * act1);
}

// II = max(MIN_II, N) * stride_factor (docs/simulator.md), plus the ~60-cycle access
// setup OVH per instruction: the stride factor doubles the datapath term, not the overhead.
TEST_CASE("the stride factor doubles the datapath cycles, not the per-instruction overhead (hw-model §5.1)",
          "[timing]") {
  for (ir::Target target : kTargets) {
    const MachineConfig& c = sim::machine_config(target);
    INFO(target_name(target));
    const std::string decls =
        "  tensor %0 \"a\" sbuf float32[128, 2048]\n"
        "  tensor %1 \"b\" sbuf float32[128, 256]\n";
    const std::string strided = "tensor_scalar dst=" + full(1, 256) + " data=%0@0[[2048,128],[8,256]] op0=add";
    const double busy = cost_of(target, decls, strided + " operand0=1", Queue::dve).busy_ns;
    CHECK(busy == Approx((2 * 256 + c.overhead_cycles) / c.dve_ghz));
  }
}

TEST_CASE("GpSimd: iota and affine_select cost GPSIMD_START + N + OVH", "[timing]") {
  for (ir::Target target : kTargets) {
    const MachineConfig& c = sim::machine_config(target);
    INFO(target_name(target));
    CHECK(c.pool_start_cycles == 150);
    for (int n : {1, 64, 512}) {
      INFO("N = " << n);
      const std::string N = std::to_string(n);
      const std::string decls = "  tensor %0 \"i\" sbuf int32[128, " + N + "]\n  tensor %1 \"f\" sbuf float32[128, " +
                                N + "]\n";
      InstrCost iota = cost_of(
          target, decls, "iota dst=" + full(0, n) + " pattern=[[1," + N + "]] channel_multiplier=" + N, Queue::pool);
      CHECK(iota.busy_ns == Approx((150.0 + n + 60) / c.pool_ghz));
      InstrCost sel = cost_of(target, decls,
                              "affine_select dst=" + full(1, n) + " pattern=[[-1," + N +
                                  "]] channel_multiplier=1 "
                                  "on_true_tile=" +
                                  full(1, n) + " on_false_value=0 cmp_op=greater_equal",
                              Queue::pool);
      CHECK(sel.busy_ns == Approx((150.0 + n + 60) / c.pool_ghz));
    }
  }
}

TEST_CASE("DMA: fixed cost, then bytes over the chunk-derated bandwidth", "[timing]") {
  // A [128, 512] fp32 load: 256 KiB, 2048 bytes per partition, the HBM side one contiguous run.
  const std::string decls =
      "  param %0 \"x\" hbm float32[128, 512]\n"
      "  tensor %1 \"t\" sbuf float32[128, 512]\n";
  const std::string load = "dma_copy dst=" + full(1, 512) + " src=" + full(0, 512);
  for (ir::Target target : kTargets) {
    const MachineConfig& c = sim::machine_config(target);
    INFO(target_name(target));
    const double peak = std::min(c.dma_engines * c.dma_engine_bytes_per_ns, c.hbm_bytes_per_ns) * c.dma_efficiency;
    CHECK(c.dma_engines == 16);
    const double bytes = 128 * 512 * 4;
    for (Queue dma : {Queue::dma0, Queue::dma3}) {
      InstrCost cost = cost_of(target, decls, load, dma);
      CHECK(cost.dma_bytes == 128 * 512 * 4);
      CHECK(cost.fixed_ns == c.dma_fixed_ns);
      CHECK(cost.busy_ns == Approx(bytes / (peak * 2048 / (2048 + c.dma_half_chunk_bytes))));
      CHECK(cost.latency_ns == 0);
      CHECK(cost.flops == 0);
    }
    // Two HBM rows per partition (rows p and p + 128 of a [256, 256] tensor): the 2048 bytes of a
    // partition arrive as two 1024-byte runs, which caps the chunk at 1024 bytes.
    const std::string decls2 =
        "  param %0 \"x\" hbm float32[256, 256]\n"
        "  tensor %1 \"t\" sbuf float32[128, 512]\n";
    InstrCost split = cost_of(target, decls2,
                              "dma_copy dst=%1@0[[512,128],[256,2],[1,256]] src=%0@0[[256,128],[32768,2],[1,256]]",
                              Queue::dma1);
    CHECK(split.dma_bytes == 128 * 512 * 4);
    CHECK(split.busy_ns == Approx(bytes / (peak * 1024 / (1024 + c.dma_half_chunk_bytes))));
    // A transposing read (element [p, j] from x[j, p]): every HBM run is one 4-byte element.
    const std::string decls_t =
        "  param %0 \"x\" hbm float32[128, 128]\n"
        "  tensor %1 \"t\" sbuf float32[128, 128]\n";
    InstrCost tr = cost_of(target, decls_t, "dma_copy dst=" + full(1, 128) + " src=%0@0[[1,128],[128,128]]",
                           Queue::dma1);
    CHECK(tr.busy_ns == Approx(128 * 128 * 4 / (peak * 4 / (4 + c.dma_half_chunk_bytes))));
    // A store costs the same as the load of the same tile.
    const std::string decls3 =
        "  param %0 \"x\" hbm float32[128, 512]\n"
        "  tensor %1 \"t\" sbuf float32[128, 512]\n"
        "  tensor %2 \"o\" shared_hbm float32[128, 512]\n";
    InstrCost store = cost_of(target, decls3, "dma_copy dst=" + full(2, 512) + " src=" + full(1, 512), Queue::dma2);
    CHECK(store.busy_ns == Approx(cost_of(target, decls, load, Queue::dma0).busy_ns));
  }
}

// ---- simulate_timing on small programs ----------------------------------------------------

namespace {

// Four fp32 [128, 512] SBUF tiles %0..%3 on trn2.
const char* const kTiles =
    "  tensor %0 \"a\" sbuf float32[128, 512]\n"
    "  tensor %1 \"b\" sbuf float32[128, 512]\n"
    "  tensor %2 \"c\" sbuf float32[128, 512]\n"
    "  tensor %3 \"d\" sbuf float32[128, 512]\n";
const std::string kRelu01 = "  activation dst=" + full(1, 512) + " data=" + full(0, 512) + " op=relu\n";
// On VectorE by name: left open, the engine assignment would put them where they finish first.
const std::string kAdd23 = "  tensor_scalar dst=" + full(3, 512) + " data=" + full(2, 512) +
                           " op0=add operand0=1 engine=vector\n";
const std::string kAdd12 = "  tensor_scalar dst=" + full(2, 512) + " data=" + full(1, 512) +
                           " op0=add operand0=1 engine=vector\n";

}  // namespace

TEST_CASE("independent instructions on different queues overlap", "[timing]") {
  const Timed t = time_kernel(parse_kernel(ir::Target::trn2, kTiles, kRelu01 + kAdd23));
  const MachineConfig& c = *t.config;
  REQUIRE(t.queue_of(0) == Queue::act);
  REQUIRE(t.queue_of(1) == Queue::dve);
  const InstrCost act = t.cost(0), dve = t.cost(1);
  CHECK(t.once(0).start_ns == 0);
  CHECK(t.once(1).start_ns == 0);
  CHECK(t.once(0).end_ns == Approx(act.busy_ns));
  CHECK(t.once(1).end_ns == Approx(dve.busy_ns));
  // The run ends when the later result is visible (busy + pipeline latency), plus the launch.
  const double expected = std::max(act.busy_ns + act.latency_ns, dve.busy_ns + dve.latency_ns);
  CHECK(t.report.total_ns - c.launch_ns == Approx(expected));
  CHECK(t.report.total_ns - c.launch_ns < act.busy_ns + dve.busy_ns);  // not one after the other
  CHECK(t.report.busy_ns[q(Queue::act)] == Approx(act.busy_ns));
  CHECK(t.report.busy_ns[q(Queue::dve)] == Approx(dve.busy_ns));
  CHECK(t.report.instructions[q(Queue::act)] == 1);
  CHECK(t.report.instructions[q(Queue::dve)] == 1);
  CHECK(t.report.stall_ns == decltype(t.report.stall_ns){});
  CHECK(t.report.barriers == 0);
}

TEST_CASE("a RAW across queues waits for the producer's result plus the semaphore latency", "[timing]") {
  SECTION("ScalarE -> VectorE") {
    const Timed t = time_kernel(parse_kernel(ir::Target::trn2, kTiles, kRelu01 + kAdd12));
    const MachineConfig& c = *t.config;
    const InstrCost act = t.cost(0), dve = t.cost(1);
    // The producer's result is visible busy + PIPE (140 ScalarE cycles) after it starts.
    CHECK(act.latency_ns == Approx(140 / c.act_ghz));
    const double start = act.busy_ns + act.latency_ns + c.sync_ns;
    const TimedInstruction& x = t.once(1);
    CHECK(x.start_ns == Approx(start));
    CHECK(x.end_ns == Approx(start + dve.busy_ns));
    CHECK(x.stall_ns == Approx(start));  // its queue was free from 0
    CHECK(x.stalled_on == q(Queue::act));
    // The row of the producer it waited for (by_line's critical path steps back to it).
    REQUIRE(x.waited_row >= 0);
    CHECK(t.report.timeline[static_cast<size_t>(x.waited_row)].ir == 0);
    CHECK(t.once(0).waited_row == -1);  // nothing to wait for
    CHECK(x.dma_bytes == 0);
    CHECK(t.report.stall_ns[q(Queue::dve)][q(Queue::act)] == Approx(start));
    CHECK(t.report.total_ns == Approx(c.launch_ns + start + dve.busy_ns + dve.latency_ns));
  }
  SECTION("TensorE -> VectorE (PSUM eviction)") {
    const std::string decls = matmul_decls("bfloat16", 512) + "  tensor %3 \"o\" sbuf float32[128, 512]\n";
    const std::string body = "  " + matmul_inst(512) + "\n  tensor_copy dst=" + full(3, 512) + " src=" + full(2, 512) +
                             "\n";
    for (ir::Target target : kTargets) {
      INFO(target_name(target));
      const Timed t = time_kernel(parse_kernel(target, decls, body));
      const MachineConfig& c = *t.config;
      REQUIRE(t.queue_of(0) == Queue::pe);
      const double start = 512 / c.pe_ghz + c.pe_pipe_cycles / c.pe_ghz + c.sync_ns;
      CHECK(t.once(1).start_ns == Approx(start));
      CHECK(t.once(1).stalled_on == q(Queue::pe));
      CHECK(t.report.flops == 2.0 * 128 * 128 * 512);
      CHECK(t.report.pe_array_ns == Approx(512 / c.pe_ghz));
    }
  }
}

TEST_CASE("a barrier drains every queue before the next region starts", "[timing]") {
  // Without the barrier the VectorE instruction (independent of ScalarE's) starts at 0.
  const Timed free = time_kernel(parse_kernel(ir::Target::trn2, kTiles, kRelu01 + kAdd23));
  CHECK(free.once(1).start_ns == 0);
  const std::string body = kRelu01 + "  register_move dst=r0 src=1\n" + kAdd23;
  const Timed t = time_kernel(parse_kernel(ir::Target::trn2, kTiles, body));
  const MachineConfig& c = *t.config;
  REQUIRE(t.program.regions.size() == 2);
  const InstrCost act = t.cost(0), dve = t.cost(2);
  // The sync engine runs the barrier once ScalarE's result is visible; then the region starts.
  const double start = act.busy_ns + act.latency_ns + c.sync_ns;
  CHECK(t.once(2).start_ns == Approx(start));
  CHECK(t.once(2).stall_ns == 0);  // a barrier is not a semaphore wait
  CHECK(t.report.barriers == 1);
  CHECK(t.report.total_ns == Approx(c.launch_ns + start + dve.busy_ns + dve.latency_ns));
  // The run order: region 0, the barrier at body index 1, region 1.
  REQUIRE(t.executed.size() == 3);
  CHECK(t.executed[0].region == 0);
  CHECK(t.executed[1].region == -1);
  CHECK(t.executed[1].pc == 1);
  CHECK(t.executed[2].region == 1);
}

namespace {

// Params %0, %1 fp32 [128, 512] in HBM; SBUF tiles %2..%5; output %6.
const char* const kDmaDecls =
    "  param %0 \"x\" hbm float32[128, 512]\n"
    "  param %1 \"y\" hbm float32[128, 512]\n"
    "  tensor %2 \"t\" sbuf float32[128, 512]\n"
    "  tensor %3 \"u\" sbuf float32[128, 512]\n"
    "  tensor %4 \"v\" sbuf float32[128, 512]\n"
    "  tensor %5 \"w\" sbuf float32[128, 512]\n"
    "  tensor %6 \"out\" shared_hbm float32[128, 512]\n";
std::string dma(int dst, int src) { return "  dma_copy dst=" + full(dst, 512) + " src=" + full(src, 512) + "\n"; }

}  // namespace

TEST_CASE("DMA transfers overlap their fixed costs and share the bandwidth one after the other", "[timing]") {
  for (ir::Target target : kTargets) {
    INFO(target_name(target));
    const Timed t = time_kernel(parse_kernel(target, kDmaDecls, dma(2, 0) + dma(3, 1)));
    const MachineConfig& c = *t.config;
    REQUIRE(t.queue_of(0) == Queue::dma0);
    REQUIRE(t.queue_of(1) == Queue::dma1);
    const double b = t.cost(0).busy_ns;
    CHECK(t.cost(1).busy_ns == b);
    const TimedInstruction& first = t.once(0);
    const TimedInstruction& second = t.once(1);
    CHECK(first.issue_ns == 0);
    CHECK(second.issue_ns == 0);
    CHECK(first.start_ns == Approx(c.dma_fixed_ns));
    CHECK(first.end_ns == Approx(c.dma_fixed_ns + b));
    CHECK(second.start_ns == Approx(first.end_ns));  // waits for the bandwidth, not for another fixed cost
    CHECK(second.end_ns == Approx(c.dma_fixed_ns + 2 * b));
    CHECK(t.report.dma_active_ns == Approx(2 * b));
    CHECK(t.report.dma_bytes == 2 * 128 * 512 * 4);
    CHECK(t.report.busy_ns[q(Queue::dma0)] == Approx(b));
    CHECK(t.report.busy_ns[q(Queue::dma1)] == Approx(b));
    CHECK(t.report.total_ns == Approx(c.launch_ns + c.dma_fixed_ns + 2 * b));
  }
}

TEST_CASE("a DMA queue issues its next transfer when the previous one's data starts moving", "[timing]") {
  // Four loads: dma0, dma1, dma2, then dma0 again (loads round-robin over dma0-dma2).
  const Timed t = time_kernel(parse_kernel(ir::Target::trn2, kDmaDecls, dma(2, 0) + dma(3, 1) + dma(4, 0) + dma(2, 1)));
  const MachineConfig& c = *t.config;
  REQUIRE(t.queue_of(3) == Queue::dma0);
  const double b = t.cost(0).busy_ns;
  for (uint32_t i = 0; i < 3; ++i) CHECK(t.once(i).start_ns == Approx(c.dma_fixed_ns + i * b));
  // The fourth (dma0 again, rewriting %2 after the first load on the same queue: no semaphore) is
  // issued when the first's data starts, pays its own fixed cost, then queues for the bandwidth.
  const TimedInstruction& fourth = t.once(3);
  CHECK(fourth.issue_ns == Approx(c.dma_fixed_ns));
  CHECK(fourth.stall_ns == 0);
  CHECK(fourth.start_ns == Approx(std::max(2 * c.dma_fixed_ns, c.dma_fixed_ns + 3 * b)));
}

// timing.h: "DMA transfers pay a fixed cost, then share the core's DMA bandwidth in issue order."
TEST_CASE("the DMA bandwidth is shared in issue order, not body order", "[timing]") {
  const std::string body = dma(2, 0) + "  activation dst=" + full(3, 512) + " data=" + full(2, 512) + " op=exp\n" +
                           dma(6, 3) + dma(4, 1);
  const Timed t = time_kernel(parse_kernel(ir::Target::trn2, kDmaDecls, body, "%6"));
  const MachineConfig& c = *t.config;
  REQUIRE(t.queue_of(2) == Queue::dma3);  // the store
  REQUIRE(t.queue_of(3) == Queue::dma1);  // the second load
  const double b = t.cost(0).busy_ns;
  CHECK(t.once(3).issue_ns == 0);
  CHECK(t.once(2).issue_ns > c.dma_fixed_ns + 2 * b);  // the store is issued after both loads could be done
  CHECK(t.once(3).start_ns == Approx(c.dma_fixed_ns + b));
}

TEST_CASE("ScalarE loads a function table when the function set changes", "[timing]") {
  const MachineConfig& c = sim::machine_config(ir::Target::trn2);
  auto act = [](int dst, int src, const char* op) {
    return "  activation dst=" + full(dst, 512) + " data=" + full(src, 512) + " op=" + op + "\n";
  };
  // exp, exp: one table load, charged to the first; relu needs none.
  const Timed t = time_kernel(
      parse_kernel(ir::Target::trn2, kTiles, act(1, 0, "exp") + act(2, 0, "exp") + act(3, 0, "relu")));
  const double b = t.cost(0).busy_ns;
  CHECK(t.once(0).end_ns - t.once(0).start_ns == Approx(b + c.act_table_ns));
  CHECK(t.once(1).end_ns - t.once(1).start_ns == Approx(b));
  CHECK(t.once(2).end_ns - t.once(2).start_ns == Approx(b));
  CHECK(t.report.busy_ns[q(Queue::act)] == Approx(3 * b + c.act_table_ns));
  // exp, tanh, exp: three loads (tanh is in another set).
  const Timed u = time_kernel(
      parse_kernel(ir::Target::trn2, kTiles, act(1, 0, "exp") + act(2, 0, "tanh") + act(3, 0, "exp")));
  CHECK(u.report.busy_ns[q(Queue::act)] == Approx(3 * b + 3 * c.act_table_ns));
}

// ScalarE functions come in "activation function sets", e.g. natural_log_exp_and_others;
// cost.cpp's act_table() groups exp and log: exp followed by log loads one table, not two.
TEST_CASE("exp and log share one function table (natural_log_exp_and_others)", "[timing]") {
  const MachineConfig& c = sim::machine_config(ir::Target::trn2);
  const Timed t = time_kernel(parse_kernel(ir::Target::trn2, kTiles,
                                           "  activation dst=" + full(1, 512) + " data=" + full(0, 512) + " op=exp\n" +
                                               "  activation dst=" + full(2, 512) + " data=" + full(0, 512) +
                                               " op=log\n"));
  const double b = t.cost(0).busy_ns;
  CHECK(t.report.busy_ns[q(Queue::act)] == Approx(2 * b + c.act_table_ns));
}

TEST_CASE("a device loop's instructions count once per trip", "[timing]") {
  // loop (body 0), tensor_scalar (1), end (2); trip count 3 from immediate bounds.
  const std::string body = "  loop iv=r0 start=0 stop=3\n" + kAdd23 + "  end\n";
  const Timed t = time_kernel(parse_kernel(ir::Target::trn2, kTiles, body));
  const MachineConfig& c = *t.config;
  const InstrCost dve = t.cost(1);
  CHECK(t.report.instructions[q(Queue::dve)] == 3);
  CHECK(t.report.busy_ns[q(Queue::dve)] == Approx(3 * dve.busy_ns));
  CHECK(t.report.barriers == 4);  // loop once, end once per trip
  // Each barrier waits for the region before it to drain: the trip takes busy + PIPE + SYNC.
  const double trip = dve.busy_ns + dve.latency_ns + c.sync_ns;
  const auto runs = t.at(1);
  REQUIRE(runs.size() == 3);
  for (int i = 0; i < 3; ++i) CHECK(runs[i].start_ns == Approx(c.sync_ns + i * trip));
  CHECK(t.report.total_ns == Approx(c.launch_ns + c.sync_ns + 3 * trip));

  // A DMA in a loop: its bytes count every trip too; step 2 over [0, 6) is also 3 trips.
  const std::string dbody = "  loop iv=r0 start=0 stop=6 step=2\n" + dma(2, 0) + "  end\n";
  const Timed d = time_kernel(parse_kernel(ir::Target::trn2, kDmaDecls, dbody));
  CHECK(d.report.dma_bytes == 3 * 128 * 512 * 4);
  for (const TimedInstruction& x : d.report.timeline) CHECK(x.dma_bytes == 128 * 512 * 4);  // each trip's own
  CHECK(d.report.instructions[q(Queue::dma0)] == 3);
  CHECK(d.report.dma_active_ns == Approx(3 * d.cost(1).busy_ns));
}

// ---- determinism ------------------------------------------------------------------------

TEST_CASE("timing is deterministic and a functional run times exactly like a timing-only one", "[timing]") {
  // Load, a 3-trip loop of ScalarE / VectorE / TensorE work, evict, store.
  const std::string decls =
      "  param %0 \"x\" hbm bfloat16[128, 512]\n"
      "  param %1 \"w\" hbm bfloat16[128, 128]\n"
      "  tensor %2 \"t\" sbuf bfloat16[128, 512]\n"
      "  tensor %3 \"s\" sbuf bfloat16[128, 128]\n"
      "  tensor %4 \"p\" psum float32[128, 512]\n"
      "  tensor %5 \"e\" sbuf float32[128, 512]\n"
      "  tensor %6 \"out\" shared_hbm float32[128, 512]\n";
  const std::string body = "  dma_copy dst=" + full(2, 512) + " src=" + full(0, 512) + "\n" +  //
                           "  dma_copy dst=" + full(3, 128) + " src=" + full(1, 128) + "\n" +  //
                           "  loop iv=r0 start=0 stop=3\n" +                                   //
                           "  nc_matmul dst=" + full(4, 512) + " stationary=" + full(3, 128) +
                           " moving=" + full(2, 512) + "\n" + "  activation dst=" + full(5, 512) +
                           " data=" + full(4, 512) + " op=exp scale=0.01\n" + "  tensor_scalar dst=" + full(2, 512) +
                           " data=" + full(5, 512) + " op0=multiply operand0=0.5\n" + "  end\n" +  //
                           "  dma_copy dst=" + full(6, 512) + " src=" + full(5, 512) + "\n";
  const ir::Kernel k = parse_kernel(ir::Target::trn2, decls, body, "%6");
  const Timed a = time_kernel(k);
  const Timed b = time_kernel(k);
  check_same_report(a.report, b.report);
  CHECK(a.report.instructions[q(Queue::pe)] == 3);
  CHECK(a.report.total_ns > a.config->launch_ns);

  // A functional run (real data, any queue interleaving) runs the same regions and barriers in the
  // same order, so its timing is identical.
  std::vector<HostTensor> args = {
      test::host(ir::DType::bfloat16, {128, 512}, test::random_values(128 * 512, 1)),
      test::host(ir::DType::bfloat16, {128, 128}, test::random_values(128 * 128, 2, -0.1f, 0.1f))};
  for (sim::Schedule schedule : {sim::Schedule::program_order, sim::Schedule::round_robin, sim::Schedule::random}) {
    std::vector<HostTensor> run_args = args;
    sim::InterpretOptions options;
    options.record_execution = true;
    options.schedule = schedule;
    options.seed = 7;
    const sim::RunResult run = sim::run_program(a.program, run_args, options);
    REQUIRE(run.outputs.size() == 1);
    REQUIRE(run.executed.size() == a.executed.size());
    for (size_t i = 0; i < run.executed.size(); ++i) {
      CHECK(run.executed[i].region == a.executed[i].region);
      CHECK(run.executed[i].pc == a.executed[i].pc);
    }
    check_same_report(sim::simulate_timing(a.program, run.executed, true), a.report);
  }
  // Without the timeline, the same totals.
  const TimingReport lean = sim::simulate_timing(a.program, a.executed, false);
  CHECK(lean.timeline.empty());
  CHECK(lean.total_ns == a.report.total_ns);
  CHECK(lean.busy_ns == a.report.busy_ns);
}
