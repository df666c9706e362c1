// The op harness: one table of cases (tests/op_cases.cpp) run on every backend of the build
// against the reference backend (backends/reference/, every kernel in plain loops) in float64, in
// the spirit of ggml's test-backend-ops. A case names the kernel of backends/kernels.def it
// exercises, how to make its inputs (on the host, float64, fixed seeds) and what to run on them;
// the modes (tests/test_ops_backends.cpp) are
//
//   compare  every backend (the reference itself in float32), in float32 and float64, against
//            the reference in float64 (forward, and the inputs' gradients when the case has
//            differentiable inputs); with `expected` the reference's float64 values are also
//            checked against a formula in plain C++;
//   gradient finite differences through the case's first output (autograd/gradcheck.h), on
//            every backend, for the cases marked `grad`;
//   timing   each case's time per backend and dtype (mixlab_tests -tc='ops timing*' --no-skip).
//
// Adding a kernel or an op means adding rows to the table, not a test function.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "autograd/tensor.h"
#include "backends/elementwise_ops.h"

namespace mixlab::test {

// How one input is made. Values are drawn in float64 from a generator seeded by `seed`, then
// cast to the case's dtype (or int32 for indices) and moved to the backend's device.
struct Input {
  enum Kind { Uniform, SmallInts, Indices, Values } kind = Uniform;
  Shape shape;
  uint64_t seed = 1;
  double lo = -1, hi = 1;      // Uniform
  int64_t bound = 0;           // Indices: in [0, bound); -100 (ignored) where ignore_every hits
  int64_t ignore_every = 0;    // Indices: every n-th index (n > 0) is -100
  std::vector<double> values;  // Values: given explicitly (edge values)
  bool differentiable = false;

  static Input uniform(Shape s, uint64_t seed, double lo = -1, double hi = 1, bool diff = false);
  static Input leaf(Shape s, uint64_t seed, double lo = -1, double hi = 1) {
    return uniform(std::move(s), seed, lo, hi, true);
  }
  static Input ints(Shape s, uint64_t seed);  // -1, 0, 1, 2: ties and equalities happen
  static Input indices(Shape s, uint64_t seed, int64_t bound, int64_t ignore_every = 0);
  static Input given(Shape s, std::vector<double> values);
};

struct Tol {
  double rtol = 0, atol = 0;
};

// What a case's run sees: the backend's device and the dtype of this run.
struct Ctx {
  Device device;
  DType dtype;
  Backend& kernels() const { return backend_for(device); }
};

struct OpCase {
  // Runs on the inputs (on ctx.device, in ctx.dtype; indices int32) and returns the outputs to
  // compare. Leaves of differentiable inputs have requires_grad set.
  using Run = std::function<std::vector<Tensor>(const Ctx&, const std::vector<Tensor>&)>;
  // Output 0 in float64 as plain C++ computes it from the inputs' values.
  using Expected = std::function<std::vector<double>(const std::vector<std::vector<double>>&)>;

  OpCase(std::string kernel, std::string name, std::vector<Input> inputs, Run run,
         Tol f32 = {1e-5, 1e-6}, Tol f64 = {1e-12, 1e-13}, bool grad = false,
         std::vector<DType> dtypes = {DType::F32, DType::F64}, Expected expected = {})
      : kernel(std::move(kernel)),
        name(std::move(name)),
        inputs(std::move(inputs)),
        run(std::move(run)),
        f32(f32),
        f64(f64),
        grad(grad),
        dtypes(std::move(dtypes)),
        expected(std::move(expected)) {}

  std::string kernel;  // the entry of backends/kernels.def this case exercises
  std::string name;    // unique: what and which shapes
  std::vector<Input> inputs;
  Run run;
  Tol f32, f64;  // against the reference in float64
  bool grad;     // gradient mode applies (small inputs: every element is perturbed)
  std::vector<DType> dtypes;
  Expected expected;  // optional
};

// The table (tests/op_cases.cpp).
const std::vector<OpCase>& op_cases();

// Every device of the build and machine: the CPU, the reference, then each available accelerator.
std::vector<Device> available_devices();

// The names of MIXLAB_UNARY_OPS' and MIXLAB_BINARY_OPS' entries, for case names and failures.
const char* unary_name(UnaryOp op);
const char* binary_name(BinaryOp op);
// Every op of MIXLAB_UNARY_OPS and MIXLAB_BINARY_OPS, in their order.
const std::vector<UnaryOp>& all_unary_ops();
const std::vector<BinaryOp>& all_binary_ops();

// The modes. Each reports through doctest CHECKs, naming the kernel, the case (its shapes), the
// backend, the dtype and the output's shape, and for a value out of tolerance the worst element
// (its index and both values).
void compare_with_reference(const OpCase& c, Device device);
void gradient_by_finite_differences(const OpCase& c, Device device);
// |got - ref| <= atol + rtol |ref| elementwise (NaN matches NaN only, an infinity only the same
// infinity); a failure names `what`, how many elements are off and the worst one.
void expect_close(const std::vector<double>& ref, const std::vector<double>& got, Tol tol,
                  const std::string& what);
// Mean seconds per run of the case (after one warm-up run), over about `budget` seconds.
double time_case(const OpCase& c, Device device, DType dtype, double budget = 0.02);

}  // namespace mixlab::test
