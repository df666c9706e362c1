#include "nn/init.h"

#include <cmath>

namespace mixlab::init {

namespace {
// fan_in = product of all but the first dim, fan_out = first dim (torch's convention for 2-D).
void fans(const Shape& shape, double& fan_in, double& fan_out) {
  check(shape.size() >= 1, "init: a matrix shape is needed, got ", shape_str(shape));
  fan_out = static_cast<double>(shape[0]);
  fan_in = shape.size() >= 2 ? static_cast<double>(numel_of(shape) / shape[0]) : fan_out;
}
}  // namespace

Tensor zeros(const Shape& shape) { return Tensor::zeros(shape); }
Tensor ones(const Shape& shape) { return Tensor::ones(shape); }
Tensor constant(const Shape& shape, double value) { return Tensor::full(shape, value); }
Tensor normal(const Shape& shape, double std, Generator& gen) {
  return Tensor::normal(shape, 0.0, std, gen);
}
Tensor truncated_normal(const Shape& shape, double std, Generator& gen) {
  return Tensor::truncated_normal(shape, 0.0, std, gen);
}
Tensor uniform(const Shape& shape, double bound, Generator& gen) {
  return Tensor::uniform(shape, -bound, bound, gen);
}
Tensor xavier_uniform(const Shape& shape, Generator& gen) {
  double fan_in, fan_out;
  fans(shape, fan_in, fan_out);
  return uniform(shape, std::sqrt(6.0 / (fan_in + fan_out)), gen);
}
Tensor lecun_normal(const Shape& shape, Generator& gen) {
  double fan_in, fan_out;
  fans(shape, fan_in, fan_out);
  return normal(shape, 1.0 / std::sqrt(fan_in), gen);
}

}  // namespace mixlab::init
