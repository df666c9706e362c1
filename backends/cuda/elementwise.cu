// Elementwise kernels: strided copy with dtype conversion, fill, unary maps, broadcast binary
// ops and where. Each op is a template parameter (its own kernel, no switch per element); views
// are coalesced on the host like the CPU's StridedLoop, and fully contiguous operands take a
// flat loop without index arithmetic. The formulas are the CPU's own (backends/elementwise_ops.h);
// the kernels' switches are generated from the op lists there.
#include "backends/cuda/common.cuh"
#include "backends/cuda/cuda_math.cuh"

namespace mixlab {
namespace cuda {
namespace {

#define MIXLAB_GRID_STRIDE(Index, i, n)                                              \
  for (Index i = static_cast<Index>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); \
       i += static_cast<Index>(blockDim.x) * gridDim.x)

// ---- kernels ------------------------------------------------------------------------------------

template <typename S, typename D>
__global__ void copy_flat(const S* src, D* dst, int64_t n) {
  MIXLAB_GRID_STRIDE(int64_t, i, n) dst[i] = static_cast<D>(src[i]);
}

template <typename S, typename D, typename Index>
__global__ void copy_strided(const S* src, D* dst, StridedIndexer<2, Index> ix, Index n) {
  MIXLAB_GRID_STRIDE(Index, i, n) {
    Index off[2];
    ix.offsets(i, off);
    dst[off[1]] = static_cast<D>(src[off[0]]);
  }
}

template <typename T>
__global__ void fill_kernel(T* dst, int64_t n, T value) {
  MIXLAB_GRID_STRIDE(int64_t, i, n) dst[i] = value;
}

template <UnaryOp OP, typename T>
__global__ void unary_kernel(const T* x, T* y, int64_t n, T alpha) {
  MIXLAB_GRID_STRIDE(int64_t, i, n) y[i] = apply_unary<OP, CudaMath>(x[i], alpha);
}

// `out` may alias `a` (in-place accumulation): each element is read before it is written, by
// the same thread, so no restrict qualifiers here.
template <BinaryOp OP, typename T>
__global__ void binary_flat(const T* a, const T* b, T* out, int64_t n) {
  MIXLAB_GRID_STRIDE(int64_t, i, n) out[i] = apply_binary<OP>(a[i], b[i]);
}

template <BinaryOp OP, typename T, typename Index>
__global__ void binary_strided(const T* a, const T* b, T* out, StridedIndexer<3, Index> ix,
                               Index n) {
  MIXLAB_GRID_STRIDE(Index, i, n) {
    Index off[3];
    ix.offsets(i, off);
    out[off[2]] = apply_binary<OP>(a[off[0]], b[off[1]]);
  }
}

template <typename T, typename C, typename Index>
__global__ void where_kernel(const C* cond, const T* a, const T* b, T* out,
                             StridedIndexer<4, Index> ix, Index n) {
  MIXLAB_GRID_STRIDE(Index, i, n) {
    Index off[4];
    ix.offsets(i, off);
    out[off[3]] = cond[off[0]] != C(0) ? a[off[1]] : b[off[2]];
  }
}

// Runs fn(Index{}) with the narrowest index type the walk allows.
template <int N, typename F>
void with_index(const Strided<N>& s, const F& fn) {
  if (s.fits_32bit())
    fn(uint32_t{});
  else
    fn(int64_t{});
}

template <typename T>
void launch_unary(UnaryOp op, const T* x, T* y, int64_t n, T a, cudaStream_t st) {
  unsigned int grid = grid_for(n);
  switch (op) {
#define MIXLAB_UNARY_CASE(NAME)                                          \
  case UnaryOp::NAME:                                                    \
    unary_kernel<UnaryOp::NAME, T><<<grid, kBlock, 0, st>>>(x, y, n, a); \
    return;
    MIXLAB_UNARY_OPS(MIXLAB_UNARY_CASE)
#undef MIXLAB_UNARY_CASE
  }
  fail("cuda unary: unknown op ", static_cast<int>(op));
}

template <BinaryOp OP, typename T>
void launch_binary_op(const View& a, const View& b, const View& out, cudaStream_t st) {
  Strided<3> s(out, {&a, &b, &out});
  int64_t n = s.numel();
  const T* pa = a.as<T>();
  const T* pb = b.as<T>();
  T* po = out.as<T>();
  if (s.contiguous) {
    binary_flat<OP, T><<<grid_for(n), kBlock, 0, st>>>(pa, pb, po, n);
    return;
  }
  with_index(s, [&](auto tag) {
    using Index = decltype(tag);
    binary_strided<OP, T, Index><<<grid_for(n), kBlock, 0, st>>>(
        pa, pb, po, StridedIndexer<3, Index>(s), static_cast<Index>(n));
  });
}

template <typename T>
void launch_binary(BinaryOp op, const View& a, const View& b, const View& out, cudaStream_t st) {
  switch (op) {
#define MIXLAB_BINARY_CASE(NAME) \
  case BinaryOp::NAME:           \
    return launch_binary_op<BinaryOp::NAME, T>(a, b, out, st);
    MIXLAB_BINARY_OPS(MIXLAB_BINARY_CASE)
#undef MIXLAB_BINARY_CASE
  }
  fail("cuda binary: unknown op ", static_cast<int>(op));
}

}  // namespace
}  // namespace cuda

using namespace cuda;

void CudaBackend::copy(const View& src, const View& dst) {
  int64_t total = dst.numel();
  if (total == 0) return;
  activate();
  Strided<2> s(dst, {&src, &dst});
  if (s.contiguous && src.dtype == dst.dtype) {
    MIXLAB_CUDA_CHECK(cudaMemcpyAsync(dst.data, src.data, total * dtype_size(dst.dtype),
                                      cudaMemcpyDeviceToDevice, stream_));
    return;
  }
  dispatch_all(src.dtype, [&](auto s_tag) {
    dispatch_all(dst.dtype, [&](auto d_tag) {
      using S = decltype(s_tag);
      using D = decltype(d_tag);
      if (s.contiguous) {
        copy_flat<S, D><<<grid_for(total), kBlock, 0, stream_>>>(src.as<S>(), dst.as<D>(), total);
      } else {
        with_index(s, [&](auto i_tag) {
          using Index = decltype(i_tag);
          copy_strided<S, D, Index><<<grid_for(total), kBlock, 0, stream_>>>(
              src.as<S>(), dst.as<D>(), StridedIndexer<2, Index>(s), static_cast<Index>(total));
        });
      }
    });
  });
  check_launch("copy");
}

void CudaBackend::fill(const View& dst, double value) {
  int64_t n = dst.numel();
  if (n == 0) return;
  activate();
  dispatch_all(dst.dtype, [&](auto tag) {
    using T = decltype(tag);
    fill_kernel<T><<<grid_for(n), kBlock, 0, stream_>>>(dst.as<T>(), n, static_cast<T>(value));
  });
  check_launch("fill");
}

void CudaBackend::unary(UnaryOp op, const View& x, const View& y, double alpha) {
  int64_t n = x.numel();
  if (n == 0) return;
  activate();
  dispatch_floating(x.dtype, "unary", [&](auto tag) {
    using T = decltype(tag);
    launch_unary<T>(op, x.as<T>(), y.as<T>(), n, static_cast<T>(alpha), stream_);
  });
  check_launch("unary");
}

void CudaBackend::binary(BinaryOp op, const View& a, const View& b, const View& out) {
  if (out.numel() == 0) return;
  activate();
  dispatch_floating(out.dtype, "binary", [&](auto tag) {
    using T = decltype(tag);
    launch_binary<T>(op, a, b, out, stream_);
  });
  check_launch("binary");
}

void CudaBackend::where(const View& cond, const View& a, const View& b, const View& out) {
  int64_t n = out.numel();
  if (n == 0) return;
  activate();
  Strided<4> s(out, {&cond, &a, &b, &out});
  dispatch_floating(out.dtype, "where", [&](auto tag) {
    using T = decltype(tag);
    dispatch_all(cond.dtype, [&](auto ctag) {
      using C = decltype(ctag);
      with_index(s, [&](auto i_tag) {
        using Index = decltype(i_tag);
        where_kernel<T, C, Index><<<grid_for(n), kBlock, 0, stream_>>>(
            cond.as<C>(), a.as<T>(), b.as<T>(), out.as<T>(), StridedIndexer<4, Index>(s),
            static_cast<Index>(n));
      });
    });
  });
  check_launch("where");
}

}  // namespace mixlab
