#include "all_ops.h"

namespace knit::testing_support {

using ir::ApDim;
using ir::DType;
using ir::Operand;
using ir::View;

ir::Kernel all_ops_kernel() {
  ir::Kernel k;
  k.name = "all_ops";
  k.target = ir::Target::trn1;
  auto add = [&](const char* name, ir::Buffer b, DType d, std::vector<int64_t> shape, bool param = false) {
    ir::TensorDecl t;
    t.name = name;
    t.buffer = b;
    t.dtype = d;
    t.shape = std::move(shape);
    t.is_param = param;
    t.loc = SourceLoc{"ops.py", static_cast<int>(k.tensors.size()) + 1, 0};
    k.tensors.push_back(t);
    if (param) k.params.push_back(static_cast<int>(k.tensors.size()) - 1);
    return static_cast<int>(k.tensors.size()) - 1;
  };
  const int hin = add("in", ir::Buffer::hbm, DType::float32, {128, 64}, true);
  const int s = add("s", ir::Buffer::sbuf, DType::float32, {128, 64});
  const int ps = add("ps", ir::Buffer::psum, DType::float32, {128, 512});
  const int bf = add("bf", ir::Buffer::sbuf, DType::bfloat16, {128, 64});
  const int i32 = add("i32", ir::Buffer::sbuf, DType::int32, {128, 8});
  const int col = add("col", ir::Buffer::sbuf, DType::float32, {128, 1});
  const int out = add("out", ir::Buffer::shared_hbm, DType::float32, {128, 64});
  k.tensors[bf].address = std::array<int64_t, 2>{32, 4096};
  k.outputs = {out, s};

  auto V = [&](int id) { return ir::full_view(k.tensors[id], id); };
  const View S = V(s), PS = V(ps), BF = V(bf), I32 = V(i32), COL = V(col), HIN = V(hin), OUT = V(out);
  const View S_half{s, DType::float32, 32, {{64, 128}, {1, 32}}};
  const View BF_as_u16{bf, DType::uint16, 0, {{64, 128}, {1, 64}}};
  const View COL2{col, DType::float32, 0, {{1, 64}, {1, 1}}};

  int line = 100;
  auto emit = [&](ir::OpVariant op, std::string name = "") {
    ir::Instruction inst;
    inst.op = std::move(op);
    inst.loc = SourceLoc{"ops.py", ++line, line % 7};  // some with a column, one without
    inst.name = std::move(name);
    k.body.push_back(std::move(inst));
  };
  emit(ir::DmaCopy{S, HIN, ir::OobMode::skip, ir::DgeMode::hwdge, ir::Engine::sync}, "copy in");
  emit(ir::NcMatmul{
      PS, BF, BF_as_u16, true, true, true, ir::Accumulate::on, {0, 64}, {64, 64}, ir::MatmulPerfMode::double_row});
  emit(ir::NcTranspose{BF, S_half, ir::Engine::vector});
  emit(ir::Activation{S, ir::ActFunc::gelu_apprx_tanh, S_half, Operand::of(COL), Operand::immediate(0.1),
                      ir::AluOp::add, COL, ir::ReduceCmd::reset_reduce, -0.25});
  emit(ir::ActivationReduce{S, ir::ActFunc::exp, S, ir::AluOp::maximum, COL, Operand::immediate(-1.5),
                            Operand::of(COL2)});
  emit(ir::TensorTensor{S, S_half, BF, ir::AluOp::power, ir::Engine::gpsimd});
  emit(ir::TensorScalar{S, BF, ir::AluOp::subtract, Operand::immediate(1e-300), true, ir::AluOp::multiply,
                        Operand::of(COL), true, ir::Engine::scalar});
  emit(ir::ScalarTensorTensor{S, S, ir::AluOp::divide, Operand::of(COL), ir::AluOp::maximum, BF, true, true});
  emit(ir::TensorReduce{COL, ir::AluOp::bitwise_xor, I32, {1, -1}, true, true});
  emit(ir::TensorPartitionReduce{COL2, ir::AluOp::average, S});
  emit(ir::TensorCopy{PS, S, ir::Engine::scalar});
  emit(ir::TensorCopyPredicated{S, Operand::immediate(3.5), I32, true});
  emit(ir::Memset{I32, -7, ir::Engine::gpsimd}, "fill");
  emit(ir::Iota{I32, {{-1, 8}}, -7, 8});
  emit(ir::AffineSelect{S, {{1, 64}}, -1, BF, -3.0e38, ir::AluOp::greater_equal, 5});
  emit(ir::SelectReduce{S, I32, BF, Operand::immediate(-std::numeric_limits<double>::infinity()), COL,
                        ir::ReduceCmd::load_reduce, ir::AluOp::minimum, true});
  emit(ir::RangeSelect{S, BF, ir::AluOp::greater, ir::AluOp::less_equal, COL, COL2, ir::ReduceCmd::reduce, COL,
                       ir::AluOp::add, 2.5, 0.0});
  emit(ir::Reciprocal{S, BF});
  emit(ir::TensorTensorScan{S, BF, S_half, Operand::of(COL), ir::AluOp::add, ir::AluOp::multiply, true, true});
  emit(ir::TensorScalarReduce{S, BF, ir::AluOp::multiply, Operand::immediate(2), ir::AluOp::maximum, COL, true,
                              ir::ReduceCmd::idle, Operand::immediate(-1), true});
  emit(ir::BnStats{I32, S});
  emit(ir::BnAggr{COL, I32});
  emit(ir::Max8{I32, S});
  emit(ir::NcFindIndex8{I32, S, BF});
  emit(ir::DmaTranspose{BF, HIN, {1, 0}, ir::DgeMode::swdge, ir::OobMode::skip});
  emit(ir::LocalGather{S, BF, I32, 4, 16});
  emit(ir::NcNGather{OUT, S, I32});
  std::vector<int64_t> mask(32, 255);
  mask[0] = 31;
  emit(ir::NcStreamShuffle{S, S, mask});
  // Registers, blocks, and views with dynamic terms and an indirect index (not verified here:
  // the text test only needs every field to differ from its default).
  View rows = HIN;
  rows.dynamic = {{3, 64}, {1, -2}};
  rows.indirect_dim = 0;
  rows.indirect = {I32};
  View S_dyn = S;
  S_dyn.dynamic = {{2, 1}};
  emit(ir::DmaCompute{rows, {rows, S_dyn}, ir::AluOp::maximum, {2.0, -0.5}, false, ir::OobMode::skip});
  View columns{s, DType::float32, 64, {{64, 128}, {1, 24}}};  // an .indirect() view: columns through an index
  columns.gather = {{8, 8}, {1, 8}};
  columns.indirect = {BF_as_u16};
  emit(ir::TensorCopy{columns, S_half, ir::Engine::vector});
  emit(ir::RegisterMove{{1}, ir::IntValue::of(-7)});
  emit(ir::RegisterLoad{{2}, COL});
  emit(ir::RegisterStore{I32, {2}});
  emit(ir::RegisterAlu{{3}, ir::IntValue::of_reg(1), ir::AluOp::multiply, ir::IntValue::of(5)});
  emit(ir::Loop{{4}, ir::IntValue::of(1), ir::IntValue::of_reg(3), 2});
  emit(ir::While{{1}});
  emit(ir::If{{2}});
  emit(ir::Else{});
  emit(ir::End{});
  emit(ir::End{});
  emit(ir::End{});
  emit(ir::Program{3});
  emit(ir::CoreBarrier{HIN, {0, 1}, ir::Engine::vector});
  emit(ir::SendRecv{S, S_half, 1, 2, 3});
  const View S_fn_x4{s, DType::float8_e4m3fn_x4, 0, {{64, 128}, {1, 16}}};
  const View S_fp4_x4{s, DType::float4_e2m1fn_x4, 16, {{64, 128}, {1, 8}}};
  const View I32_e8m0{i32, DType::float8_e8m0fnu, 0, {{32, 16}, {1, 16}}};
  emit(ir::QuantizeMx{S_fn_x4, BF, I32_e8m0}, "quantize");
  emit(ir::NcMatmulMx{PS, S_fn_x4, S_fp4_x4, I32_e8m0, BF_as_u16, {32, 0}, {32, 128}, ir::Accumulate::off});
  emit(ir::Exponential{S, BF, Operand::of(COL), COL, ir::ReduceCmd::load_reduce, Operand::immediate(0.5)});
  const View I32_as_u32{i32, DType::uint32, 0, {{8, 6}, {1, 6}}};
  const View I32_seed{i32, DType::int32, 0, {{8, 1}, {1, 1}}};
  emit(ir::Rng{I32, ir::Engine::gpsimd});
  emit(ir::SetRngSeed{I32_seed}, "seed");
  emit(ir::RandSetState{I32_as_u32, ir::Engine::vector});
  emit(ir::RandGetState{I32_as_u32, ir::Engine::unknown});
  emit(ir::Rand2{S, Operand::immediate(-2.5), Operand::of(COL)});
  emit(ir::Dropout{S, S, Operand::immediate(0.25)});
  emit(ir::TensorScalarCumulative{S, BF, ir::AluOp::multiply, ir::AluOp::maximum, Operand::of(COL),
                                  Operand::immediate(-2.5), ir::ReduceCmd::load_reduce});
  emit(ir::NcMatchReplace8{S, S_half, I32, -1.5, I32});
  emit(ir::NonzeroWithCount{I32, S, 100, -9});
  emit(ir::SequenceBounds{I32, S});
  emit(ir::Topk{BF, I32, BF, 20});
  emit(ir::Activate2{S, ir::ActFunc::prelu, BF, Operand::of(COL), Operand::immediate(0.5), ir::AluOp::multiply,
                     ir::AluOp::subtract, Operand::of(COL2), true, true, ir::AluOp::abs_max, COL,
                     ir::ReduceCmd::reset_reduce});
  ir::Collective collective{OUT, HIN, HIN, I32};  // every field off its default (not a valid call)
  collective.kind = ir::CollectiveKind::all_to_all_v;
  collective.groups = {0, 1, 2, 3};
  collective.group_sizes = {2, 2};
  collective.op = ir::AluOp::maximum;
  collective.dim = 1;
  collective.channel = 1;
  collective.recv_counts_known = true;
  emit(collective);
  return k;
}

}  // namespace knit::testing_support
