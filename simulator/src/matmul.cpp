#include "matmul.h"

#include <limits>
#include <string>

namespace knit::sim {

using namespace knit::ir;

std::vector<float> matmul_partials(const std::vector<float>& s, const std::vector<float>& v, int64_t K, int64_t M,
                                   int64_t N, bool skip_zero_moving) {
  std::vector<float> partial(static_cast<size_t>(M * N), 0.0f);
  for (int64_t k = 0; k < K; ++k)
    for (int64_t mi = 0; mi < M; ++mi) {
      const float a = s[k * M + mi];
      float* row = partial.data() + mi * N;
      const float* b = v.data() + k * N;
      for (int64_t n = 0; n < N; ++n)
        if (!skip_zero_moving || b[n] != 0.0f) row[n] += a * b[n];
    }
  return partial;
}

void write_matmul_result(ExecState& m, Tile& dst, const std::vector<float>& partial, Accumulate accumulate) {
  const std::string op(m.current().opcode_name());
  for (int64_t i = 0; i < dst.size(); ++i) {
    const bool add = accumulate == Accumulate::on || (accumulate == Accumulate::auto_ && dst.matmul_written(i));
    float previous = 0.0f;
    if (add && !dst.is_initialized(i)) {
      // Undefined on hardware; like NKI's simulator, warn and add to the fresh-memory sentinel
      // (and the sum is poison).
      m.undefined_read(dst, i, /*never_written=*/true, /*accumulating=*/true);
      m.warn(op +
             "(accumulate=True) adds into PSUM that was never written (undefined on hardware); "
             "use accumulate=None or False for the first matmul of a group");
      previous = std::numeric_limits<float>::quiet_NaN();
    } else if (add) {
      if (!dst.matmul_written(i))
        m.warn(op +
               "(accumulate=True) adds into PSUM last written by a non-matmul instruction "
               "(undefined on trn1/trn2)");
      previous = dst.read(i);
    }
    dst.write_from_matmul(i, add ? previous + partial[i] : partial[i]);
  }
}

}  // namespace knit::sim
