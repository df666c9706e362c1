#include "train/optim/grad_utils.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"

namespace mixlab {

namespace {
// The gradients of `params` as one 1-D range of a flat gradient buffer, when each gradient is its
// parameter's grad slot and together they tile one contiguous range with nothing else in it;
// else undefined (the per-tensor path).
Tensor flat_grad_range(const std::vector<Tensor>& params) {
  if (params.empty()) return Tensor();
  std::vector<std::pair<int64_t, int64_t>> spans;
  const Storage* storage = nullptr;
  Tensor first;
  for (const Tensor& p : params) {
    Tensor g = p.grad();
    if (!g.defined() || g.impl_ptr() != p.impl().grad_slot || !g.is_contiguous()) return Tensor();
    if (!first.defined()) first = g, storage = g.impl().storage.get();
    if (g.impl().storage.get() != storage) return Tensor();
    spans.emplace_back(g.offset(), g.offset() + g.numel());
  }
  std::sort(spans.begin(), spans.end());
  for (size_t j = 1; j < spans.size(); ++j)
    if (spans[j].first != spans[j - 1].second) return Tensor();  // a gap or an overlap
  return make_view(first, {spans.back().second - spans.front().first}, {1}, spans.front().first);
}

// Σ g² of one tensor, in float64 where its device has it.
Tensor squared_sum(const Tensor& g) {
  Tensor partial = sum(mul(g, g));
  if (partial.dtype() != DType::F64 && backend_for(partial.device()).supports(DType::F64))
    partial = cast(partial, DType::F64);
  return partial;
}
}  // namespace

double grad_norm(const std::vector<Tensor>& params) {
  NoGradGuard no_grad;
  if (Tensor flat = flat_grad_range(params); flat.defined())
    return flat.numel() == 0 ? 0.0 : std::sqrt(squared_sum(flat).item());
  Tensor total;  // a 0-d tensor on the gradients' device
  for (const Tensor& p : params) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    // Across tensors in float64 where the device has it: a large model has many partial sums.
    Tensor partial = squared_sum(g);
    if (!total.defined()) {
      total = partial;
    } else {
      check(partial.device() == total.device(), "grad_norm: gradients on ", total.device().str(),
            " and ", partial.device().str());
      total = add(total, cast(partial, total.dtype()));
    }
  }
  return total.defined() ? std::sqrt(total.item()) : 0.0;
}

double clip_grad_norm(const std::vector<Tensor>& params, double max_norm) {
  check(max_norm > 0, "clip_grad_norm: max_norm must be > 0, got ", max_norm);
  const double total = grad_norm(params);
  if (!std::isfinite(total)) return total;
  const double coef = max_norm / (total + 1e-6);
  if (coef < 1.0) scale_grads(params, coef);
  return total;
}

void scale_grads(const std::vector<Tensor>& params, double factor) {
  NoGradGuard no_grad;
  if (Tensor flat = flat_grad_range(params); flat.defined()) {
    // In place, the same per-element product as mul(g, factor).
    if (flat.numel() > 0)
      backend_for(flat.device()).unary(UnaryOp::MulScalar, flat.view(), flat.view(), factor);
    return;
  }
  for (const Tensor& p : params) {
    Tensor g = p.grad();
    if (g.defined()) p.set_grad(mul(g, factor));
  }
}

}  // namespace mixlab
