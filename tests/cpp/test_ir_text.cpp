// IR text form (ir/text.h, docs/ir.md): print -> parse -> == -> print again, golden text, every
// op of KNIT_OPS with non-default fields, and parse errors with their line:col.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <limits>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <knit/knit.h>

#include "all_ops.h"
#include "kernels.h"

namespace ir = knit::ir;
using namespace knit;
using ir::ApDim;
using ir::DType;
using ir::Operand;
using ir::View;
using testing_support::all_ops_kernel;

namespace {

// Round trip: parse(print(k)) == k and print(parse(print(k))) == print(k).
void check_round_trip(const ir::Kernel& k) {
  const std::string text = ir::print(k);
  INFO(text);
  const ir::Kernel back = ir::parse(text);
  CHECK(back == k);
  CHECK(ir::print(back) == text);
}

// Splits text into lines (without the '\n').
std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

struct ParseFailure {
  std::string rule = "<no error>", message, what;
  int line = 0, col = 0;
  std::string file;
};
ParseFailure parse_failure(const std::string& text, const std::string& source = "<ir>") {
  ParseFailure f;
  try {
    ir::parse(text, source);
  } catch (const knit::Error& e) {
    f.rule = e.rule();
    f.message = e.message();
    f.what = e.what();
    f.line = e.loc().line;
    f.col = e.loc().column;
    f.file = e.loc().file;
    CHECK(e.kind() == knit::ErrorKind::User);
  }
  return f;
}

// ---- kernels traced with the C++ DSL ------------------------------------------------------------

nl::tensor data_ops_kernel(nl::tensor a, nl::tensor b) {
  // a: hbm float32 [128, 64]; b: hbm bfloat16 [64, 128]
  auto out = nl::ndarray({128, 64}, nl::float32, nl::shared_hbm, "out");
  auto s = nl::ndarray({128, 64}, nl::float32, nl::sbuf, "s \"pinned\"", std::array<int64_t, 2>{0, 1024});
  isa::dma_copy(s, a, {.dge_mode = isa::dge_mode::swdge, .engine = isa::engine::sync, .name = "load a"});
  auto bt = nl::ndarray({64, 128}, nl::bfloat16, nl::sbuf, "bt");
  isa::dma_copy(bt, b, {.oob_mode = isa::oob_mode::skip});
  auto p = nl::ndarray({128, 64}, nl::bfloat16, nl::psum, "p", std::array<int64_t, 2>{0, 2048});
  isa::nc_transpose(p, bt, isa::engine::tensor);
  auto m = nl::ndarray({128, 64}, nl::int32, nl::sbuf, "mask");
  isa::memset(m, -3, isa::engine::gpsimd, "fill mask");  // name= on a call without an options struct
  isa::tensor_copy(s(nl::all, nl::ds(0, 32)), p(nl::all, nl::ds(32, 32)), isa::engine::vector);
  isa::tensor_copy_predicated(s, 2.5, m.view_as(nl::float32), true, "pick");
  auto st = nl::ndarray({64, 64}, nl::bfloat16, nl::sbuf, "st");
  auto mv = nl::ndarray({64, 512}, nl::bfloat16, nl::sbuf, "mv");
  isa::memset(st, 0.1);
  isa::memset(mv, -1.5e-7);
  auto acc = nl::ndarray({64, 512}, nl::float32, nl::psum, "acc");
  isa::nc_matmul(acc, st, mv, {.accumulate = false, .tile_position = {64, 0}, .tile_size = {64, 64}, .name = "mm"});
  auto tr = nl::ndarray({128, 64}, nl::bfloat16, nl::sbuf, "tr");
  isa::dma_transpose(tr, b, {.axes = {1, 0}, .dge_mode = isa::dge_mode::swdge});
  isa::dma_copy(out(nl::slice(std::nullopt, std::nullopt, -1), nl::all), s);
  return out;
}

}  // namespace

TEST_CASE("C++ DSL kernels round-trip through the text form", "[core][ir-text]") {
  SECTION("data movement with non-default options") {
    const ir::Kernel k = trace("data_ops", data_ops_kernel,
                               {arg({128, 64}, nl::float32, "a"), arg({64, 128}, nl::bfloat16, "b")}, ir::Target::trn3);
    REQUIRE(k.body.size() == 11);
    check_round_trip(k);
    const std::string text = ir::print(k);
    CHECK(text.rfind("kernel \"data_ops\" target=trn3 {\n", 0) == 0);
    CHECK(text.find("tensor %3 \"s \\\"pinned\\\"\" sbuf float32[128, 64] address=(0, 1024) @ \"") !=
          std::string::npos);
    CHECK(text.find("dge_mode=swdge engine=sync name=\"load a\" @ ") != std::string::npos);
    CHECK(text.find("oob_mode=skip") != std::string::npos);
    CHECK(text.find("engine=tensor") != std::string::npos);
    CHECK(text.find("value=-3 engine=gpsimd name=\"fill mask\"") != std::string::npos);
    CHECK(text.find("value=0.1 @") != std::string::npos);
    CHECK(text.find("value=-1.5e-07 @") != std::string::npos);
    CHECK(text.find("src=2.5 predicate=%6:float32@0[[64,128],[1,64]] reverse_pred=true name=\"pick\"") !=
          std::string::npos);
    CHECK(text.find("accumulate=off tile_position=[64,0] tile_size=[64,64] name=\"mm\"") != std::string::npos);
    CHECK(text.find("axes=[1,0] dge_mode=swdge") != std::string::npos);
    CHECK(text.find("dst=%2@8128[[-64,128],[1,64]] src=%3@0[[64,128],[1,64]]") != std::string::npos);
    CHECK(text.find("dst=%3@0[[64,128],[1,32]] src=%5@32[[64,128],[1,32]] engine=vector") != std::string::npos);
    CHECK(text.find("\n  return %2\n}\n") != std::string::npos);
    // Every instruction carries the line of its isa:: call in this file.
    for (const ir::Instruction& inst : k.body) {
      CHECK(inst.loc.file == __FILE__);
      CHECK(inst.loc.line > 0);
    }
  }
  SECTION("example matmul (dma_copy, nc_matmul, tensor_copy)") {
    const ir::Kernel k = trace("matmul", examples::matmul,
                               {arg({256, 128}, nl::bfloat16, "lhsT"), arg({256, 1024}, nl::bfloat16, "rhs")});
    CHECK(k.body.size() == 16);  // 2 column blocks x (2 K steps x 3 + copy + store)
    check_round_trip(k);
  }
  SECTION("example transpose (nc_transpose on the Tensor Engine)") {
    const ir::Kernel k = trace("transpose", examples::transpose, {arg({256, 128}, nl::float32, "x")}, ir::Target::trn1);
    check_round_trip(k);
  }
  SECTION("example tensor_add (tensor_tensor)") {
    const ir::Kernel k = trace("tensor_add", examples::tensor_add,
                               {arg({200, 64}, nl::float16, "a"), arg({200, 64}, nl::float16, "b")});
    check_round_trip(k);
  }
}

// ---- golden text ------------------------------------------------------------------------------

namespace {
const char* const kGolden =
    R"(kernel "golden \"k\"\n\\2" target=trn3 {
  param %0 "x" hbm bfloat16[128, 64] @ "g.py":3:1
  param %1 "w" hbm bfloat16[128, 256] @ "dir\\g \"2\".py":3
  tensor %2 "out" shared_hbm float32[64, 256] @ "g.py":5:11
  tensor %3 "x_t" sbuf bfloat16[128, 64] address=(0, 0) @ "g.py":6:11
  tensor %4 "w_t" sbuf bfloat16[128, 256]
  tensor %5 "acc" psum float32[64, 256] address=(64, 4096) @ "g.py":8:11
  tensor %6 "res" sbuf float32[64, 256] @ "g.py":9:11
  tensor %7 "col" sbuf float32[64, 1] @ "g.py":9:11
  dma_copy dst=%3@0[[64,128],[1,64]] src=%0@0[[64,128],[1,64]] dge_mode=swdge name="load_x" @ "g.py":10:5
  dma_copy dst=%4:int16@0[[256,128],[1,256]] src=%1:int16@0[[256,128],[1,256]] @ "g.py":11:5
  nc_matmul dst=%5@0[[256,64],[1,256]] stationary=%3@0[[64,128],[1,64]] moving=%4@0[[256,128],[1,256]] accumulate=off tile_position=[0,0] tile_size=[128,128] @ "g.py":12:5
  tensor_copy dst=%6@255[[256,64],[-1,256]] src=%5@0[[256,64],[1,256]] engine=vector @ "g.py":13:5
  memset dst=%7@0[[1,64],[1,1]] value=-inf @ "g.py":14:5
  tensor_scalar dst=%6@0[[256,64],[1,256]] data=%6@0[[256,64],[1,256]] op0=multiply operand0=0.1 op1=subtract operand1=%7@0[[1,64],[0,256]] reverse1=true @ "g.py":15:5
  activation dst=%6@0[[256,64],[1,256]] op=exp data=%6@0[[256,64],[1,256]] bias=-2.5 scale=none alpha=1e-300 @ "g.py":16:5
  tensor_reduce dst=%7@0[[1,64],[1,1]] op=maximum data=%6@0[[256,64],[1,256]] axis=[1] negate=true @ "g.py":17:5
  iota dst=%6:int32@0[[256,64],[1,256]] pattern=[[-1,256]] offset=-7 channel_multiplier=256 @ "g.py":18:5
  dma_copy dst=%2@0[[256,64],[1,256]] src=%6@0[[256,64],[1,256]] @ "g.py":19:5
  return %2, %6
}
)";
}  // namespace

TEST_CASE("golden IR text parses and prints back verbatim", "[core][ir-text]") {
  const ir::Kernel k = ir::parse(kGolden);
  CHECK(ir::print(k) == kGolden);
  CHECK(ir::parse(ir::print(k)) == k);

  // What was parsed, field by field.
  CHECK(k.name == "golden \"k\"\n\\2");
  CHECK(k.target == ir::Target::trn3);
  REQUIRE(k.tensors.size() == 8);
  CHECK(k.params == std::vector<int>{0, 1});
  CHECK(k.outputs == std::vector<int>{2, 6});
  CHECK(k.tensors[1].loc == SourceLoc{"dir\\g \"2\".py", 3, 0});
  CHECK(k.tensors[0].loc == SourceLoc{"g.py", 3, 1});
  CHECK(k.tensors[1].is_param);
  CHECK_FALSE(k.tensors[2].is_param);
  CHECK(k.tensors[2].buffer == ir::Buffer::shared_hbm);
  CHECK(k.tensors[4].loc == SourceLoc{});
  CHECK(k.tensors[5].address == std::array<int64_t, 2>{64, 4096});
  CHECK(k.tensors[5].buffer == ir::Buffer::psum);
  CHECK(k.tensors[1].shape == std::vector<int64_t>{128, 256});
  REQUIRE(k.body.size() == 10);

  const auto& load = std::get<ir::DmaCopy>(k.body[0].op);
  CHECK(load.dge_mode == ir::DgeMode::swdge);
  CHECK(load.oob_mode == ir::OobMode::error);
  CHECK(load.dst == View{3, DType::bfloat16, 0, {{64, 128}, {1, 64}}});
  CHECK(k.body[0].name == "load_x");
  CHECK(k.body[0].loc == SourceLoc{"g.py", 10, 5});
  const auto& cast = std::get<ir::DmaCopy>(k.body[1].op);
  CHECK(cast.dst.dtype == DType::int16);
  const auto& mm = std::get<ir::NcMatmul>(k.body[2].op);
  CHECK(mm.accumulate == ir::Accumulate::off);
  CHECK(mm.tile_size == ir::IntList{128, 128});
  const auto& tc = std::get<ir::TensorCopy>(k.body[3].op);
  CHECK(tc.dst.offset == 255);
  CHECK(tc.dst.dims[1] == ApDim{-1, 256});
  const auto& ms = std::get<ir::Memset>(k.body[4].op);
  CHECK(ms.value == -std::numeric_limits<double>::infinity());
  const auto& ts = std::get<ir::TensorScalar>(k.body[5].op);
  CHECK(ts.op0 == ir::AluOp::multiply);
  CHECK(ts.operand0 == Operand::immediate(0.1));
  CHECK(ts.operand1 == Operand::of(View{7, DType::float32, 0, {{1, 64}, {0, 256}}}));
  CHECK(ts.reverse1);
  CHECK_FALSE(ts.reverse0);
  CHECK(ts.op1 == ir::AluOp::subtract);
  const auto& act = std::get<ir::Activation>(k.body[6].op);
  CHECK(act.op == ir::ActFunc::exp);
  CHECK(act.bias == Operand::immediate(-2.5));
  CHECK(act.scale.is_none());
  CHECK(act.alpha == 1e-300);
  CHECK_FALSE(act.reduce_res.has_value());
  const auto& red = std::get<ir::TensorReduce>(k.body[7].op);
  CHECK(red.axis == ir::IntList{1});
  CHECK(red.negate);
  CHECK_FALSE(red.keepdims);
  const auto& io = std::get<ir::Iota>(k.body[8].op);
  CHECK(io.pattern == ir::Pattern{{-1, 256}});
  CHECK(io.offset == -7);
  CHECK(io.channel_multiplier == 256);
  CHECK(io.dst.dtype == DType::int32);
}

TEST_CASE("hand-written text is normalized by one round trip", "[core][ir-text]") {
  // Comments, odd spacing, fields out of order, defaults spelled out, '+' on integers,
  // declarations after instructions. (An instruction and its operands stay on one line.)
  const std::string messy = R"(# a comment line
kernel   "n"   target = trn1{
  param %0 "a" hbm float32[ 4 , 8 ]   # trailing comment
  tensor %1 "s" sbuf float32[4,8] @"k.py":2:3
  dma_copy   src = %0@+0[[8,4],[1,8]]  engine=unknown oob_mode=error  dst=%1@0[ [8,4] , [1,8] ] dge_mode=hwdge @ "k.py" : 4
  tensor %2 "o" shared_hbm float32[4,8]
  dma_copy dst=%2@0[[8,4],[1,8]] src=%1@0[[8,4],[1,8]] dge_mode=none dge_mode=hwdge @ "k.py":5
  return %2
}
# done
)";
  const std::string canonical = R"(kernel "n" target=trn1 {
  param %0 "a" hbm float32[4, 8]
  tensor %1 "s" sbuf float32[4, 8] @ "k.py":2:3
  tensor %2 "o" shared_hbm float32[4, 8]
  dma_copy dst=%1@0[[8,4],[1,8]] src=%0@0[[8,4],[1,8]] dge_mode=hwdge @ "k.py":4
  dma_copy dst=%2@0[[8,4],[1,8]] src=%1@0[[8,4],[1,8]] dge_mode=hwdge @ "k.py":5
  return %2
}
)";
  const ir::Kernel k = ir::parse(messy);
  CHECK(ir::print(k) == canonical);
  CHECK(ir::parse(canonical) == k);
}

TEST_CASE("print of single instructions and views", "[core][ir-text]") {
  const ir::Kernel k = ir::parse(kGolden);
  CHECK(ir::print(k, k.body[1]) ==
        "dma_copy dst=%4:int16@0[[256,128],[1,256]] src=%1:int16@0[[256,128],[1,256]] @ \"g.py\":11:5");
  CHECK(ir::print(k, std::get<ir::DmaCopy>(k.body[0].op).src) == "%0@0[[64,128],[1,64]]");
  CHECK(ir::print(k, View{6, DType::uint8, 12, {{1024, 64}, {4, 3}}}) == "%6:uint8@12[[1024,64],[4,3]]");
}

// ---- every op ---------------------------------------------------------------------------------

TEST_CASE("every op in KNIT_OPS round-trips with non-default fields", "[core][ir-text]") {
  const ir::Kernel k = all_ops_kernel();

  // Coverage: each opcode of the KNIT_OPS list appears at least once.
  std::set<ir::Opcode> seen;
  for (const ir::Instruction& inst : k.body) seen.insert(inst.opcode());
  CHECK(seen.size() == ir::kNumOpcodes);
  for (size_t i = 0; i < ir::kNumOpcodes; ++i) {
    INFO("opcode " << ir::opcode_name(static_cast<ir::Opcode>(i)));
    CHECK(seen.count(static_cast<ir::Opcode>(i)) == 1);
  }

  // Every field differs from its default, so every field is printed.
  for (const ir::Instruction& inst : k.body) {
    const std::string text = ir::print(k, inst);
    INFO(text);
    CHECK(text.rfind(std::string(inst.opcode_name()) + " ", 0) == 0);
    ir::for_each_field(inst, [&](const char* name, const auto&) {
      CHECK(text.find(std::string(" ") + name + "=") != std::string::npos);
    });
  }

  check_round_trip(k);

  // Each op alone in a kernel, too: the op parses back to exactly itself.
  for (const ir::Instruction& inst : k.body) {
    ir::Kernel one = k;
    one.body = {inst};
    const ir::Kernel back = ir::parse(ir::print(one));
    INFO(ir::print(one));
    REQUIRE(back.body.size() == 1);
    CHECK(back.body[0] == inst);
  }
}

TEST_CASE("opcode names match KNIT_OPS and parse back", "[core][ir-text]") {
  CHECK(ir::opcode_name(ir::Opcode::dma_copy) == "dma_copy");
  CHECK(ir::opcode_name(ir::Opcode::nc_n_gather) == "nc_n_gather");
  CHECK(ir::opcode_name(ir::Opcode::tensor_copy_predicated) == "tensor_copy_predicated");
  for (size_t i = 0; i < ir::kNumOpcodes; ++i) {
    const auto op = static_cast<ir::Opcode>(i);
    CHECK(ir::parse_opcode(ir::opcode_name(op)) == op);
  }
  CHECK_FALSE(ir::parse_opcode("dma_cpy").has_value());
  CHECK_FALSE(ir::parse_opcode("").has_value());
}

TEST_CASE("immediates round-trip exactly", "[core][ir-text]") {
  const double values[] = {0.1,
                           1.0 / 3.0,
                           -2.5,
                           5e-324,
                           std::numeric_limits<double>::max(),
                           -std::numeric_limits<double>::max(),
                           static_cast<double>(std::numeric_limits<float>::max()),
                           123456789.0,
                           std::numeric_limits<double>::infinity(),
                           -std::numeric_limits<double>::infinity()};
  ir::Kernel k = all_ops_kernel();
  for (double v : values) {
    k.body.resize(1);  // keep the first instruction, then add a memset
    ir::Instruction inst;
    inst.op = ir::Memset{ir::full_view(k.tensors[1], 1), v, ir::Engine::unknown};
    inst.loc = SourceLoc{"m.py", 1, 1};
    k.body.push_back(inst);
    INFO("value " << v);
    const ir::Kernel back = ir::parse(ir::print(k));
    REQUIRE(back.body.size() == 2);
    const double got = std::get<ir::Memset>(back.body[1].op).value;
    CHECK(std::bit_cast<uint64_t>(got) == std::bit_cast<uint64_t>(v));
  }
}

TEST_CASE("NaN immediates print as nan / -nan and keep their sign", "[core][ir-text]") {
  ir::Kernel k = all_ops_kernel();
  for (double v : {std::numeric_limits<double>::quiet_NaN(), -std::numeric_limits<double>::quiet_NaN()}) {
    k.body.resize(1);
    ir::Instruction inst;
    inst.op = ir::Memset{ir::full_view(k.tensors[1], 1), v, ir::Engine::unknown};
    inst.loc = SourceLoc{"m.py", 1, 1};
    k.body.push_back(inst);
    const std::string text = ir::print(k);
    CHECK(text.find(std::signbit(v) ? "value=-nan @" : "value=nan @") != std::string::npos);
    const ir::Kernel back = ir::parse(text);
    const double got = std::get<ir::Memset>(back.body[1].op).value;
    CHECK(std::isnan(got));
    CHECK(std::signbit(got) == std::signbit(v));
    CHECK(ir::print(back) == text);  // (== on the kernel is false for NaN by design, docs/ir.md)
  }
}

// Regression test for a bug fixed in ir/src/printer.cpp, Printer::same.
TEST_CASE("memset value -0.0 keeps its sign through print/parse", "[core][ir-text]") {
  ir::Kernel k = all_ops_kernel();
  k.body.resize(1);
  ir::Instruction inst;
  inst.op = ir::Memset{ir::full_view(k.tensors[1], 1), -0.0, ir::Engine::unknown};
  inst.loc = SourceLoc{"m.py", 1, 1};
  k.body.push_back(inst);
  const ir::Kernel back = ir::parse(ir::print(k));
  CHECK(std::signbit(std::get<ir::Memset>(back.body[1].op).value));
}

// Known issue documented in docs/ir.md (parser.cpp, Parser::operands): the field loop does not stop
// at a newline, so an instruction without a source location swallows the next line's op name.
TEST_CASE("instructions without a source location round-trip", "[core][ir-text]") {
  ir::Kernel k = all_ops_kernel();
  for (ir::Instruction& inst : k.body) inst.loc = SourceLoc{};
  const std::string text = ir::print(k);
  ir::Kernel back;
  REQUIRE_NOTHROW(back = ir::parse(text));
  CHECK(back == k);
}

TEST_CASE("a kernel with no body and no outputs", "[core][ir-text]") {
  const std::string text = "kernel \"\" target=trn2 {\n  return\n}\n";
  const ir::Kernel k = ir::parse(text);
  CHECK(k.name.empty());
  CHECK(k.tensors.empty());
  CHECK(k.outputs.empty());
  CHECK(ir::print(k) == text);
}

// ---- parse errors -----------------------------------------------------------------------------

namespace {
// A valid kernel; the error tests break one token of it.
const std::string kBase =
    "kernel \"e\" target=trn2 {\n"                                                     // line 1
    "  param %0 \"a\" hbm float32[128, 64] @ \"e.py\":1:1\n"                           // line 2
    "  tensor %1 \"s\" sbuf float32[128, 64] @ \"e.py\":2:5\n"                         // line 3
    "  dma_copy dst=%1@0[[64,128],[1,64]] src=%0@0[[64,128],[1,64]] @ \"e.py\":3:5\n"  // line 4
    "  return %1\n"                                                                    // line 5
    "}\n";

// kBase with the first occurrence of `from` on line `line` replaced by `to`.
std::string broken(int line, const std::string& from, const std::string& to) {
  auto ls = lines_of(kBase);
  std::string& l = ls.at(line - 1);
  const size_t at = l.find(from);
  REQUIRE(at != std::string::npos);
  l.replace(at, from.size(), to);
  std::string out;
  for (const auto& x : ls) out += x + "\n";
  return out;
}
// 1-based column of the first occurrence of `what` on line `line` of `text`.
int col_of(const std::string& text, int line, const std::string& what) {
  const auto ls = lines_of(text);
  const size_t at = ls.at(line - 1).find(what);
  REQUIRE(at != std::string::npos);
  return static_cast<int>(at) + 1;
}
}  // namespace

TEST_CASE("the base text of the error tests parses", "[core][ir-text]") {
  const ir::Kernel k = ir::parse(kBase);
  CHECK(ir::print(k) == kBase);
}

// Column convention (docs/ir.md "Parse errors"): for an error on a name (unknown instruction,
// operand or enum value) and on a tensor number, the column points just past the token; for an
// unexpected character it points at that character.
TEST_CASE("parse errors name rule ir-parse and the line:col of the bad token", "[core][ir-text]") {
  SECTION("unknown instruction") {
    const std::string text = broken(4, "dma_copy", "dma_cpy");
    const ParseFailure f = parse_failure(text);
    CHECK(f.rule == "ir-parse");
    CHECK(f.message.find("unknown instruction 'dma_cpy'") != std::string::npos);
    CHECK(f.line == 4);
    CHECK(f.col == col_of(text, 4, "dma_cpy") + 7);
    CHECK(f.file == "<ir>");
    CHECK(f.what.rfind("<ir>:4:" + std::to_string(f.col) + ": error: [ir-parse] ", 0) == 0);
  }
  SECTION("undeclared tensor") {
    const std::string text = broken(4, "src=%0@", "src=%7@");
    const ParseFailure f = parse_failure(text);
    CHECK(f.rule == "ir-parse");
    CHECK(f.message.find("tensor %7 is not declared") != std::string::npos);
    CHECK(f.line == 4);
    CHECK(f.col == col_of(text, 4, "%7") + 2);
  }
  SECTION("bad dtype") {
    const std::string text = broken(3, "float32", "floot32");
    const ParseFailure f = parse_failure(text);
    CHECK(f.rule == "ir-parse");
    CHECK(f.message.find("unknown dtype 'floot32'") != std::string::npos);
    CHECK(f.line == 3);
    CHECK(f.col == col_of(text, 3, "floot32") + 7);
  }
  SECTION("bad dtype in a view") {
    const std::string text = broken(4, "dst=%1@", "dst=%1:float64@");
    const ParseFailure f = parse_failure(text);
    CHECK(f.rule == "ir-parse");
    CHECK(f.message.find("float64") != std::string::npos);
    CHECK(f.line == 4);
    CHECK(f.col == col_of(text, 4, "float64") + 7);
  }
  SECTION("missing '=' points at the token found instead") {
    const std::string text = broken(4, "dst=%1", "dst %1");
    const ParseFailure f = parse_failure(text);
    CHECK(f.rule == "ir-parse");
    CHECK(f.message.find("expected '='") != std::string::npos);
    CHECK(f.message.find("found '%1@0") != std::string::npos);
    CHECK(f.line == 4);
    CHECK(f.col == col_of(text, 4, "%1@"));
  }
  SECTION("missing '=' after target") {
    const std::string text = broken(1, "target=trn2", "target trn2");
    const ParseFailure f = parse_failure(text);
    CHECK(f.rule == "ir-parse");
    CHECK(f.line == 1);
    CHECK(f.col == col_of(text, 1, "trn2"));
  }
  SECTION("unterminated string") {
    const std::string text = broken(4, "\"e.py\":3:5", "\"e.py:3:5");
    const ParseFailure f = parse_failure(text);
    CHECK(f.rule == "ir-parse");
    CHECK(f.message.find("unterminated string") != std::string::npos);
  }
  SECTION("unknown operand") {
    const std::string text = broken(4, "src=", "source=");
    const ParseFailure f = parse_failure(text);
    CHECK(f.rule == "ir-parse");
    CHECK(f.message.find("instruction dma_copy has no operand 'source'") != std::string::npos);
    CHECK(f.line == 4);
  }
  SECTION("unknown enum value") {
    const std::string text = broken(4, " @ \"e.py\":3", " engine=vectr @ \"e.py\":3");
    const ParseFailure f = parse_failure(text);
    CHECK(f.rule == "ir-parse");
    CHECK(f.message.find("unknown engine 'vectr'") != std::string::npos);
    CHECK(f.col == col_of(text, 4, "vectr") + 5);
  }
  SECTION("unknown target and buffer") {
    ParseFailure f = parse_failure(broken(1, "trn2", "trn9"));
    CHECK(f.rule == "ir-parse");
    CHECK(f.message.find("unknown target 'trn9'") != std::string::npos);
    f = parse_failure(broken(3, "sbuf", "sram"));
    CHECK(f.message.find("unknown buffer 'sram'") != std::string::npos);
    CHECK(f.line == 3);
  }
  SECTION("tensors out of order") {
    const std::string text = broken(3, "%1", "%2");
    const ParseFailure f = parse_failure(text);
    CHECK(f.rule == "ir-parse");
    CHECK(f.message.find("expected %1") != std::string::npos);
    CHECK(f.line == 3);
  }
  SECTION("zero dim") {
    const ParseFailure f = parse_failure(broken(3, "[128, 64]", "[128, 0]"));
    CHECK(f.rule == "ir-parse");
    CHECK(f.message.find(">= 1") != std::string::npos);
    CHECK(f.line == 3);
  }
  SECTION("bad enum value, bad integer, bad pattern") {
    CHECK(parse_failure(broken(4, " @ \"e.py\":3", " oob_mode=1 @ \"e.py\":3")).rule == "ir-parse");
    const ParseFailure b = parse_failure(broken(4, "[[64,128]", "[[64,x]"));
    CHECK(b.rule == "ir-parse");
    CHECK(b.message.find("expected an integer") != std::string::npos);
    CHECK(b.col == col_of(broken(4, "[[64,128]", "[[64,x]"), 4, "x]"));
    const ParseFailure c = parse_failure(broken(4, "[1,64]] src", "[1,64] src"));
    CHECK(c.rule == "ir-parse");
    CHECK(c.message.find("expected ']'") != std::string::npos);
  }
  SECTION("text after the kernel") {
    const ParseFailure f = parse_failure(kBase + "kernel");
    CHECK(f.rule == "ir-parse");
    CHECK(f.message.find("unexpected text after the kernel") != std::string::npos);
    CHECK(f.line == 7);
    CHECK(f.col == 1);
  }
  SECTION("source name appears in the diagnostic") {
    const ParseFailure f = parse_failure(broken(4, "dma_copy", "dma_cpy"), "my_kernel.tir");
    CHECK(f.file == "my_kernel.tir");
    CHECK(f.what.rfind("my_kernel.tir:4:", 0) == 0);
  }
}

// Regression test for a bug fixed in ir/src/parser.cpp, Parser::operands.
TEST_CASE("unknown operand error points just past the operand name", "[core][ir-text]") {
  const std::string text = broken(4, "src=", "source=");
  const ParseFailure f = parse_failure(text);
  CHECK(f.rule == "ir-parse");
  CHECK(f.line == 4);
  CHECK(f.col == col_of(text, 4, "source") + 6);
}

// Regression test for a bug fixed in ir/src/parser.cpp, Lexer::quoted.
TEST_CASE("unterminated string points at its opening quote", "[core][ir-text]") {
  const std::string text = broken(4, "\"e.py\":3:5", "\"e.py:3:5");
  const ParseFailure f = parse_failure(text);
  CHECK(f.rule == "ir-parse");
  CHECK(f.line == 4);
  CHECK(f.col == col_of(text, 4, "\"e.py"));
}

TEST_CASE("malformed text never crashes: every prefix and every single-byte deletion", "[core][ir-text]") {
  const std::string text = ir::print(all_ops_kernel());
  int errors = 0;
  for (size_t n = 0; n < text.size(); ++n) {
    const std::string prefix = text.substr(0, n);
    try {
      ir::parse(prefix);
      // Only a prefix that already holds the whole kernel (minus trailing whitespace) may parse.
      CHECK(text.substr(n).find_first_not_of(" \n") == std::string::npos);
    } catch (const knit::Error& e) {
      ++errors;
      if (e.rule() != "ir-parse") FAIL_CHECK("prefix of " << n << " bytes: rule " << e.rule());
    }
  }
  CHECK(errors > 0);
  for (size_t i = 0; i < text.size(); i += 3) {
    std::string t = text;
    t.erase(i, 1);
    try {
      ir::parse(t);
    } catch (const knit::Error& e) {
      if (e.rule() != "ir-parse") FAIL_CHECK("deleting byte " << i << ": rule " << e.rule());
    }
  }
}
