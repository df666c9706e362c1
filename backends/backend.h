// The backend interface: the complete list of primitive kernels the engine needs from a device.
//
// Everything above this file (ops, autograd, nn, train) is device-independent and calls only
// these kernels. To add a device, implement this class (see backends/cpu/ for the reference and
// docs/kernels.md for the recipe) and register it in backends/registry.cpp; the op tests in
// tests/test_backend_parity.cpp then compare every kernel with the CPU on the same inputs.
//
// Conventions: a View is a pointer (already offset) plus shape and strides in elements. Unless a
// kernel says "strided", its inputs and outputs are contiguous. Row kernels see their data as
// [rows, cols] with cols the last (contiguous) axis. Index tensors are int32.
#pragma once
#include <cstdint>

#include "core/device.h"
#include "core/dtype.h"

namespace mixlab {

constexpr int kMaxDims = 8;

struct View {
  void* data = nullptr;
  DType dtype = DType::F32;
  int ndim = 0;
  int64_t shape[kMaxDims] = {};
  int64_t strides[kMaxDims] = {};

  int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < ndim; ++i) n *= shape[i];
    return n;
  }
  bool is_contiguous() const {
    int64_t s = 1;
    for (int i = ndim - 1; i >= 0; --i) {
      if (shape[i] != 1 && strides[i] != s) return false;
      s *= shape[i];
    }
    return true;
  }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data);
  }
};

// Elementwise maps y = f(x; alpha). The *Grad entries are derivatives f'(x) used by backward.
enum class UnaryOp : uint8_t {
  Neg,
  Exp,
  Log,
  Sqrt,
  Abs,
  Sign,
  Relu,
  Step,
  Sigmoid,
  Tanh,
  GeluErf,
  GeluTanh,
  GeluErfGrad,
  GeluTanhGrad,
  PowScalar,  // x^alpha
  AddScalar,  // x + alpha
  MulScalar,  // x * alpha
};
enum class BinaryOp : uint8_t { Add, Sub, Mul, Div, Maximum, Minimum, Equal, Greater };
enum class ReduceOp : uint8_t { Sum, Max, Min };

// C = alpha * op(A) @ op(B) + beta * C for `batch` row-major matrices. op(A) is m x k, op(B) is
// k x n; lda/ldb/ldc are row strides; stride_* step between batch items (0 broadcasts).
struct GemmArgs {
  DType dtype = DType::F32;
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0;
  const void* a = nullptr;
  int64_t lda = 0, stride_a = 0;
  const void* b = nullptr;
  int64_t ldb = 0, stride_b = 0;
  void* c = nullptr;
  int64_t ldc = 0, stride_c = 0;
  int64_t batch = 1;
  double alpha = 1.0, beta = 0.0;
};

struct AdamArgs {
  double lr, beta1, beta2, eps, weight_decay;
  bool decoupled;  // AdamW: decay the weights directly, not through the gradient
  double bias_correction1, bias_correction2;  // 1 - beta^step
};
struct SgdArgs {
  double lr, momentum, dampening, weight_decay;
  bool nesterov;
  bool first_step;  // momentum buffer starts as the gradient itself (PyTorch's rule)
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;
  virtual DeviceType device_type() const = 0;
  virtual bool supports(DType) const { return true; }

  // ---- memory ----
  virtual void* allocate(size_t bytes) = 0;
  virtual void deallocate(void* ptr, size_t bytes) = 0;
  virtual void copy_from_host(void* dst, const void* src, size_t bytes) = 0;
  virtual void copy_to_host(void* dst, const void* src, size_t bytes) = 0;
  virtual void synchronize() {}

  // ---- data movement ----
  // dst[i] = src[i] over dst's shape, both strided; converts dtype when they differ.
  virtual void copy(const View& src, const View& dst) = 0;
  virtual void fill(const View& dst, double value) = 0;  // dst contiguous

  // ---- elementwise ----
  virtual void unary(UnaryOp op, const View& x, const View& y, double alpha) = 0;
  // out = a op b; a and b are strided views already broadcast to out's shape (stride 0 on
  // broadcast axes); out is contiguous (it may alias a for in-place accumulation).
  virtual void binary(BinaryOp op, const View& a, const View& b, const View& out) = 0;
  // out = cond != 0 ? a : b, all three strided views broadcast to out's shape.
  virtual void where(const View& cond, const View& a, const View& b, const View& out) = 0;

  // ---- reductions: x contiguous seen as [outer, n, inner], out as [outer, inner] ----
  virtual void reduce(ReduceOp op, const View& x, int64_t outer, int64_t n, int64_t inner,
                      const View& out) = 0;
  // Running log-sum-exp along n of [outer, n, inner]: y[i] = log sum_{i' <= i} exp(x[i']).
  virtual void logcumsumexp(const View& x, int64_t outer, int64_t n, int64_t inner,
                            const View& y) = 0;
  // dx[j] = sum_{i >= j} dy[i] * exp(x[j] - y[i]), computed stably from the end.
  virtual void logcumsumexp_backward(const View& x, const View& y, const View& dy, int64_t outer,
                                     int64_t n, int64_t inner, const View& dx) = 0;

  // ---- linear algebra ----
  virtual void gemm(const GemmArgs& args) = 0;

  // ---- fused row kernels ----
  virtual void softmax(const View& x, const View& y, int64_t rows, int64_t cols, bool log) = 0;
  // dx = y * (dy - sum(dy*y)) (softmax) or dy - exp(y) * sum(dy) (log-softmax).
  virtual void softmax_backward(const View& y, const View& dy, const View& dx, int64_t rows,
                                int64_t cols, bool log) = 0;
  // gamma/beta may be null (data == nullptr). mean and rstd are [rows], saved for backward.
  virtual void layer_norm(const View& x, const View& gamma, const View& beta, const View& y,
                          const View& mean, const View& rstd, int64_t rows, int64_t cols,
                          double eps) = 0;
  // dgamma/dbeta may be null; when given they are overwritten (not accumulated).
  virtual void layer_norm_backward(const View& dy, const View& x, const View& mean,
                                   const View& rstd, const View& gamma, const View& dx,
                                   const View& dgamma, const View& dbeta, int64_t rows,
                                   int64_t cols) = 0;
  // loss[r] = smoothed cross-entropy of row r (0 where target == ignore_index); lse[r] saved.
  virtual void cross_entropy(const View& logits, const View& targets, const View& loss,
                             const View& lse, int64_t rows, int64_t cols, int64_t ignore_index,
                             double smoothing) = 0;
  // dlogits[r] = scale[r] * (softmax(logits[r]) - smoothed one-hot); 0 for ignored rows.
  virtual void cross_entropy_backward(const View& logits, const View& targets, const View& lse,
                                      const View& scale, const View& dlogits, int64_t rows,
                                      int64_t cols, int64_t ignore_index, double smoothing) = 0;

  // ---- indexing ----
  // out[i, :] = table[idx[i], :]; table [vocab, dim]. Indices are validated by the caller.
  virtual void gather_rows(const View& table, const View& idx, const View& out, int64_t count,
                           int64_t dim) = 0;
  // dtable[idx[i], :] += grad[i, :] (dtable zeroed by the caller).
  virtual void scatter_add_rows(const View& grad, const View& idx, const View& dtable,
                                int64_t count, int64_t dim) = 0;

  // ---- randomness ----
  // mask[i] = (counter_uniform(seed, i) >= p) / (1 - p): the same mask on every device.
  virtual void dropout_mask(const View& mask, double p, uint64_t seed) = 0;

  // ---- Fourier transforms (FNet) ----
  // Complex DFT along n of x [outer, n, inner, 2] (real, imaginary interleaved), unnormalised;
  // inverse flips the exponent's sign (still unnormalised).
  virtual void fft(const View& x, const View& y, int64_t outer, int64_t n, int64_t inner,
                   bool inverse) = 0;
  // y[b] = Re(DFT2(x[b])) over [n, d] for each b; with lengths (int32 [batch], data may be null)
  // item b is transformed at [lengths[b], d] and its rows >= lengths[b] are 0.
  virtual void fft2_real(const View& x, const View& lengths, const View& y, int64_t batch,
                         int64_t n, int64_t d) = 0;

  // ---- optimizer updates, one call per parameter tensor ----
  virtual void adam_update(const View& param, const View& grad, const View& m, const View& v,
                           const AdamArgs& args) = 0;
  virtual void sgd_update(const View& param, const View& grad, const View& momentum_buffer,
                          const SgdArgs& args) = 0;
};

// The backend that owns a device; throws Error when that device is not available.
Backend& backend_for(Device device);
// Whether a device of this type exists in this build and on this machine.
bool device_available(DeviceType type);

}  // namespace mixlab
