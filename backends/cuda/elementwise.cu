// Elementwise kernels: strided copy with dtype conversion, fill, unary maps, broadcast binary
// ops and where. Each op is a template parameter (its own kernel, no switch per element); views
// are coalesced on the host like the CPU's StridedLoop, and fully contiguous operands take a
// flat loop without index arithmetic. Formulas follow backends/cpu/cpu_elementwise.cpp exactly.
#include "backends/cuda/common.cuh"

namespace mixlab {
namespace cuda {
namespace {

constexpr double kSqrt2OverPi = 0.7978845608028654;  // sqrt(2/pi)
constexpr double kInvSqrt2 = 0.7071067811865476;
constexpr double kInvSqrt2Pi = 0.3989422804014327;  // 1/sqrt(2 pi)

template <UnaryOp OP, typename T>
__device__ __forceinline__ T apply_unary(T x, T alpha) {
  if constexpr (OP == UnaryOp::Neg) return -x;
  if constexpr (OP == UnaryOp::Exp) return d_exp(x);
  if constexpr (OP == UnaryOp::Log) return d_log(x);
  if constexpr (OP == UnaryOp::Sqrt) return d_sqrt(x);
  if constexpr (OP == UnaryOp::Abs) return d_abs(x);
  if constexpr (OP == UnaryOp::Sign) return static_cast<T>((x > 0) - (x < 0));
  if constexpr (OP == UnaryOp::Relu) return x > 0 ? x : T(0);
  if constexpr (OP == UnaryOp::Step) return x > 0 ? T(1) : T(0);
  if constexpr (OP == UnaryOp::Sigmoid) return T(1) / (T(1) + d_exp(-x));
  if constexpr (OP == UnaryOp::Tanh) return d_tanh(x);
  if constexpr (OP == UnaryOp::GeluErf) return T(0.5) * x * (T(1) + d_erf(x * T(kInvSqrt2)));
  if constexpr (OP == UnaryOp::GeluTanh) {
    T inner = T(kSqrt2OverPi) * (x + T(0.044715) * x * x * x);
    return T(0.5) * x * (T(1) + d_tanh(inner));
  }
  if constexpr (OP == UnaryOp::GeluErfGrad)  // Φ(x) + x φ(x)
    return T(0.5) * (T(1) + d_erf(x * T(kInvSqrt2))) + x * T(kInvSqrt2Pi) * d_exp(T(-0.5) * x * x);
  if constexpr (OP == UnaryOp::GeluTanhGrad) {
    T inner = T(kSqrt2OverPi) * (x + T(0.044715) * x * x * x);
    T t = d_tanh(inner);
    T dinner = T(kSqrt2OverPi) * (T(1) + T(3 * 0.044715) * x * x);
    return T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * dinner;
  }
  if constexpr (OP == UnaryOp::PowScalar) return d_pow(x, alpha);
  if constexpr (OP == UnaryOp::AddScalar) return x + alpha;
  if constexpr (OP == UnaryOp::MulScalar) return x * alpha;
  return x;
}

template <BinaryOp OP, typename T>
__device__ __forceinline__ T apply_binary(T a, T b) {
  if constexpr (OP == BinaryOp::Add) return a + b;
  if constexpr (OP == BinaryOp::Sub) return a - b;
  if constexpr (OP == BinaryOp::Mul) return a * b;
  if constexpr (OP == BinaryOp::Div) return a / b;
  if constexpr (OP == BinaryOp::Maximum) return a >= b ? a : b;
  if constexpr (OP == BinaryOp::Minimum) return a <= b ? a : b;
  if constexpr (OP == BinaryOp::Equal) return a == b ? T(1) : T(0);
  if constexpr (OP == BinaryOp::Greater) return a > b ? T(1) : T(0);
  return a;
}

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
  MIXLAB_GRID_STRIDE(int64_t, i, n) y[i] = apply_unary<OP>(x[i], alpha);
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
    MIXLAB_UNARY_CASE(Neg)
    MIXLAB_UNARY_CASE(Exp)
    MIXLAB_UNARY_CASE(Log)
    MIXLAB_UNARY_CASE(Sqrt)
    MIXLAB_UNARY_CASE(Abs)
    MIXLAB_UNARY_CASE(Sign)
    MIXLAB_UNARY_CASE(Relu)
    MIXLAB_UNARY_CASE(Step)
    MIXLAB_UNARY_CASE(Sigmoid)
    MIXLAB_UNARY_CASE(Tanh)
    MIXLAB_UNARY_CASE(GeluErf)
    MIXLAB_UNARY_CASE(GeluTanh)
    MIXLAB_UNARY_CASE(GeluErfGrad)
    MIXLAB_UNARY_CASE(GeluTanhGrad)
    MIXLAB_UNARY_CASE(PowScalar)
    MIXLAB_UNARY_CASE(AddScalar)
    MIXLAB_UNARY_CASE(MulScalar)
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
    case BinaryOp::Add:
      return launch_binary_op<BinaryOp::Add, T>(a, b, out, st);
    case BinaryOp::Sub:
      return launch_binary_op<BinaryOp::Sub, T>(a, b, out, st);
    case BinaryOp::Mul:
      return launch_binary_op<BinaryOp::Mul, T>(a, b, out, st);
    case BinaryOp::Div:
      return launch_binary_op<BinaryOp::Div, T>(a, b, out, st);
    case BinaryOp::Maximum:
      return launch_binary_op<BinaryOp::Maximum, T>(a, b, out, st);
    case BinaryOp::Minimum:
      return launch_binary_op<BinaryOp::Minimum, T>(a, b, out, st);
    case BinaryOp::Equal:
      return launch_binary_op<BinaryOp::Equal, T>(a, b, out, st);
    case BinaryOp::Greater:
      return launch_binary_op<BinaryOp::Greater, T>(a, b, out, st);
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
