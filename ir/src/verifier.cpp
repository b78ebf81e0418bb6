#include "knit/ir/verifier.h"

#include <algorithm>
#include <sstream>

#include "verify_rules.h"

namespace knit::ir {

TargetInfo target_info(Target t) {
  // HBM per device: 32 / 96 / 144 GiB (the Trainium chip pages).
  // SBUF per partition: 24/28/32 MiB over 128 partitions; PSUM 2 MiB = 8 banks x 2 KiB per
  // partition on every generation (nki.language.tile_size; the NKI architecture guides).
  switch (t) {
    case Target::trn1: return {192 * 1024, 16 * 1024, 2048, 512, int64_t{32} << 30};
    case Target::trn2: return {224 * 1024, 16 * 1024, 2048, 512, int64_t{96} << 30};
    case Target::trn3: return {256 * 1024, 16 * 1024, 2048, 4096, int64_t{144} << 30};
  }
  return {192 * 1024, 16 * 1024, 2048, 512, int64_t{32} << 30};
}

std::string list_text(std::initializer_list<std::string_view> items) {
  std::string s;
  for (auto it = items.begin(); it != items.end(); ++it) {
    if (it != items.begin()) s += std::next(it) == items.end() ? " or " : ", ";
    s += *it;
  }
  return s;
}

void Checker::fail(const std::string& rule, const std::string& message) const {
  user_error(inst_.loc, rule, std::string(inst_.opcode_name()) + ": " + message);
}

int64_t Checker::partition_size(const View& v) const {
  const TensorDecl& t = tensor(v);
  return t.partition_elements() * dtype_size(t.dtype) / dtype_size(v.dtype);
}

int64_t Checker::start_partition(const View& v) const {
  const TensorDecl& t = tensor(v);
  return v.offset / partition_size(v) + (t.address ? (*t.address)[0] : 0);
}

void Checker::buffer_in(const View& v, const char* what, std::initializer_list<Buffer> allowed) const {
  const Buffer b = buffer(v);
  for (Buffer a : allowed)
    if (a == b) return;
  std::string names;
  for (Buffer a : allowed) names += (names.empty() ? "" : " or ") + std::string(to_string(a));
  fail("buffer", std::string(what) + " is in " + std::string(to_string(b)) + " but must be in " + names);
}

void Checker::not_psum(const View& v, const char* what, const char* why) const {
  if (in_psum(v)) fail("buffer", std::string(what) + " must not be in psum: " + why);
}

void Checker::same_partitions(const View& a, const char* an, const View& b, const char* bn) const {
  if (partitions(a) != partitions(b))
    fail("partition-mismatch", std::string(an) + " has " + std::to_string(partitions(a)) + " partitions but " + bn +
                                   " has " + std::to_string(partitions(b)) +
                                   "; operands must span the same partitions");
}

void Checker::same_free_size(const View& a, const char* an, const View& b, const char* bn) const {
  if (free_size(a) != free_size(b))
    fail("free-size-mismatch", std::string(an) + " has " + std::to_string(free_size(a)) +
                                   " elements per partition but " + bn + " has " + std::to_string(free_size(b)));
}

void Checker::column(const View& v, const char* what, const View& like) const {
  on_chip(v, what);
  same_partitions(v, what, like, "dst");
  if (free_size(v) != 1)
    fail("operand-shape", std::string(what) + " must be a [P, 1] column (one value per partition); it has " +
                              std::to_string(free_size(v)) + " elements per partition");
}

void Checker::dtype_in(const View& v, const char* what, std::initializer_list<DType> allowed) const {
  for (DType d : allowed)
    if (d == v.dtype) return;
  std::string names;
  for (DType d : allowed) names += (names.empty() ? "" : ", ") + std::string(to_string(d));
  fail("dtype", std::string(what) + " has dtype " + std::string(to_string(v.dtype)) + "; allowed: " + names);
}

void Checker::integer_dtype(const View& v, const char* what) const {
  if (!is_integer(v.dtype) && v.dtype != DType::bool_)
    fail("dtype", std::string(what) + " has dtype " + std::string(to_string(v.dtype)) +
                      " but bit-vector operations need integer dtypes");
}

void Checker::same_dtype(const View& a, const char* an, const View& b, const char* bn) const {
  if (a.dtype != b.dtype)
    fail("dtype", std::string(an) + " has dtype " + std::string(to_string(a.dtype)) + " but " + bn + " has " +
                      std::string(to_string(b.dtype)) + "; this instruction moves bits and cannot convert dtypes");
}

void Checker::engine_in(Engine e, std::initializer_list<Engine> allowed) const {
  if (e == Engine::unknown) return;
  for (Engine a : allowed)
    if (a == e) return;
  std::string names;
  for (Engine a : allowed) names += (names.empty() ? "" : ", ") + std::string(to_string(a));
  fail("engine",
       "cannot run on the " + std::string(to_string(e)) + " engine; choose " + names + " or leave engine unknown");
}

void Checker::requires_gen(int min_gen) const {
  if (nc_version(target()) < min_gen)
    fail("target", "needs NeuronCore gen" + std::to_string(min_gen) + " or newer, but the kernel targets " +
                       std::string(to_string(target())) + " (gen" + std::to_string(nc_version(target())) + ")");
}

void Checker::alu_class_in(AluOp op, const char* what, std::initializer_list<AluClass> allowed) const {
  for (AluClass a : allowed)
    if (a == alu_class(op)) return;
  fail("alu-op", std::string(what) + " '" + std::string(to_string(op)) + "' is not allowed here");
}

void Checker::reduction_op(AluOp op, const char* what) const {
  if (!alu_is_reduction(op))
    fail("alu-op", std::string(what) + " '" + std::string(to_string(op)) +
                       "' is not a reduction; use add, subtract, multiply, maximum, minimum, a logical or a bitwise "
                       "and/or/xor");
}

void verify_tensor(const Kernel& k, const TensorDecl& t) {
  auto fail = [&](const std::string& rule, const std::string& msg) {
    user_error(t.loc, rule, "tensor '" + t.name + "': " + msg);
  };
  if (t.shape.empty()) fail("tensor-shape", "needs at least one dim");
  int64_t total_bytes = dtype_size(t.dtype);
  for (int64_t s : t.shape) {
    if (s < 1) fail("tensor-shape", "dims must be >= 1");
    // Every byte offset must fit in 64 bits (the views' and the simulator's arithmetic).
    if (__builtin_mul_overflow(total_bytes, s, &total_bytes))
      fail("tensor-shape", "has more bytes than a 64-bit offset can address; use smaller dims");
  }
  if (!is_on_chip(t.buffer)) {
    if (t.address) fail("address", "address= pins apply only to sbuf/psum tensors");
    const int64_t hbm = target_info(k.target).hbm_bytes;
    if (total_bytes > hbm)
      fail("capacity", std::to_string(total_bytes) + " bytes exceed the " + std::to_string(hbm >> 30) +
                           " GiB of HBM on " + std::string(to_string(k.target)) + "; use a smaller tensor");
    return;
  }
  if (t.shape.size() < 2) fail("tensor-shape", "on-chip tensors need a partition dim and at least one free dim");
  if (t.shape[0] > kMaxPartitions)
    fail("partition-limit", "partition dim " + std::to_string(t.shape[0]) + " exceeds " +
                                std::to_string(kMaxPartitions) + "; split the tile along dim 0 with nl.ds or a loop");
  const TargetInfo info = target_info(k.target);
  const int64_t limit = t.buffer == Buffer::sbuf ? info.sbuf_partition_bytes : info.psum_partition_bytes;
  const int64_t bytes = t.partition_elements() * dtype_size(t.dtype);
  if (bytes > limit)
    fail("capacity", std::to_string(bytes) + " bytes per partition exceed the " + std::string(to_string(t.buffer)) +
                         " partition size of " + std::to_string(limit) + " bytes on " +
                         std::string(to_string(k.target)) + "; use smaller tiles");
  if (t.address) {
    const auto [p, off] = *t.address;
    if (p < 0 || p + t.shape[0] > kMaxPartitions || off < 0 || off + bytes > limit)
      fail("address", "address=(" + std::to_string(p) + ", " + std::to_string(off) + ") puts the tensor outside " +
                          std::string(to_string(t.buffer)) + " (" + std::to_string(limit) + " bytes x " +
                          std::to_string(kMaxPartitions) + " partitions)");
    if (t.buffer == Buffer::psum && off % info.psum_bank_bytes != 0)
      fail("address", "psum addresses must start on a 2 KiB bank boundary; got byte offset " + std::to_string(off));
  }
}

namespace {

// The packed MX dtypes (*_x4) mean something only to the MX instructions, which check their own
// operands. Elsewhere they may only be moved as words: dma_copy to the same dtype, memset to 0
// (nki.language data types). One rule for every other instruction, so a new op cannot forget it.
void check_packed_operands(const Checker& c, const Instruction& inst) {
  const Opcode op = inst.opcode();
  if (op == Opcode::quantize_mx || op == Opcode::nc_matmul_mx) return;
  if (const auto* copy = std::get_if<DmaCopy>(&inst.op)) {
    if ((is_packed(copy->dst.dtype) || is_packed(copy->src.dtype)) && copy->dst.dtype != copy->src.dtype)
      c.fail("packed-dtype", "cannot convert between " + std::string(to_string(copy->src.dtype)) + " and " +
                                 std::string(to_string(copy->dst.dtype)) +
                                 "; packed MX words are copied only to the same dtype");
    return;
  }
  if (const auto* set = std::get_if<Memset>(&inst.op)) {
    if (is_packed(set->dst.dtype) && set->value != 0)
      c.fail("packed-dtype", "a " + std::string(to_string(set->dst.dtype)) + " tile can only be memset to 0, got " +
                                 std::to_string(set->value));
    return;
  }
  for_each_view(inst, [&](const char* name, const View& v) {
    if (is_packed(v.dtype))
      c.fail("packed-dtype", std::string("operand ") + name + " has the packed MX dtype " +
                                 std::string(to_string(v.dtype)) +
                                 ", which only quantize_mx, nc_matmul_mx, dma_copy (same dtype) and memset (value 0) "
                                 "accept; bitcast the view to uint32 to move its words with other instructions");
  });
}

}  // namespace

void verify_instruction(const Kernel& k, const Instruction& inst) {
  for_each_field(inst, [&](const char* name, const auto& value) {
    if constexpr (std::is_same_v<std::decay_t<decltype(value)>, View>)
      if (!value.valid())
        user_error(inst.loc, "operand", std::string(inst.opcode_name()) + ": operand " + name + " is missing");
  });
  for_each_view(inst, [&](const char* name, const View& v) {
    if (v.tensor < 0 || v.tensor >= static_cast<int>(k.tensors.size()))
      user_error(inst.loc, "ir-reference",
                 std::string(inst.opcode_name()) + ": operand " + name + " refers to undeclared tensor %" +
                     std::to_string(v.tensor));
    check_view(k.tensors[v.tensor], v, std::string(inst.opcode_name()) + " operand " + name, inst.loc);
    if (v.indexes_rows()) check_indirect(k, inst, v, name);
  });
  Checker c(k, inst);
  check_column_indirection(c, inst);
  check_packed_operands(c, inst);
  std::visit(
      [&](const auto& op) {
        if constexpr (std::is_same_v<std::decay_t<decltype(op)>, std::monostate>) internal_error("empty instruction");
        else check(c, op);
      },
      inst.op);
}

void verify(const Kernel& k) {
  for (const TensorDecl& t : k.tensors) verify_tensor(k, t);
  for (int id : k.params)
    if (!k.tensor(id).is_param || !is_hbm(k.tensor(id).buffer))
      user_error(k.tensor(id).loc, "kernel-param",
                 "kernel parameter '" + k.tensor(id).name + "' must be an HBM tensor");
  for (int id : k.outputs) {
    const TensorDecl& t = k.tensor(id);
    // A kernel may return a parameter it wrote; any other output is created in shared_hbm.
    if (t.buffer != Buffer::shared_hbm && !t.is_param)
      user_error(t.loc, "kernel-output",
                 "kernel output '" + t.name + "' is in " + std::string(to_string(t.buffer)) +
                     "; outputs must be created with buffer=shared_hbm");
  }
  for (const Instruction& inst : k.body) verify_instruction(k, inst);
  verify_blocks(k);
  verify_programs(k);
}

}  // namespace knit::ir
