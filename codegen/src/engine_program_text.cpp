// The engine program's text form (knit/codegen/engine_program.h, docs/codegen.md): the kernel's
// IR text (knit/ir/text.h), then its schedule:
//
//   engine_program cores=1 sbuf_high_water=4096 psum_high_water=2048 dependences=3 {
//     alloc %2 core=0 partition=0 partitions=128 offset=0 bytes=2048
//     alloc %3 core=0 partition=0 partitions=128 offset=0 bytes=2048 pinned
//     region [0, 5)
//       pe: 2
//       dve: 3 wait(pe>=1)
//       dma0: 0 4 wait(dve>=1)
//   }
//
// An `alloc` per allocated tensor (the others have none), a `region [begin, end)` per region and,
// under it, one line per non-empty queue: the body indices of its instructions in queue order,
// each followed by its semaphore waits. The IR's lexer reads both parts. Parsing checks every
// index, count and allocation against the kernel before the program is used: the text comes
// from outside (a cache entry, a test), so a crafted one must not reach memory outside the
// simulator's buffers.
#include <sstream>

#include "knit/codegen/engine_program.h"
#include "knit/ir/text.h"
#include "knit/ir/text_lexer.h"
#include "knit/ir/verifier.h"
#include "knit/ir/view.h"

namespace knit::codegen {

using namespace knit::ir;

std::string EngineProgram::to_text() const {
  std::ostringstream out;
  out << print(kernel) << "engine_program cores=" << plan.cores << " sbuf_high_water=" << plan.sbuf_high_water
      << " psum_high_water=" << plan.psum_high_water << " dependences=" << dependences << " {\n";
  for (size_t id = 0; id < plan.tensors.size(); ++id)
    if (const auto& a = plan.tensors[id])
      out << "  alloc %" << id << " core=" << a->core << " partition=" << a->partition
          << " partitions=" << a->partitions << " offset=" << a->offset << " bytes=" << a->bytes
          << (a->pinned ? " pinned" : "") << '\n';
  for (const Region& r : regions) {
    out << "  region [" << r.begin << ", " << r.end << ")\n";
    for (int q = 0; q < kNumQueues; ++q) {
      if (r.queues[q].empty()) continue;
      out << "    " << queue_name(static_cast<Queue>(q)) << ':';
      for (const EngineInstr& e : r.queues[q]) {
        out << ' ' << e.ir;
        if (e.waits.empty()) continue;
        out << " wait(";
        for (size_t w = 0; w < e.waits.size(); ++w)
          out << (w ? ", " : "") << queue_name(e.waits[w].queue) << ">=" << e.waits[w].count;
        out << ')';
      }
      out << '\n';
    }
  }
  out << "}\n";
  return out.str();
}

namespace {

class ScheduleParser {
 public:
  ScheduleParser(Lexer& lex, EngineProgram& p) : lex_(lex), p_(p) {}

  void parse() {
    lex_.expect_word("engine_program");
    p_.plan.cores = static_cast<int>(field("cores", 1, 1024));
    p_.plan.sbuf_high_water = field("sbuf_high_water", 0, INT64_MAX);
    p_.plan.psum_high_water = field("psum_high_water", 0, INT64_MAX);
    p_.dependences = field("dependences", 0, INT64_MAX);
    p_.plan.tensors.assign(p_.kernel.tensors.size(), std::nullopt);
    placed_.assign(p_.kernel.body.size(), 0);
    lex_.expect('{');
    for (;;) {
      if (lex_.accept_word("alloc")) allocation();
      else if (lex_.accept_word("region")) region();
      else if (lex_.accept('}')) break;
      else if (p_.regions.empty()) lex_.fail("expected 'alloc', 'region' or '}'" + lex_.found());
      else queue_line();
    }
    if (!lex_.at_end()) lex_.fail("unexpected text after the engine program" + lex_.found());
    if (!p_.regions.empty()) finish_region();
    for (size_t i = 0; i < placed_.size(); ++i)
      if (!is_barrier(p_.kernel.body[i]) && !placed_[i])
        corrupt("instruction " + std::to_string(i) + " is on no queue");
  }

 private:
  [[noreturn]] void corrupt(const std::string& what) {
    user_error(SourceLoc{"<engine program>", lex_.line(), 0}, "corrupt-program",
               "the engine program is corrupt: " + what +
                   "; delete it (or the Knit cache entry it came from) so that it is rebuilt");
  }

  int64_t integer(int64_t lo, int64_t hi, const char* what) {
    const int64_t v = lex_.integer();
    if (v < lo || v > hi)
      corrupt(std::string(what) + " " + std::to_string(v) + " is outside [" + std::to_string(lo) + ", " +
              std::to_string(hi) + "]");
    return v;
  }

  int64_t field(const char* name, int64_t lo, int64_t hi) {
    lex_.expect_word(name);
    lex_.expect('=');
    return integer(lo, hi, name);
  }

  Queue queue() {
    const std::string name = lex_.ident();
    for (int q = 0; q < kNumQueues; ++q)
      if (name == queue_name(static_cast<Queue>(q))) return static_cast<Queue>(q);
    lex_.fail("unknown queue '" + name + "'");
  }

  // Every allocation inside its target's SBUF/PSUM, of its tensor's size (compared without
  // overflow). A checksum only catches accidents; this keeps a crafted program from reaching
  // memory outside the simulator's buffers.
  void allocation() {
    lex_.expect('%');
    const int64_t id = integer(0, static_cast<int64_t>(p_.kernel.tensors.size()) - 1, "tensor");
    const TensorDecl& t = p_.kernel.tensors[id];
    if (!is_on_chip(t.buffer)) corrupt("an allocation for HBM tensor %" + std::to_string(id));
    if (p_.plan.tensors[id]) corrupt("tensor %" + std::to_string(id) + " is allocated twice");
    const TargetInfo info = target_info(p_.kernel.target);
    const int64_t capacity = t.buffer == Buffer::sbuf ? info.sbuf_partition_bytes : info.psum_partition_bytes;
    Allocation a;
    a.core = static_cast<int>(field("core", 0, p_.plan.cores - 1));
    a.partition = field("partition", 0, kMaxPartitions - t.partitions());
    a.partitions = field("partitions", t.partitions(), t.partitions());
    const int64_t bytes = t.partition_elements() * dtype_size(t.dtype);
    a.offset = field("offset", 0, capacity - bytes);
    a.bytes = field("bytes", bytes, bytes);
    a.pinned = lex_.accept_word("pinned");
    p_.plan.tensors[id] = a;
  }

  void region() {
    if (!p_.regions.empty()) finish_region();
    const int64_t size = static_cast<int64_t>(p_.kernel.body.size());
    const int64_t after = p_.regions.empty() ? 0 : p_.regions.back().end;
    lex_.expect('[');
    Region r;
    r.begin = static_cast<uint32_t>(integer(after, size - 1, "region start"));
    lex_.expect(',');
    r.end = static_cast<uint32_t>(integer(r.begin + 1, size, "region end"));
    lex_.expect(')');
    // A region is a whole run between barriers.
    const auto& body = p_.kernel.body;
    if ((r.begin > 0 && !is_barrier(body[r.begin - 1])) || (r.end < body.size() && !is_barrier(body[r.end])))
      corrupt("region [" + std::to_string(r.begin) + ", " + std::to_string(r.end) + ") is not a run between barriers");
    for (uint32_t i = r.begin; i < r.end; ++i)
      if (is_barrier(body[i]))
        corrupt("region [" + std::to_string(r.begin) + ", " + std::to_string(r.end) + ") holds barrier " +
                std::to_string(i));
    p_.regions.push_back(std::move(r));
  }

  void queue_line() {
    Region& r = p_.regions.back();
    const Queue q = queue();
    lex_.expect(':');
    auto& list = r.queues[static_cast<int>(q)];
    if (!list.empty()) corrupt(std::string("queue ") + queue_name(q) + " is listed twice in a region");
    while (!lex_.at_line_end()) {
      EngineInstr e;
      e.queue = q;
      e.ir = static_cast<uint32_t>(integer(list.empty() ? r.begin : list.back().ir + 1, r.end - 1, "instruction"));
      if (placed_[e.ir]++) corrupt("instruction " + std::to_string(e.ir) + " is on two queues");
      if (!lex_.at_line_end() && lex_.accept_word("wait")) {  // (accept_word would skip a line end)
        lex_.expect('(');
        do {
          Wait w;
          w.queue = queue();
          lex_.expect('>');
          lex_.expect('=');
          w.count = static_cast<int32_t>(integer(1, r.end - r.begin, "wait count"));
          e.waits.push_back(w);
        } while (lex_.accept(','));
        lex_.expect(')');
      }
      list.push_back(std::move(e));
    }
  }

  // A wait for more instructions than its queue runs in the region would never end.
  void finish_region() {
    const Region& r = p_.regions.back();
    for (const auto& list : r.queues)
      for (const EngineInstr& e : list)
        for (const Wait& w : e.waits)
          if (static_cast<size_t>(w.count) > r.queues[static_cast<int>(w.queue)].size())
            corrupt("instruction " + std::to_string(e.ir) + " waits for " + std::to_string(w.count) +
                    " instructions of " + queue_name(w.queue) + ", which runs fewer in its region");
  }

  Lexer& lex_;
  EngineProgram& p_;
  std::vector<uint8_t> placed_;
};

}  // namespace

EngineProgram EngineProgram::from_text(std::string_view text, const std::string& source_name) {
  Lexer lex(text, source_name);
  EngineProgram p;
  p.kernel = parse_kernel(lex);
  verify(p.kernel);
  ScheduleParser(lex, p).parse();
  // Every on-chip tensor the body uses has its allocation.
  for (const Instruction& inst : p.kernel.body)
    for_each_view(inst, [&](const char*, const View& v) {
      if (is_on_chip(p.kernel.tensors[v.tensor].buffer) && !p.plan.tensors[v.tensor])
        user_error(
            {}, "corrupt-program",
            "the engine program is corrupt: on-chip tensor %" + std::to_string(v.tensor) +
                " is used but not allocated; delete it (or the Knit cache entry it came from) so that it is rebuilt");
    });
  check_structure(p);
  index_regions(p);
  p.verified = true;
  return p;
}

}  // namespace knit::codegen
