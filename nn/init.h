// Parameter initialisers, all drawn from a seeded Generator. Each returns a new tensor of the
// given shape; fan_in/fan_out are read from a [out, in] matrix (PyTorch's Linear layout).
#pragma once
#include "core/random.h"
#include "autograd/tensor.h"

namespace mixlab::init {

Tensor zeros(const Shape& shape);
Tensor ones(const Shape& shape);
Tensor constant(const Shape& shape, double value);
Tensor normal(const Shape& shape, double std, Generator& gen);
Tensor truncated_normal(const Shape& shape, double std, Generator& gen);  // cut at ±2 std
Tensor uniform(const Shape& shape, double bound, Generator& gen);         // U(-bound, bound)
// Glorot uniform: U(±sqrt(6 / (fan_in + fan_out))) for a [fan_out, fan_in] matrix.
Tensor xavier_uniform(const Shape& shape, Generator& gen);
// LeCun normal: N(0, 1/fan_in).
Tensor lecun_normal(const Shape& shape, Generator& gen);

}  // namespace mixlab::init
