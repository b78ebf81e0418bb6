// Per-instruction cost model, one formula per instruction class (docs/simulator.md, "Instruction
// costs"), from the "Estimated instruction cost" sections of the nki.isa API reference (Neuron
// 2.24-2.26) and the NKI architecture guides. Cycles are the engine's own; instruction_cost
// converts them to ns with the engine's clock.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>

#include "knit/codegen/cost.h"
#include "knit/ir/op_traits.h"
#include "knit/ir/view.h"

namespace knit::codegen {

using namespace knit::ir;

namespace {

struct Operands {
  const Kernel& k;
  std::vector<std::pair<const char*, const View*>> views;

  const View* find(const char* name) const {
    for (const auto& [n, v] : views)
      if (!std::strcmp(n, name)) return v;
    return nullptr;
  }
  Buffer buffer(const View& v) const { return k.tensor(v.tensor).buffer; }
  int64_t free_size(const View& v) const { return view_free_size(k.tensor(v.tensor), v); }
  int64_t partitions(const View& v) const { return view_partitions(k.tensor(v.tensor), v); }
  // Elements per partition the instruction streams: its largest on-chip operand.
  int64_t stream() const {
    int64_t n = 1;
    for (const auto& [name, v] : views)
      if (is_on_chip(buffer(*v))) n = std::max(n, free_size(*v));
    return n;
  }
  bool all_16bit() const {
    for (const auto& [name, v] : views)
      if (dtype_size(v->dtype) != 2) return false;
    return !views.empty();
  }
  bool any_psum() const {
    for (const auto& [name, v] : views)
      if (buffer(*v) == Buffer::psum) return true;
    return false;
  }
  bool any_dynamic() const {
    for (const auto& [name, v] : views)
      if (!v->is_static()) return true;
    return false;
  }
  // An SBUF/PSUM port reading or writing with an innermost stride over 16 bytes runs at half rate
  // (Trainium/Inferentia2 Architecture Guide for NKI).
  bool strided() const {
    for (const auto& [name, v] : views) {
      if (!is_on_chip(buffer(*v))) continue;
      for (size_t d = v->dims.size(); d-- > 1;) {
        if (v->dims[d].num <= 1) continue;
        if (std::abs(v->dims[d].step) * dtype_size(v->dtype) > 16) return true;
        break;
      }
    }
    return false;
  }
  bool contiguous() const {
    for (const auto& [name, v] : views)
      if (!v->dims.empty() && v->dims.back().num > 1 && v->dims.back().step != 1) return false;
    return true;
  }
};

Operands operands_of(const Kernel& k, const Instruction& inst) {
  Operands o{k, {}};
  for_each_view(inst, [&](const char* name, const View& v) { o.views.emplace_back(name, &v); });
  return o;
}

double matmul_cycles(const Operands& o, const Instruction& inst, const MachineConfig& c, InstrCost& cost) {
  const View* mov = o.find("moving");
  const View* stat = o.find("stationary");
  const int64_t n = mov ? o.free_size(*mov) : 1, m = stat ? o.free_size(*stat) : 1;
  const int64_t kdim = stat ? o.partitions(*stat) : 128;
  bool fp32 = (stat && stat->dtype == DType::float32) || (mov && mov->dtype == DType::float32);
  double dt = fp32 ? c.fp32_factor : 1;
  if (const auto* mm = std::get_if<NcMatmul>(&inst.op)) {
    if (fp32 && (mm->is_stationary_onezero || mm->is_moving_onezero)) dt = c.fp32_factor / 2.0;
    cost.flops = 2.0 * kdim * m * n * (mm->perf_mode == MatmulPerfMode::double_row ? 2 : 1);
  } else {
    cost.flops = 2.0 * kdim * m * n * 4;  // MX: contraction over 4x the partitions
  }
  const double mm_ii = std::max<double>(static_cast<double>(n), c.mm_min_cycles) * dt;
  const double ls_ii = std::max(m / 4.0, 16.0);  // background LoadStationary; floor estimated
  cost.pe_array_ns = static_cast<double>(n) * dt / c.pe_ghz;
  return std::max(mm_ii, ls_ii);
}

// The op table's stream rule: per_element cycles per element (halved when every operand is
// 16-bit, for the rows that say so), at least MIN_II when floored, plus the row's extra cycles.
double stream_cycles(const Operands& o, const OpCost& rule, const MachineConfig& c) {
  double cycles = static_cast<double>(o.stream()) * rule.per_element_num / rule.per_element_den;
  if (rule.halves_16bit && o.all_16bit()) cycles /= 2;
  if (rule.floored) cycles = std::max<double>(c.min_ii, cycles);
  return cycles + rule.extra_cycles;
}

double vector_cycles(const Operands& o, const Instruction& inst, const MachineConfig& c) {
  const double n = static_cast<double>(o.stream());
  const OpCost& rule = op_traits(inst.opcode()).cost;
  switch (CostRule(rule.rule)) {
    case CostRule::tensor_tensor: {
      const View* a = o.find("data1");
      const View* b = o.find("data2");
      const bool mixed = a && b && (o.buffer(*a) == Buffer::psum) != (o.buffer(*b) == Buffer::psum);
      const bool fast16 = o.all_16bit() && !o.any_psum() && o.contiguous();
      double cycles = (mixed || fast16 ? 1 : 2) * n;
      if (c.dve_perf_mode && fast16) cycles /= 2;
      return std::max<double>(c.min_ii, cycles);  // MIN_II bounds the perf modes too
    }
    case CostRule::perf_mode: {
      double cycles = n;
      if (c.dve_perf_mode && o.all_16bit()) cycles /= (!o.any_psum() && o.contiguous()) ? 4 : 2;
      return std::max<double>(c.min_ii, cycles);
    }
    case CostRule::predicated: return o.any_psum() ? n : 2 * n;
    default: return stream_cycles(o, rule, c);
  }
}

double scalar_cycles(const Operands& o, const MachineConfig& c) {
  const double n = static_cast<double>(o.stream()) / (o.all_16bit() ? c.act_16bit_factor : 1);
  double cycles = std::max<double>(c.min_ii, n);
  if (o.find("reduce_res")) cycles += 64;  // ActReadAccumulator (Trainium/Inferentia2 arch guide)
  return cycles;
}

double gpsimd_cycles(const Operands& o, const Instruction& inst, const MachineConfig& c) {
  const double n = static_cast<double>(o.stream());
  const View* dst = o.find("dst");
  const int es = dst ? dtype_size(dst->dtype) : 4;
  switch (cost_rule(inst.opcode())) {
    case CostRule::partition_fold: {
      const View* data = o.find("data");
      return c.pool_start_cycles + n * (data ? o.partitions(*data) : 128) / 128.0;
    }
    case CostRule::index_stream: return c.pool_start_cycles + n;
    case CostRule::snake_topk: {  // 4 * n + K cycles per partition (NKI Library gpsimd-topk notes)
      const auto& op = std::get<Topk>(inst.op);
      return c.pool_start_cycles + 4.0 * static_cast<double>(op.n) + static_cast<double>(o.free_size(op.val_dst));
    }
    default: return c.pool_start_cycles + n * std::min(1.0, es / 4.0);  // 32-bit lanes; 16/8-bit pack 2/4
  }
}

// The activation function of an instruction that applies one (its ActFunc operand).
std::optional<ActFunc> activation_function(const Instruction& inst) {
  std::optional<ActFunc> f;
  for_each_field(inst, [&](const char*, const auto& value) {
    if constexpr (std::is_same_v<std::decay_t<decltype(value)>, ActFunc>) f = value;
  });
  return f;
}

void dma_cost(const Operands& o, const Instruction& inst, const MachineConfig& c, InstrCost& cost) {
  const View* dst = o.find("dst");
  if (!dst) return;
  const int64_t bytes = dst->num_elements() * dtype_size(dst->dtype);
  // Bytes per partition of the on-chip side, capped by the HBM side's contiguous run: the
  // size of the pieces the DMA engines move.
  int64_t partitions = 1, run = bytes;
  for (const auto& [name, v] : o.views) {
    if (is_on_chip(o.buffer(*v))) {
      partitions = std::max(partitions, o.partitions(*v));
    } else if (!v->dims.empty()) {
      int64_t contiguous = dtype_size(v->dtype), expect = 1;
      for (size_t d = v->dims.size(); d-- > 0;) {
        if (v->dims[d].num == 1) continue;
        if (v->dims[d].step != expect) break;
        contiguous *= v->dims[d].num;
        expect *= v->dims[d].num;
      }
      run = std::min(run, contiguous);
    }
  }
  const double chunk = static_cast<double>(std::min(run, std::max<int64_t>(1, bytes / partitions)));
  const double peak = dma_peak_bytes_per_ns(c);
  double bandwidth = peak * chunk / (chunk + c.dma_half_chunk_bytes);
  // DMA transposes: 0.5 of the bandwidth from the Trainium2 arch guide; trn1's 0.25 estimated.
  if (cost_rule(inst.opcode()) == CostRule::dma_transpose) bandwidth *= c.target == Target::trn1 ? 0.25 : 0.5;
  cost.dma_bytes = bytes;
  for (const auto& [name, v] : o.views) {
    if (is_on_chip(o.buffer(*v))) continue;
    const int64_t b = v->num_elements() * dtype_size(v->dtype);
    (!std::strcmp(name, "dst") ? cost.hbm_write_bytes : cost.hbm_read_bytes) += b;
  }
  cost.fixed_ns = c.dma_fixed_ns;
  cost.busy_ns = static_cast<double>(bytes) / bandwidth;
  cost.latency_ns = 0;
}

}  // namespace

InstrCost instruction_cost(const Kernel& k, const Instruction& inst, Queue queue, const MachineConfig& c) {
  InstrCost cost;
  const Operands o = operands_of(k, inst);
  if (static_cast<int>(queue) >= kFirstDmaQueue) {
    dma_cost(o, inst, c, cost);
    return cost;
  }
  double cycles = 0, ghz = 1, pipe = 0;
  switch (queue) {
    case Queue::pe:
      ghz = c.pe_ghz;
      pipe = c.pe_pipe_cycles;
      if (cost_rule(inst.opcode()) == CostRule::pe_transpose) {
        const View* data = o.find("data");
        cycles = data ? std::max<double>(o.partitions(*data), std::min<double>(64, o.free_size(*data))) : 64;
        cost.pe_array_ns = cycles / ghz;
      } else {
        cycles = matmul_cycles(o, inst, c, cost);
      }
      break;
    case Queue::act:
      ghz = c.act_ghz;
      cycles = scalar_cycles(o, c);
      if (const std::optional<ActFunc> f = activation_function(inst))
        if (const std::optional<ActFunc> set = act_table_set(*f)) cost.act_table = static_cast<int>(*set);
      pipe = 140;  // with min_ii + overhead: the 264-cycle dependent II (NKI perf guide)
      break;
    case Queue::dve:
      ghz = c.dve_ghz;
      cycles = vector_cycles(o, inst, c);
      pipe = 140;
      break;
    default:
      ghz = c.pool_ghz;
      cycles = gpsimd_cycles(o, inst, c);
      pipe = 140;
      break;
  }
  if (queue != Queue::pe) {
    if (o.strided()) cycles *= 2;                           // the datapath term only, not the setup overhead
    if (o.any_dynamic()) cycles = std::max(cycles, 600.0);  // dynamic-address MIN_II (nki.isa cost sections)
    cycles += c.overhead_cycles;
  }
  cost.busy_ns = cycles / ghz;
  cost.latency_ns = pipe / ghz;
  return cost;
}

}  // namespace knit::codegen
