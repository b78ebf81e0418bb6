// #include <knit/testing.h> — unit tests of C++ kernels on the simulator, in your Catch2 binary.
//
//   auto x = knit::testing::normal({256, 512}, nl::bfloat16, /*seed=*/1);
//   ir::Kernel k = knit::trace("softmax", softmax, {knit::testing::spec_of(x, "x")});
//   auto prof = knit::testing::profile(k, {x});                     // engine program: run + time
//   REQUIRE_THAT(prof.outputs[0], knit::testing::IsCloseTo(my_reference(x)));
//   REQUIRE_THAT(prof, knit::testing::LatencyAtMost(30.0));          // simulated microseconds
//
// The same rules as Python's knit.testing (docs/testing.md): an element passes when
// |actual - expected| <= atol + rtol * |expected|; rtol defaults per output dtype (table below),
// atol to rtol * max|expected| + the dtype's smallest subnormal; NaN matches NaN, an infinity only
// itself, and where the reference overflows the output dtype the expected value is what the
// hardware writes (+-inf, NaN for float8_e4m3fn). A failure lists the worst elements with their
// indices, values and distance in ULPs of the output dtype. Simulated latency is deterministic.
//
// Link against knit::knit (knit_dsl) and Catch2. Catch2 v2 (<catch2/catch.hpp>) and v3 are both
// recognised; without Catch2 the helpers work and only the matchers are left out.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "knit/codegen/lower.h"
#include "knit/knit.h"
#include "knit/sim/machine_config.h"
#include "knit/sim/timing.h"
#include "knit/sim/trace.h"

#if __has_include(<catch2/matchers/catch_matchers.hpp>)
#include <catch2/catch_tostring.hpp>
#include <catch2/matchers/catch_matchers.hpp>
#define KNIT_TESTING_MATCHER_BASE Catch::Matchers::MatcherBase
#elif __has_include(<catch2/catch.hpp>)
#include <catch2/catch.hpp>
#define KNIT_TESTING_MATCHER_BASE Catch::MatcherBase
#endif

namespace knit::testing {

// ---- tolerances -------------------------------------------------------------------------------

// dtype, significant bits p, log2(rtol): rtol = 2 * 2^-p (two roundings) for the narrow formats,
// 2^-16 = 256 ULPs for fp32 (reductions in fp32 engines). The same table as
// python/knit/testing/tolerances.py (tests/python/test_testing.py compares them).
#define KNIT_TESTING_TOLERANCES(X) \
  X(float32, 24, -16)              \
  X(tfloat32, 24, -16)             \
  X(float16, 11, -10)              \
  X(bfloat16, 8, -7)               \
  X(float8_e4m3, 4, -3)            \
  X(float8_e4m3fn, 4, -3)          \
  X(float8_e5m2, 3, -2)

struct Tolerance {
  double rtol = 0, atol = 0;
};

// The smallest positive subnormal of a float dtype: the value of code 1.
inline double smallest_subnormal(ir::DType t) {
  const uint8_t one[4] = {1, 0, 0, 0};
  return ir::decode(t, one);
}

// Default tolerance for results of `t` whose largest expected magnitude is `scale`
// (exact for integers and bool, and for dtypes the table does not know).
inline Tolerance tolerance(ir::DType t, double scale = 0) {
  switch (t) {
#define KNIT_X(name, bits, rtol_log2) \
  case ir::DType::name: return {std::ldexp(1.0, rtol_log2), std::ldexp(1.0, rtol_log2) * scale + smallest_subnormal(t)};
    KNIT_TESTING_TOLERANCES(KNIT_X)
#undef KNIT_X
    default: return {0, 0};
  }
}

inline bool has_ulps(ir::DType t) {
  switch (t) {
#define KNIT_X(name, bits, rtol_log2) case ir::DType::name:
    KNIT_TESTING_TOLERANCES(KNIT_X)
#undef KNIT_X
    return true;
    default: return false;
  }
}

// ---- ULP distance -----------------------------------------------------------------------------

// v rounded to t, as an integer monotonic in the value (sign-magnitude to two's complement).
inline int64_t ordered_code(ir::DType t, double v) {
  const float f = std::fabs(v) > std::numeric_limits<float>::max() ? std::copysign(INFINITY, float(v)) : float(v);
  uint8_t bytes[4] = {};
  ir::encode(t, f, bytes);
  const int64_t bits = ir::load_bits(t, bytes) & ((int64_t(1) << (8 * ir::dtype_size(t))) - 1);
  const int64_t sign = int64_t(1) << (8 * ir::dtype_size(t) - 1);
  return (bits & sign) ? -(bits & (sign - 1)) : bits;
}

// ULPs of t between a and b (both rounded to t first); -1 when either is NaN.
inline int64_t ulp_distance(ir::DType t, double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return -1;
  return std::llabs(ordered_code(t, a) - ordered_code(t, b));
}

// ---- comparing results --------------------------------------------------------------------------

inline std::vector<double> values(const sim::HostTensor& h) {
  std::vector<double> v(static_cast<size_t>(h.num_elements()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = h.get(static_cast<int64_t>(i));
  return v;
}

namespace detail {

inline std::string fmt(double x, const char* spec = "%.9g") {
  char buf[64];
  std::snprintf(buf, sizeof buf, spec, x);
  return buf;
}

// A flat index as a Python-style tuple: "(3, 7)", "(5,)".
inline std::string index_text(int64_t flat, const std::vector<int64_t>& shape) {
  std::vector<int64_t> idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = shape[d] ? flat % shape[d] : 0;
    flat = shape[d] ? flat / shape[d] : 0;
  }
  std::string s = "(";
  for (size_t d = 0; d < idx.size(); ++d) s += (d ? ", " : "") + std::to_string(idx[d]);
  return s + (idx.size() == 1 ? ",)" : ")");
}

inline std::string shape_text(ir::DType t, const std::vector<int64_t>& shape) {
  std::string s = std::string(ir::to_string(t)) + "[";
  for (size_t d = 0; d < shape.size(); ++d) s += (d ? ", " : "") + std::to_string(shape[d]);
  return s + "]";
}

// The exact reference, except where it overflows t: there, what writing it produces.
inline double expected_in(ir::DType t, double e) {
  if (!has_ulps(t) || !std::isfinite(e)) return e;
  const float r = std::fabs(e) > std::numeric_limits<float>::max() ? std::copysign(INFINITY, float(e))
                                                                   : ir::round_to(t, float(e));
  return std::isfinite(r) ? e : ir::round_to(t, r);
}

}  // namespace detail

struct CloseOptions {
  std::optional<double> rtol, atol;  // unset: the defaults for the result's dtype
  bool equal_nan = true;
  std::string name = "result";
  size_t worst_shown = 8;
};

// Empty if `actual` matches `expected` (one value per element, row-major), else the failure
// message: the worst elements with indices, values, |diff|, allowed error and ULPs.
inline std::string mismatch_report(const sim::HostTensor& actual, const std::vector<double>& expected,
                                   const CloseOptions& o = {}) {
  const std::string what = o.name + " (" + detail::shape_text(actual.dtype, actual.shape) + ")";
  if (static_cast<int64_t>(expected.size()) != actual.num_elements())
    return what + " has " + std::to_string(actual.num_elements()) + " elements but the reference has " +
           std::to_string(expected.size());
  double scale = 0;
  for (double e : expected)
    if (std::isfinite(e)) scale = std::max(scale, std::fabs(e));
  Tolerance tol = tolerance(actual.dtype, scale);
  if (o.rtol && !o.atol) tol.atol += (*o.rtol - tol.rtol) * scale;
  if (o.rtol) tol.rtol = *o.rtol;
  if (o.atol) tol.atol = *o.atol;

  struct Bad {
    int64_t i;
    double a, e, diff, allowed, ratio;
  };
  std::vector<Bad> bad;
  const std::vector<double> a = values(actual);
  std::array<int64_t, 4> only = {-1, -1, -1, -1};  // first NaN / inf only in actual / only in expected
  std::array<int64_t, 4> only_count = {};
  for (size_t i = 0; i < a.size(); ++i) {
    const double e = detail::expected_in(actual.dtype, expected[i]);
    const double diff = std::fabs(a[i] - e), allowed = tol.atol + tol.rtol * std::fabs(e);
    const bool both_nan = std::isnan(a[i]) && std::isnan(e);
    const bool same_inf = std::isinf(a[i]) && a[i] == e;
    const bool ok = (std::isfinite(e) && diff <= allowed) || same_inf || (both_nan && o.equal_nan);
    const bool flags[4] = {std::isnan(a[i]) && !std::isnan(e), std::isnan(e) && !std::isnan(a[i]),
                           std::isinf(a[i]) && !std::isinf(e), std::isinf(e) && !std::isinf(a[i])};
    for (int f = 0; f < 4; ++f)
      if (flags[f] && only_count[f]++ == 0) only[f] = static_cast<int64_t>(i);
    if (!ok)
      bad.push_back({static_cast<int64_t>(i), a[i], e, diff, allowed,
                     std::isfinite(diff) ? diff / std::max(allowed, 1e-300) : INFINITY});
  }
  if (bad.empty()) return "";
  const size_t total = a.size();
  std::stable_sort(bad.begin(), bad.end(), [](const Bad& x, const Bad& y) { return x.ratio > y.ratio; });
  const bool ulps = has_ulps(actual.dtype);
  const std::string dt(ir::to_string(actual.dtype));
  std::ostringstream m;
  m << what << " differs from the reference: " << bad.size() << " of " << total << " elements ("
    << detail::fmt(100.0 * bad.size() / total, "%.3g") << "%) exceed |actual - expected| <= atol + rtol * |expected| "
    << "with rtol=" << detail::fmt(tol.rtol, "%.3g") << ", atol=" << detail::fmt(tol.atol, "%.3g");
  if (!o.atol && tol.rtol)
    m << " (atol = rtol * max|expected| " << detail::fmt(scale, "%.4g") << (o.rtol ? "" : ", defaults for " + dt)
      << ")";
  const size_t shown = std::min(bad.size(), o.worst_shown);
  m << "\nworst " << shown << " (index: actual vs expected, |diff|, allowed" << (ulps ? ", ULPs of " + dt : "") << "):";
  for (size_t n = 0; n < shown; ++n) {
    const Bad& b = bad[n];
    m << "\n  " << detail::index_text(b.i, actual.shape) << ": " << detail::fmt(b.a) << " vs " << detail::fmt(b.e)
      << ", |diff| " << detail::fmt(b.diff) << ", allowed " << detail::fmt(b.allowed, "%.3g");
    if (ulps) {
      const int64_t u = ulp_distance(actual.dtype, b.a, b.e);
      m << (u < 0 ? ", ULPs n/a (NaN)" : ", " + std::to_string(u) + " ULPs");
    }
  }
  if (!actual.shape.empty()) {  // the smallest slice holding every mismatch: a missed tile stands out
    std::vector<int64_t> lo(actual.shape.size(), INT64_MAX), hi(actual.shape.size(), -1);
    for (const Bad& b : bad) {
      int64_t flat = b.i;
      for (size_t d = actual.shape.size(); d-- > 0;) {
        const int64_t i = actual.shape[d] ? flat % actual.shape[d] : 0;
        flat = actual.shape[d] ? flat / actual.shape[d] : 0;
        lo[d] = std::min(lo[d], i), hi[d] = std::max(hi[d], i + 1);
      }
    }
    m << "\nthe mismatches lie within [";
    for (size_t d = 0; d < lo.size(); ++d) m << (d ? ", " : "") << lo[d] << ":" << hi[d];
    m << "]";
  }
  const char* notes[4] = {
      "NaN: %lld in the result where the reference has none", "NaN: %lld in the reference where the result has none",
      "inf: %lld in the result where the reference has none", "inf: %lld in the reference where the result has none"};
  for (int f = 0; f < 4; ++f)
    if (only_count[f]) {
      char buf[96];
      std::snprintf(buf, sizeof buf, notes[f], static_cast<long long>(only_count[f]));
      m << "\n" << buf << " (first at " << detail::index_text(only[f], actual.shape) << ")";
    }
  if (ulps) {
    int64_t worst = -1, at = 0;
    for (const Bad& b : bad) {
      const int64_t u = ulp_distance(actual.dtype, b.a, b.e);
      if (u > worst) worst = u, at = b.i;
    }
    if (worst >= 0) m << "\nlargest ULP distance " << worst << " at " << detail::index_text(at, actual.shape);
  }
  return m.str();
}

// ---- inputs -------------------------------------------------------------------------------------

// Argument spec of a host tensor (for knit::trace).
inline ArgSpec spec_of(const sim::HostTensor& h, std::string name = "") { return {h.shape, h.dtype, std::move(name)}; }

// A shape/dtype placeholder: profile() of placeholders is a timing-only run.
inline sim::HostTensor placeholder(std::vector<int64_t> shape, ir::DType dtype) {
  return {dtype, std::move(shape), {}};
}

namespace detail {
inline int64_t count(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}
template <class Dist>
sim::HostTensor draw(std::vector<int64_t> shape, ir::DType dtype, uint64_t seed, Dist dist) {
  std::mt19937_64 rng(seed);
  std::vector<float> v(static_cast<size_t>(count(shape)));
  for (float& x : v) x = static_cast<float>(dist(rng));
  return sim::HostTensor::from_floats(dtype, std::move(shape), v);
}
}  // namespace detail

// Normally distributed values rounded to dtype (reproducible by seed; not NumPy's stream).
inline sim::HostTensor normal(std::vector<int64_t> shape, ir::DType dtype, uint64_t seed = 0, double mean = 0,
                              double stddev = 1) {
  return detail::draw(std::move(shape), dtype, seed, std::normal_distribution<double>(mean, stddev));
}
// Values uniform in [low, high) rounded to dtype.
inline sim::HostTensor uniform(std::vector<int64_t> shape, ir::DType dtype, uint64_t seed = 0, double low = -1,
                               double high = 1) {
  return detail::draw(std::move(shape), dtype, seed, std::uniform_real_distribution<double>(low, high));
}

struct EdgeOptions {
  bool nan = false, inf = false;
  double fraction = 0.25;  // share of the elements replaced by special values
};

// The special values of a float dtype: +-0, +-smallest subnormal, the largest subnormal, +-smallest
// normal, +-1, the neighbours of 1, +-largest finite; NaN and +-inf when asked. Throws
// std::invalid_argument for non-float dtypes and for inf of a dtype without infinity.
inline std::vector<float> special_values(ir::DType t, const EdgeOptions& o = {}) {
  int p = 0;  // significant bits
  switch (t) {
#define KNIT_X(name, bits, rtol_log2) \
  case ir::DType::name: p = bits; break;
    KNIT_TESTING_TOLERANCES(KNIT_X)
#undef KNIT_X
    default: throw std::invalid_argument("special_values: " + std::string(ir::to_string(t)) + " is not a float dtype");
  }
  if (o.inf && !std::isinf(ir::round_to(t, INFINITY)))
    throw std::invalid_argument(std::string(ir::to_string(t)) +
                                " has no infinity (it becomes NaN); ask for nan instead");
  const float sub = static_cast<float>(smallest_subnormal(t)), big = static_cast<float>(ir::max_finite(t));
  const float tiny = std::ldexp(sub, p - 1);  // values below it are spaced `sub` apart
  std::vector<float> v = {0.0f,
                          -0.0f,
                          sub,
                          -sub,
                          tiny - sub,
                          tiny,
                          -tiny,
                          1.0f,
                          -1.0f,
                          1.0f + std::ldexp(1.0f, 1 - p),
                          1.0f - std::ldexp(1.0f, -p),
                          big,
                          -big};
  if (o.nan) v.push_back(NAN);
  if (o.inf) v.insert(v.end(), {INFINITY, -INFINITY});
  return v;
}

// Standard-normal values with `fraction` of the elements (at least one of each special value
// when there is room) replaced by special_values at random places.
inline sim::HostTensor edge_values(std::vector<int64_t> shape, ir::DType dtype, uint64_t seed = 0,
                                   const EdgeOptions& o = {}) {
  sim::HostTensor h = normal(shape, dtype, seed);
  const std::vector<float> specials = special_values(dtype, o);
  const int64_t n = h.num_elements();
  const int64_t k = std::min<int64_t>(n, std::max<int64_t>(specials.size(), std::llround(o.fraction * n)));
  std::vector<int64_t> places(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) places[i] = i;
  std::mt19937_64 rng(seed ^ 0x9e3779b97f4a7c15ull);
  std::shuffle(places.begin(), places.end(), rng);
  for (int64_t j = 0; j < k; ++j) h.set(places[j], specials[static_cast<size_t>(j) % specials.size()]);
  return h;
}

// ---- timing -------------------------------------------------------------------------------------

struct Profile {
  std::string kernel;
  ir::Target target = ir::Target::trn2;
  sim::TimingReport report;
  double launch_ns = 0;
  const char* core_name = "";
  std::vector<sim::HostTensor> outputs;                     // empty for a timing-only run
  std::vector<std::pair<std::string, std::string>> source;  // per body instruction: opcode, file:line
  ir::Kernel program_kernel;  // the engine program's kernel (its trace names its instructions)

  double latency_us() const { return report.total_ns / 1e3; }
  // Busy fraction of the run (launch overhead included) of one queue.
  double utilization(codegen::Queue q) const {
    return report.total_ns ? report.busy_ns[static_cast<int>(q)] / report.total_ns : 0.0;
  }
  std::string summary() const {
    std::ostringstream s;
    s << "kernel " << kernel << " on " << ir::to_string(target) << " (" << core_name
      << "): " << detail::fmt(latency_us(), "%.2f") << " us (includes " << detail::fmt(launch_ns / 1e3, "%.1f")
      << " us launch overhead)\n  engine       busy us    util    instrs";
    for (int q = 0; q < codegen::kNumQueues; ++q) {
      if (!report.instructions[q]) continue;
      char row[96];
      std::snprintf(row, sizeof row, "\n  %-8s%12.2f%7.1f%%%10lld", codegen::queue_name(static_cast<codegen::Queue>(q)),
                    report.busy_ns[q] / 1e3, 100 * utilization(static_cast<codegen::Queue>(q)),
                    static_cast<long long>(report.instructions[q]));
      s << row;
    }
    s << "\n  DMA: " << detail::fmt(report.dma_bytes / 1e6, "%.2f") << " MB, bandwidth in use "
      << detail::fmt(report.total_ns ? 100 * report.dma_active_ns / report.total_ns : 0, "%.1f") << "% of the time";
    return s.str();
  }
};

// Lowers `kernel` for `target` (default: the kernel's own), runs its engine program on `args`
// (with the race checker) and times the run. Arguments without bytes (placeholder()) make the run
// timing-only; then every argument must be a placeholder.
inline Profile profile(const ir::Kernel& kernel, std::vector<sim::HostTensor> args,
                       std::optional<ir::Target> target = std::nullopt) {
  codegen::LowerOptions lower_options;
  lower_options.target = target;
  const codegen::EngineProgram program = codegen::lower(kernel, lower_options);
  sim::InterpretOptions options;
  options.record_execution = true;
  options.schedule = sim::Schedule::program_order;
  options.timing_only = std::any_of(args.begin(), args.end(),
                                    [](const sim::HostTensor& h) { return h.bytes.empty() && h.num_elements() > 0; });
  sim::RunResult run = sim::run_program(program, args, options);
  const sim::MachineConfig& config = sim::machine_config(program.kernel.target);
  Profile p;
  p.kernel = program.kernel.name;
  p.target = program.kernel.target;
  p.report = sim::simulate_timing(program, run.executed, /*keep_timeline=*/true);
  for (const ir::Instruction& inst : program.kernel.body)
    p.source.emplace_back(std::string(inst.opcode_name()), inst.loc.file + ":" + std::to_string(inst.loc.line));
  p.program_kernel = program.kernel;
  p.launch_ns = config.launch_ns;
  p.core_name = config.core_name;
  if (!options.timing_only) p.outputs = std::move(run.outputs);
  return p;
}

// Writes the run's timeline as Chrome trace JSON (open in ui.perfetto.dev), the same file as
// Python's Profile.save_trace (one writer, knit/sim/trace.h).
inline std::string save_trace(const Profile& p, const std::string& path) {
  std::ofstream out(path);
  if (!out) throw std::runtime_error("cannot write the trace file " + path);
  out << sim::chrome_trace_json(p.program_kernel, p.report.timeline);
  if (!out) throw std::runtime_error("cannot write the trace file " + path);
  return path;
}

// Where a failing latency check saves its trace: $KNIT_TRACE_DIR, else <temp>/knit-traces.
inline std::string trace_path_for(const Profile& p) {
  const char* env = std::getenv("KNIT_TRACE_DIR");
  const std::filesystem::path dir = env && *env ? std::filesystem::path(env)
                                                : std::filesystem::temp_directory_path() / "knit-traces";
  std::filesystem::create_directories(dir);
  return (dir / (p.kernel + "-" + std::string(ir::to_string(p.target)) + ".json")).string();
}

#ifdef KNIT_TESTING_MATCHER_BASE

// REQUIRE_THAT(result, IsCloseTo(expected)): a HostTensor against reference values (row-major,
// one per element), with the dtype's default tolerances unless `options` sets them.
class IsCloseTo : public KNIT_TESTING_MATCHER_BASE<sim::HostTensor> {
 public:
  explicit IsCloseTo(std::vector<double> expected, CloseOptions options = {})
      : expected_(std::move(expected)), options_(std::move(options)) {}
  // Another run's tensor as the reference (e.g. the same kernel on another target).
  explicit IsCloseTo(const sim::HostTensor& expected, CloseOptions options = {})
      : IsCloseTo(values(expected), std::move(options)) {}
  bool match(const sim::HostTensor& actual) const override {
    report_ = mismatch_report(actual, expected_, options_);
    return report_.empty();
  }
  std::string describe() const override {
    return report_.empty() ? "is close to the reference" : "is close to the reference\n" + report_;
  }

 private:
  std::vector<double> expected_;
  CloseOptions options_;
  mutable std::string report_;
};

// REQUIRE_THAT(profile(k, args), LatencyAtMost(max_us)): simulated latency bound; a failure
// shows the profile summary and saves the run's trace (trace_path_for) for Perfetto.
class LatencyAtMost : public KNIT_TESTING_MATCHER_BASE<Profile> {
 public:
  explicit LatencyAtMost(double max_us) : max_us_(max_us) {}
  bool match(const Profile& p) const override {
    if (p.latency_us() <= max_us_) return true;
    trace_ = save_trace(p, trace_path_for(p));
    return false;
  }
  std::string describe() const override {
    std::string text = "is at most " + detail::fmt(max_us_) + " us (simulated)";
    return trace_.empty() ? text : text + "\nPerfetto trace: " + trace_ + " (open in ui.perfetto.dev)";
  }

 private:
  double max_us_;
  mutable std::string trace_;
};

#endif  // KNIT_TESTING_MATCHER_BASE

}  // namespace knit::testing

#ifdef KNIT_TESTING_MATCHER_BASE
// How Catch prints the tested values: tensors by dtype and shape, profiles by their summary.
template <>
struct Catch::StringMaker<knit::sim::HostTensor> {
  static std::string convert(const knit::sim::HostTensor& h) {
    return knit::testing::detail::shape_text(h.dtype, h.shape) + " tensor";
  }
};
template <>
struct Catch::StringMaker<knit::testing::Profile> {
  static std::string convert(const knit::testing::Profile& p) {
    std::string s = "\n";
    s += p.summary();
    return s += '\n';
  }
};
#endif
