#include "nn/drop_path.h"

#include <vector>

#include "autograd/ops.h"
#include "core/error.h"
#include "core/random.h"

namespace mixlab {

namespace {
// Each sequence's factor m_b/(1-p), in batch order. Drawn on the host for every device, so a
// seed drops the same sequences on the CPU and on a GPU; the upload is one number per row.
std::vector<double> sequence_factors(int64_t batch, double p, uint64_t seed) {
  Generator gen(seed);
  std::vector<double> factors(batch);
  for (double& f : factors) f = gen.uniform() < p ? 0.0 : 1.0 / (1.0 - p);
  return factors;
}
}  // namespace

Tensor drop_path(const Tensor& h, double p, uint64_t seed, const TokenRows& rows) {
  check(p >= 0.0 && p < 1.0, "drop_path: p = ", p, " must be in [0, 1)");
  if (p == 0.0) return h;
  check(h.dim() >= 1, "drop_path: h ", shape_str(h.shape()), " has no batch axis");
  std::vector<double> factor;
  Shape shape(h.dim(), 1);
  if (rows.defined()) {
    check(h.size(0) == rows.count(), "drop_path: h ", shape_str(h.shape()), " does not hold the ",
          rows.count(), " rows of its token rows");
    const std::vector<double> per_sequence = sequence_factors(rows.batch, p, seed);
    factor.reserve(rows.count());
    for (int64_t b : rows.order) factor.insert(factor.end(), rows.lengths[b], per_sequence[b]);
    shape[0] = rows.count();
  } else {
    factor = sequence_factors(h.size(0), p, seed);
    shape[0] = h.size(0);
  }
  return mul(h, cast(Tensor::from_data(factor, shape, h.device()), h.dtype()));
}

std::string DropPath::extra_repr() const { return "p=" + std::to_string(p); }

Tensor DropPath::forward(const Tensor& h, const TokenRows& rows) const {
  if (!is_training() || p == 0.0) return h;
  return drop_path(h, p, default_generator().next_u64(), rows);
}

}  // namespace mixlab
