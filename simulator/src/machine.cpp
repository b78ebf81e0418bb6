#include "machine.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <sstream>

#include <unistd.h>

#include "knit/codegen/allocate.h"
#include "knit/codegen/lower.h"
#include "knit/codegen/spill.h"
#include "knit/ir/indirect.h"
#include "knit/ir/liveness.h"
#include "knit/ir/op_traits.h"
#include "knit/ir/verifier.h"
#include "knit/ir/view.h"

namespace knit::sim {

using namespace knit::ir;

// ---- Machine --------------------------------------------------------------------------------

Machine::Machine(const Kernel& kernel, std::vector<HostTensor>& args, const InterpretOptions& options)
    : Machine(kernel, nullptr, args, options) {}

Machine::Machine(const codegen::EngineProgram& program, std::vector<HostTensor>& args, const InterpretOptions& options)
    : Machine(program.kernel, &program, args, options) {}

Machine::Machine(const Kernel& kernel, const codegen::EngineProgram* program, std::vector<HostTensor>& args,
                 const InterpretOptions& options)
    : program_(program), kernel_(kernel), args_(args), options_(options), rng_state_(options.seed) {
  if (!program || !program->verified) {  // lower() and from_binary() have checked both
    verify(kernel);
    if (program) codegen::check_structure(*program);
  }
  if (args.size() != kernel.params.size())
    user_error({}, "kernel-args",
               "kernel '" + kernel.name + "' takes " + std::to_string(kernel.params.size()) +
                   " tensors but was given " + std::to_string(args.size()));
  compute_liveness();
  for (std::string& w : codegen::spill_warnings(kernel)) {
    if (options_.on_warning) options_.on_warning(w);
    warnings_.push_back(std::move(w));
  }
  pool_ = std::make_unique<MemoryPool>(kernel, plan_, !times_regions_only());
  int max_reg = -1;
  for (const Instruction& inst : kernel.body)
    for_each_register(inst, [&](const char*, int r) { max_reg = std::max(max_reg, r); });
  reset_registers(max_reg + 1);
  for (size_t a = 0; a < args.size(); ++a) {
    const TensorDecl& t = kernel.tensor(kernel.params[a]);
    if (args[a].dtype != t.dtype || args[a].shape != t.shape ||
        (!options.timing_only && static_cast<int64_t>(args[a].input_bytes().size()) != t.size_bytes()))
      user_error(t.loc, "kernel-args",
                 "argument " + std::to_string(a) + " ('" + t.name +
                     "') does not match the "
                     "kernel's parameter dtype/shape");
  }
  if (!options.timing_only) check_host_memory();
  // HBM tensors live for the whole kernel.
  for (size_t id = 0; id < kernel.tensors.size(); ++id) {
    const TensorDecl& t = kernel.tensors[id];
    if (is_on_chip(t.buffer)) continue;
    if (options.timing_only) continue;  // no data: HBM is never touched
    Memory& mem = pool_->place_hbm(static_cast<int>(id));
    if (t.is_param) continue;  // filled from its argument below
    mem.resize(static_cast<size_t>(t.size_bytes()), /*track_matmul=*/false, /*zero_bytes=*/false);
    // lazy_fill_note: a fresh HBM tensor holds NaN / 4, but only a read of a never-written byte
    // or the output can see that. The native path never reads one (such an instance goes to the
    // reference executors), and those read through tile(), which settles the fill first; run()
    // settles it before an output leaves. So the pattern goes only into the bytes still unwritten
    // then (usually none), instead of into the whole tensor here: a pass over every output saved.
    mem.fill_owed = t.dtype;
  }
  if (!options.timing_only) params_written_ = params_written();  // (a timing-only run has no data)
  for (size_t a = 0; a < args.size() && !options.timing_only; ++a) {
    Memory& mem = pool_->hbm(kernel.params[a]);
    const std::span<const uint8_t> in = args[a].input_bytes();
    if (!params_written_[a]) {
      mem.borrow_initialized(in);
      continue;
    }
    mem.resize_initialized(in.size());
    std::memcpy(mem.bytes.data(), in.data(), in.size());
  }
  if (program && options.backend != Backend::reference && !options.timing_only) {
    native_ = std::make_unique<NativeExecutor>(*this);
    native_->start();
  }
}

Machine::~Machine() = default;

// The simulator holds every HBM tensor in host memory: a kernel whose tensors do not fit is a
// user error naming the largest, before anything is allocated (rather than std::bad_alloc, or
// the process killed once the pages are touched). The cap is the machine's physical memory, or
// KNIT_HOST_MEMORY_CAP bytes.
void Machine::check_host_memory() const {
  int64_t cap = static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGE_SIZE);
  if (const char* env = std::getenv("KNIT_HOST_MEMORY_CAP"); env && *env) cap = std::atoll(env);
  int64_t total = 0;
  const TensorDecl* largest = nullptr;
  for (const TensorDecl& t : kernel_.tensors) {
    if (is_on_chip(t.buffer)) continue;
    total += t.size_bytes();
    if (!largest || t.size_bytes() > largest->size_bytes()) largest = &t;
  }
  if (largest && total > cap)
    user_error(largest->loc, "host-memory",
               "the kernel's HBM tensors need " + std::to_string(total) + " bytes of host memory, more than the " +
                   std::to_string(cap) +
                   " the simulator may use (KNIT_HOST_MEMORY_CAP, default the machine's "
                   "memory); the largest is '" +
                   largest->name + "' (" + std::to_string(largest->size_bytes()) +
                   " bytes): simulate smaller shapes, or time the kernel with shape placeholders");
}

void Machine::fail(const std::string& rule, const std::string& message) const {
  runtime_error(current_ ? current_->loc : SourceLoc{}, rule, message);
}

void Machine::warn(const std::string& message) {
  if (warned_at_ == executed_) return;  // one warning per executed instruction is enough
  warned_at_ = executed_;
  std::string text = format_diagnostic("warning", "", message, current_ ? current_->loc : SourceLoc{});
  warnings_.push_back(text);
  if (options_.on_warning) options_.on_warning(text);
}

Tile Machine::tile(const View& v, const char* what, OobMode oob) {
  const TensorDecl& t = kernel_.tensor(v.tensor);
  const MemoryPool::Placement& pl = pool_->placement(v.tensor);
  if (!pl.live) internal_error("tensor '" + t.name + "' used while not placed");
  pl.mem->settle_fill();  // it may read never-written bytes (lazy_fill_note)
  Tile tile;
  tile.state_ = this;
  tile.mem_ = pl.mem;
  tile.dtype = v.dtype;
  tile.esize_ = dtype_size(v.dtype);
  tile.what_ = what;
  tile.tensor_ = v.tensor;
  tile.P = view_partitions(t, v);
  tile.F = view_free_size(t, v);
  const int esize = dtype_size(v.dtype);
  const bool on_chip = is_on_chip(t.buffer);
  const int64_t capacity = partition_capacity(t.buffer);
  const int64_t tensor_part_bytes = on_chip ? t.partition_elements() * dtype_size(t.dtype) : t.size_bytes();
  tile.offset_.resize(static_cast<size_t>(v.num_elements()));
  if (pool_->linear_offsets(v, tile.offset_)) return tile;
  if (v.indexes_columns()) {
    column_offsets(v, what, tile);
    return tile;
  }
  // Indirect view: the index along dims[indirect_dim] comes from the index tensor.
  std::vector<int64_t> rows;
  if (const View* index = v.index_view()) {
    Tile it = this->tile(*index, "vector_offset");
    rows.resize(static_cast<size_t>(it.size()));
    for (int64_t i = 0; i < it.size(); ++i) rows[i] = it.read_int(i);
  }
  const int ind = v.indirect_dim;
  std::vector<int64_t> idx(v.dims.size(), 0);
  for (int64_t e = 0; e < v.num_elements(); ++e) {
    int64_t flat = v.offset;
    for (size_t k = 0; k < idx.size(); ++k)
      flat += (static_cast<int>(k) == ind ? rows[idx[k]] : idx[k]) * v.dims[k].step;
    const int64_t byte = flat * esize;
    // Bounds check of every access: static views were verified already, so this fires for
    // indirect rows out of range (or, defensively, any view that slipped through).
    if (byte < 0 || byte + esize > (on_chip ? tensor_part_bytes * t.partitions() : tensor_part_bytes)) {
      if (ind >= 0 && oob == OobMode::skip) {
        tile.skipped_.resize(static_cast<size_t>(v.num_elements()), 0);
        tile.skipped_[e] = 1;
        tile.offset_[e] = 0;
      } else if (ind >= 0) {
        fail("indirect-out-of-bounds",
             std::string(current_->opcode_name()) + " operand " + what + ": index " + std::to_string(rows[idx[ind]]) +
                 " (entry " + std::to_string(idx[ind]) + " of the vector_offset tensor) reaches outside tensor '" +
                 t.name +
                 "'; fix the indices, or drop such rows with oob_mode skip (Python: oob_mode=nisa.oob_mode.skip, "
                 "C++: {.oob_mode = isa::oob_mode::skip})");
      } else {
        fail("out-of-bounds",
             std::string(current_->opcode_name()) + " operand " + what + " accesses outside tensor '" + t.name + "'");
      }
      for (size_t k = idx.size(); k-- > 0;) {
        if (++idx[k] < v.dims[k].num) break;
        idx[k] = 0;
      }
      continue;
    }
    tile.offset_[e] = on_chip
                          ? (pl.partition + byte / tensor_part_bytes) * capacity + pl.offset + byte % tensor_part_bytes
                          : byte;
    for (size_t k = idx.size(); k-- > 0;) {
      if (++idx[k] < v.dims[k].num) break;
      idx[k] = 0;
    }
  }
  return tile;
}

// An .indirect() view (ir.h, View::gather): column i of partition p is the element at the free
// offset the index tile holds for it (knit/ir/indirect.h), read fresh each time the instruction
// runs. An offset outside the indirected view is an error naming partition, column and offset.
void Machine::column_offsets(const View& v, const char* what, Tile& tile) {
  const TensorDecl& t = kernel_.tensor(v.tensor);
  const MemoryPool::Placement& pl = pool_->placement(v.tensor);
  const int64_t esize = dtype_size(v.dtype), capacity = partition_capacity(t.buffer);
  const int64_t part_bytes = t.partition_elements() * dtype_size(t.dtype);
  const Tile index = this->tile(*v.index_view(), "indirect_index");
  const int64_t G = indirect_group(current_->opcode()), size = gather_size(v.gather);
  // An nc_matmul_mx scale reads its data's index: scale partition p serves data partitions
  // rows*p .. rows*p+rows-1, all in one group (indirect.h, index_rows_per_partition).
  const int64_t rows = index.P / tile.P;
  for (int64_t p = 0; p < tile.P; ++p)
    for (int64_t i = 0; i < tile.F; ++i) {
      const IndexCell cell = indirect_cell(p * rows, i, G);
      const int64_t o = index.read_int(index.at(cell.row, cell.col));
      if (o < 0 || o >= size)
        fail("indirect-out-of-bounds", std::string(current_->opcode_name()) + " operand " + what + ": partition " +
                                           std::to_string(p) + ", column " + std::to_string(i) + " reads offset " +
                                           std::to_string(o) + " (index tile row " + std::to_string(cell.row) +
                                           ", column " + std::to_string(cell.col) + ") outside the indirected view's " +
                                           std::to_string(size) + " elements per partition of tensor '" + t.name +
                                           "'; fix the index tile");
      const int64_t byte = (v.offset + p * v.dims[0].step + gather_offset(v.gather, o)) * esize;
      tile.offset_[tile.at(p, i)] = (pl.partition + byte / part_bytes) * capacity + pl.offset + byte % part_bytes;
    }
}

void Machine::compute_liveness() {
  match_ = match_blocks(kernel_);
  loop_stop_.assign(kernel_.body.size(), 0);
  if (times_regions_only()) {  // only control flow runs: no lives, no allocation's memory
    plan_ = program_->plan;
    place_at_.assign(kernel_.body.size(), {});
    release_at_.assign(kernel_.body.size(), {});
    return;
  }
  const std::vector<LiveRange> live = live_ranges(kernel_, match_);
  plan_ = program_ ? program_->plan : codegen::allocate(kernel_, live);
  place_at_ = codegen::placements(kernel_, live);
  overwritten_at_place_.assign(kernel_.tensors.size(), false);
  std::vector<bool> placed_elsewhere(kernel_.tensors.size(), false);
  for (size_t pc = 0; pc < place_at_.size(); ++pc)
    for (int id : place_at_[pc]) {
      overwritten_at_place_[id] = !placed_elsewhere[id] && (overwrites_whole(kernel_.body[pc], id) ||
                                                            ir::written_whole_before_read(kernel_, pc, id));
      placed_elsewhere[id] = true;
    }
  release_at_.assign(kernel_.body.size(), {});
  for (size_t id = 0; id < live.size(); ++id)
    if (live[id].used() && is_on_chip(kernel_.tensors[id].buffer))
      release_at_[live[id].last].push_back(static_cast<int>(id));
}

void Machine::execute(const Instruction& inst) {
  poison_reads_.clear();
  if (!native_ || !native_->run(inst))
    std::visit(
        [&](const auto& op) {
          if constexpr (std::is_same_v<std::decay_t<decltype(op)>, std::monostate>) internal_error("empty instruction");
          else exec(*this, op);
        },
        inst.op);
  if (!poison_reads_.empty()) propagate_poison(inst);
}

bool Machine::overwrites_whole(const Instruction& inst, int id) const {
  return ir::overwrites_whole(kernel_, inst, id);
}

Instruction Machine::concretize(const Instruction& inst) const {
  Instruction c = inst;
  std::map<int, int32_t> used;  // registers named in the message, each once
  for_each_view_mut(c, [&](View& v) {
    for (const RegTerm& t : v.dynamic) {
      const int32_t r = reg(t.reg);
      v.offset += t.coeff * r;
      used[t.reg] = r;
    }
    v.dynamic.clear();
  });
  std::string values;
  for (const auto& [id, value] : used)
    values += (values.empty() ? "" : ", ") + ("r" + std::to_string(id)) + " = " + std::to_string(value);
  try {
    verify_instruction(kernel_, c);
  } catch (const Error& e) {
    runtime_error(inst.loc, e.rule(), e.message() + " (with " + values + ")");
  }
  return c;
}

size_t Machine::control(size_t pc, const Instruction& inst) {
  switch (inst.opcode()) {
    case Opcode::loop: {
      const auto& op = std::get<Loop>(inst.op);
      const int32_t start = value(op.start);
      loop_stop_[pc] = value(op.stop);
      set_reg(op.iv.id, start);
      return start < loop_stop_[pc] ? pc + 1 : match_[pc] + 1;
    }
    case Opcode::while_: return reg(std::get<While>(inst.op).cond.id) != 0 ? pc + 1 : match_[pc] + 1;
    case Opcode::if_:
      return reg(std::get<If>(inst.op).cond.id) != 0 ? pc + 1 : match_[pc] + 1;  // past the else, or the end
    case Opcode::else_: return match_[pc] + 1;  // the then-branch ran: skip the else-branch
    case Opcode::end: {
      const size_t opener = match_[pc];
      const Instruction& head = kernel_.body[opener];
      if (head.opcode() == Opcode::while_) return opener;  // re-test the condition
      if (head.opcode() == Opcode::loop) {
        const auto& op = std::get<Loop>(head.op);
        const int64_t next = static_cast<int64_t>(reg(op.iv.id)) + op.step;
        if (next < loop_stop_[opener]) {
          set_reg(op.iv.id, next);
          return opener + 1;
        }
      }
      return pc + 1;
    }
    default: internal_error("not a control instruction");
  }
}

size_t Machine::step(size_t pc) {
  if (program_ && program_->region_at[pc] >= 0) {
    const codegen::Region& region = program_->regions[program_->region_at[pc]];
    if (options_.record_execution) executed_log_.push_back({core_, program_->region_at[pc], static_cast<int32_t>(pc)});
    const size_t next = options_.timing_only ? region.end : run_region(region);
    for (size_t i = pc; i < next; ++i)
      for (int id : release_at_[i]) pool_->release(id);
    return next;
  }
  const Instruction& inst = kernel_.body[pc];
  size_t next = pc + 1;
  const Opcode op = inst.opcode();
  // Grid instances are cores: one that runs after another (no cross-core sync) is still its own.
  if (const auto* p = std::get_if<Program>(&inst.op)) core_ = static_cast<int>(p->id);
  if (options_.record_execution) executed_log_.push_back({core_, -1, static_cast<int32_t>(pc)});
  if (options_.timing_only && op == Opcode::register_store) return next;  // no data to write
  if (options_.timing_only && op == Opcode::register_load) {
    current_ = &inst;
    fail("timing-only-data",
         "register_load reads a value from tensor data, which a timing-only run (shape "
         "placeholders instead of arrays) does not have; pass real arrays");
  }
  if (is_block(op)) {
    current_ = &inst;
    count_executed(pc);
    for (int id : place_at_[pc])
      if (!pool_->placement(id).live) pool_->place(id, overwritten_at_place_[id]);
    next = control(pc, inst);
  } else {
    execute_at(pc);
  }
  // Leaving instructions forward (also by jumping past a block) ends the lives that end there;
  // a backward jump stays inside every live range (ranges cover whole blocks).
  for (size_t i = pc; i < next && i < release_at_.size(); ++i)
    for (int id : release_at_[i]) pool_->release(id);
  return next;
}

void Machine::count_executed(size_t pc) {
  if (options_.on_progress && (executed_ & 4095) == 0) options_.on_progress(executed_);
  if (++executed_ > options_.max_instructions) fail_over_budget(pc);
}

// The error at the innermost while loop around instruction `pc` (the one that ran away, most
// likely), else at the instruction itself.
void Machine::fail_over_budget(size_t pc) {
  const auto& body = kernel_.body;
  const std::string spent = "the kernel executed more than " + std::to_string(options_.max_instructions) +
                            " instructions (KNIT_MAX_INSTRUCTIONS)";
  // Walk back from pc: an `end` before pc closes a block pc is not in (skip to its opener);
  // any other block opener met is around pc.
  size_t i = body[pc].opcode() == Opcode::end ? match_[pc] + 1 : pc + 1;
  while (i-- > 0) {
    if (body[i].opcode() == Opcode::end) {
      i = match_[i];
      continue;
    }
    if (body[i].opcode() == Opcode::while_) {
      current_ = &body[i];
      fail("instruction-limit", spent +
                                    " inside this while loop, which has not ended: is its condition register "
                                    "never set to 0? (raise KNIT_MAX_INSTRUCTIONS if the loop is just long)");
    }
  }
  fail("instruction-limit", spent + "; raise KNIT_MAX_INSTRUCTIONS if the kernel is just long");
}

int64_t default_instruction_budget() {
  const char* text = std::getenv("KNIT_MAX_INSTRUCTIONS");
  if (!text || !*text) return kDefaultInstructionBudget;
  char* end = nullptr;
  errno = 0;
  const long long n = std::strtoll(text, &end, 10);
  if (errno || *end || n <= 0)
    user_error(SourceLoc{}, "instruction-limit",
               std::string("KNIT_MAX_INSTRUCTIONS=") + text +
                   " is not a positive whole number of instructions (unset it for the default, " +
                   std::to_string(kDefaultInstructionBudget) + ")");
  return n;
}

void Machine::execute_at(size_t pc, const std::function<void(const std::vector<codegen::Access>&)>& check) {
  const Instruction& inst = kernel_.body[pc];
  current_ = &inst;
  current_pc_ = pc;
  count_executed(pc);
  for (int id : place_at_[pc])
    if (!pool_->placement(id).live) pool_->place(id, overwritten_at_place_[id]);
  bool dynamic = false;
  for_each_view(inst, [&](const char*, const View& v) { dynamic = dynamic || !v.dynamic.empty(); });
  const Instruction concrete = dynamic ? concretize(inst) : Instruction{};
  const Instruction& run = dynamic ? concrete : inst;
  if (check) check(codegen::instruction_accesses(kernel_, plan_, run, place_at_[pc]));
  current_ = &run;
  execute(run);
  current_ = &inst;
}

void Machine::run_cores() {
  const auto& body = kernel_.body;
  std::vector<Core> cores;
  for (size_t i = 0; i < body.size(); ++i)
    if (const auto* p = std::get_if<Program>(&body[i].op)) {
      if (!cores.empty()) cores.back().end = i;
      cores.push_back({p->id, i, body.size()});
    }
  if (cores.empty()) cores.push_back({0, 0, body.size()});
  while (true) {
    bool all_done = true;
    for (Core& c : cores) {
      core_ = static_cast<int>(c.rank);
      while (!c.done() && !is_core_sync(body[c.pc].opcode())) c.pc = step(c.pc);
      all_done = all_done && c.done();
    }
    if (all_done) return;
    // Every unfinished core now waits at a core_barrier or sendrecv.
    const bool barriers = release_barriers(cores);
    const bool exchanges = exchange(cores);
    const bool collectives = run_collectives(cores);
    if (!barriers && !exchanges && !collectives) deadlock(cores);
  }
}

namespace {
// The synchronization instruction of type Op that core `rank` waits at, or null.
template <class Op, class Cores>
const Op* waiting_at(const Kernel& k, const Cores& cores, int64_t rank) {
  if (rank < 0 || rank >= static_cast<int64_t>(cores.size()) || cores[rank].done()) return nullptr;
  return std::get_if<Op>(&k.body[cores[rank].pc].op);
}
}  // namespace

bool Machine::release_barriers(std::vector<Core>& cores) {
  auto barrier_of = [&](int64_t rank) { return waiting_at<CoreBarrier>(kernel_, cores, rank); };
  std::vector<size_t> ready;
  for (size_t c = 0; c < cores.size(); ++c) {
    const CoreBarrier* b = barrier_of(static_cast<int64_t>(c));
    if (!b) continue;
    bool all_here = true;
    for (int64_t r : b->cores) {
      const CoreBarrier* other = barrier_of(r);
      all_here = all_here && other && other->cores == b->cores;
    }
    if (all_here) ready.push_back(c);
  }
  for (size_t c : ready) {
    core_ = static_cast<int>(c);
    cores[c].pc = step(cores[c].pc);
  }
  return !ready.empty();
}

// Cores whose sendrecv pairs match on both sides exchange: every ready core's src is read
// before any dst is written, so crossing transfers see the values from before the exchange.
bool Machine::exchange(std::vector<Core>& cores) {
  const auto& body = kernel_.body;
  auto sendrecv_of = [&](int64_t rank) { return waiting_at<SendRecv>(kernel_, cores, rank); };
  std::vector<size_t> ready;
  for (size_t c = 0; c < cores.size(); ++c) {
    const SendRecv* s = sendrecv_of(static_cast<int64_t>(c));
    if (!s) continue;
    const SendRecv* from = sendrecv_of(s->recv_from_rank);
    const SendRecv* to = sendrecv_of(s->send_to_rank);
    if (from && to && from->send_to_rank == static_cast<int64_t>(c) && from->pipe_id == s->pipe_id &&
        to->recv_from_rank == static_cast<int64_t>(c) && to->pipe_id == s->pipe_id)
      ready.push_back(c);
  }
  std::vector<std::vector<uint32_t>> sent(cores.size());
  std::vector<std::vector<PoisonedRead>> sent_poison(cores.size());
  for (size_t c : (options_.timing_only ? std::vector<size_t>{} : ready)) {
    current_ = &body[cores[c].pc];
    for (int id : place_at_[cores[c].pc])
      if (!pool_->placement(id).live) pool_->place(id, overwritten_at_place_[id]);
    poison_reads_.clear();
    sent[c] = tile(std::get<SendRecv>(current_->op).src, "src").read_all_bits();
    sent_poison[c] = std::move(poison_reads_);
  }
  for (size_t c : (options_.timing_only ? std::vector<size_t>{} : ready)) {
    current_ = &body[cores[c].pc];
    const SendRecv& s = std::get<SendRecv>(current_->op);
    Tile dst = tile(s.dst, "dst");
    dst.write_all_bits(sent[s.recv_from_rank]);
    poison_output(sent_poison[s.recv_from_rank], PoisonRule::elementwise, dst, "dst");
  }
  for (size_t c : ready) {
    core_ = static_cast<int>(c);
    cores[c].pc = step(cores[c].pc);  // exec(SendRecv) moves nothing
  }
  return !ready.empty();
}

void Machine::deadlock(const std::vector<Core>& cores) {
  const bool ranks = has_collectives(kernel_);
  std::ostringstream msg;
  msg << "the " << (ranks ? "ranks" : "cores") << " wait for each other forever:";
  const Instruction* first = nullptr;
  for (const Core& c : cores) {
    msg << "\n    " << (ranks ? "rank " : "core ") << c.rank << ": ";
    if (c.done()) {
      msg << "finished";
      continue;
    }
    const Instruction& inst = kernel_.body[c.pc];
    first = first ? first : &inst;
    msg << "waits at " << inst.opcode_name() << " (" << inst.loc.file << ':' << inst.loc.line << ')';
  }
  msg << "\n  Every core in a core_barrier's cores must reach it, each sendrecv needs the partner's "
         "sendrecv (send_to_rank / recv_from_rank swapped, same pipe_id), and every rank of a collective's "
         "replica group must reach that collective.";
  current_ = first;
  Machine::fail("deadlock", msg.str());
}

RunResult Machine::run() {
  bool multi_core = false;
  for (const Instruction& inst : kernel_.body) multi_core = multi_core || is_core_sync(inst.opcode());
  if (multi_core) {
    run_cores();
  } else {
    for (size_t pc = 0; pc < kernel_.body.size();) pc = step(pc);
  }
  current_ = nullptr;
  check_outputs_defined();
  RunResult result;
  result.warnings = warnings_;
  result.executed = std::move(executed_log_);
  if (native_) {
    result.native_instructions = native_->native;
    result.interpreted_instructions = native_->interpreted;
    result.indirect_compute_instructions = native_->indirect_compute;
    result.forwarded_copies = native_->forwarded;
    result.fallbacks = native_->fallbacks;
    result.static_work = native_->work_estimate;
    result.break_even_work = native_->break_even;
  }
  if (options_.timing_only) return result;
  for (size_t o = 0; o < kernel_.outputs.size(); ++o) {
    const int id = kernel_.outputs[o];
    const TensorDecl& t = kernel_.tensor(id);
    Memory& mem = pool_->hbm(id);
    // The bytes no instruction wrote (an argument's memory tracks none), counted for the warning,
    // get the fresh-memory pattern (lazy_fill_note).
    int64_t unwritten = 0;
    mem.init.for_each_zero_run([&](int64_t, int64_t len) { unwritten += len; });
    mem.settle_fill();
    if (std::optional<std::string> w = unwritten_output_warning(t, unwritten)) {
      result.warnings.push_back(*w);
      if (options_.on_warning) options_.on_warning(*w);
    }
    result.outputs.push_back(output_tensor(o, result.outputs));
  }
  // Only arguments some instruction writes can have changed (the others were read in place).
  result.args_written = params_written_;
  for (size_t a = 0; a < args_.size(); ++a) {
    if (!result.args_written[a]) continue;
    const Memory& mem = pool_->hbm(kernel_.params[a]);
    args_[a].bytes.assign(mem.bytes.data(), mem.bytes.data() + mem.bytes.size());
    args_[a].borrowed = {};
  }
  return result;
}

// Output o's bytes: handed over without a copy when the caller asked and the memory is the run's
// own (not an argument's, which the write-back still reads), else copied; an output listed twice
// is copied from its earlier place (`done`: the outputs before o), which took the memory.
HostTensor Machine::output_tensor(size_t o, const std::vector<HostTensor>& done) {
  const int id = kernel_.outputs[o];
  const TensorDecl& t = kernel_.tensor(id);
  Memory& mem = pool_->hbm(id);
  HostTensor h;
  h.dtype = t.dtype;
  h.shape = t.shape;
  for (size_t e = 0; e < o; ++e)
    if (kernel_.outputs[e] == id) {
      const std::span<const uint8_t> earlier = done[e].output_bytes();
      h.bytes.assign(earlier.begin(), earlier.end());
      return h;
    }
  if (options_.outputs_without_copy && !t.is_param && !mem.bytes.borrowed()) {
    h.block_size = mem.bytes.size();
    h.block = mem.bytes.share();
  } else {
    h.bytes.assign(mem.bytes.data(), mem.bytes.data() + mem.bytes.size());
  }
  return h;
}

// An output with bytes no instruction wrote returns the fresh-memory pattern (NaN / 4) there:
// a warning names it, as a read of never-written memory would be named.
std::optional<std::string> Machine::unwritten_output_warning(const TensorDecl& t, int64_t unwritten) const {
  if (unwritten == 0) return std::nullopt;
  const int64_t elements = (unwritten + dtype_size(t.dtype) - 1) / dtype_size(t.dtype);
  return format_diagnostic("warning", "unwritten-output",
                           "kernel output '" + t.name + "': " + std::to_string(elements) + " of " +
                               std::to_string(t.num_elements()) +
                               " elements were never written and hold NaN (integers: 4); write them (e.g. "
                               "nisa.dma_copy or nisa.memset) or return a smaller tensor",
                           t.loc);
}

std::vector<bool> Machine::params_written() const {
  std::vector<uint64_t> written;
  for (const Instruction& inst : kernel_.body)
    for (const codegen::Access& a : codegen::instruction_accesses(kernel_, plan_, inst))
      if (a.write) written.push_back(a.memory);
  std::sort(written.begin(), written.end());
  std::vector<bool> out(kernel_.params.size());
  for (size_t a = 0; a < out.size(); ++a)
    out[a] = std::binary_search(written.begin(), written.end(), codegen::hbm_memory(kernel_.params[a]));
  return out;
}

RunResult interpret(const Kernel& kernel, std::vector<HostTensor>& args, const InterpretOptions& options) {
  verify(kernel);  // spilling needs a well-formed body; lower() spills the same way
  const Kernel spilled = codegen::spill_to_fit(kernel);
  Machine machine(spilled, args, options);
  return machine.run();
}

}  // namespace knit::sim
