// Never-written memory and the poison computed from it (docs/simulator.md, "Never-written memory").
//
// Like MemorySanitizer, the machine does not stop at a read of never-written memory: the value
// read (NaN / 4, as NKI's simulator reads) is poison, each element an instruction computes from
// poison is poison (the op table's PoisonRule says which), and a defined write clears it. Poison
// is reported only where it matters: a kernel output holding it at the end of the run, a register
// loaded from it (registers steer control flow, loop bounds and dynamic offsets), an index read
// from it. Uninitialized::error keeps the strict check of every read instead.
#include <sstream>

#include "knit/codegen/access.h"
#include "machine.h"

namespace knit::sim {

using namespace knit::ir;

namespace {

std::string where(const SourceLoc& loc) { return loc.file + ":" + std::to_string(loc.line); }

// "[i, j, ...]" of flat element e of a tensor of that shape.
std::string element_index(const std::vector<int64_t>& shape, int64_t e) {
  std::vector<int64_t> idx(shape.size());
  for (size_t k = shape.size(); k-- > 0;) {
    idx[k] = shape[k] ? e % shape[k] : 0;
    e = shape[k] ? e / shape[k] : 0;
  }
  std::string s = "[";
  for (size_t k = 0; k < idx.size(); ++k) s += (k ? ", " : "") + std::to_string(idx[k]);
  return s + "]";
}

// The output elements one poisoned input element reaches, gathered as elements, whole partition
// rows and whole columns of the output (a row or column is marked once, not per input element).
struct Reach {
  std::vector<uint8_t> element, row, column;
  bool whole = false;
  explicit Reach(int64_t P, int64_t F)
      : element(static_cast<size_t>(P * F)), row(static_cast<size_t>(P)), column(static_cast<size_t>(F)) {}
};

void reach(PoisonRule rule, const std::string& in_name, int64_t inP, int64_t inF, int64_t i, const Tile& out,
           bool reads_itself, Reach& r) {
  const int64_t p = i / inF, f = i % inF;
  const bool same_size = inP * inF == out.size();
  if (reads_itself && same_size) return void(r.element[i] = 1);  // accumulation into the output
  switch (rule) {
    case PoisonRule::elementwise:
      if (same_size) return void(r.element[i] = 1);
      if (inP == out.P && (inF == 1 || out.F == 1)) return void(r.row[p] = 1);  // a column operand / reduce_res
      if (inP == 1 && inF == out.F) return void(r.column[f] = 1);               // a row broadcast over partitions
      break;
    case PoisonRule::row:
      if (inP == out.P) return void(r.row[p] = 1);
      break;
    case PoisonRule::column:
      if (inF == out.F) return void(r.column[f] = 1);
      break;
    case PoisonRule::contract:  // stationary [K, M] (or [K, 2M] double-row), moving [K, N], dst [M, N]
      if (in_name == "stationary" && out.P > 0) return void(r.row[f % out.P] = 1);
      if (in_name == "moving" && out.F > 0) return void(r.column[f % out.F] = 1);
      break;
    case PoisonRule::transpose:
      if (inP == out.F && inF == out.P) return void(r.element[out.at(f, p)] = 1);
      break;
    case PoisonRule::whole: break;
  }
  r.whole = true;
}

}  // namespace

bool Machine::is_poison_sink(const Tile& t) const {
  if (current().opcode() == Opcode::register_load) return true;
  return t.what_ == "vector_offset" || t.what_ == "index" || t.what_ == "indices";
}

void Machine::strict_uninitialized_read(const Tile& t, int64_t i) const {
  fail("uninitialized-read", std::string(current().opcode_name()) + " reads " + t.describe(i) +
                                 ", which was never written (fresh tensors hold NaN / 4); write it first, e.g. "
                                 "with nisa.memset");
}

std::string Machine::poison_origin(int origin) const {
  if (origin < 0) return "";
  const PoisonOrigin& o = origins_[static_cast<size_t>(origin)];
  return "; it comes from never-written memory, first read at " + where(o.loc) + ": " + o.read;
}

int Machine::poison_origin_of(const Tile& t, int64_t i, bool never_written) {
  if (!never_written) {
    if (tensor_origin_.size() > static_cast<size_t>(t.tensor_) && tensor_origin_[t.tensor_] >= 0)
      return tensor_origin_[t.tensor_];
    return origins_.empty() ? -1 : 0;  // poison reached t's bytes through an alias (address=)
  }
  const SourceLoc& loc = current().loc;
  const auto [at, added] = origin_at_.try_emplace({loc.file, loc.line, loc.column}, static_cast<int>(origins_.size()));
  if (added) origins_.push_back({loc, std::string(current().opcode_name()) + " reads " + t.describe(i)});
  return at->second;
}

void Machine::report_poison(const std::string& rule, const std::string& message, const SourceLoc& loc, bool warn_only) {
  if (options_.uninitialized == Uninitialized::report && !warn_only) runtime_error(loc, rule, message);
  const std::string text = format_diagnostic("warning", rule, message, loc);
  warnings_.push_back(text);
  if (options_.on_warning) options_.on_warning(text);
}

void Machine::undefined_read(const Tile& t, int64_t i, bool never_written, bool accumulating) {
  const Uninitialized mode = options_.uninitialized;
  if (mode == Uninitialized::off) return;
  if (mode == Uninitialized::error) {
    if (accumulating) return;  // the matmul warns, as NKI's simulator does
    strict_uninitialized_read(t, i);
  }
  const int origin = poison_origin_of(t, i, never_written);
  if (is_poison_sink(t)) {
    if (warned_at_ == executed_) return;  // one report per executed instruction
    warned_at_ = executed_;
    const bool load = current().opcode() == Opcode::register_load;
    report_poison("uninitialized-use",
                  std::string(current().opcode_name()) + (load ? " loads " : " uses ") + t.describe(i) +
                      (load ? " into a register" : " as an index") + "; it " +
                      (never_written ? "was never written" : "was computed from never-written memory") +
                      " (NaN / 4 in the simulator, undefined on hardware)" + poison_origin(origin) +
                      ". Write that memory first (e.g. with nisa.memset)",
                  current().loc);
    return;
  }
  if (poison_reads_.empty() || poison_reads_.back().what != t.what_ || poison_reads_.back().P != t.P ||
      poison_reads_.back().F != t.F)
    poison_reads_.push_back({t.what_, t.P, t.F, {}, origin});
  poison_reads_.back().elements.push_back(i);
}

void Machine::propagate_poison(const Instruction& inst) {
  const std::vector<PoisonedRead> reads = std::move(poison_reads_);
  const PoisonRule rule = op_traits(inst.opcode()).poison;
  for_each_view(inst, [&](const char* name, const View& v) {
    if (codegen::is_output_operand(name)) poison_output(reads, rule, tile(v, name), name);
  });
  poison_reads_.clear();  // reads of an indirect output's index while finding it
}

void Machine::poison_output(const std::vector<PoisonedRead>& reads, PoisonRule rule, const Tile& out,
                            const std::string& out_name) {
  if (reads.empty()) return;
  Reach r(out.P, out.F);
  for (const PoisonedRead& read : reads)
    for (int64_t i : read.elements) {
      reach(rule, read.what, read.P, read.F, i, out, read.what == out_name, r);
      if (r.whole) break;
    }
  for (int64_t i = 0; i < out.size(); ++i)
    if (!out.skipped(i) && (r.whole || r.element[i] || r.row[i / out.F] || r.column[i % out.F]))
      out.mem_->set_poison(out.offset_[i], out.esize_);
  tensor_origin_.resize(kernel_.tensors.size(), -1);
  tensor_origin_[out.tensor_] = reads.front().origin;
}

void Machine::check_outputs_defined() {
  if (options_.timing_only || options_.uninitialized == Uninitialized::off) return;
  std::vector<int> checked = kernel_.outputs;
  for (size_t a = 0; a < params_written_.size(); ++a)
    if (params_written_[a]) checked.push_back(kernel_.params[a]);
  std::sort(checked.begin(), checked.end());
  checked.erase(std::unique(checked.begin(), checked.end()), checked.end());
  for (int id : checked) {
    const Memory& mem = pool_->hbm(id);
    const int64_t byte = mem.poison.size() ? mem.poison.first_set() : -1;
    if (byte < 0) continue;
    const TensorDecl& t = kernel_.tensor(id);
    // A device_print tensor (python/knit/language.py names them so) only shows the poison: NKI's
    // simulator prints the NaN / 4 fill and goes on, so it is a warning, never an error.
    const bool printed = t.name.rfind("device_print:", 0) == 0;
    const int origin = static_cast<size_t>(id) < tensor_origin_.size() ? tensor_origin_[id] : -1;
    const std::string what = printed ? "nl.device_print(\"" + t.name.substr(13) + "\")"
                                     : "kernel output '" + t.name + "'";
    report_poison("uninitialized-output",
                  what + " element " + element_index(t.shape, byte / dtype_size(t.dtype)) +
                      " holds a value computed from never-written memory (NaN / 4 in the simulator, undefined on "
                      "hardware)" +
                      poison_origin(origin) +
                      ". Write that memory before using it (e.g. with nisa.memset), or keep what is computed "
                      "from it out of the outputs",
                  origin >= 0 ? origins_[static_cast<size_t>(origin)].loc : t.loc, printed);
  }
}

}  // namespace knit::sim
