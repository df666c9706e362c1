// The op harness's modes as test cases (tests/op_harness.h). Every case of tests/op_cases.cpp
// runs on every backend of the build against the reference backend in float64; a backend the
// machine lacks is reported as skipped.
//
//   mixlab_tests -tc='ops:*'                      the reference and the CPU, and gradients
//   mixlab_tests -tc='cuda: ops*'                 the GPU (skipped without one)
//   mixlab_tests -tc='ops timing*' --no-skip      each case's time per backend and dtype
#include <doctest/doctest.h>

#include <cstdio>
#include <set>

#include "autograd/grad_mode.h"
#include "tests/op_harness.h"

using namespace mixlab;
using namespace mixlab::test;

namespace {
const bool kGpuMissing = !device_available(DeviceType::CUDA);
}

TEST_CASE("ops: the case table covers every kernel of backends/kernels.def") {
  std::set<std::string> covered;
  std::set<std::string> names;
  for (const OpCase& c : op_cases()) {
    covered.insert(c.kernel);
    CHECK_MESSAGE(names.insert(c.kernel + " " + c.name).second, "duplicate case ", c.name);
  }
#define MIXLAB_KERNEL(name, params, args, label) CHECK_MESSAGE(covered.count(#name), #name);
#include "backends/kernels.def"
#undef MIXLAB_KERNEL
}

TEST_CASE("ops: every case on the reference in float32 against the reference in float64") {
  for (const OpCase& c : op_cases()) compare_with_reference(c, Device::ref());
}

TEST_CASE("ops: every case on the CPU in float32 and float64 against the reference in float64") {
  for (const OpCase& c : op_cases()) compare_with_reference(c, Device::cpu());
}

TEST_CASE(
    "ops: gradients by finite differences through every differentiable case on the reference") {
  for (const OpCase& c : op_cases())
    if (c.grad) gradient_by_finite_differences(c, Device::ref());
}

TEST_CASE("ops: gradients by finite differences through every differentiable case on the CPU") {
  for (const OpCase& c : op_cases())
    if (c.grad) gradient_by_finite_differences(c, Device::cpu());
}

TEST_CASE("cuda: ops harness every case against the reference in float64" *
          doctest::skip(kGpuMissing)) {
  for (const OpCase& c : op_cases()) compare_with_reference(c, Device::cuda(0));
}

TEST_CASE("cuda: ops harness gradients by finite differences" * doctest::skip(kGpuMissing)) {
  for (const OpCase& c : op_cases())
    if (c.grad) gradient_by_finite_differences(c, Device::cuda(0));
}

// Timing is not a test: it is skipped unless asked for (--no-skip). Times on a loaded machine
// are noisy; compare backends within one run.
TEST_CASE("ops timing: each case's time per backend and dtype" * doctest::skip()) {
  std::vector<Device> devices = available_devices();
  std::printf("%-22s %-48s", "kernel", "case");
  for (Device d : devices)
    for (const char* dt : {"f32", "f64"}) std::printf(" %9s us", (d.str() + " " + dt).c_str());
  std::printf("\n");
  for (const OpCase& c : op_cases()) {
    std::printf("%-22s %-48s", c.kernel.c_str(), c.name.substr(0, 48).c_str());
    for (Device d : devices) {
      for (DType dt : {DType::F32, DType::F64}) {
        bool runs = false;
        for (DType x : c.dtypes) runs |= x == dt;
        if (runs)
          std::printf(" %12.1f", time_case(c, d, dt) * 1e6);
        else
          std::printf(" %12s", "-");
      }
    }
    std::printf("\n");
  }
}
