#include "knit/codegen/spill.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <sstream>

#include "knit/codegen/allocate.h"
#include "knit/ir/liveness.h"
#include "knit/ir/op_traits.h"
#include "knit/ir/verifier.h"
#include "knit/ir/view.h"

namespace knit::codegen {

using namespace knit::ir;

namespace {

bool is_write(std::string_view operand) {
  return operand == "dst" || operand == "reduce_res" || operand == "dst_scale";
}

// Body indices at which each tensor appears, in order; and whether each index is inside a block.
struct Uses {
  std::vector<std::vector<size_t>> at;
  std::vector<bool> in_block;
  std::vector<std::optional<size_t>> whole_at;  // written_whole_at, computed when first asked
};

Uses find_uses(const Kernel& k) {
  Uses u{std::vector<std::vector<size_t>>(k.tensors.size()), std::vector<bool>(k.body.size(), false),
         std::vector<std::optional<size_t>>(k.tensors.size())};
  int depth = 0;
  for (size_t i = 0; i < k.body.size(); ++i) {
    const BlockPart part = op_traits(k.body[i].opcode()).block;
    if (part == BlockPart::close) --depth;
    u.in_block[i] = depth > 0 || part != BlockPart::none;
    if (part == BlockPart::open) ++depth;
    for_each_view(k.body[i], [&](const char*, const View& v) {
      auto& list = u.at[v.tensor];
      if (list.empty() || list.back() != i) list.push_back(i);
    });
  }
  return u;
}

// Marks in `done` the elements of tensor t that static view v writes; returns how many were new.
int64_t mark_written(const TensorDecl& t, const View& v, std::vector<bool>& done) {
  if (!v.is_static() || dtype_size(v.dtype) != dtype_size(t.dtype)) return 0;  // not countable here
  int64_t fresh = 0;
  std::vector<int64_t> idx(v.dims.size(), 0);
  for (int64_t n = v.num_elements(); n > 0; --n) {
    int64_t at = v.offset;
    for (size_t d = 0; d < idx.size(); ++d) at += idx[d] * v.dims[d].step;
    if (at >= 0 && at < static_cast<int64_t>(done.size()) && !done[static_cast<size_t>(at)]) {
      done[static_cast<size_t>(at)] = true;
      ++fresh;
    }
    for (size_t d = idx.size(); d-- > 0;) {  // next index, last dim fastest
      if (++idx[d] < v.dims[d].num) break;
      idx[d] = 0;
    }
  }
  return fresh;
}

// The first body index by which static writes have covered every element of tensor t (a tile
// may be filled in parts, e.g. one transposed block at a time); SIZE_MAX when they never do.
size_t written_whole_at(const Kernel& k, const std::vector<size_t>& at_list, int t) {
  const TensorDecl& d = k.tensor(t);
  std::vector<bool> done(static_cast<size_t>(d.num_elements()), false);
  int64_t left = d.num_elements();
  for (size_t i : at_list) {
    for_each_view(k.body[i], [&](const char* name, const View& v) {
      if (v.tensor == t && is_write(name)) left -= mark_written(d, v, done);
    });
    if (left == 0) return i;
  }
  return SIZE_MAX;
}

// A matmul that adds into tensor t (accumulate auto or on): t's matmul-written flags matter to it.
bool accumulates_into(const Instruction& inst, int t) {
  bool writes_t = false, adds = false;
  for_each_field(inst, [&](const char* name, const auto& value) {
    using T = std::decay_t<decltype(value)>;
    if constexpr (std::is_same_v<T, Accumulate>) adds = value != Accumulate::off;
    if constexpr (std::is_same_v<T, View>)
      if (std::string_view(name) == "dst" && value.tensor == t) writes_t = true;
  });
  return writes_t && adds;
}

std::string line_of(const SourceLoc& loc) { return loc.file + ":" + std::to_string(loc.line); }

struct Victim {
  int tensor = -1;
  size_t last_before = 0, next_after = 0;  // T's uses around the over-full point
};

// Picks the tile to spill where `failing` starts, among the tensors `alive` there (all in its
// buffer); when none qualifies, `why` says for each candidate what kept it.
Victim choose_victim(const Kernel& k, Uses& uses, const std::vector<LiveRange>& live, int failing,
                     const std::vector<int>& alive, std::string& why) {
  const auto at = static_cast<size_t>(live[failing].first);
  // The failing tile's next use after `at`: a victim needed again by that same instruction would
  // come back while the failing tile holds its bytes, and the two would evict each other in turn.
  // (A victim needed earlier comes back once the failing tile, then farther from its next use,
  // can go out in its place.)
  const auto& failing_uses = uses.at[failing];
  const auto failing_next_it = std::upper_bound(failing_uses.begin(), failing_uses.end(), at);
  const size_t failing_next = failing_next_it == failing_uses.end() ? at : *failing_next_it;
  Victim best;
  std::ostringstream reasons;
  for (int t : alive) {
    const TensorDecl& d = k.tensor(t);
    const auto& at_list = uses.at[t];
    const auto next = std::lower_bound(at_list.begin(), at_list.end(), at);
    const std::string name = "'" + d.name + "' (" + line_of(d.loc) + ")";
    if (d.address) {
      reasons << "\n    " << name << " is pinned by address=";
      continue;
    }
    if (live[t].first >= live[failing].first) {  // starts with the tile that does not fit
      reasons << "\n    " << name << " is live from the same point (a loop or branch around both)";
      continue;
    }
    if (next == at_list.begin()) continue;  // first used after `at` (a pin's bytes held early)
    if (std::any_of(at_list.begin(), at_list.end(), [&](size_t i) { return uses.in_block[i]; })) {
      reasons << "\n    " << name << " is used inside a loop or branch (only straight-line tiles are spilled)";
      continue;
    }
    if (next == at_list.end()) continue;  // not live across `at`
    if (*next == at) {
      reasons << "\n    " << name << " is used by the same instruction";
      continue;
    }
    const size_t before = *(next - 1), after = *next;
    if (accumulates_into(k.body[after], t)) {
      reasons << "\n    " << name << " is in an open matmul accumulation group (the matmul at "
              << line_of(k.body[after].loc) << " adds into it)";
      continue;
    }
    auto& whole_at = uses.whole_at[static_cast<size_t>(t)];
    if (!whole_at) whole_at = written_whole_at(k, at_list, t);
    if (*whole_at >= at) {
      reasons << "\n    " << name << " has not been written whole yet";
      continue;
    }
    if (after == failing_next) {
      reasons << "\n    " << name << " is needed again at " << line_of(k.body[after].loc) << " together with '"
              << k.tensor(failing).name << "'";
      continue;
    }
    if (best.tensor < 0 || after > best.next_after) best = {t, before, after};
  }
  why = reasons.str();
  return best;
}

template <class Op>
Instruction copy_instruction(const Kernel& k, int dst, int src, const SourceLoc& loc) {
  Op op;
  op.dst = full_view(k.tensor(dst), dst);
  op.src = full_view(k.tensor(src), src);
  Instruction inst;
  inst.op = std::move(op);
  inst.loc = loc;
  return inst;
}

void rename(Instruction& inst, int from, int to) {
  for_each_view_mut(inst, [&](View& v) {
    if (v.tensor == from) v.tensor = to;
    for (View& index : v.indirect)
      if (index.tensor == from) index.tensor = to;
  });
}

// Spills victim v to a new tensor `<name>.spill` in buffer `to` (spill_of = v), copied out by a
// `Copy` after v's last use before the over-full point and back by a `Copy` into a fresh tensor
// (v's name and line) before v's next use, which replaces v from there on. PSUM victims go to SBUF
// by tensor_copy; SBUF victims go to a private HBM tensor by dma_copy.
template <class Copy>
void insert_spill(Kernel& k, const Victim& v, Buffer to) {
  const int spill = static_cast<int>(k.tensors.size()), reloaded = spill + 1;
  TensorDecl s = k.tensor(v.tensor);
  s.name += ".spill";
  s.buffer = to;
  s.address.reset();
  s.is_param = false;
  s.spill_of = v.tensor;
  TensorDecl t2 = k.tensor(v.tensor);
  k.tensors.push_back(std::move(s));
  k.tensors.push_back(std::move(t2));
  for (size_t i = v.next_after; i < k.body.size(); ++i) rename(k.body[i], v.tensor, reloaded);
  const SourceLoc reload_at = k.body[v.next_after].loc, store_at = k.body[v.last_before].loc;
  k.body.insert(k.body.begin() + static_cast<std::ptrdiff_t>(v.next_after),
                copy_instruction<Copy>(k, reloaded, spill, reload_at));
  k.body.insert(k.body.begin() + static_cast<std::ptrdiff_t>(v.last_before + 1),
                copy_instruction<Copy>(k, spill, v.tensor, store_at));
}

// The body index of the one instruction that writes (or reads) tensor t.
size_t only_access(const Kernel& k, int t, bool write) {
  for (size_t i = 0; i < k.body.size(); ++i) {
    bool hit = false;
    for_each_view(k.body[i],
                  [&](const char* name, const View& v) { hit = hit || (v.tensor == t && is_write(name) == write); });
    if (hit) return i;
  }
  internal_error("spill tensor without its copies");
}

// Replaces body[i] with the two instructions a, b.
void replace_with_pair(Kernel& k, size_t i, Instruction a, Instruction b) {
  k.body[i] = std::move(a);
  k.body.insert(k.body.begin() + static_cast<std::ptrdiff_t>(i + 1), std::move(b));
}

// SBUF has no room for spill tensor s: it moves to HBM. DMA cannot reach PSUM, so each way goes
// through an SBUF staging tile that lives for two instructions: PSUM -> stage -> HBM after the
// last use, HBM -> stage -> PSUM before the next.
void move_spill_to_hbm(Kernel& k, int s) {
  TensorDecl stage = k.tensor(s);
  stage.name = k.tensor(*stage.spill_of).name + ".stage";
  stage.spill_of.reset();
  const int out = static_cast<int>(k.tensors.size()), in = out + 1;
  k.tensors.push_back(stage);
  k.tensors.push_back(stage);
  k.tensors[static_cast<size_t>(s)].buffer = Buffer::hbm;
  const size_t store = only_access(k, s, true);
  const int victim = std::get<TensorCopy>(k.body[store].op).src.tensor;
  const SourceLoc store_at = k.body[store].loc;
  replace_with_pair(k, store, copy_instruction<TensorCopy>(k, out, victim, store_at),
                    copy_instruction<DmaCopy>(k, s, out, store_at));
  const size_t reload = only_access(k, s, false);
  const int reloaded = std::get<TensorCopy>(k.body[reload].op).dst.tensor;
  const SourceLoc reload_at = k.body[reload].loc;
  replace_with_pair(k, reload, copy_instruction<DmaCopy>(k, in, s, reload_at),
                    copy_instruction<TensorCopy>(k, reloaded, in, reload_at));
}

// An SBUF spill tensor among `alive`, else -1.
int sbuf_spill_among(const Kernel& k, const std::vector<int>& alive) {
  for (int t : alive)
    if (k.tensor(t).spill_of && k.tensor(t).buffer == Buffer::sbuf) return t;
  return -1;
}

// Where SBUF tensor `failure.tensor` does not fit and no SBUF tensor could be spilled: moves a
// PSUM tile's SBUF spill to HBM, or throws the capacity error saying why nothing can go.
void relieve_sbuf(Kernel& k, const std::vector<LiveRange>& live, const AllocationFailure& failure) {
  std::vector<int> here = failure.alive;
  here.push_back(failure.tensor);
  if (const int s = sbuf_spill_among(k, here); s >= 0) {
    move_spill_to_hbm(k, s);
    return;
  }
  std::string why;  // the one-pass search found no victim here; say why
  Uses uses = find_uses(k);
  choose_victim(k, uses, live, failure.tensor, failure.alive, why);
  allocate(k, live,
           why.empty() ? ""
                       : "SBUF is over-subscribed and none of the tensors live here can be spilled to HBM:" + why +
                             "\n  Use smaller tiles, or let tensors die earlier (allocate them inside the loop that "
                             "uses them, or load them again where they are needed).");
}

// Spills each of `victims` (distinct SBUF tensors, found in one allocation pass) to HBM; each
// spill's two inserted instructions shift the body indices of those not yet inserted.
void insert_sbuf_spills(Kernel& k, std::vector<Victim> victims) {
  for (size_t i = 0; i < victims.size(); ++i) {
    const Victim v = victims[i];
    insert_spill<DmaCopy>(k, v, Buffer::hbm);
    const auto shift = [&](size_t at) { return at + (at >= v.next_after) + (at >= v.last_before + 1); };
    for (size_t j = i + 1; j < victims.size(); ++j) {
      victims[j].last_before = shift(victims[j].last_before);
      victims[j].next_after = shift(victims[j].next_after);
    }
  }
}

// One allocation pass that, where an SBUF tensor does not fit, takes out the SBUF tensors
// choose_victim picks (as many as it takes) and goes on, so that one pass finds the spills of
// many over-full points. Returns them; `failure` is the pass's first unresolved failure.
std::vector<Victim> sbuf_victims_in_one_pass(const Kernel& k, const std::vector<LiveRange>& live,
                                             AllocationFailure& failure) {
  Uses uses = find_uses(k);
  std::vector<Victim> victims;
  const Evict evict = [&](int failing, const std::vector<int>& alive) {
    if (k.tensor(failing).buffer != Buffer::sbuf) return -1;
    std::vector<int> here = alive;
    here.push_back(failing);
    if (sbuf_spill_among(k, here) >= 0) return -1;  // relieve_sbuf moves it to HBM first
    std::string why;
    const Victim v = choose_victim(k, uses, live, failing, alive, why);
    if (v.tensor >= 0) victims.push_back(v);
    return v.tensor;
  };
  try_allocate(k, live, failure, evict);
  return victims;
}

}  // namespace

std::optional<Kernel> spilled_to_fit(const Kernel& k, std::vector<LiveRange>* final_live) {
  std::vector<LiveRange> live = live_ranges(k, match_blocks(k));
  AllocationFailure failure;
  if (sbuf_victims_in_one_pass(k, live, failure).empty() && failure.tensor < 0) {
    if (final_live) *final_live = std::move(live);
    return std::nullopt;
  }
  return spill_to_fit(k, final_live);
}

Kernel spill_to_fit(Kernel k, std::vector<LiveRange>* final_live) {
  const size_t limit = 4 * k.body.size() + 64;  // each spill shortens a live range; this is a backstop
  for (size_t round = 0;; ++round) {
    std::vector<LiveRange> live = live_ranges(k, match_blocks(k));
    AllocationFailure failure;
    if (std::vector<Victim> victims = sbuf_victims_in_one_pass(k, live, failure); !victims.empty()) {
      if (round >= limit) allocate(k, live, "");
      insert_sbuf_spills(k, std::move(victims));
      continue;
    }
    if (failure.tensor < 0) {
      if (final_live) *final_live = std::move(live);
      return k;
    }
    if (round >= limit) allocate(k, live, "");
    if (k.tensor(failure.tensor).buffer == Buffer::sbuf) {
      relieve_sbuf(k, live, failure);
      continue;
    }
    std::string why;
    Uses uses = find_uses(k);
    const Victim v = choose_victim(k, uses, live, failure.tensor, failure.alive, why);
    if (v.tensor < 0)
      allocate(k, live,
               "PSUM is over-subscribed and none of these tiles can be spilled to SBUF here:" + why +
                   "\n  Finish each matmul accumulation group before starting the next (the K loop innermost), "
                   "or keep fewer PSUM tiles live at once.");
    insert_spill<TensorCopy>(k, v, Buffer::sbuf);
  }
}

namespace {

// One spill's warning: its rule, its text and the victim's declaration.
struct SpillNote {
  const char* rule;
  std::string text;
  SourceLoc at;
  int64_t count = 1;
};

// Where spill tensor s is written (the copy out) and read (the copy back).
struct SpillCopies {
  SourceLoc out_at, in_at;
};

// The copies of every spill tensor, found in one walk of the body.
std::vector<SpillCopies> spill_copies(const Kernel& k) {
  std::vector<SpillCopies> copies(k.tensors.size());
  for (const Instruction& inst : k.body)
    for_each_view(inst, [&](const char* name, const View& v) {
      if (v.tensor < 0 || !k.tensors[static_cast<size_t>(v.tensor)].spill_of) return;
      SpillCopies& c = copies[static_cast<size_t>(v.tensor)];
      (is_write(name) ? c.out_at : c.in_at) = inst.loc;
    });
  return copies;
}

SpillNote spill_note(const Kernel& k, size_t s, const SpillCopies& copies) {
  const TensorDecl& victim = k.tensor(*k.tensors[s].spill_of);
  const SourceLoc &out_at = copies.out_at, &in_at = copies.in_at;
  const int64_t bytes = victim.partition_elements() * dtype_size(victim.dtype);  // HBM has no partitions
  std::ostringstream msg;
  if (victim.buffer == Buffer::sbuf) {
    msg << "SBUF tensor '" << victim.name << "' (" << line_of(victim.loc)
        << ") is spilled: the SBUF tensors live at once need more than SBUF's "
        << target_info(k.target).sbuf_partition_bytes << " bytes per partition on " << to_string(k.target)
        << ", so its value is copied to HBM after line " << out_at.line << " and back to SBUF before line "
        << in_at.line << " (" << bytes
        << " bytes per partition each way, by DMA, timed like the DMAs they are); keep fewer SBUF tensors live "
           "to avoid it";
    return {"sbuf-spill", msg.str(), victim.loc};
  }
  msg << "PSUM tensor '" << victim.name << "' (" << line_of(victim.loc)
      << ") is spilled: more PSUM tiles are live than PSUM's 8 banks hold, so its value is copied to "
      << (k.tensors[s].buffer == Buffer::hbm ? "HBM (through SBUF: SBUF is full)" : "SBUF") << " after line "
      << out_at.line << " and back to PSUM before line " << in_at.line << " (" << bytes
      << " bytes per partition each way, timed like the copies they are); keep fewer PSUM tiles live to avoid it";
  return {"psum-spill", msg.str(), victim.loc};
}

}  // namespace

// One warning per declaration line and kind: an unrolled loop's tiles share their line, and a big
// kernel can spill thousands of them.
std::vector<std::string> spill_warnings(const Kernel& k) {
  std::vector<SpillNote> notes;
  const std::vector<SpillCopies> copies = spill_copies(k);
  for (size_t s = 0; s < k.tensors.size(); ++s) {
    if (!k.tensors[s].spill_of) continue;
    SpillNote note = spill_note(k, s, copies[s]);
    auto same = std::find_if(notes.begin(), notes.end(), [&](const SpillNote& n) {
      return n.rule == note.rule && n.at.file == note.at.file && n.at.line == note.at.line;
    });
    if (same != notes.end()) ++same->count;
    else notes.push_back(std::move(note));
  }
  std::vector<std::string> out;
  for (const SpillNote& n : notes) {
    const std::string more =
        n.count > 1 ? " (the first of " + std::to_string(n.count) + " spills of tensors declared on this line)" : "";
    out.push_back(format_diagnostic("warning", n.rule, n.text + more, n.at));
  }
  return out;
}

}  // namespace knit::codegen
