// The op harness's machinery: inputs, the three modes (tests/op_harness.h).
#include "tests/op_harness.h"

#include <doctest/doctest.h>

#include <chrono>
#include <cmath>
#include <sstream>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "core/random.h"

namespace mixlab::test {

Input Input::uniform(Shape s, uint64_t seed, double lo, double hi, bool diff) {
  Input in;
  in.kind = Uniform, in.shape = std::move(s), in.seed = seed, in.lo = lo, in.hi = hi;
  in.differentiable = diff;
  return in;
}
Input Input::ints(Shape s, uint64_t seed) {
  Input in;
  in.kind = SmallInts, in.shape = std::move(s), in.seed = seed;
  return in;
}
Input Input::indices(Shape s, uint64_t seed, int64_t bound, int64_t ignore_every) {
  Input in;
  in.kind = Indices, in.shape = std::move(s), in.seed = seed, in.bound = bound;
  in.ignore_every = ignore_every;
  return in;
}
Input Input::given(Shape s, std::vector<double> values) {
  Input in;
  in.kind = Values, in.shape = std::move(s), in.values = std::move(values);
  return in;
}

const char* unary_name(UnaryOp op) {
  switch (op) {
#define MIXLAB_NAME(n) \
  case UnaryOp::n:     \
    return #n;
    MIXLAB_UNARY_OPS(MIXLAB_NAME)
#undef MIXLAB_NAME
  }
  return "?";
}
const char* binary_name(BinaryOp op) {
  switch (op) {
#define MIXLAB_NAME(n) \
  case BinaryOp::n:    \
    return #n;
    MIXLAB_BINARY_OPS(MIXLAB_NAME)
#undef MIXLAB_NAME
  }
  return "?";
}

const std::vector<UnaryOp>& all_unary_ops() {
  static const std::vector<UnaryOp> ops = {
#define MIXLAB_ENTRY(n) UnaryOp::n,
      MIXLAB_UNARY_OPS(MIXLAB_ENTRY)
#undef MIXLAB_ENTRY
  };
  return ops;
}
const std::vector<BinaryOp>& all_binary_ops() {
  static const std::vector<BinaryOp> ops = {
#define MIXLAB_ENTRY(n) BinaryOp::n,
      MIXLAB_BINARY_OPS(MIXLAB_ENTRY)
#undef MIXLAB_ENTRY
  };
  return ops;
}

std::vector<Device> available_devices() {
  std::vector<Device> devices{Device::cpu(), Device::ref()};
  if (device_available(DeviceType::CUDA)) devices.push_back(Device::cuda(0));
  return devices;
}

namespace {

// The input's values on the host, in float64.
std::vector<double> host_values(const Input& in) {
  std::vector<double> v(numel_of(in.shape));
  Generator gen(in.seed);
  for (size_t i = 0; i < v.size(); ++i) {
    switch (in.kind) {
      case Input::Uniform:
        v[i] = gen.uniform(in.lo, in.hi);
        break;
      case Input::SmallInts:
        v[i] = static_cast<double>(gen.below(4)) - 1.0;
        break;
      case Input::Indices:
        v[i] =
            in.ignore_every > 0 && static_cast<int64_t>(i) % in.ignore_every == in.ignore_every - 1
                ? -100.0
                : static_cast<double>(gen.below(static_cast<uint64_t>(in.bound)));
        break;
      case Input::Values:
        v[i] = in.values.at(i);
        break;
    }
  }
  return v;
}

Tensor make_input(const Input& in, const Ctx& ctx) {
  Tensor t = Tensor::from_data(host_values(in), in.shape);
  t = t.to(in.kind == Input::Indices ? DType::I32 : ctx.dtype).to(ctx.device).detach();
  if (in.differentiable) t.set_requires_grad(true);
  return t;
}

std::string where_(const OpCase& c, Device device, DType dtype) {
  return c.kernel + " | " + c.name + " | " + device.str() + " " + dtype_name(dtype);
}

// The outputs, then the gradient of every differentiable input of sum(output 0 * w).
std::vector<Tensor> run_case(const OpCase& c, const Ctx& ctx) {
  std::vector<Tensor> inputs;
  for (const Input& in : c.inputs) inputs.push_back(make_input(in, ctx));
  std::vector<Tensor> out = c.run(ctx, inputs);
  bool any_grad = false;
  for (const Input& in : c.inputs) any_grad |= in.differentiable;
  if (any_grad) {
    Tensor w = make_input(Input::uniform(out.at(0).shape(), 977), ctx);
    sum(mul(out[0], w)).backward();
    for (size_t i = 0; i < inputs.size(); ++i)
      if (c.inputs[i].differentiable) out.push_back(inputs[i].grad());
  }
  return out;
}

}  // namespace

// |got - ref| <= atol + rtol |ref| elementwise; NaN matches NaN only, and an infinity only the same
// infinity (its relative tolerance, rtol · inf, would let any value through).
void expect_close(const std::vector<double>& ref, const std::vector<double>& got, Tol tol,
                  const std::string& what) {
  INFO(what);
  REQUIRE(ref.size() == got.size());
  size_t bad = 0, worst = 0;
  double worst_excess = -1;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (ref[i] == got[i] || (std::isnan(ref[i]) && std::isnan(got[i]))) continue;
    double err = std::abs(ref[i] - got[i]);
    double limit = std::isinf(ref[i]) ? 0.0 : tol.atol + tol.rtol * std::abs(ref[i]);
    double excess = std::isnan(err) ? 1e300 : err - limit;
    if (!(err <= limit)) ++bad;
    if (excess > worst_excess) worst_excess = excess, worst = i;
  }
  INFO(bad << " of " << ref.size() << " elements out of tolerance; worst " << worst
           << ": reference " << (ref.empty() ? 0.0 : ref[worst]) << " got "
           << (got.empty() ? 0.0 : got[worst]));
  CHECK(bad == 0);
}

void compare_with_reference(const OpCase& c, Device device) {
  const Ctx ref_ctx{Device::ref(), DType::F64};
  std::vector<Tensor> ref = run_case(c, ref_ctx);
  if (c.expected && device.is_ref()) {
    std::vector<std::vector<double>> values;
    for (const Input& in : c.inputs) values.push_back(host_values(in));
    expect_close(c.expected(values), ref.at(0).to_double_vector(), c.f64,
                 where_(c, device, DType::F64) + " against its formula");
  }
  for (DType dt : c.dtypes) {
    if (device.is_ref() && dt == DType::F64) continue;  // that is the reference itself
    std::vector<Tensor> got = run_case(c, Ctx{device, dt});
    REQUIRE(got.size() == ref.size());
    Tol tol = dt == DType::F32 ? c.f32 : c.f64;
    for (size_t i = 0; i < ref.size(); ++i) {
      REQUIRE(ref[i].defined() == got[i].defined());
      if (!ref[i].defined()) continue;
      std::string what = where_(c, device, dt) + " | output " + std::to_string(i) + " " +
                         shape_str(ref[i].shape()) + " against ref float64";
      CHECK_MESSAGE(got[i].device() == device, what);
      CHECK_MESSAGE(shape_str(got[i].shape()) == shape_str(ref[i].shape()), what);
      expect_close(ref[i].to_double_vector(), got[i].to_double_vector(), tol, what);
    }
  }
}

void gradient_by_finite_differences(const OpCase& c, Device device) {
  const Ctx ctx{device, DType::F64};
  std::vector<Tensor> fixed, leaves;
  for (const Input& in : c.inputs) {
    // gradcheck perturbs float64 CPU leaves; everything else reaches the op as it is.
    Ctx host{Device::cpu(), in.differentiable ? DType::F64 : ctx.dtype};
    Tensor t = make_input(in, in.differentiable ? host : ctx);
    (in.differentiable ? leaves : fixed).push_back(t);
  }
  auto fn = [&](const std::vector<Tensor>& xs) {
    std::vector<Tensor> inputs;
    size_t leaf = 0, other = 0;
    for (const Input& in : c.inputs)
      inputs.push_back(in.differentiable ? xs[leaf++].to(device) : fixed[other++]);
    return c.run(ctx, inputs).at(0).to(Device::cpu());
  };
  GradcheckResult r = gradcheck(fn, leaves);
  INFO(where_(c, device, DType::F64) << ": " << r.worst);
  CHECK(r.ok);
}

double time_case(const OpCase& c, Device device, DType dtype, double budget) {
  const Ctx ctx{device, dtype};
  std::vector<Tensor> inputs;
  for (const Input& in : c.inputs) inputs.push_back(make_input(in, ctx));
  auto once = [&] {
    c.run(ctx, inputs);
    ctx.kernels().synchronize();
  };
  once();  // warm-up: plans, caches, lazy handles
  int runs = 0;
  auto t0 = std::chrono::steady_clock::now();
  double elapsed = 0;
  do {
    once();
    ++runs;
    elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  } while (elapsed < budget && runs < 1000);
  return elapsed / runs;
}

}  // namespace mixlab::test
