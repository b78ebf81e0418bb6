// Engine program helpers: region index, statistics, disassembly and the binary form.
#include "knit/codegen/engine_program.h"

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
  for (const RegTerm& term : v.dynamic) out << (term.coeff < 0 ? " - " : " + ") << std::abs(term.coeff) * es << "*r" << term.reg;
  out << " [";
  for (size_t k = first_free; k < v.dims.size(); ++k)
    out << (k > first_free ? "," : "") << '[' << v.dims[k].step * es << ',' << v.dims[k].num << ']';
  out << "] " << to_string(v.dtype);
  if (v.index_view()) out << " rows of dim " << v.indirect_dim << " from vector_offset";
  return out.str();
}

}  // namespace

std::string EngineProgram::disassemble() const {
  std::ostringstream out;
  const ProgramStats s = stats();
  out << "# engine program of kernel '" << kernel.name << "' for " << to_string(kernel.target) << ": "
      << regions.size() << " regions, " << s.barriers << " sync instructions, " << s.waits << " waits\n"
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

// ---- binary form ---------------------------------------------------------------------------
//
// "KNEP" u32 version, u64 FNV-1a checksum of the payload, payload:
//   str kernel IR text | plan: u32 cores, i64 sbuf/psum high-water, u32 n, n x (u8 set
//   [i32 core, i64 partition, partitions, offset, bytes, u8 pinned]) | i64 dependences |
//   u32 regions, each: u32 begin, end, then per queue u32 n, n x (u32 ir, u8 waits,
//   waits x (u8 queue, i32 count)).

namespace {

constexpr uint32_t kVersion = 1;

uint64_t fnv1a(const uint8_t* data, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ data[i]) * 1099511628211ull;
  return h;
}

struct Writer {
  std::vector<uint8_t> bytes;
  template <class T>
  void put(T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    bytes.insert(bytes.end(), p, p + sizeof v);
  }
  void str(const std::string& s) {
    put(static_cast<uint32_t>(s.size()));
    bytes.insert(bytes.end(), s.begin(), s.end());
  }
};

struct Reader {
  const std::vector<uint8_t>& bytes;
  size_t at = 0;
  [[noreturn]] void corrupt() const {
    user_error({}, "corrupt-program",
               "the engine program is truncated or corrupt at byte " + std::to_string(at) +
                   "; delete it (or the Knit cache entry it came from) so that it is rebuilt");
  }
  template <class T>
  T get() {
    if (at + sizeof(T) > bytes.size()) corrupt();
    T v;
    std::memcpy(&v, bytes.data() + at, sizeof v);
    at += sizeof v;
    return v;
  }
  std::string str() {
    const uint32_t n = get<uint32_t>();
    if (at + n > bytes.size()) corrupt();
    std::string s(bytes.begin() + static_cast<long>(at), bytes.begin() + static_cast<long>(at + n));
    at += n;
    return s;
  }
  uint32_t count(size_t max) {
    const uint32_t n = get<uint32_t>();
    if (n > max) corrupt();
    return n;
  }
};

// Every allocation inside its target's SBUF/PSUM, of its tensor's size; every on-chip tensor
// the body uses allocated. A checksum only catches accidents; this keeps a crafted program from
// reaching memory outside the simulator's buffers.
void check_plan(const EngineProgram& p, const Reader& in) {
  const TargetInfo info = target_info(p.kernel.target);
  if (p.plan.cores < 1 || p.plan.cores > 1024) in.corrupt();
  std::vector<char> used(p.kernel.tensors.size(), 0);
  for (const Instruction& inst : p.kernel.body)
    for_each_view(inst, [&](const char*, const View& v) { used[v.tensor] = 1; });
  for (size_t id = 0; id < p.kernel.tensors.size(); ++id) {
    const TensorDecl& t = p.kernel.tensors[id];
    const auto& a = id < p.plan.tensors.size() ? p.plan.tensors[id] : std::nullopt;
    if (!a) {
      if (is_on_chip(t.buffer) && used[id]) in.corrupt();
      continue;
    }
    const int64_t capacity = t.buffer == Buffer::sbuf ? info.sbuf_partition_bytes : info.psum_partition_bytes;
    if (!is_on_chip(t.buffer) || a->core < 0 || a->core >= p.plan.cores || a->partition < 0 ||
        a->partitions != t.partitions() || a->partition + a->partitions > kMaxPartitions || a->offset < 0 ||
        a->bytes != t.partition_elements() * dtype_size(t.dtype) || a->offset + a->bytes > capacity)
      in.corrupt();
  }
}

}  // namespace

std::vector<uint8_t> EngineProgram::to_binary() const {
  Writer w;
  w.str(print(kernel));
  w.put(static_cast<uint32_t>(plan.cores));
  w.put(plan.sbuf_high_water);
  w.put(plan.psum_high_water);
  w.put(static_cast<uint32_t>(plan.tensors.size()));
  for (const auto& a : plan.tensors) {
    w.put(static_cast<uint8_t>(a.has_value()));
    if (!a) continue;
    w.put(static_cast<int32_t>(a->core));
    w.put(a->partition);
    w.put(a->partitions);
    w.put(a->offset);
    w.put(a->bytes);
    w.put(static_cast<uint8_t>(a->pinned));
  }
  w.put(dependences);
  w.put(static_cast<uint32_t>(regions.size()));
  for (const Region& r : regions) {
    w.put(r.begin);
    w.put(r.end);
    for (const auto& queue : r.queues) {
      w.put(static_cast<uint32_t>(queue.size()));
      for (const EngineInstr& e : queue) {
        w.put(e.ir);
        w.put(static_cast<uint8_t>(e.waits.size()));
        for (const Wait& wt : e.waits) {
          w.put(static_cast<uint8_t>(wt.queue));
          w.put(wt.count);
        }
      }
    }
  }
  std::vector<uint8_t> out{'K', 'N', 'E', 'P'};
  Writer head;
  head.put(kVersion);
  head.put(fnv1a(w.bytes.data(), w.bytes.size()));
  out.insert(out.end(), head.bytes.begin(), head.bytes.end());
  out.insert(out.end(), w.bytes.begin(), w.bytes.end());
  return out;
}

EngineProgram EngineProgram::from_binary(const std::vector<uint8_t>& bytes) {
  Reader in{bytes};
  if (bytes.size() < 16 || std::memcmp(bytes.data(), "KNEP", 4) != 0) in.corrupt();
  in.at = 4;
  if (in.get<uint32_t>() != kVersion)
    user_error({}, "corrupt-program", "the engine program was written by another Knit version; rebuild it");
  const uint64_t sum = in.get<uint64_t>();
  if (sum != fnv1a(bytes.data() + in.at, bytes.size() - in.at)) in.corrupt();
  EngineProgram p;
  p.kernel = parse(in.str());
  p.plan.cores = static_cast<int>(in.get<uint32_t>());
  p.plan.sbuf_high_water = in.get<int64_t>();
  p.plan.psum_high_water = in.get<int64_t>();
  p.plan.tensors.resize(in.count(p.kernel.tensors.size()));
  for (auto& a : p.plan.tensors) {
    if (!in.get<uint8_t>()) continue;
    a.emplace();
    a->core = in.get<int32_t>();
    a->partition = in.get<int64_t>();
    a->partitions = in.get<int64_t>();
    a->offset = in.get<int64_t>();
    a->bytes = in.get<int64_t>();
    a->pinned = in.get<uint8_t>() != 0;
  }
  p.dependences = in.get<int64_t>();
  p.regions.resize(in.count(p.kernel.body.size()));
  for (Region& r : p.regions) {
    r.begin = in.get<uint32_t>();
    r.end = in.get<uint32_t>();
    if (r.begin >= r.end || r.end > p.kernel.body.size()) in.corrupt();
    for (int q = 0; q < kNumQueues; ++q) {
      r.queues[q].resize(in.count(r.end - r.begin));
      for (EngineInstr& e : r.queues[q]) {
        e.ir = in.get<uint32_t>();
        e.queue = static_cast<Queue>(q);
        if (e.ir < r.begin || e.ir >= r.end) in.corrupt();
        e.waits.resize(in.get<uint8_t>());
        for (Wait& w : e.waits) {
          const uint8_t wq = in.get<uint8_t>();
          if (wq >= kNumQueues) in.corrupt();
          w.queue = static_cast<Queue>(wq);
          w.count = in.get<int32_t>();
          if (w.count < 1 || w.count > static_cast<int32_t>(r.end - r.begin)) in.corrupt();
        }
      }
    }
  }
  if (in.at != bytes.size()) in.corrupt();
  verify(p.kernel);
  check_plan(p, in);
  check_structure(p);
  index_regions(p);
  p.verified = true;
  return p;
}

}  // namespace knit::codegen
