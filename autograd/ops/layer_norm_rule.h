// The recorded node of a layer norm, shared by layer_norm (layer_norm.cpp) and the fused residual
// op (residual.cpp), whose kernels both save mean and rstd the same way: one backward kernel
// yields dx, dgamma and dbeta.
#pragma once
#include "autograd/ops/op_utils.h"

namespace mixlab::ops_detail {

// Records y = layer_norm(x) over [rows, cols]; `in` holds x's values (contiguous), g and b are
// the dense gamma and beta (either may be undefined), mean and rstd the forward's [rows].
Tensor record_layer_norm(const Tensor& y, const Tensor& x, const Tensor& gamma, const Tensor& beta,
                         const Tensor& in, const Tensor& g, const Tensor& b, const Tensor& mean,
                         const Tensor& rstd, int64_t rows, int64_t cols);

// Checks that gamma and beta (when defined) are [cols] on x's device and dtype.
void check_layer_norm_params(const char* op, const Tensor& x, const Tensor& gamma,
                             const Tensor& beta);

}  // namespace mixlab::ops_detail
