// Operand access for the executors: Tiles over a tensor's bytes, scalar columns and registers.
#include <sstream>

#include "exec_state.h"
#include "knit/ir/numerics.h"
#include "memory_pool.h"

namespace knit::sim {

using namespace knit::ir;

void Tile::check_init(int64_t i) const {
  const int64_t at = offset_[i];
  if (!mem_->undefined(at, esize_)) return;
  state_->undefined_read(*this, i, mem_->tracks_init() && !mem_->init.all(at, esize_, 1));
}

std::string Tile::describe(int64_t i) const {
  std::ostringstream s;
  s << what_ << " element [" << (i / F) << ", " << (i % F) << "] of tensor '" << state_->kernel().tensor(tensor_).name
    << "'";
  return s.str();
}

float Tile::read(int64_t i) const {
  check_init(i);
  return decode(dtype, mem_->bytes.data() + offset_[i]);
}

uint32_t Tile::read_bits(int64_t i) const {
  check_init(i);
  return load_bits(dtype, mem_->bytes.data() + offset_[i]);
}

int64_t Tile::read_int(int64_t i) const {
  check_init(i);
  return load_int(dtype, mem_->bytes.data() + offset_[i]);
}

std::vector<float> Tile::read_all() const {
  std::vector<float> v(size());
  for (int64_t i = 0; i < size(); ++i) v[i] = read(i);
  return v;
}

std::vector<uint32_t> Tile::read_all_bits() const {
  std::vector<uint32_t> v(size());
  for (int64_t i = 0; i < size(); ++i) v[i] = read_bits(i);
  return v;
}

void Tile::write_all(const std::vector<float>& values) {
  for (int64_t i = 0; i < size(); ++i) write(i, values[i]);
}

void Tile::write_all_bits(const std::vector<uint32_t>& bits) {
  for (int64_t i = 0; i < size(); ++i) write_bits(i, bits[i]);
}

void Tile::mark_written(int64_t i, bool by_matmul) {
  const int size = esize_;
  if (mem_->tracks_init()) mem_->init.set(offset_[i], size, 1);
  if (mem_->tracks_matmul()) mem_->mm_written.set(offset_[i], size, by_matmul ? 1 : 0);
  mem_->clear_poison(offset_[i], size);
}

void Tile::write(int64_t i, float v) {
  encode(dtype, v, mem_->bytes.data() + offset_[i]);
  mark_written(i, false);
}

void Tile::write_bits(int64_t i, uint32_t bits) {
  store_bits(dtype, bits, mem_->bytes.data() + offset_[i]);
  mark_written(i, false);
}

void Tile::write_int(int64_t i, int64_t v) {
  store_int(dtype, v, mem_->bytes.data() + offset_[i]);
  mark_written(i, false);
}

bool Tile::matmul_written(int64_t i) const { return mem_->tracks_matmul() && mem_->mm_written.get(offset_[i]) != 0; }

void Tile::write_from_matmul(int64_t i, float v) {
  encode(dtype, v, mem_->bytes.data() + offset_[i]);
  mark_written(i, true);
}

bool Tile::is_initialized(int64_t i) const { return !mem_->tracks_init() || mem_->init.get(offset_[i]) != 0; }

std::vector<float> ExecState::column(const Operand& o, int64_t P, const char* what) {
  if (o.is_tile()) {
    Tile t = tile(o.tile, what);
    std::vector<float> v(P);
    for (int64_t p = 0; p < P; ++p) v[p] = t.read(t.at(p, 0));
    return v;
  }
  return std::vector<float>(P, static_cast<float>(o.imm));
}

int32_t ExecState::reg(int id) const {
  if (!reg_set_[id])
    fail("uninitialized-register", std::string(current().opcode_name()) + " reads register r" + std::to_string(id) +
                                       ", which was never set; initialize it (nisa.register_alloc(value) or "
                                       "register_move / register_load)");
  return regs_[id];
}

void ExecState::set_reg(int id, int64_t value) {
  regs_[id] = static_cast<int32_t>(static_cast<uint32_t>(value));  // 32-bit, wrapping
  reg_set_[id] = 1;
}

}  // namespace knit::sim
