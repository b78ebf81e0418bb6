// Engine program helpers: region index, statistics and disassembly (the text form is in
// engine_program_text.cpp).
#include "knit/codegen/engine_program.h"

#include <algorithm>
#include <cstring>
#include <sstream>

#include "knit/ir/op_traits.h"
#include "knit/ir/text.h"
#include "knit/ir/verifier.h"
#include "knit/ir/view.h"

namespace knit::codegen {

using namespace knit::ir;

const char* queue_name(Queue q) {
  static const char* names[] = {
#define KNIT_X(q) #q,
      KNIT_QUEUES(KNIT_X)
#undef KNIT_X
  };
  return names[static_cast<int>(q)];
}

bool is_barrier(const Instruction& inst) { return !moves_tensor_data(inst.opcode()); }

std::vector<uint32_t> issue_order(const Region& region) {
  std::array<size_t, kNumQueues> head{};
  std::vector<uint32_t> order;
  for (;;) {
    int pick = -1;
    for (int q = 0; q < kNumQueues; ++q) {
      if (head[q] >= region.queues[q].size()) continue;
      const EngineInstr& e = region.queues[q][head[q]];
      const bool ready = std::all_of(e.waits.begin(), e.waits.end(), [&](const Wait& w) {
        return head[static_cast<int>(w.queue)] >= static_cast<size_t>(w.count);
      });
      if (ready && (pick < 0 || e.ir < region.queues[pick][head[pick]].ir)) pick = q;
    }
    if (pick < 0) return order;
    order.push_back(region.queues[pick][head[pick]++].ir);
  }
}

void index_regions(EngineProgram& p) {
  p.region_at.assign(p.kernel.body.size(), -1);
  for (size_t r = 0; r < p.regions.size(); ++r) p.region_at.at(p.regions[r].begin) = static_cast<int32_t>(r);
}

void check_structure(const EngineProgram& p) {
  const auto& body = p.kernel.body;
  std::vector<int> seen(body.size(), 0);
  for (const Region& r : p.regions) {
    if (r.begin >= r.end || r.end > body.size()) internal_error("engine program: region out of the body");
    for (int q = 0; q < kNumQueues; ++q) {
      uint32_t previous = 0;
      for (const EngineInstr& e : r.queues[q]) {
        if (e.ir < r.begin || e.ir >= r.end || seen[e.ir]++ || is_barrier(body[e.ir]) ||
            static_cast<int>(e.queue) != q || (previous && e.ir <= previous))
          internal_error("engine program: instruction " + std::to_string(e.ir) + " misplaced in its region's queues");
        previous = e.ir;
        for (const Wait& w : e.waits)
          if (w.count < 1) internal_error("engine program: a wait for a count below 1");
      }
    }
  }
  for (size_t i = 0; i < body.size(); ++i)
    if (!is_barrier(body[i]) && seen[i] != 1)
      internal_error("engine program: instruction " + std::to_string(i) + " is on no queue");
}

// ---- statistics ----------------------------------------------------------------------------

ProgramStats EngineProgram::stats() const {
  ProgramStats s;
  s.sbuf_high_water = plan.sbuf_high_water;
  s.psum_high_water = plan.psum_high_water;
  s.dependences = dependences;
  for (const Instruction& inst : kernel.body) s.barriers += is_barrier(inst);
  for (const Region& r : regions)
    for (int q = 0; q < kNumQueues; ++q)
      for (const EngineInstr& e : r.queues[q]) {
        ++s.instructions[q];
        s.waits += static_cast<int64_t>(e.waits.size());
        if (q >= kFirstDmaQueue) {
          for_each_view(kernel.body[e.ir], [&](const char* name, const View& v) {
            if (!std::strcmp(name, "dst")) s.dma_bytes += v.num_elements() * dtype_size(v.dtype);
          });
        }
      }
  return s;
}

std::string ProgramStats::summary() const {
  std::ostringstream out;
  out << "instructions:";
  for (int q = 0; q < kNumQueues; ++q) out << ' ' << queue_name(static_cast<Queue>(q)) << '=' << instructions[q];
  out << " sync=" << barriers << "\nsemaphore waits: " << waits << " (for " << dependences
      << " cross-queue dependences)\nDMA bytes: " << dma_bytes << "\nSBUF high-water: " << sbuf_high_water
      << " B/partition, PSUM high-water: " << psum_high_water << " B/partition\n";
  return out.str();
}

// ---- disassembly ---------------------------------------------------------------------------

namespace {

// Where a view's elements are: memory, first partition, byte offset and byte steps.
std::string placement(const EngineProgram& p, const View& v) {
  const TensorDecl& t = p.kernel.tensor(v.tensor);
  const int64_t es = dtype_size(v.dtype);
  std::ostringstream out;
  size_t first_free = 0;
  int64_t byte = v.offset * es;
  if (is_on_chip(t.buffer) && p.plan.tensors[v.tensor]) {
    const Allocation& a = *p.plan.tensors[v.tensor];
    const PartitionLayout l = partition_layout(t, v);
    const int64_t partition = a.partition + l.first_partition;
    const int64_t parts = l.partition_dim ? v.dims[0].num : 1;
    first_free = l.partition_dim ? 1 : 0;
    out << to_string(t.buffer);
    if (p.plan.cores > 1) out << '.' << a.core;
    out << "[p" << partition << ':' << partition + parts << "] +" << a.offset + l.start_byte;
  } else {
    out << "hbm '" << t.name << "' +" << byte;
  }
  for (const RegTerm& term : v.dynamic)
    out << (term.coeff < 0 ? " - " : " + ") << std::abs(term.coeff) * es << "*r" << term.reg;
  out << " [";
  for (size_t k = first_free; k < v.dims.size(); ++k)
    out << (k > first_free ? "," : "") << '[' << v.dims[k].step * es << ',' << v.dims[k].num << ']';
  out << "] " << to_string(v.dtype);
  if (v.indexes_rows()) out << " rows of dim " << v.indirect_dim << " from vector_offset";
  if (v.indexes_columns()) out << " columns from an .indirect() index";
  return out.str();
}

}  // namespace

std::string EngineProgram::disassemble() const {
  std::ostringstream out;
  const ProgramStats s = stats();
  out << "# engine program of kernel '" << kernel.name << "' for " << to_string(kernel.target) << ": " << regions.size()
      << " regions, " << s.barriers << " sync instructions, " << s.waits << " waits\n"
      << "# SBUF high-water " << s.sbuf_high_water << " B/partition, PSUM " << s.psum_high_water
      << " B/partition; addresses are bytes inside a partition, steps in bytes\n";
  size_t next_region = 0;
  for (size_t i = 0; i < kernel.body.size();) {
    if (next_region < regions.size() && regions[next_region].begin == i) {
      const Region& r = regions[next_region];
      out << "region " << next_region++ << ": body [" << r.begin << ", " << r.end << ")\n";
      std::vector<const EngineInstr*> order(r.end - r.begin, nullptr);
      std::vector<int> position(r.end - r.begin, 0);
      for (const auto& queue : r.queues)
        for (size_t n = 0; n < queue.size(); ++n) {
          order[queue[n].ir - r.begin] = &queue[n];
          position[queue[n].ir - r.begin] = static_cast<int>(n);
        }
      for (size_t n = 0; n < order.size(); ++n) {
        const EngineInstr& e = *order[n];
        std::ostringstream head;
        head << queue_name(e.queue) << '.' << position[n];
        out << "  " << head.str() << std::string(head.str().size() < 9 ? 9 - head.str().size() : 1, ' ');
        if (!e.waits.empty()) {
          out << "wait";
          for (const Wait& w : e.waits) out << ' ' << queue_name(w.queue) << ">=" << w.count;
          out << "; ";
        }
        out << print(kernel, kernel.body[e.ir]) << '\n';
        for_each_view(kernel.body[e.ir], [&](const char* name, const View& v) {
          out << "             " << name << ": " << placement(*this, v) << '\n';
        });
      }
      i = r.end;
      continue;
    }
    out << "  sync     " << print(kernel, kernel.body[i]) << '\n';
    ++i;
  }
  return out.str();
}

}  // namespace knit::codegen
