// View algebra (ir/view.h) against NKI's rules (the NKI Access Patterns guide; docs/architecture.md, Views).
//
// Every view is checked twice: its access pattern (offset + [[step, num], ...]) and the flat
// storage indices it addresses, which the tests compute by hand with plain loops over the
// original tensor's row-major layout.
#include <catch2/catch.hpp>

#include <functional>
#include <string>
#include <vector>

#include "knit/ir/view.h"

namespace ir = knit::ir;
using ir::ApDim;
using ir::Buffer;
using ir::DType;
using ir::Index;
using ir::Pattern;
using ir::TensorDecl;
using ir::View;
using Flat = std::vector<int64_t>;

namespace {

const knit::SourceLoc kLoc{"kernel.py", 42, 7};

TensorDecl decl(Buffer b, DType d, std::vector<int64_t> shape, std::string name = "t") {
  TensorDecl t;
  t.name = std::move(name);
  t.buffer = b;
  t.dtype = d;
  t.shape = std::move(shape);
  return t;
}
TensorDecl sbuf(std::vector<int64_t> shape, DType d = DType::float32) { return decl(Buffer::sbuf, d, shape); }
TensorDecl hbm(std::vector<int64_t> shape, DType d = DType::float32) { return decl(Buffer::hbm, d, shape); }

// Flat storage index of every element of v, in row-major order of the view's shape.
Flat addressed(const View& v) {
  Flat out;
  std::vector<int64_t> idx(v.dims.size(), 0);
  const int64_t n = v.num_elements();
  for (int64_t e = 0; e < n; ++e) {
    int64_t f = v.offset;
    for (size_t k = 0; k < v.dims.size(); ++k) f += idx[k] * v.dims[k].step;
    out.push_back(f);
    for (size_t k = v.dims.size(); k-- > 0;) {
      if (++idx[k] < v.dims[k].num) break;
      idx[k] = 0;
    }
  }
  return out;
}

// Builds the expected flat index list by running `body` over a nested index space.
Flat grid(std::vector<int64_t> sizes, const std::function<int64_t(const std::vector<int64_t>&)>& at) {
  Flat out;
  std::vector<int64_t> i(sizes.size(), 0);
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  for (int64_t e = 0; e < n; ++e) {
    out.push_back(at(i));
    for (size_t k = sizes.size(); k-- > 0;) {
      if (++i[k] < sizes[k]) break;
      i[k] = 0;
    }
  }
  return out;
}

View full(const TensorDecl& t) { return ir::full_view(t, 0); }

View idx(const TensorDecl& t, std::vector<Index> key) { return ir::index(t, full(t), key, kLoc); }

// The rule of the knit::Error that f throws ("<no error>" if none). Also checks the error is a
// user error at kLoc.
template <class F>
std::string rule_of(F&& f) {
  try {
    f();
  } catch (const knit::Error& e) {
    CHECK(e.kind() == knit::ErrorKind::User);
    CHECK(e.loc() == kLoc);
    CHECK(std::string(e.what()).find("kernel.py:42:7") != std::string::npos);
    return e.rule();
  }
  return "<no error>";
}

void check_ok(const TensorDecl& t, const View& v) { CHECK_NOTHROW(ir::check_view(t, v, "operand", kLoc)); }

}  // namespace

TEST_CASE("full_view is row-major", "[core][views]") {
  const TensorDecl t = sbuf({128, 64});
  const View v = ir::full_view(t, 3);
  CHECK(v.tensor == 3);
  CHECK(v.dtype == DType::float32);
  CHECK(v.offset == 0);
  CHECK(v.dims == Pattern{{64, 128}, {1, 64}});
  const TensorDecl h = hbm({2, 3, 4}, DType::bfloat16);
  const View hv = full(h);
  CHECK(hv.dtype == DType::bfloat16);
  CHECK(hv.dims == Pattern{{12, 2}, {4, 3}, {1, 4}});
  Flat all(24);
  for (int i = 0; i < 24; ++i) all[i] = i;
  CHECK(addressed(hv) == all);
}

TEST_CASE("NKI example: (128,64).slice(1, 8, 24)", "[core][views]") {
  const TensorDecl t = sbuf({128, 64});
  const View v = ir::slice(t, full(t), 1, 8, 24, 1, kLoc);
  CHECK(v.offset == 8);
  CHECK(v.dims == Pattern{{64, 128}, {1, 16}});
  CHECK(addressed(v) == grid({128, 16}, [](auto& i) { return i[0] * 64 + 8 + i[1]; }));
  // The same through t[:, nl.ds(8, 16)] and through a raw .ap().
  CHECK(idx(t, {Index::all(), Index::ds(8, 16)}) == v);
  CHECK(ir::ap(t, full(t), {{64, 128}, {1, 16}}, 8, std::nullopt, kLoc) == v);
  check_ok(t, v);
}

TEST_CASE("on-chip integer subscripts", "[core][views]") {
  const TensorDecl t = sbuf({128, 4, 8});  // 32 elements per partition
  SECTION("an int on the partition dim keeps a size-1 partition dim") {
    const View v = idx(t, {Index::at(5)});
    CHECK(v.shape() == std::vector<int64_t>{1, 4, 8});
    CHECK(v.offset == 5 * 32);
    CHECK(addressed(v) == grid({4, 8}, [](auto& i) { return 160 + i[0] * 8 + i[1]; }));
    check_ok(t, v);
  }
  SECTION("an int on a free dim drops it") {
    const View v = idx(t, {Index::all(), Index::at(2)});
    CHECK(v.shape() == std::vector<int64_t>{128, 8});
    CHECK(v.offset == 16);
    CHECK(v.dims == Pattern{{32, 128}, {1, 8}});
    CHECK(addressed(v) == grid({128, 8}, [](auto& i) { return i[0] * 32 + 16 + i[1]; }));
  }
  SECTION("results stay >= 2-D: the last free dim stays with size 1") {
    const View v = idx(t, {Index::all(), Index::at(2), Index::at(3)});
    CHECK(v.shape() == std::vector<int64_t>{128, 1});
    CHECK(v.offset == 19);
    CHECK(v.dims[0] == ApDim{32, 128});
    CHECK(addressed(v) == grid({128}, [](auto& i) { return i[0] * 32 + 19; }));
    const View w = idx(t, {Index::at(3), Index::at(2), Index::at(3)});
    CHECK(w.shape() == std::vector<int64_t>{1, 1});
    CHECK(addressed(w) == Flat{3 * 32 + 2 * 8 + 3});
    check_ok(t, w);
  }
  SECTION("2-D tile column") {
    const TensorDecl t2 = sbuf({128, 64});
    const View v = idx(t2, {Index::all(), Index::at(7)});
    CHECK(v.shape() == std::vector<int64_t>{128, 1});
    CHECK(addressed(v) == grid({128}, [](auto& i) { return i[0] * 64 + 7; }));
  }
  SECTION("negative ints count from the end") {
    const View v = idx(t, {Index::at(-1), Index::at(-4)});
    CHECK(v.shape() == std::vector<int64_t>{1, 8});
    CHECK(addressed(v) == grid({8}, [](auto& i) { return 127 * 32 + 0 * 8 + i[0]; }));
  }
}

TEST_CASE("HBM integer subscripts drop dims", "[core][views]") {
  const TensorDecl t = hbm({4, 6, 8});
  const View a = idx(t, {Index::at(3)});
  CHECK(a.shape() == std::vector<int64_t>{6, 8});
  CHECK(addressed(a) == grid({6, 8}, [](auto& i) { return 3 * 48 + i[0] * 8 + i[1]; }));
  const View b = idx(t, {Index::at(1), Index::all(), Index::at(2)});
  CHECK(b.shape() == std::vector<int64_t>{6});
  CHECK(b.dims == Pattern{{8, 6}});
  CHECK(addressed(b) == grid({6}, [](auto& i) { return 48 + i[0] * 8 + 2; }));
  // All dims indexed: still 1-D (NKI: HBM results are >= 1-D).
  const View c = idx(t, {Index::at(-1), Index::at(-1), Index::at(-1)});
  CHECK(c.shape() == std::vector<int64_t>{1});
  CHECK(addressed(c) == Flat{4 * 6 * 8 - 1});
  const TensorDecl m = hbm({16, 8});
  const View row = idx(m, {Index::at(-1)});
  CHECK(addressed(row) == grid({8}, [](auto& i) { return 120 + i[0]; }));
  const View col = idx(m, {Index::all(), Index::at(-1)});
  CHECK(col.shape() == std::vector<int64_t>{16});
  CHECK(addressed(col) == grid({16}, [](auto& i) { return i[0] * 8 + 7; }));
}

TEST_CASE("slices: steps, negative bounds, reversal, nl.ds", "[core][views]") {
  const TensorDecl m = hbm({16, 8});
  SECTION("step 3") {  // rows 1, 4, 7
    const View v = idx(m, {Index::range(1, 10, 3)});
    CHECK(v.shape() == std::vector<int64_t>{3, 8});
    CHECK(v.offset == 8);
    CHECK(v.dims == Pattern{{24, 3}, {1, 8}});
    CHECK(addressed(v) == grid({3, 8}, [](auto& i) { return (1 + 3 * i[0]) * 8 + i[1]; }));
  }
  SECTION("negative bounds") {  // rows 13, 14
    const View v = idx(m, {Index::range(-3, -1)});
    CHECK(v.shape() == std::vector<int64_t>{2, 8});
    CHECK(addressed(v) == grid({2, 8}, [](auto& i) { return (13 + i[0]) * 8 + i[1]; }));
  }
  SECTION("reversed rows: ::-1") {
    const View v = idx(m, {Index::range(std::nullopt, std::nullopt, -1)});
    CHECK(v.shape() == std::vector<int64_t>{16, 8});
    CHECK(v.offset == 120);
    CHECK(v.dims == Pattern{{-8, 16}, {1, 8}});
    CHECK(addressed(v) == grid({16, 8}, [](auto& i) { return (15 - i[0]) * 8 + i[1]; }));
    check_ok(m, v);
  }
  SECTION("negative step with bounds: 10:2:-3 -> rows 10, 7, 4") {
    const View v = idx(m, {Index::range(10, 2, -3)});
    CHECK(v.shape() == std::vector<int64_t>{3, 8});
    CHECK(addressed(v) == grid({3, 8}, [](auto& i) { return (10 - 3 * i[0]) * 8 + i[1]; }));
  }
  SECTION("free-dim step: [:, ::2] and [:, 1::2]") {
    const View even = idx(m, {Index::all(), Index::range(std::nullopt, std::nullopt, 2)});
    CHECK(even.dims == Pattern{{8, 16}, {2, 4}});
    CHECK(addressed(even) == grid({16, 4}, [](auto& i) { return i[0] * 8 + 2 * i[1]; }));
    const View odd = idx(m, {Index::all(), Index::range(1, std::nullopt, 2)});
    CHECK(addressed(odd) == grid({16, 4}, [](auto& i) { return i[0] * 8 + 1 + 2 * i[1]; }));
  }
  SECTION("nl.ds on the partition dim of an on-chip tensor") {
    const TensorDecl t = sbuf({128, 64});
    const View v = idx(t, {Index::ds(32, 64), Index::ds(10, 5)});
    CHECK(v.offset == 32 * 64 + 10);
    CHECK(v.dims == Pattern{{64, 64}, {1, 5}});
    CHECK(addressed(v) == grid({64, 5}, [](auto& i) { return (32 + i[0]) * 64 + 10 + i[1]; }));
    check_ok(t, v);
  }
  SECTION("slices compose: a slice of a slice") {
    const View a = ir::slice(m, full(m), 0, 2, 14, 2, kLoc);  // rows 2,4,...,12
    const View b = ir::slice(m, a, 0, 1, 4, 1, kLoc);         // rows 4,6,8
    const View c = ir::slice(m, b, 1, 3, 8, 2, kLoc);         // cols 3,5,7
    CHECK(c.shape() == std::vector<int64_t>{3, 3});
    CHECK(addressed(c) == grid({3, 3}, [](auto& i) { return (4 + 2 * i[0]) * 8 + 3 + 2 * i[1]; }));
  }
}

TEST_CASE("subscript and slice errors", "[core][views]") {
  const TensorDecl t = sbuf({128, 64});
  const TensorDecl m = hbm({16, 8});
  CHECK(rule_of([&] { idx(t, {Index::all(), Index::ds(60, 8)}); }) == "view-out-of-range");  // 60+8 > 64
  CHECK(rule_of([&] { idx(t, {Index::ds(100, 29)}); }) == "view-out-of-range");              // 129 partitions
  CHECK(rule_of([&] { idx(m, {Index::range(5, 100)}); }) == "view-out-of-range");            // no clamping
  CHECK(rule_of([&] { idx(m, {Index::range(-20, 4)}); }) == "view-out-of-range");
  CHECK(rule_of([&] { idx(m, {Index::at(16)}); }) == "view-out-of-range");
  CHECK(rule_of([&] { idx(m, {Index::at(-17)}); }) == "view-out-of-range");
  CHECK(rule_of([&] { idx(t, {Index::at(128)}); }) == "view-out-of-range");
  CHECK(rule_of([&] { idx(m, {Index::range(0, 4, 0)}); }) == "view-slice");
  CHECK(rule_of([&] { idx(m, {Index::at(0), Index::at(0), Index::at(0)}); }) == "view-index");
  CHECK(rule_of([&] { ir::slice(t, full(t), 1, 8, 65, 1, kLoc); }) == "view-out-of-range");
  CHECK(rule_of([&] { ir::slice(t, full(t), 1, -1, 4, 1, kLoc); }) == "view-out-of-range");
  CHECK(rule_of([&] { ir::slice(t, full(t), 1, 0, 4, 0, kLoc); }) == "view-slice");
  CHECK(rule_of([&] { ir::slice(t, full(t), 2, 0, 4, 1, kLoc); }) == "view-dim");
  CHECK(rule_of([&] { ir::slice(t, full(t), -3, 0, 4, 1, kLoc); }) == "view-dim");
  // The message names the bound that was broken.
  try {
    ir::slice(t, full(t), 1, 8, 65, 1, kLoc);
  } catch (const knit::Error& e) {
    CHECK(e.message().find("64") != std::string::npos);
  }
}

// Regression test: slice() follows NKI (0 <= start < end, step >= 1).
TEST_CASE("slice() rejects empty ranges and non-positive steps (NKI: 0 <= start < end, step >= 1)", "[core][views]") {
  const TensorDecl t = sbuf({128, 64});
  CHECK(rule_of([&] { ir::slice(t, full(t), 1, 8, 8, 1, kLoc); }) != "<no error>");
  CHECK(rule_of([&] { ir::slice(t, full(t), 1, 20, 8, -1, kLoc); }) != "<no error>");
}

TEST_CASE("select", "[core][views]") {
  const TensorDecl m = hbm({16, 8});
  const View s = ir::select(m, full(m), 0, 3, kLoc);
  CHECK(s == idx(m, {Index::at(3)}));
  const View c = ir::select(m, full(m), 1, -1, kLoc);
  CHECK(addressed(c) == grid({16}, [](auto& i) { return i[0] * 8 + 7; }));
  const TensorDecl t = sbuf({128, 4, 8});
  const View f = ir::select(t, full(t), 2, 5, kLoc);
  CHECK(f.shape() == std::vector<int64_t>{128, 4});
  CHECK(addressed(f) == grid({128, 4}, [](auto& i) { return i[0] * 32 + i[1] * 8 + 5; }));
  CHECK(rule_of([&] { ir::select(t, full(t), 0, 1, kLoc); }) == "view-partition-dim");
  CHECK(rule_of([&] { ir::select(m, full(m), 1, 8, kLoc); }) == "view-out-of-range");
}

TEST_CASE("permute", "[core][views]") {
  const TensorDecl h = hbm({2, 3, 4});
  const std::vector<int> order{2, 0, 1};
  const View p = ir::permute(h, full(h), order, kLoc);
  CHECK(p.shape() == std::vector<int64_t>{4, 2, 3});
  CHECK(p.dims == Pattern{{1, 4}, {12, 2}, {4, 3}});
  // result(a, b, c) = original(b, c, a)
  CHECK(addressed(p) == grid({4, 2, 3}, [](auto& i) { return i[1] * 12 + i[2] * 4 + i[0]; }));
  const std::vector<int> neg{-1, 0, 1};
  CHECK(ir::permute(h, full(h), neg, kLoc) == p);

  const TensorDecl t = sbuf({128, 4, 8});
  const std::vector<int> keep0{0, 2, 1};
  const View q = ir::permute(t, full(t), keep0, kLoc);
  CHECK(q.dims == Pattern{{32, 128}, {1, 8}, {8, 4}});
  CHECK(addressed(q) == grid({128, 8, 4}, [](auto& i) { return i[0] * 32 + i[2] * 8 + i[1]; }));
  check_ok(t, q);

  const std::vector<int> move0{1, 0, 2}, repeat{0, 1, 1}, short_order{0, 1};
  CHECK(rule_of([&] { ir::permute(t, full(t), move0, kLoc); }) == "view-partition-dim");
  CHECK(rule_of([&] { ir::permute(h, full(h), repeat, kLoc); }) == "view-permute");
  CHECK(rule_of([&] { ir::permute(h, full(h), short_order, kLoc); }) == "view-permute");
  // HBM tensors have no partition dim: moving dim 0 is fine.
  CHECK(ir::permute(h, full(h), move0, kLoc).shape() == std::vector<int64_t>{3, 2, 4});
}

TEST_CASE("broadcast, expand_dim, squeeze_dim", "[core][views]") {
  const TensorDecl col = sbuf({128, 1});
  const View b = ir::broadcast(col, full(col), 1, 16, kLoc);
  CHECK(b.dims == Pattern{{1, 128}, {0, 16}});
  CHECK(addressed(b) == grid({128, 16}, [](auto& i) { return i[0]; }));
  check_ok(col, b);
  CHECK(rule_of([&] { ir::broadcast(col, full(col), 0, 4, kLoc); }) == "view-partition-dim");
  const TensorDecl t = sbuf({128, 64});
  CHECK(rule_of([&] { ir::broadcast(t, full(t), 1, 4, kLoc); }) == "view-broadcast");
  CHECK(rule_of([&] { ir::broadcast(col, full(col), 1, 0, kLoc); }) == "view-broadcast");
  const TensorDecl row = hbm({1, 8});
  const View hb = ir::broadcast(row, full(row), 0, 4, kLoc);  // HBM: dim 0 may broadcast
  CHECK(addressed(hb) == grid({4, 8}, [](auto& i) { return i[1]; }));

  const View e1 = ir::expand_dim(t, full(t), 1, kLoc);
  CHECK(e1.shape() == std::vector<int64_t>{128, 1, 64});
  CHECK(addressed(e1) == grid({128, 64}, [](auto& i) { return i[0] * 64 + i[1]; }));
  const View e2 = ir::expand_dim(t, full(t), -1, kLoc);  // -1: after the last dim
  CHECK(e2.shape() == std::vector<int64_t>{128, 64, 1});
  CHECK(rule_of([&] { ir::expand_dim(t, full(t), 0, kLoc); }) == "view-partition-dim");
  CHECK(rule_of([&] { ir::expand_dim(t, full(t), 4, kLoc); }) == "view-dim");
  CHECK(ir::expand_dim(row, full(row), 0, kLoc).shape() == std::vector<int64_t>{1, 1, 8});

  const View s = ir::squeeze_dim(t, e1, 1, kLoc);
  CHECK(s == full(t));
  const TensorDecl t3 = sbuf({128, 1, 64});
  const View s3 = ir::squeeze_dim(t3, full(t3), 1, kLoc);
  CHECK(s3.shape() == std::vector<int64_t>{128, 64});
  CHECK(addressed(s3) == grid({128, 64}, [](auto& i) { return i[0] * 64 + i[1]; }));
  CHECK(rule_of([&] { ir::squeeze_dim(t, full(t), 1, kLoc); }) == "view-squeeze");
  const TensorDecl one = sbuf({1, 64});
  CHECK(rule_of([&] { ir::squeeze_dim(one, full(one), 0, kLoc); }) == "view-partition-dim");
}

TEST_CASE("reshape", "[core][views]") {
  const TensorDecl h = hbm({4, 6});
  const std::vector<int64_t> s2x12{2, 12}, s3xm1{3, -1}, s24{24}, s5x5{5, 5}, s4x3x1{4, 3, 1};
  const View r = ir::reshape(h, full(h), s2x12, kLoc);
  CHECK(r.dims == Pattern{{12, 2}, {1, 12}});
  CHECK(addressed(r) == grid({2, 12}, [](auto& i) { return i[0] * 12 + i[1]; }));
  CHECK(ir::reshape(h, full(h), s3xm1, kLoc).shape() == std::vector<int64_t>{3, 8});
  CHECK(rule_of([&] { ir::reshape(h, full(h), s5x5, kLoc); }) == "view-reshape");
  const std::vector<int64_t> two_infer{-1, -1}, zero{0, 24};
  CHECK(rule_of([&] { ir::reshape(h, full(h), two_infer, kLoc); }) == "view-reshape");
  CHECK(rule_of([&] { ir::reshape(h, full(h), zero, kLoc); }) == "view-reshape");

  SECTION("leading-row slices stay contiguous") {
    const View rows = idx(h, {Index::range(1, 3)});  // rows 1..2 = flat 6..17
    const std::vector<int64_t> s12{12};
    const View flat = ir::reshape(h, rows, s12, kLoc);
    CHECK(addressed(flat) == grid({12}, [](auto& i) { return 6 + i[0]; }));
  }
  SECTION("a column slice cannot be flattened without copying") {
    const View cols = idx(h, {Index::all(), Index::range(0, 3)});
    const std::vector<int64_t> s12{12};
    CHECK(rule_of([&] { ir::reshape(h, cols, s12, kLoc); }) == "view-reshape");
    // Splitting off a unit dim is still fine.
    const View u = ir::reshape(h, cols, s4x3x1, kLoc);
    CHECK(addressed(u) == grid({4, 3}, [](auto& i) { return i[0] * 6 + i[1]; }));
  }
  SECTION("a permuted view cannot be flattened") {
    const std::vector<int> t10{1, 0};
    const View p = ir::permute(h, full(h), t10, kLoc);
    CHECK(rule_of([&] { ir::reshape(h, p, s24, kLoc); }) == "view-reshape");
  }
  SECTION("an every-other-column view is one stride-2 run") {
    const TensorDecl m = hbm({16, 8});
    const View even = idx(m, {Index::all(), Index::range(std::nullopt, std::nullopt, 2)});
    const std::vector<int64_t> s64{64}, s16x2x2{16, 2, 2};
    const View flat = ir::reshape(m, even, s64, kLoc);
    CHECK(flat.dims == Pattern{{2, 64}});
    CHECK(addressed(flat) == grid({64}, [](auto& i) { return 2 * i[0]; }));
    const View split = ir::reshape(m, even, s16x2x2, kLoc);
    CHECK(split.dims == Pattern{{8, 16}, {4, 2}, {2, 2}});
    CHECK(addressed(split) == addressed(even));
  }
  SECTION("on-chip reshape keeps the partition dim") {
    const TensorDecl t = sbuf({128, 4, 8});
    const std::vector<int64_t> s128x32{128, 32}, s128x2x16{128, 2, 16}, s64x64{64, 64}, sm1x32{-1, 32};
    const View a = ir::reshape(t, full(t), s128x32, kLoc);
    CHECK(a.dims == Pattern{{32, 128}, {1, 32}});
    check_ok(t, a);
    const View b = ir::reshape(t, full(t), s128x2x16, kLoc);
    CHECK(addressed(b) == grid({128, 2, 16}, [](auto& i) { return i[0] * 32 + i[1] * 16 + i[2]; }));
    CHECK(rule_of([&] { ir::reshape(t, full(t), s64x64, kLoc); }) == "view-partition-dim");
    CHECK(ir::reshape(t, full(t), sm1x32, kLoc) == a);
    // A sliced partition range keeps its exact partition step.
    const View part = idx(t, {Index::ds(8, 16)});
    const std::vector<int64_t> s16x32{16, 32};
    const View pr = ir::reshape(t, part, s16x32, kLoc);
    CHECK(pr.dims[0] == ApDim{32, 16});
    CHECK(addressed(pr) == grid({16, 32}, [](auto& i) { return (8 + i[0]) * 32 + i[1]; }));
    check_ok(t, pr);
  }
}

TEST_CASE("reshape_dim and flatten_dims", "[core][views]") {
  const TensorDecl t = sbuf({128, 64});
  const std::vector<int64_t> s8xm1{8, -1}, s4x4{4, 4};
  const View r = ir::reshape_dim(t, full(t), 1, s8xm1, kLoc);
  CHECK(r.shape() == std::vector<int64_t>{128, 8, 8});
  CHECK(r.dims == Pattern{{64, 128}, {8, 8}, {1, 8}});
  CHECK(addressed(r) == grid({128, 8, 8}, [](auto& i) { return i[0] * 64 + i[1] * 8 + i[2]; }));
  CHECK(rule_of([&] { ir::reshape_dim(t, full(t), 0, s8xm1, kLoc); }) == "view-partition-dim");
  CHECK(rule_of([&] { ir::reshape_dim(t, full(t), 1, s4x4, kLoc); }) == "view-reshape");

  const TensorDecl t3 = sbuf({128, 4, 8});
  const View f = ir::flatten_dims(t3, full(t3), 1, 2, kLoc);
  CHECK(f.dims == Pattern{{32, 128}, {1, 32}});
  CHECK(addressed(f) == grid({128, 32}, [](auto& i) { return i[0] * 32 + i[1]; }));
  CHECK(rule_of([&] { ir::flatten_dims(t3, full(t3), 0, 1, kLoc); }) == "view-partition-dim");
  CHECK(rule_of([&] { ir::flatten_dims(t3, full(t3), 2, 1, kLoc); }) == "view-flatten");

  const TensorDecl h = hbm({2, 3, 4});
  const View hf = ir::flatten_dims(h, full(h), 0, 1, kLoc);
  CHECK(hf.shape() == std::vector<int64_t>{6, 4});
  CHECK(addressed(hf) == grid({6, 4}, [](auto& i) { return i[0] * 4 + i[1]; }));
  const std::vector<int> swap{0, 2, 1};
  const View p = ir::permute(h, full(h), swap, kLoc);
  CHECK(rule_of([&] { ir::flatten_dims(h, p, 1, 2, kLoc); }) == "view-reshape");
}

TEST_CASE("bitcast (view(dtype))", "[core][views]") {
  const TensorDecl t = sbuf({128, 64});  // float32
  SECTION("float32 -> bfloat16 doubles the last dim") {
    const View v = ir::bitcast(t, full(t), DType::bfloat16, kLoc);
    CHECK(v.dtype == DType::bfloat16);
    CHECK(v.dims == Pattern{{128, 128}, {1, 128}});
    // In bf16 units each partition holds 128 elements.
    CHECK(addressed(v) == grid({128, 128}, [](auto& i) { return i[0] * 128 + i[1]; }));
    check_ok(t, v);
  }
  SECTION("bitcast of a slice rescales the offset") {
    const View s = ir::slice(t, full(t), 1, 8, 24, 1, kLoc);
    const View v = ir::bitcast(t, s, DType::bfloat16, kLoc);
    CHECK(v.offset == 16);
    CHECK(v.dims == Pattern{{128, 128}, {1, 32}});
    CHECK(addressed(v) == grid({128, 32}, [](auto& i) { return i[0] * 128 + 16 + i[1]; }));
    check_ok(t, v);
  }
  SECTION("bfloat16 -> float32 halves the last dim") {
    const TensorDecl b = sbuf({128, 64}, DType::bfloat16);
    const View v = ir::bitcast(b, full(b), DType::float32, kLoc);
    CHECK(v.dims == Pattern{{32, 128}, {1, 32}});
    // fp32 element j of partition p covers bf16 elements 2j, 2j+1 of that partition.
    CHECK(addressed(v) == grid({128, 32}, [](auto& i) { return i[0] * 32 + i[1]; }));
    check_ok(b, v);
    const View v8 = ir::bitcast(b, full(b), DType::uint8, kLoc);
    CHECK(v8.dims == Pattern{{128, 128}, {1, 128}});
    CHECK(addressed(v8) == grid({128, 128}, [](auto& i) { return i[0] * 128 + i[1]; }));
    // A bitcast of a row range keeps the partition offset in the new units.
    const View rows = ir::bitcast(b, idx(b, {Index::ds(4, 2), Index::ds(2, 4)}), DType::float32, kLoc);
    CHECK(rows.offset == 4 * 32 + 1);
    CHECK(addressed(rows) == grid({2, 2}, [](auto& i) { return (4 + i[0]) * 32 + 1 + i[1]; }));
    check_ok(b, rows);
  }
  SECTION("same size only changes the dtype") {
    const View v = ir::bitcast(t, full(t), DType::int32, kLoc);
    CHECK(v.dtype == DType::int32);
    CHECK(v.dims == full(t).dims);
    CHECK(addressed(v) == addressed(full(t)));
  }
  SECTION("errors") {
    const View strided = idx(t, {Index::all(), Index::range(std::nullopt, std::nullopt, 2)});
    CHECK(rule_of([&] { ir::bitcast(t, strided, DType::bfloat16, kLoc); }) == "view-bitcast");
    const TensorDecl odd = sbuf({128, 3}, DType::bfloat16);
    CHECK(rule_of([&] { ir::bitcast(odd, full(odd), DType::float32, kLoc); }) == "view-bitcast");
    const TensorDecl b = sbuf({128, 4}, DType::bfloat16);
    const View off1 = ir::slice(b, full(b), 1, 1, 3, 1, kLoc);  // starts half way into an fp32
    CHECK(rule_of([&] { ir::bitcast(b, off1, DType::float32, kLoc); }) == "view-bitcast");
  }
}

TEST_CASE("ap: raw access pattern over the storage", "[core][views]") {
  const TensorDecl t = sbuf({128, 64});
  const View sliced = ir::slice(t, full(t), 1, 8, 24, 1, kLoc);
  SECTION("ignores the pattern it is called on, keeps its offset when none is given") {
    const View v = ir::ap(t, sliced, {{64, 128}, {2, 4}}, std::nullopt, std::nullopt, kLoc);
    CHECK(v.offset == 8);
    CHECK(v.dtype == DType::float32);
    CHECK(addressed(v) == grid({128, 4}, [](auto& i) { return i[0] * 64 + 8 + 2 * i[1]; }));
    const View w = ir::ap(t, sliced, {{64, 2}, {1, 3}}, 130, std::nullopt, kLoc);
    CHECK(addressed(w) == Flat{130, 131, 132, 194, 195, 196});
    check_ok(t, w);
  }
  SECTION("dtype reinterprets, counts in new elements") {
    const View v = ir::ap(t, full(t), {{128, 128}, {1, 128}}, 0, DType::bfloat16, kLoc);
    CHECK(v.dtype == DType::bfloat16);
    check_ok(t, v);
  }
  SECTION("errors") {
    CHECK(rule_of([&] { ir::ap(t, full(t), {}, 0, std::nullopt, kLoc); }) == "view-ap");
    CHECK(rule_of([&] { ir::ap(t, full(t), {{64, 128}, {1, 0}}, 0, std::nullopt, kLoc); }) == "view-ap");
  }
}

TEST_CASE("check_view: partition limit, partition step, bounds", "[core][views]") {
  const TensorDecl t = sbuf({128, 64});
  auto check = [&](const View& v) { return rule_of([&] { ir::check_view(t, v, "src", kLoc); }); };
  auto ap = [&](Pattern p, int64_t off, std::optional<DType> d = std::nullopt) {
    return ir::ap(t, full(t), p, off, d, kLoc);
  };
  check_ok(t, full(t));
  check_ok(t, ap({{64, 128}, {1, 64}}, 0));
  check_ok(t, ap({{7, 1}, {1, 64}}, 64 * 127));  // one partition: its step is irrelevant
  CHECK(check(ap({{64, 129}, {1, 64}}, 0)) == "partition-limit");
  CHECK(check(ap({{32, 4}, {1, 32}}, 0)) == "view-partition-step");
  CHECK(check(ap({{128, 64}, {1, 64}}, 0)) == "view-partition-step");  // every other partition
  CHECK(check(idx(t, {Index::range(0, 128, 2)})) == "view-partition-step");
  CHECK(check(ap({{64, 128}, {1, 64}}, 1)) == "view-out-of-range");       // spills into the next partition
  CHECK(check(ap({{64, 32}, {1, 8}}, 64 * 100)) == "view-out-of-range");  // partitions 100..131
  CHECK(check(ap({{64, 2}, {-1, 2}}, 0)) == "view-out-of-range");         // free index -1
  CHECK(check(ap({{64, 2}, {1, 4}}, -1)) == "view-out-of-range");
  CHECK(check(ap({{64, 1}, {1, 65}}, 0)) == "view-out-of-range");
  // Reinterpreted: bf16 partitions hold 128 elements.
  check_ok(t, ap({{128, 128}, {1, 128}}, 0, DType::bfloat16));
  CHECK(check(ap({{64, 128}, {1, 64}}, 0, DType::bfloat16)) == "view-partition-step");
  const TensorDecl odd = sbuf({128, 3}, DType::bfloat16);  // 6 bytes per partition
  CHECK(rule_of([&] {
          ir::check_view(odd, ir::ap(odd, full(odd), {{1, 128}, {1, 1}}, 0, DType::float32, kLoc), "x", kLoc);
        }) == "view-bitcast");

  // The message names the limit and the operand.
  try {
    ir::check_view(t, ap({{64, 129}, {1, 64}}, 0), "moving", kLoc);
    FAIL("no error");
  } catch (const knit::Error& e) {
    CHECK(e.message().find("128") != std::string::npos);
    CHECK(e.message().find("129") != std::string::npos);
    CHECK(e.message().find("moving") != std::string::npos);
  }

  const TensorDecl h = hbm({4, 6});
  auto hcheck = [&](Pattern p, int64_t off) {
    return rule_of([&] { ir::check_view(h, ir::ap(h, full(h), p, off, std::nullopt, kLoc), "dst", kLoc); });
  };
  CHECK(hcheck({{1, 24}}, 0) == "<no error>");
  CHECK(hcheck({{1, 25}}, 0) == "view-out-of-range");
  CHECK(hcheck({{6, 4}, {1, 6}}, 1) == "view-out-of-range");
  CHECK(hcheck({{-6, 4}, {1, 6}}, 18) == "<no error>");  // rows reversed
  CHECK(hcheck({{-6, 4}, {1, 6}}, 17) == "view-out-of-range");
  // HBM storage counted in the view's dtype: 24 fp32 = 48 bf16.
  CHECK(rule_of([&] { ir::check_view(h, ir::ap(h, full(h), {{1, 48}}, 0, DType::bfloat16, kLoc), "dst", kLoc); }) ==
        "<no error>");
  CHECK(rule_of([&] { ir::check_view(h, ir::ap(h, full(h), {{1, 49}}, 0, DType::bfloat16, kLoc), "dst", kLoc); }) ==
        "view-out-of-range");
}

TEST_CASE("view_partitions and view_free_size", "[core][views]") {
  const TensorDecl t = sbuf({128, 4, 8});
  CHECK(ir::view_partitions(t, full(t)) == 128);
  CHECK(ir::view_free_size(t, full(t)) == 32);
  const View part = idx(t, {Index::ds(0, 16), Index::at(1)});
  CHECK(ir::view_partitions(t, part) == 16);
  CHECK(ir::view_free_size(t, part) == 8);
  const TensorDecl h = hbm({4, 6});
  CHECK(ir::view_partitions(h, full(h)) == 1);
  CHECK(ir::view_free_size(h, full(h)) == 24);
}
