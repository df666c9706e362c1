// Finite-difference gradient checks in float64. The function's output is reduced to a scalar
// with fixed random weights (so every output element matters), its analytic gradient is
// compared with central differences on every input element, and the worst element is reported.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "autograd/tensor.h"

namespace mixlab {

struct GradcheckResult {
  bool ok = true;
  double max_abs_error = 0;  // over all checked elements
  std::string worst;         // "input 1 element 7: analytic 0.12 numeric 0.13" for the worst
};

// Checks fn's gradient with respect to `leaves`: float64 CPU contiguous leaf tensors that fn
// reads (module parameters, inputs). They are perturbed in place and restored.
GradcheckResult gradcheck_leaves(const std::function<Tensor()>& fn,
                                 const std::vector<Tensor>& leaves, double eps = 1e-6,
                                 double atol = 1e-6, double rtol = 1e-4);

// Inputs must be float64 CPU tensors; those with requires_grad set are checked.
GradcheckResult gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                          std::vector<Tensor> inputs, double eps = 1e-6, double atol = 1e-6,
                          double rtol = 1e-4);

}  // namespace mixlab
