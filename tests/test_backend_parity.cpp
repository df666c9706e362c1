// The CUDA backend against the CPU reference: every kernel of backends/backend.h on the same
// random inputs on both devices (odd sizes 1, 17, 1000 and beyond, non-contiguous views,
// broadcasting), forward and backward, mostly through the public ops (autograd/ops.h: the same
// op on a CPU tensor and on its .to(Device::cuda()) copy), the rest through the Backend
// interface directly; then a small model trained a few steps on both devices.
//
// Every GPU test case carries doctest::skip(no GPU): on a machine without one they are reported
// as skipped. A few host-side checks (the device copy of the dropout generator, the allocator's
// size classes, the error for a missing device) run everywhere.
//
// Run only these: mixlab_tests -tc='cuda:*'
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "backends/backend.h"
#include "backends/cuda/counter_random.h"
#include "core/random.h"
#include "nn/layers.h"
#include "nn/mixer_registry.h"

#ifdef MIXLAB_HAVE_CUDA
#include "backends/cuda/allocator.h"
#include "backends/cuda/cuda_backend.h"
#endif

using namespace mixlab;

namespace {

const bool kNoGpu = !device_available(DeviceType::CUDA);

Device gpu() { return Device::cuda(0); }

Tensor rnd(const Shape& shape, uint64_t seed, DType dtype = DType::F32, double lo = -1.0,
           double hi = 1.0) {
  Generator gen(seed);
  return Tensor::uniform(shape, lo, hi, gen, dtype);
}

// Small integers (-1, 0, 1, 2) so that comparisons and ties happen.
Tensor rnd_ints(const Shape& shape, uint64_t seed, DType dtype = DType::F32) {
  Generator gen(seed);
  std::vector<double> v(numel_of(shape));
  for (double& x : v) x = static_cast<double>(gen.below(4)) - 1.0;
  Tensor t = Tensor::from_data(v, shape);
  return dtype == DType::F64 ? t : t.to(dtype);
}

// A leaf on `device` holding host's values.
Tensor leaf(const Tensor& host, Device device) {
  Tensor t = host.to(device).detach();
  t.set_requires_grad(true);
  return t;
}

struct Tol {
  double rtol, atol;
};
Tol tol_for(DType dtype) { return dtype == DType::F64 ? Tol{1e-10, 1e-12} : Tol{1e-5, 1e-6}; }
Tol loose_for(DType dtype) { return dtype == DType::F64 ? Tol{1e-9, 1e-10} : Tol{2e-4, 2e-5}; }
const Tol kExact{0, 0};

// |cuda - cpu| <= atol + rtol |cpu| elementwise (NaN matches NaN, inf matches inf); the worst
// element is reported.
void expect_close(const Tensor& ref, const Tensor& got, Tol tol, const std::string& what) {
  INFO(what);
  REQUIRE(ref.defined());
  REQUIRE(got.defined());
  REQUIRE(shape_str(ref.shape()) == shape_str(got.shape()));
  CHECK(ref.dtype() == got.dtype());
  std::vector<double> a = ref.to_double_vector(), b = got.to_double_vector();
  bool ok = true;
  size_t worst = 0;
  double worst_excess = -1;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] == b[i] || (std::isnan(a[i]) && std::isnan(b[i]))) continue;
    double err = std::abs(a[i] - b[i]);
    double limit = tol.atol + tol.rtol * std::abs(a[i]);
    double excess = std::isnan(err) ? 1e300 : err - limit;
    if (!(err <= limit)) ok = false;
    if (excess > worst_excess) worst_excess = excess, worst = i;
  }
  if (!ok) {
    INFO("worst element " << worst << " of " << a.size() << ": cpu " << a[worst] << " cuda "
                          << b[worst]);
    CHECK(ok);
  } else {
    CHECK(ok);
  }
}

// Runs fn on the CPU and on the GPU and compares every returned tensor.
void parity(const std::function<std::vector<Tensor>(Device)>& fn, Tol tol,
            const std::string& what) {
  std::vector<Tensor> cpu = fn(Device::cpu());
  std::vector<Tensor> cuda = fn(gpu());
  REQUIRE(cpu.size() == cuda.size());
  for (size_t i = 0; i < cpu.size(); ++i) {
    if (!cpu[i].defined() && !cuda[i].defined()) continue;
    CHECK(cuda[i].device() == gpu());
    expect_close(cpu[i], cuda[i], tol, what + " output " + std::to_string(i));
  }
}

Backend& kernels(Device d) { return backend_for(d); }

const DType kFloats[] = {DType::F32, DType::F64};

}  // namespace

// ---- host-side checks (run with or without a GPU) ---------------------------------------------

TEST_CASE("cuda: counter_uniform host-device copy matches core/random.h") {
  for (uint64_t seed : {0ull, 1ull, 42ull, 0x9E3779B97F4A7C15ull, ~0ull}) {
    for (uint64_t i = 0; i < 20000; i += 7) {
      CHECK(cuda::mix64_hd(seed ^ i) == mix64(seed ^ i));
      CHECK(cuda::counter_uniform_hd(seed, i) == counter_uniform(seed, i));
    }
  }
}

TEST_CASE("cuda: asking for a missing CUDA device is an Error") {
  if (!device_available(DeviceType::CUDA)) {
    CHECK_THROWS_AS(backend_for(Device::cuda()), Error);
    CHECK_THROWS_AS(Tensor::zeros({2}, DType::F32, Device::cuda()), Error);
    CHECK_THROWS_AS(Tensor::ones({2}).to(Device::cuda()), Error);
  } else {
    CHECK_THROWS_AS(backend_for(Device::cuda(1 << 20)), Error);
  }
}

#ifdef MIXLAB_HAVE_CUDA
TEST_CASE("cuda: allocator size classes waste at most a quarter") {
  CHECK(CachingAllocator::size_class(1) == 512);
  CHECK(CachingAllocator::size_class(512) == 512);
  CHECK(CachingAllocator::size_class(513) == 640);
  CHECK(CachingAllocator::size_class(1024) == 1024);
  CHECK(CachingAllocator::size_class(1025) == 1280);
  size_t previous = 0;
  for (size_t bytes = 1; bytes < (size_t(1) << 34); bytes = bytes * 3 / 2 + 1) {
    size_t c = CachingAllocator::size_class(bytes);
    CHECK(c >= bytes);
    CHECK(c % 128 == 0);
    CHECK(c >= previous);
    if (bytes > 512) CHECK(static_cast<double>(c) <= 1.25 * static_cast<double>(bytes) + 1);
    previous = c;
  }
}
#endif

// ---- memory and data movement -----------------------------------------------------------------

TEST_CASE("cuda: host-device copies round-trip every dtype" * doctest::skip(kNoGpu)) {
  for (int64_t n : {0, 1, 17, 1000, 100003}) {
    Tensor f = rnd({n}, 1, DType::F32);
    Tensor d = rnd({n}, 2, DType::F64);
    Tensor i = rnd_ints({n}, 3).to(DType::I32);
    for (const Tensor& t : {f, d, i}) {
      Tensor g = t.to(gpu());
      CHECK(g.device() == gpu());
      expect_close(t, g, kExact, "round trip " + std::string(dtype_name(t.dtype())));
      expect_close(t, g.to(Device::cpu()), kExact, "back on the host");
    }
  }
}

TEST_CASE("cuda: strided copies and dtype conversions match the CPU" * doctest::skip(kNoGpu)) {
  NoGradGuard no_grad;
  parity(
      [](Device dev) {
        Tensor x = mul(rnd({7, 17, 5}, 4, DType::F64), 10.0).to(dev);
        Tensor dst = Tensor::zeros({5, 7}, DType::F64, dev);
        transpose(dst, 0, 1).copy_(squeeze(narrow(x, 1, 2, 1), 1));  // strided destination
        return std::vector<Tensor>{
            contiguous(transpose(x, 0, 2)),
            contiguous(narrow(x, 1, 3, 10)),
            contiguous(permute(x, {1, 2, 0})),
            contiguous(expand(narrow(x, 0, 0, 1), {4, 17, 5})),
            cast(x, DType::F32),
            cast(transpose(x, 0, 1), DType::I32),
            cast(cast(x, DType::I32), DType::F64),
            cast(cast(transpose(x, 1, 2), DType::F32), DType::F64),
            dst,
            concat({x, x}, 1),
        };
      },
      kExact, "copies");
}

TEST_CASE("cuda: fill writes every dtype" * doctest::skip(kNoGpu)) {
  for (int64_t n : {1, 17, 1000}) {
    for (DType dt : {DType::F32, DType::F64, DType::I32}) {
      parity(
          [&](Device dev) {
            Tensor t = Tensor::full({n, 3}, -2.5, dt, dev);
            Tensor z = Tensor::zeros({3, n}, dt, dev);
            transpose(z, 0, 1).fill_(7.0);  // non-contiguous fill
            return std::vector<Tensor>{t, z, Tensor::ones({n}, dt, dev)};
          },
          kExact, "fill");
    }
  }
}

TEST_CASE("cuda: copies back to the host wait for queued kernels" * doctest::skip(kNoGpu)) {
  NoGradGuard no_grad;
  Tensor c = rnd({1 << 20}, 5);
  Tensor g = c.to(gpu());
  for (int i = 0; i < 50; ++i) {
    c = add(mul(c, 1.0001), 0.001);
    g = add(mul(g, 1.0001), 0.001);
  }
  expect_close(c, g, Tol{1e-5, 1e-6}, "chain of 100 kernels");
  CHECK(sum(g).item() == doctest::Approx(sum(c).item()).epsilon(1e-4));
}

// ---- elementwise
// ---------------------------------------------------------------------------------

TEST_CASE("cuda: every unary kernel matches the CPU" * doctest::skip(kNoGpu)) {
  const int last = static_cast<int>(UnaryOp::MulScalar);
  for (DType dt : kFloats) {
    for (int64_t n : {1, 17, 1000}) {
      for (int k = 0; k <= last; ++k) {
        UnaryOp op = static_cast<UnaryOp>(k);
        bool positive = op == UnaryOp::Log || op == UnaryOp::Sqrt || op == UnaryOp::PowScalar;
        Tensor x = positive ? rnd({n}, 10 + k, dt, 0.1, 3.0) : rnd({n}, 10 + k, dt, -4.0, 4.0);
        double alpha = op == UnaryOp::PowScalar ? 1.7 : -0.37;
        parity(
            [&](Device dev) {
              Tensor in = x.to(dev);
              Tensor y = Tensor::empty(x.shape(), dt, dev);
              kernels(dev).unary(op, in.view(), y.view(), alpha);
              return std::vector<Tensor>{y};
            },
            tol_for(dt), "unary op " + std::to_string(k) + " n=" + std::to_string(n));
      }
    }
    // Edge values: zero for sign, step and relu.
    Tensor edge = Tensor::from_data(std::vector<double>{-2, -0.5, 0, 0.5, 2}, {5}).to(dt);
    for (UnaryOp op : {UnaryOp::Sign, UnaryOp::Step, UnaryOp::Relu, UnaryOp::Abs}) {
      parity(
          [&](Device dev) {
            Tensor in = edge.to(dev);
            Tensor y = Tensor::empty({5}, dt, dev);
            kernels(dev).unary(op, in.view(), y.view(), 0.0);
            return std::vector<Tensor>{y};
          },
          kExact, "unary edge values");
    }
  }
}

TEST_CASE("cuda: unary ops and their gradients through autograd" * doctest::skip(kNoGpu)) {
  using Fn = std::function<Tensor(const Tensor&)>;
  std::vector<std::pair<std::string, Fn>> fns = {
      {"exp", [](const Tensor& x) { return exp(x); }},
      {"log", [](const Tensor& x) { return log(add(abs(x), 0.5)); }},
      {"sqrt", [](const Tensor& x) { return sqrt(add(abs(x), 0.5)); }},
      {"pow", [](const Tensor& x) { return pow(add(abs(x), 0.5), 2.5); }},
      {"relu", [](const Tensor& x) { return relu(x); }},
      {"gelu erf", [](const Tensor& x) { return gelu(x, GeluForm::Erf); }},
      {"gelu tanh", [](const Tensor& x) { return gelu(x, GeluForm::Tanh); }},
      {"sigmoid", [](const Tensor& x) { return sigmoid(x); }},
      {"tanh", [](const Tensor& x) { return tanh(x); }},
      {"neg scalar ops", [](const Tensor& x) { return mul(add(neg(x), 0.25), 3.0); }},
  };
  for (DType dt : kFloats) {
    for (auto& [name, fn] : fns) {
      parity(
          [&, &fn = fn](Device dev) {
            // A transposed (non-contiguous) input.
            Tensor x = leaf(rnd({1000, 17}, 21, dt, -3, 3), dev);
            Tensor y = fn(transpose(x, 0, 1));
            Tensor w = rnd({17, 1000}, 22, dt).to(dev);
            sum(mul(y, w)).backward();
            return std::vector<Tensor>{y, x.grad()};
          },
          loose_for(dt), name);
    }
  }
}

TEST_CASE("cuda: binary kernels broadcast over strided views" * doctest::skip(kNoGpu)) {
  struct Case {
    Shape a, b;
    bool transpose_a;
  };
  std::vector<Case> cases = {
      {{17, 1000}, {1000}, false}, {{3, 1, 5}, {1, 4, 5}, false}, {{1}, {1}, false},
      {{1000, 17}, {17, 1}, true}, {{2, 3, 4}, {}, false},        {{17}, {17}, false},
  };
  const int last = static_cast<int>(BinaryOp::Greater);
  for (DType dt : kFloats) {
    for (const Case& c : cases) {
      for (int k = 0; k <= last; ++k) {
        BinaryOp op = static_cast<BinaryOp>(k);
        bool ints = op == BinaryOp::Equal || op == BinaryOp::Greater || op == BinaryOp::Maximum ||
                    op == BinaryOp::Minimum;
        Tensor a = ints ? rnd_ints(c.a, 30 + k, dt) : rnd(c.a, 30 + k, dt);
        Tensor b = ints ? rnd_ints(c.b, 60 + k, dt) : rnd(c.b, 60 + k, dt, 0.5, 2.0);
        parity(
            [&](Device dev) {
              Tensor av = c.transpose_a ? transpose(a.to(dev), 0, 1) : a.to(dev);
              Shape out_shape = broadcast_shapes(av.shape(), c.b, "test");
              Tensor ae = expand(av, out_shape), be = expand(b.to(dev), out_shape);
              Tensor out = Tensor::empty(out_shape, dt, dev);
              kernels(dev).binary(op, ae.view(), be.view(), out.view());
              // In place: out aliases a contiguous a.
              Tensor acc = contiguous(ae).clone();
              kernels(dev).binary(op, acc.view(), be.view(), acc.view());
              return std::vector<Tensor>{out, acc};
            },
            tol_for(dt),
            "binary op " + std::to_string(k) + " " + shape_str(c.a) + " " + shape_str(c.b));
      }
    }
  }
}

TEST_CASE("cuda: binary ops and gradients with broadcasting through autograd" *
          doctest::skip(kNoGpu)) {
  for (DType dt : kFloats) {
    parity(
        [&](Device dev) {
          Tensor a = leaf(rnd({4, 17, 33}, 70, dt), dev);
          Tensor b = leaf(rnd({17, 1}, 71, dt, 0.5, 2.0), dev);
          Tensor c = leaf(rnd({33}, 72, dt), dev);
          Tensor y = add(div(mul(sub(a, c), b), add(b, 1.0)), maximum(a, c));
          Tensor z = add(y, mul(equal(a, a), greater(a, c)));
          Tensor w = rnd({4, 17, 33}, 73, dt).to(dev);
          sum(mul(z, w)).backward();
          return std::vector<Tensor>{z, a.grad(), b.grad(), c.grad()};
        },
        loose_for(dt), "broadcast ops");
  }
}

TEST_CASE("cuda: where selects with any condition dtype" * doctest::skip(kNoGpu)) {
  for (DType dt : kFloats) {
    for (DType cond_dt : {DType::F32, DType::F64, DType::I32}) {
      Tensor cond = rnd_ints({17, 1}, 80).to(cond_dt);
      Tensor a = rnd({1000}, 81, dt), b = rnd({1000, 17}, 82, dt);
      parity(
          [&](Device dev) {
            Shape shape{17, 1000};
            Tensor out = Tensor::empty(shape, dt, dev);
            kernels(dev).where(expand(cond.to(dev), shape).view(), expand(a.to(dev), shape).view(),
                               transpose(b.to(dev), 0, 1).view(), out.view());
            return std::vector<Tensor>{out};
          },
          kExact, "where");
    }
    parity(
        [&](Device dev) {
          Tensor x = leaf(rnd({5, 17}, 83, dt), dev), y = leaf(rnd({17}, 84, dt), dev);
          Tensor mask = greater(x.detach(), Tensor::zeros({1}, dt, dev));
          Tensor z = add(where(mask, x, y), masked_fill(x, mask, -3.0));
          sum(mul(z, z)).backward();
          return std::vector<Tensor>{z, x.grad(), y.grad()};
        },
        tol_for(dt), "where and masked_fill through autograd");
  }
}

// ---- reductions
// ----------------------------------------------------------------------------------

TEST_CASE("cuda: reductions over the middle axis match the CPU" * doctest::skip(kNoGpu)) {
  struct Case {
    int64_t outer, n, inner;
  };
  // Rows (inner 1): tiny, warp and block rows, split long rows; columns: direct and split.
  std::vector<Case> cases = {{1, 1, 1},      {17, 1, 1},     {1, 17, 1},    {3, 1000, 1},
                             {1000, 17, 1},  {1000, 2, 1},   {2, 5, 17},    {4, 1000, 17},
                             {100, 3, 1000}, {1, 300000, 1}, {3, 70001, 1}, {1, 100000, 3},
                             {5, 2000, 1025}};
  for (DType dt : kFloats) {
    for (const Case& c : cases) {
      Tensor x = rnd({c.outer * c.n * c.inner}, 90, dt);
      for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min}) {
        // Sums in another order: tolerance grows with n; max and min are exact.
        Tol tol = op != ReduceOp::Sum ? kExact
                  : dt == DType::F64  ? Tol{1e-10, 1e-12 * static_cast<double>(c.n)}
                                      : Tol{1e-4, 2e-6 * static_cast<double>(c.n)};
        parity(
            [&](Device dev) {
              Tensor in = x.to(dev);
              Tensor out = Tensor::empty({c.outer * c.inner}, dt, dev);
              kernels(dev).reduce(op, in.view(), c.outer, c.n, c.inner, out.view());
              return std::vector<Tensor>{out};
            },
            tol,
            "reduce op " + std::to_string(static_cast<int>(op)) + " [" + std::to_string(c.outer) +
                ", " + std::to_string(c.n) + ", " + std::to_string(c.inner) + "]");
      }
    }
  }
}

TEST_CASE("cuda: sum mean and max over axes with gradients" * doctest::skip(kNoGpu)) {
  for (DType dt : kFloats) {
    parity(
        [&](Device dev) {
          Tensor x = leaf(rnd({6, 17, 40}, 100, dt), dev);
          Tensor xt = transpose(x, 0, 2);  // [40, 17, 6], non-contiguous
          Tensor a = sum(xt, {1});
          Tensor b = mean(x, {0, 2}, true);
          Tensor c = max(xt, {0, 2});
          Tensor d = sum(x);
          Tensor total = add(add(sum(mul(a, a)), sum(b)), add(sum(mul(c, c)), d));
          total.backward();
          return std::vector<Tensor>{a, b, c, d, x.grad()};
        },
        loose_for(dt), "sum/mean/max");
  }
}

TEST_CASE("cuda: logcumsumexp forward and backward match the CPU" * doctest::skip(kNoGpu)) {
  struct Case {
    Shape shape;
    int64_t axis;
  };
  // Warp scans (inner 1, or few columns) and a thread per column (many columns, short n).
  std::vector<Case> cases = {
      {{1}, 0},         {{17}, 0},         {{3, 1000}, 1},      {{5, 3001}, 1},
      {{2, 17, 40}, 1}, {{2, 100, 40}, 1}, {{70, 100, 128}, 1}, {{1000, 3}, 0}};
  for (DType dt : kFloats) {
    for (const Case& c : cases) {
      parity(
          [&](Device dev) {
            Tensor x = leaf(mul(rnd(c.shape, 110, dt), 5.0), dev);
            Tensor y = logcumsumexp(x, c.axis);
            Tensor w = rnd(c.shape, 111, dt).to(dev);
            sum(mul(y, w)).backward();
            return std::vector<Tensor>{y, x.grad()};
          },
          dt == DType::F64 ? Tol{1e-9, 1e-9} : Tol{1e-4, 1e-4},
          "logcumsumexp " + shape_str(c.shape));
    }
  }
}

// ---- matrix products --------------------------------------------------------------------------

TEST_CASE("cuda: gemm matches the CPU for transposes batches and broadcast" *
          doctest::skip(kNoGpu)) {
  struct Size {
    int64_t m, n, k;
  };
  for (DType dt : kFloats) {
    for (Size s : std::vector<Size>{{1, 1, 1}, {17, 5, 13}, {64, 1000, 17}, {300, 17, 1000}}) {
      for (int flags = 0; flags < 4; ++flags) {
        for (int64_t batch : {1, 3}) {
          for (bool broadcast_a : {false, true}) {
            if (broadcast_a && batch == 1) continue;
            bool ta = flags & 1, tb = flags & 2;
            int64_t items_a = broadcast_a ? 1 : batch;
            Tensor a = rnd({items_a * s.m * s.k}, 120, dt);
            Tensor b = rnd({batch * s.k * s.n}, 121, dt);
            Tensor c0 = rnd({batch * s.m * s.n}, 122, dt);
            for (double beta : {0.0, 0.25}) {
              parity(
                  [&](Device dev) {
                    Tensor A = a.to(dev), B = b.to(dev), C = c0.to(dev).clone();
                    GemmArgs g;
                    g.dtype = dt;
                    g.trans_a = ta, g.trans_b = tb;
                    g.m = s.m, g.n = s.n, g.k = s.k;
                    g.a = A.raw_data(), g.lda = ta ? s.m : s.k;
                    g.stride_a = broadcast_a ? 0 : s.m * s.k;
                    g.b = B.raw_data(), g.ldb = tb ? s.k : s.n, g.stride_b = s.k * s.n;
                    g.c = C.raw_data(), g.ldc = s.n, g.stride_c = s.m * s.n;
                    g.batch = batch;
                    g.alpha = 0.5, g.beta = beta;
                    kernels(dev).gemm(g);
                    return std::vector<Tensor>{C};
                  },
                  dt == DType::F64 ? Tol{1e-10, 1e-11} : Tol{1e-4, 1e-4},
                  "gemm m=" + std::to_string(s.m) + " n=" + std::to_string(s.n) +
                      " k=" + std::to_string(s.k) + " flags=" + std::to_string(flags) +
                      " batch=" + std::to_string(batch) + (broadcast_a ? " broadcast" : ""));
            }
          }
        }
      }
    }
  }
}

TEST_CASE("cuda: matmul and linear with gradients match the CPU" * doctest::skip(kNoGpu)) {
  for (DType dt : kFloats) {
    parity(
        [&](Device dev) {
          Tensor a = leaf(rnd({2, 1, 17, 9}, 130, dt), dev);
          Tensor b = leaf(rnd({3, 13, 9}, 131, dt), dev);  // used transposed
          Tensor w = leaf(rnd({5, 13}, 132, dt), dev);
          Tensor bias = leaf(rnd({5}, 133, dt), dev);
          Tensor y = matmul(a, transpose(b, 1, 2));  // [2, 3, 17, 13]
          Tensor z = linear(y, w, bias);             // [2, 3, 17, 5]
          Tensor u = matmul(transpose(z, 2, 3), z);  // [2, 3, 5, 5]
          Tensor r = rnd({2, 3, 5, 5}, 134, dt).to(dev);
          sum(mul(u, r)).backward();
          return std::vector<Tensor>{y, z, u, a.grad(), b.grad(), w.grad(), bias.grad()};
        },
        dt == DType::F64 ? Tol{1e-10, 1e-11} : Tol{1e-4, 1e-4}, "matmul/linear");
  }
}

// ---- row kernels -------------------------------------------------------------------------------

TEST_CASE("cuda: softmax and log_softmax forward and backward" * doctest::skip(kNoGpu)) {
  for (DType dt : kFloats) {
    for (int64_t rows : {1, 17, 300}) {
      for (int64_t cols : {1, 17, 1000, 1025, 5000}) {
        for (bool log : {false, true}) {
          parity(
              [&](Device dev) {
                Tensor x = leaf(mul(rnd({rows, cols}, 140, dt), 8.0), dev);
                Tensor y = log ? log_softmax(x) : softmax(x);
                Tensor w = rnd({rows, cols}, 141, dt).to(dev);
                sum(mul(y, w)).backward();
                return std::vector<Tensor>{y, x.grad()};
              },
              loose_for(dt),
              std::string(log ? "log_softmax" : "softmax") + " [" + std::to_string(rows) + ", " +
                  std::to_string(cols) + "]");
        }
      }
    }
    // Along a leading axis (moved last through a transposed copy).
    parity(
        [&](Device dev) {
          Tensor x = leaf(rnd({40, 3, 7}, 142, dt), dev);
          Tensor y = softmax(x, 0);
          sum(mul(y, rnd({40, 3, 7}, 143, dt).to(dev))).backward();
          return std::vector<Tensor>{y, x.grad()};
        },
        loose_for(dt), "softmax axis 0");
  }
}

TEST_CASE("cuda: layer_norm forward and backward with and without affine" * doctest::skip(kNoGpu)) {
  for (DType dt : kFloats) {
    for (int64_t rows : {1, 17, 2000}) {
      for (int64_t cols : {1, 17, 1000, 3000}) {
        for (int affine = 0; affine < 3; ++affine) {  // gamma and beta / gamma only / none
          parity(
              [&](Device dev) {
                Tensor x = leaf(add(mul(rnd({rows, cols}, 150, dt), 3.0), 0.5), dev);
                Tensor g = affine < 2 ? leaf(rnd({cols}, 151, dt, 0.5, 1.5), dev) : Tensor();
                Tensor b = affine < 1 ? leaf(rnd({cols}, 152, dt), dev) : Tensor();
                Tensor y = layer_norm(x, g, b, 1e-5);
                sum(mul(y, rnd({rows, cols}, 153, dt).to(dev))).backward();
                return std::vector<Tensor>{y, x.grad(), g.defined() ? g.grad() : Tensor(),
                                           b.defined() ? b.grad() : Tensor()};
              },
              dt == DType::F64 ? Tol{1e-9, 1e-10} : Tol{1e-3, 1e-4},
              "layer_norm [" + std::to_string(rows) + ", " + std::to_string(cols) + "] affine " +
                  std::to_string(affine));
        }
      }
    }
  }
}

TEST_CASE("cuda: cross_entropy with ignore_index and label smoothing" * doctest::skip(kNoGpu)) {
  for (DType dt : kFloats) {
    for (int64_t rows : {1, 17, 500}) {
      for (int64_t cols : {1, 17, 1000, 5000}) {
        for (double smoothing : {0.0, 0.1}) {
          for (bool all_ignored : {false, true}) {
            Generator gen(160);
            std::vector<int32_t> targets(rows);
            for (int64_t r = 0; r < rows; ++r)
              targets[r] =
                  (all_ignored || r % 5 == 3) ? -100 : static_cast<int32_t>(gen.below(cols));
            parity(
                [&](Device dev) {
                  Tensor z = leaf(mul(rnd({rows, cols}, 161, dt), 4.0), dev);
                  Tensor t = Tensor::from_data(targets, {rows}, dev);
                  Tensor loss = cross_entropy(z, t, -100, smoothing);
                  mul(loss, 2.0).backward();
                  return std::vector<Tensor>{loss, z.grad()};
                },
                loose_for(dt),
                "cross_entropy [" + std::to_string(rows) + ", " + std::to_string(cols) +
                    "] smoothing " + std::to_string(smoothing) +
                    (all_ignored ? " all ignored" : ""));
          }
        }
      }
    }
  }
}

// ---- indexing and randomness ---------------------------------------------------------------

TEST_CASE("cuda: embedding gather and scatter-add with repeated ids" * doctest::skip(kNoGpu)) {
  for (DType dt : kFloats) {
    for (int64_t count : {1, 17, 1000, 20000}) {
      Generator gen(170);
      std::vector<int32_t> ids(count);
      // Skewed: id 3 about half of the time (a long segment), the rest spread over the table.
      for (auto& id : ids) id = gen.below(2) ? 3 : static_cast<int32_t>(gen.below(50));
      parity(
          [&](Device dev) {
            Tensor table = leaf(rnd({50, 17}, 171, dt), dev);
            Tensor idx = Tensor::from_data(ids, {count}, dev);
            Tensor out = embedding(table, idx);
            sum(mul(out, rnd({count, 17}, 172, dt).to(dev))).backward();
            return std::vector<Tensor>{out, table.grad()};
          },
          // Same additions in the same order as the CPU: bit-identical.
          kExact, "embedding count " + std::to_string(count));
    }
  }
  // gather_rows moves int32 rows too.
  parity(
      [](Device dev) {
        Tensor table = rnd_ints({9, 4}, 173).to(DType::I32).to(dev);
        Tensor idx = Tensor::from_data(std::vector<int32_t>{8, 0, 0, 5}, {4}, dev);
        Tensor out = Tensor::empty({4, 4}, DType::I32, dev);
        kernels(dev).gather_rows(table.view(), idx.view(), out.view(), 4, 4);
        return std::vector<Tensor>{out};
      },
      kExact, "int32 gather");
}

TEST_CASE("cuda: dropout masks are bit-identical to the CPU" * doctest::skip(kNoGpu)) {
  for (DType dt : kFloats) {
    for (int64_t n : {1, 17, 100003}) {
      for (double p : {0.1, 0.5, 0.9}) {
        parity(
            [&](Device dev) {
              Tensor mask = Tensor::empty({n}, dt, dev);
              kernels(dev).dropout_mask(mask.view(), p, 1234567);
              Tensor x = leaf(rnd({n}, 180, dt), dev);
              Tensor y = dropout(x, p, true, 99);
              sum(y).backward();
              return std::vector<Tensor>{mask, y, x.grad()};
            },
            kExact, "dropout n=" + std::to_string(n) + " p=" + std::to_string(p));
      }
    }
  }
}

// ---- Fourier transforms ----------------------------------------------------------------------

TEST_CASE("cuda: fft and inverse fft along any axis" * doctest::skip(kNoGpu)) {
  struct Case {
    Shape shape;
    int64_t axis;
  };
  std::vector<Case> cases = {{{1, 2}, 0},        {{17, 2}, 0},       {{1000, 2}, 0},
                             {{3, 17, 5, 2}, 1}, {{7, 16, 2, 2}, 1}, {{6, 5, 4, 2}, 0},
                             {{4, 3, 12, 2}, 2}};
  for (DType dt : kFloats) {
    double rel = dt == DType::F64 ? 1e-11 : 2e-5;
    for (const Case& c : cases) {
      for (bool inverse : {false, true}) {
        parity(
            [&](Device dev) {
              Tensor x = leaf(rnd(c.shape, 190, dt), dev);
              Tensor y = fft(x, c.axis, inverse);
              sum(mul(y, rnd(c.shape, 191, dt).to(dev))).backward();
              return std::vector<Tensor>{y, x.grad()};
            },
            Tol{0, rel * std::sqrt(static_cast<double>(c.shape[c.axis])) * 4},
            "fft " + shape_str(c.shape) + (inverse ? " inverse" : ""));
      }
    }
    // A contiguous view that starts between two complex numbers (staged to an aligned copy).
    parity(
        [&](Device dev) {
          Tensor flat = rnd({2001}, 192, dt).to(dev);
          Tensor x = reshape(narrow(flat, 0, 1, 2000), {1000, 2});
          return std::vector<Tensor>{fft(x, 0)};
        },
        Tol{0, rel * 200}, "fft of an unaligned view");
  }
}

TEST_CASE("cuda: fft2_real with and without per-item lengths" * doctest::skip(kNoGpu)) {
  struct Case {
    Shape shape;
    std::vector<int32_t> lengths;  // empty: none
  };
  std::vector<Case> cases = {
      {{2, 5, 6}, {}},          {{2, 5, 6}, {3, 5}}, {{3, 17, 9}, {}},
      {{3, 17, 9}, {0, 17, 1}}, {{4, 8, 1}, {}},     {{4, 8, 1}, {8, 2, 5, 0}},
      {{2, 1, 7}, {}},          {{2, 1, 7}, {1, 0}}, {{2, 64, 32}, {64, 64}},
      {{1, 1000, 2}, {}},
  };
  for (DType dt : kFloats) {
    double rel = dt == DType::F64 ? 1e-11 : 1e-5;
    for (const Case& c : cases) {
      parity(
          [&](Device dev) {
            Tensor x = leaf(rnd(c.shape, 200, dt), dev);
            Tensor lens =
                c.lengths.empty()
                    ? Tensor()
                    : Tensor::from_data(c.lengths, {static_cast<int64_t>(c.lengths.size())}, dev);
            Tensor y = fft2_real(x, lens);
            sum(mul(y, rnd(c.shape, 201, dt).to(dev))).backward();
            return std::vector<Tensor>{y, x.grad()};
          },
          Tol{0, rel * 4 * std::sqrt(static_cast<double>(numel_of(c.shape)))},
          "fft2_real " + shape_str(c.shape) + (c.lengths.empty() ? "" : " with lengths"));
    }
  }
}

// ---- optimizer updates -----------------------------------------------------------------------

TEST_CASE("cuda: adam and sgd updates match the CPU" * doctest::skip(kNoGpu)) {
  for (DType dt : kFloats) {
    Tol tol = dt == DType::F64 ? Tol{1e-12, 1e-14} : Tol{1e-6, 1e-8};
    for (int64_t n : {1, 17, 1000}) {
      for (int variant = 0; variant < 3; ++variant) {
        parity(
            [&](Device dev) {
              Tensor p = rnd({n}, 210, dt).to(dev).clone();
              Tensor m = Tensor::zeros({n}, dt, dev), v = Tensor::zeros({n}, dt, dev);
              for (int step = 1; step <= 3; ++step) {
                Tensor g = rnd({n}, 211 + step, dt).to(dev);
                AdamArgs a{};
                a.lr = 1e-2, a.beta1 = 0.9, a.beta2 = 0.999, a.eps = 1e-8;
                a.weight_decay = variant == 0 ? 0.0 : 0.05;
                a.decoupled = variant == 2;
                a.bias_correction1 = 1 - std::pow(a.beta1, step);
                a.bias_correction2 = 1 - std::pow(a.beta2, step);
                kernels(dev).adam_update(p.view(), g.view(), m.view(), v.view(), a);
              }
              return std::vector<Tensor>{p, m, v};
            },
            tol, "adam variant " + std::to_string(variant));
        parity(
            [&](Device dev) {
              Tensor p = rnd({n}, 220, dt).to(dev).clone();
              Tensor buf = Tensor::zeros({n}, dt, dev);
              for (int step = 1; step <= 3; ++step) {
                Tensor g = rnd({n}, 221 + step, dt).to(dev);
                SgdArgs a{};
                a.lr = 0.1;
                a.momentum = variant == 0 ? 0.0 : 0.9;
                a.dampening = 0.1;
                a.weight_decay = 1e-3;
                a.nesterov = variant == 2;
                a.first_step = step == 1;
                kernels(dev).sgd_update(p.view(), g.view(), buf.view(), a);
              }
              return std::vector<Tensor>{p, buf};
            },
            tol, "sgd variant " + std::to_string(variant));
      }
    }
  }
}

// ---- a small model on both devices ------------------------------------------------------------

namespace {

class TinyModel : public Module {
 public:
  static constexpr int64_t kVocab = 37, kDim = 32;
  explicit TinyModel(uint64_t seed) {
    Generator gen(seed);
    emb = register_module("emb", std::make_shared<Embedding>(kVocab, kDim, gen));
    MixerConfig c;
    c.name = "attention";
    c.dim = kDim;
    c.heads = 4;
    c.max_len = 16;
    c.seed = seed;
    mixer = register_module("mixer", make_mixer(c));
    norm1 = register_module("norm1", std::make_shared<LayerNorm>(kDim));
    norm2 = register_module("norm2", std::make_shared<LayerNorm>(kDim));
    ffn = register_module("ffn", std::make_shared<FeedForward>(kDim, 2 * kDim, gen));
    head = register_module("head", std::make_shared<Linear>(kDim, kVocab, true, gen));
  }
  std::string type_name() const override { return "TinyModel"; }

  Tensor loss(const Tensor& ids, const Tensor& targets, const MixerContext& ctx,
              uint64_t dropout_seed) {
    Tensor x = emb->forward(ids);
    x = add(x, mixer->forward(norm1->forward(x), ctx));
    x = add(x, dropout(ffn->forward(norm2->forward(x)), 0.1, true, dropout_seed));
    return cross_entropy(head->forward(x), targets, -100, 0.1);
  }

  std::shared_ptr<Embedding> emb;
  std::shared_ptr<Mixer> mixer;
  std::shared_ptr<LayerNorm> norm1, norm2;
  std::shared_ptr<FeedForward> ffn;
  std::shared_ptr<Linear> head;
};

}  // namespace

TEST_CASE("cuda: a small model trains the same on both devices" * doctest::skip(kNoGpu)) {
  const int64_t batch = 3, len = 12;
  std::vector<int32_t> lengths{12, 7, 10};
  Generator gen(230);
  std::vector<int32_t> ids(batch * len), targets(batch * len);
  for (int64_t i = 0; i < batch * len; ++i) {
    ids[i] = static_cast<int32_t>(gen.below(TinyModel::kVocab));
    targets[i] =
        (i % len) >= lengths[i / len] ? -100 : static_cast<int32_t>(gen.below(TinyModel::kVocab));
  }
  for (DType dt : kFloats) {
    Tol tol = dt == DType::F64 ? Tol{1e-8, 1e-10} : Tol{2e-3, 2e-5};
    TinyModel cpu_model(7), gpu_model(7);
    cpu_model.to(dt);
    gpu_model.to(dt);
    gpu_model.to(gpu());
    auto cpu_params = cpu_model.named_parameters(), gpu_params = gpu_model.named_parameters();
    REQUIRE(cpu_params.size() == gpu_params.size());
    // SGD with momentum: linear in the gradients. (Adam would blow float noise in gradients
    // that are zero in exact arithmetic, like the key bias's, up to lr-sized updates.)
    std::vector<Tensor> cpu_buf, gpu_buf;
    for (const auto& [name, p] : cpu_params) {
      cpu_buf.push_back(Tensor::zeros(p.shape(), dt));
      gpu_buf.push_back(Tensor::zeros(p.shape(), dt, gpu()));
    }
    for (int step = 1; step <= 3; ++step) {
      auto run = [&](TinyModel& model, Device dev,
                     std::vector<std::pair<std::string, Tensor>>& params,
                     std::vector<Tensor>& buf) {
        MixerContext ctx;
        ctx.lengths = lengths;
        ctx.valid = length_mask(lengths, len, dt, dev);
        model.zero_grad();
        Tensor loss = model.loss(Tensor::from_data(ids, {batch, len}, dev),
                                 Tensor::from_data(targets, {batch, len}, dev), ctx, 500 + step);
        loss.backward();
        std::vector<Tensor> grads;
        for (size_t i = 0; i < params.size(); ++i) {
          Tensor p = params[i].second;
          Tensor g = p.grad();
          REQUIRE(g.defined());
          grads.push_back(g.clone());
          SgdArgs a{};
          a.lr = 0.1, a.momentum = 0.9, a.dampening = 0.0, a.weight_decay = 1e-4;
          a.nesterov = true;
          a.first_step = step == 1;
          kernels(dev).sgd_update(p.view(), g.view(), buf[i].view(), a);
        }
        return std::make_pair(loss, grads);
      };
      auto [cpu_loss, cpu_grads] = run(cpu_model, Device::cpu(), cpu_params, cpu_buf);
      auto [gpu_loss, gpu_grads] = run(gpu_model, gpu(), gpu_params, gpu_buf);
      std::string tag = std::string(dtype_name(dt)) + " step " + std::to_string(step);
      expect_close(cpu_loss, gpu_loss, tol, "loss " + tag);
      for (size_t i = 0; i < cpu_params.size(); ++i) {
        expect_close(cpu_grads[i], gpu_grads[i], tol, "grad of " + cpu_params[i].first + " " + tag);
        expect_close(cpu_params[i].second, gpu_params[i].second, tol,
                     "updated " + cpu_params[i].first + " " + tag);
      }
    }
  }
}

// ---- the CUDA backend's own promises ----------------------------------------------------------

#ifdef MIXLAB_HAVE_CUDA
TEST_CASE("cuda: the caching allocator serves repeated steps without cudaMalloc" *
          doctest::skip(kNoGpu)) {
  auto& backend = dynamic_cast<CudaBackend&>(backend_for(gpu()));
  auto step = [&] {
    Tensor x = leaf(rnd({64, 256}, 240), gpu());
    Tensor y = softmax(matmul(x, transpose(x, 0, 1)));
    Tensor loss = sum(mul(y, y));
    loss.backward();
    return loss.item();
  };
  double first = step();
  step();  // warm-up: the cache settles within a step or two
  step();
  CudaMemoryStats before = backend.memory_stats();
  for (int i = 0; i < 5; ++i) CHECK(step() == first);
  CudaMemoryStats after = backend.memory_stats();
  CHECK(after.device_mallocs == before.device_mallocs);
  CHECK(after.cache_hits > before.cache_hits);
  CHECK(after.bytes_cached > 0);
  backend.empty_cache();
  CHECK(backend.memory_stats().bytes_cached == 0);
  CHECK(step() == first);  // still works after giving the memory back
}

TEST_CASE("cuda: failures are mixlab::Error and leave the device usable" * doctest::skip(kNoGpu)) {
  // 32 TiB: cudaMalloc fails, the allocator empties its cache, retries, and reports.
  CHECK_THROWS_AS(Tensor::empty({int64_t(1) << 43}, DType::F32, gpu()), Error);
  Tensor ok = Tensor::ones({3}, DType::F32, gpu());
  CHECK(sum(ok).item() == 3.0);
  // Devices never mix silently.
  CHECK_THROWS_AS(add(Tensor::ones({3}), ok), Error);
  // An integer tensor is not a float kernel's input.
  View v = Tensor::zeros({4}, DType::I32, gpu()).view();
  CHECK_THROWS_AS(backend_for(gpu()).unary(UnaryOp::Exp, v, v, 0.0), Error);
}
#endif

TEST_CASE("cuda: gradients flow back across Tensor.to" * doctest::skip(kNoGpu)) {
  for (DType dt : kFloats) {
    Tensor x = rnd({17, 5}, 250, dt);
    x.set_requires_grad(true);
    Tensor y = tanh(x.to(gpu()));              // on the GPU
    Tensor z = mul(y.to(Device::cpu()), 2.0);  // back on the host
    sum(z).backward();
    REQUIRE(x.grad().defined());
    CHECK(x.grad().device() == Device::cpu());
    Tensor x2 = rnd({17, 5}, 250, dt);
    x2.set_requires_grad(true);
    sum(mul(tanh(x2), 2.0)).backward();
    expect_close(x2.grad(), x.grad(), tol_for(dt), "grad through to()");
  }
}
