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

// Σ g² of one tensor, summed and returned in float64 where its device has it: one read of g (the
// sum_squares kernel), where mul then sum wrote a temporary as large as g and read it back (on the
// d=256 translator's 5.6 M-parameter flat gradient, 2.1 ms of a 2-thread CPU step).
Tensor squared_sum(const Tensor& g) {
  Tensor dense = g.contiguous();
  Tensor total = Tensor::empty({}, widest_float(g.device()), g.device());
  backend_for(g.device()).sum_squares(dense.view(), total.view());
  return total;
}

// Where a norm of no gradients lives: the first parameter's device (the CPU if there is none).
Device device_of_grads(const std::vector<Tensor>& params) {
  return params.empty() ? Device::cpu() : params.front().device();
}
}  // namespace

Tensor grad_norm_tensor(const std::vector<Tensor>& params) {
  NoGradGuard no_grad;
  Tensor total;  // Σ g², a 0-d tensor on the gradients' device
  if (Tensor flat = flat_grad_range(params); flat.defined()) {
    total = flat.numel() == 0 ? Tensor() : squared_sum(flat);
  } else {
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
  }
  if (!total.defined()) return Tensor::zeros({}, DType::F32, device_of_grads(params));
  Tensor norm = Tensor::empty({}, total.dtype(), total.device());
  backend_for(total.device()).unary(UnaryOp::Sqrt, total.view(), norm.view(), 0.0);
  return norm;
}

double grad_norm(const std::vector<Tensor>& params) { return grad_norm_tensor(params).item(); }

Tensor clip_grad_norm_tensor(const std::vector<Tensor>& params, double max_norm) {
  check(max_norm > 0, "clip_grad_norm: max_norm must be > 0, got ", max_norm);
  NoGradGuard no_grad;
  Tensor total = grad_norm_tensor(params);
  Tensor coef = Tensor::empty({}, total.dtype(), total.device());
  backend_for(total.device()).unary(UnaryOp::ClipCoef, total.view(), coef.view(), max_norm);
  // On the CPU reading the factor costs nothing, and a factor of 1 (no clipping, or a norm that
  // is not finite) would only multiply every gradient by 1: skip that pass.
  if (coef.device().is_cpu() && coef.item() == 1.0) return total;
  scale_grads(params, coef);
  return total;
}

double clip_grad_norm(const std::vector<Tensor>& params, double max_norm) {
  return clip_grad_norm_tensor(params, max_norm).item();
}

void scale_grads(const std::vector<Tensor>& params, double factor) {
  // Held in float64 (where the device has it), so each gradient gets factor in its own dtype,
  // as mul(g, factor) gives.
  const Device device = device_of_grads(params);
  scale_grads(params, Tensor::full({}, factor, widest_float(device), device));
}

void scale_grads(const std::vector<Tensor>& params, const Tensor& factor) {
  NoGradGuard no_grad;
  check(factor.numel() == 1, "scale_grads: the factor must have one element, got shape ",
        shape_str(factor.shape()));
  if (Tensor flat = flat_grad_range(params); flat.defined()) {
    // In place: float(factor) times each element, as mul(g, factor) would give.
    if (flat.numel() > 0) {
      Tensor f = expand(cast(reshape(factor, {}), flat.dtype()), flat.shape());
      backend_for(flat.device()).binary(BinaryOp::Mul, flat.view(), f.view(), flat.view());
    }
    return;
  }
  for (const Tensor& p : params) {
    Tensor g = p.grad();
    if (g.defined()) p.set_grad(mul(g, cast(reshape(factor, {}), g.dtype())));
  }
}

}  // namespace mixlab
