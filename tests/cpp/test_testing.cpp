// <knit/testing.h>: tolerances from the rounding model, ULP distances counted by hand, failure
// messages by content, generators, and the latency matcher on the deterministic simulator.
// The Python twin is tests/python/test_testing.py (which also checks the two tolerance tables agree).
#include <cmath>
#include <fstream>
#include <iterator>
#include <set>

#include <knit/testing.h>
#include <catch2/catch.hpp>

#include "kernels.h"

using namespace knit;
namespace kt = knit::testing;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

TEST_CASE("default rtol is two roundings of narrow formats, 256 ULPs of fp32", "[testing]") {
  CHECK(kt::tolerance(nl::bfloat16).rtol == std::ldexp(2.0, -8));
  CHECK(kt::tolerance(nl::float16).rtol == std::ldexp(2.0, -11));
  CHECK(kt::tolerance(nl::float8_e4m3).rtol == std::ldexp(2.0, -4));
  CHECK(kt::tolerance(nl::float8_e5m2).rtol == std::ldexp(2.0, -3));
  CHECK(kt::tolerance(nl::float32).rtol == 256 * std::ldexp(1.0, -24));
  // atol = rtol * scale + smallest subnormal (e4m3: 2^-9, e5m2: 2^-16).
  CHECK(kt::tolerance(nl::float8_e4m3, 0).atol == std::ldexp(1.0, -9));
  CHECK(kt::tolerance(nl::float8_e5m2, 0).atol == std::ldexp(1.0, -16));
  CHECK(kt::tolerance(nl::bfloat16, 64).atol == std::ldexp(1.0, -7) * 64 + std::ldexp(1.0, -133));
  CHECK(kt::tolerance(nl::int32, 5).rtol == 0);
  CHECK(kt::tolerance(nl::int32, 5).atol == 0);
}

TEST_CASE("ULP distances are counted in the output dtype", "[testing]") {
  CHECK(kt::ulp_distance(nl::bfloat16, 1.0, 1.0078125) == 1);
  CHECK(kt::ulp_distance(nl::bfloat16, 2.0, 1.0 - std::ldexp(1.0, -8)) == 129);
  CHECK(kt::ulp_distance(nl::bfloat16, 0.0, -0.0) == 0);
  CHECK(kt::ulp_distance(nl::bfloat16, std::ldexp(1.0, -133), -std::ldexp(1.0, -133)) == 2);
  CHECK(kt::ulp_distance(nl::bfloat16, ir::max_finite(nl::bfloat16), INFINITY) == 1);
  CHECK(kt::ulp_distance(nl::float32, 1.0, 1.0 + std::ldexp(1.0, -23)) == 1);
  CHECK(kt::ulp_distance(nl::float8_e4m3, 1.0, 1.125) == 1);
  CHECK(kt::ulp_distance(nl::float8_e5m2, -1.0, 1.0) == 2 * 0x3C);
  CHECK(kt::ulp_distance(nl::float32, NAN, 1.0) == -1);
}

TEST_CASE("a mismatch report names the worst elements, their indices, values and ULPs", "[testing]") {
  std::vector<float> v(32);
  std::vector<double> expected(32);
  for (int i = 0; i < 32; ++i) expected[i] = v[i] = 1.0f + i / 31.0f;
  HostTensor actual = HostTensor::from_floats(nl::bfloat16, {4, 8}, v);
  actual.set(2 * 8 + 5, actual.get(2 * 8 + 5) + 5 * 0.0078125f);  // 5 ULPs off in [1, 2)
  actual.set(1 * 8 + 1, actual.get(1 * 8 + 1) + 0.0625f);         // 8 ULPs off: the worst
  const std::string msg = kt::mismatch_report(actual, expected);
  CHECK_THAT(msg, StartsWith("result (bfloat16[4, 8]) differs from the reference: 2 of 32 elements (6.25%)"));
  CHECK_THAT(msg, Contains("with rtol=0.00781") && Contains("defaults for bfloat16"));
  CHECK_THAT(msg, Contains("\n  (1, 1): 1.3515625 vs 1.29032254, ") && Contains(", 8 ULPs\n  (2, 5): "));
  CHECK_THAT(msg, Contains(", 5 ULPs\nthe mismatches lie within [1:3, 1:6]\nlargest ULP distance 8 at (1, 1)"));

  HostTensor with_nan = HostTensor::from_floats(nl::float32, {2}, std::vector<float>{1.0f, NAN});
  CHECK_THAT(kt::mismatch_report(with_nan, {1.0, 2.0}),
             Contains("(1,): nan vs 2") && Contains("ULPs n/a (NaN)") &&
                 Contains("NaN: 1 in the result where the reference has none (first at (1,))"));
  CHECK(kt::mismatch_report(with_nan, {1.0, NAN}).empty());
  CHECK_THAT(kt::mismatch_report(with_nan, {1.0}), Contains("has 2 elements but the reference has 1"));
  // A reference overflowing bf16 expects the inf the hardware writes.
  HostTensor inf = HostTensor::from_floats(nl::bfloat16, {1}, std::vector<float>{INFINITY});
  CHECK(kt::mismatch_report(inf, {2 * ir::max_finite(nl::bfloat16)}).empty());
  CHECK_THAT(kt::mismatch_report(inf, {1.0}), Contains("inf: 1 in the result where the reference has none"));
}

TEST_CASE("IsCloseTo carries the report into Catch's message", "[testing]") {
  HostTensor t = HostTensor::from_floats(nl::float32, {2, 2}, std::vector<float>{1, 2, 3, 4});
  kt::IsCloseTo same({1, 2, 3, 4});
  CHECK(same.match(t));
  kt::IsCloseTo off({1, 2, 3, 4.5}, {.rtol = 0.01});
  CHECK_FALSE(off.match(t));
  CHECK_THAT(off.describe(), Contains("(1, 1): 4 vs 4.5") && Contains("rtol=0.01"));
  CHECK(Catch::Detail::stringify(t) == "float32[2, 2] tensor");
}

TEST_CASE("edge values hold every special value, and generators are reproducible", "[testing]") {
  for (ir::DType d : {nl::float32, nl::bfloat16, nl::float16, nl::float8_e4m3, nl::float8_e5m2}) {
    INFO(ir::to_string(d));
    const HostTensor h = kt::edge_values({16, 16}, d, 2, {.nan = true, .inf = true});
    const std::vector<double> v = kt::values(h);
    for (float s : kt::special_values(d, {.nan = true, .inf = true}))
      CHECK(std::any_of(v.begin(), v.end(), [&](double x) {
        return (std::isnan(s) && std::isnan(x)) || (x == s && std::signbit(x) == std::signbit(s));
      }));
  }
  CHECK_THROWS_WITH(kt::special_values(nl::float8_e4m3fn, {.inf = true}), Contains("has no infinity"));
  CHECK(kt::values(kt::normal({64}, nl::bfloat16, 7)) == kt::values(kt::normal({64}, nl::bfloat16, 7)));
  CHECK(kt::values(kt::normal({64}, nl::bfloat16, 7)) != kt::values(kt::normal({64}, nl::bfloat16, 8)));
}

TEST_CASE("simulated latency is the same run to run, and LatencyAtMost shows the profile", "[testing]") {
  HostTensor x = kt::normal({256, 512}, nl::float32, 1);
  ir::Kernel k = trace("softmax", examples::softmax, {kt::spec_of(x, "x")}, ir::Target::trn1);
  const kt::Profile a = kt::profile(k, {x}), b = kt::profile(k, {kt::placeholder({256, 512}, nl::float32)});
  CHECK(a.report.total_ns == b.report.total_ns);  // timing does not depend on the data
  CHECK(a.report.busy_ns == b.report.busy_ns);
  CHECK(b.outputs.empty());
  CHECK(kt::LatencyAtMost(a.latency_us()).match(a));
  kt::LatencyAtMost tight(a.latency_us() - 0.001);
  CHECK_FALSE(tight.match(a));
  const std::string path = kt::trace_path_for(a);
  CHECK_THAT(tight.describe(), Contains("us (simulated)\nPerfetto trace: " + path));
  std::ifstream trace(path);
  const std::string json((std::istreambuf_iterator<char>(trace)), std::istreambuf_iterator<char>());
  size_t events = 0;
  for (size_t at = json.find("\"ph\": \"X\""); at != std::string::npos; at = json.find("\"ph\": \"X\"", at + 1))
    ++events;
  CHECK(events == a.report.timeline.size());
  CHECK_THAT(json, StartsWith("{\"displayTimeUnit\": \"ns\", \"traceEvents\": [{\"name\": \"dma_copy\""));
  CHECK(json == sim::chrome_trace_json(a.program_kernel, a.report.timeline));  // the one writer, shared with Python
  const std::string shown = Catch::Detail::stringify(a);
  CHECK_THAT(shown,
             Contains("kernel softmax on trn1 (NC-v2): ") && Contains("  engine       busy us    util    instrs"));
  const kt::Profile on_trn3 = kt::profile(k, {x}, ir::Target::trn3);
  CHECK(on_trn3.target == ir::Target::trn3);
  CHECK(on_trn3.report.total_ns < a.report.total_ns);  // a later generation, faster engines
  CHECK_THAT(on_trn3.outputs[0], kt::IsCloseTo(a.outputs[0], {.rtol = 0, .atol = 0}));  // same numerics
}
