// The CPU reference backend: OpenBLAS for matrix products, FFTW for Fourier transforms, plain
// loops (vectorisable, split over the worker pool for large inputs) for everything else. Each
// kernel family has its own file in this folder.
#pragma once
#include "backends/backend.h"

namespace mixlab {

class CpuBackend final : public Backend {
 public:
  CpuBackend();  // puts OpenBLAS on one thread (cpu_gemm.cpp)
  const char* name() const override { return "cpu"; }
  DeviceType device_type() const override { return DeviceType::CPU; }

  void* allocate(size_t bytes) override;
  void deallocate(void* ptr, size_t bytes) override;
  void copy_from_host(void* dst, const void* src, size_t bytes) override;
  void copy_to_host(void* dst, const void* src, size_t bytes) override;

  void copy(const View& src, const View& dst) override;
  void fill(const View& dst, double value) override;

  void unary(UnaryOp op, const View& x, const View& y, double alpha) override;
  void binary(BinaryOp op, const View& a, const View& b, const View& out) override;
  void where(const View& cond, const View& a, const View& b, const View& out) override;

  void reduce(ReduceOp op, const View& x, int64_t outer, int64_t n, int64_t inner,
              const View& out) override;
  void logcumsumexp(const View& x, int64_t outer, int64_t n, int64_t inner, const View& y) override;
  void logcumsumexp_backward(const View& x, const View& y, const View& dy, int64_t outer, int64_t n,
                             int64_t inner, const View& dx) override;

  void gemm(const GemmArgs& args) override;

  void softmax(const View& x, const View& y, int64_t rows, int64_t cols, bool log) override;
  void softmax_backward(const View& y, const View& dy, const View& dx, int64_t rows, int64_t cols,
                        bool log) override;
  void layer_norm(const View& x, const View& gamma, const View& beta, const View& y,
                  const View& mean, const View& rstd, int64_t rows, int64_t cols,
                  double eps) override;
  void layer_norm_backward(const View& dy, const View& x, const View& mean, const View& rstd,
                           const View& gamma, const View& dx, const View& dgamma, const View& dbeta,
                           int64_t rows, int64_t cols) override;
  void cross_entropy(const View& logits, const View& targets, const View& loss, const View& lse,
                     int64_t rows, int64_t cols, int64_t ignore_index, double smoothing) override;
  void cross_entropy_backward(const View& logits, const View& targets, const View& lse,
                              const View& scale, const View& dlogits, int64_t rows, int64_t cols,
                              int64_t ignore_index, double smoothing) override;

  void gather_rows(const View& table, const View& idx, const View& out, int64_t count,
                   int64_t dim) override;
  void scatter_add_rows(const View& grad, const View& idx, const View& dtable, int64_t count,
                        int64_t dim) override;

  void dropout_mask(const View& mask, double p, uint64_t seed) override;

  void fft(const View& x, const View& y, int64_t outer, int64_t n, int64_t inner,
           bool inverse) override;
  void fft2_real(const View& x, const View& lengths, const View& y, int64_t batch, int64_t n,
                 int64_t d) override;

  void adam_update(const View& param, const View& grad, const View& m, const View& v,
                   const AdamArgs& args) override;
  void sgd_update(const View& param, const View& grad, const View& momentum_buffer,
                  const SgdArgs& args) override;
};

}  // namespace mixlab
