// Matrix products: the triple loop, the linear layer's epilogue after it, and batched outer
// products.
#include "backends/fused_ops.h"
#include "backends/reference/reference_backend.h"

namespace mixlab {
namespace {

// C = alpha · op(A) op(B) + beta · C for each batch item, op(X) = X or Xᵀ:
//   C[i, j] = alpha · Σ_p op(A)[i, p] · op(B)[p, j] + beta · C[i, j]   (C not read when beta = 0)
// Items that share one C (gemm_sums_outer) add in outer order: the first writes with beta, the
// others add.
template <typename T>
void gemm_loops(const GemmArgs& g) {
  const bool sums = gemm_sums_outer(g);
  for (int64_t item = 0; item < g.batch; ++item) {
    const T* a =
        static_cast<const T*>(g.a) + gemm_item_offset(g, item, g.stride_a, g.outer_stride_a);
    const T* b =
        static_cast<const T*>(g.b) + gemm_item_offset(g, item, g.stride_b, g.outer_stride_b);
    T* c = static_cast<T*>(g.c) + gemm_item_offset(g, item, g.stride_c, g.outer_stride_c);
    const double beta = sums && item >= g.inner ? 1.0 : g.beta;
    for (int64_t i = 0; i < g.m; ++i) {
      for (int64_t j = 0; j < g.n; ++j) {
        T sum = 0;
        for (int64_t p = 0; p < g.k; ++p) {
          const T a_ip = g.trans_a ? a[p * g.lda + i] : a[i * g.lda + p];
          const T b_pj = g.trans_b ? b[j * g.ldb + p] : b[p * g.ldb + j];
          sum += a_ip * b_pj;
        }
        T& c_ij = c[i * g.ldc + j];
        c_ij = beta == 0 ? T(g.alpha) * sum : T(g.alpha) * sum + T(beta) * c_ij;
      }
    }
  }
}

}  // namespace

// C = alpha · op(A) op(B) + beta · C, item by item (gemm_loops)
void ReferenceBackend::gemm(const GemmArgs& g) {
  dispatch_floating(g.dtype, "gemm", [&](auto tag) { gemm_loops<decltype(tag)>(g); });
}

// The product, then a pass over C's rows (one item, C contiguous [m, n]):
//   Bias:          C += bias
//   BiasGelu:      C += bias, aux = gelu(C)
//   BiasGeluSlope: C += bias, aux = gelu(C), C = gelu'(C)
//   Times:         C *= aux
//   RowSums:       aux[i] = Σ_p op(A)[i, p]   (C as the product left it)
void ReferenceBackend::gemm_epilogue(const GemmArgs& g, GemmEpilogue epilogue, const View& bias,
                                     const View& aux) {
  check(g.batch == 1 && (g.m <= 1 || g.ldc == g.n), "gemm_epilogue: C must be one contiguous [",
        g.m, ", ", g.n, "] matrix (batch ", g.batch, ", ldc ", g.ldc, ")");
  gemm(g);
  dispatch_floating(g.dtype, "gemm_epilogue", [&](auto tag) {
    using T = decltype(tag);
    T* c = static_cast<T*>(g.c);
    const T* a = static_cast<const T*>(g.a);
    for (int64_t i = 0; i < g.m; ++i) {
      if (epilogue == GemmEpilogue::RowSums) {
        T sum = 0;
        for (int64_t p = 0; p < g.k; ++p) sum += g.trans_a ? a[p * g.lda + i] : a[i * g.lda + p];
        aux.as<T>()[i] = sum;
        continue;
      }
      for (int64_t j = 0; j < g.n; ++j) {
        T& x = c[i * g.n + j];
        if (epilogue == GemmEpilogue::Times) {
          x *= aux.as<T>()[i * g.n + j];
          continue;
        }
        x += bias.as<T>()[j];
        if (epilogue == GemmEpilogue::Bias) continue;
        aux.as<T>()[i * g.n + j] = apply_unary<UnaryOp::GeluErf, ref::Math>(x, T(0));
        if (epilogue == GemmEpilogue::BiasGeluSlope)
          x = apply_unary<UnaryOp::GeluErfGrad, ref::Math>(x, T(0));
      }
    }
  });
}

// out[r, u, v] = a[r, u] · b[r, v]
void ReferenceBackend::outer_product(const View& a, const View& b, const View& out, int64_t rows,
                                     int64_t p, int64_t q) {
  dispatch_floating(a.dtype, "outer_product", [&](auto tag) {
    using T = decltype(tag);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t u = 0; u < p; ++u)
        for (int64_t v = 0; v < q; ++v)
          out.as<T>()[(r * p + u) * q + v] = a.as<T>()[r * p + u] * b.as<T>()[r * q + v];
  });
}

// da[r, u] = Σ_v dout[r, u, v] · b[r, v],  db[r, v] = Σ_u dout[r, u, v] · a[r, u]
void ReferenceBackend::outer_product_backward(const View& a, const View& b, const View& dout,
                                              const View& da, const View& db, int64_t rows,
                                              int64_t p, int64_t q) {
  dispatch_floating(a.dtype, "outer_product_backward", [&](auto tag) {
    using T = decltype(tag);
    const T* g = dout.as<T>();
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t u = 0; u < p; ++u) {
        T sum = 0;
        for (int64_t v = 0; v < q; ++v) sum += g[(r * p + u) * q + v] * b.as<T>()[r * q + v];
        da.as<T>()[r * p + u] = sum;
      }
      for (int64_t v = 0; v < q; ++v) {
        T sum = 0;
        for (int64_t u = 0; u < p; ++u) sum += g[(r * p + u) * q + v] * a.as<T>()[r * p + u];
        db.as<T>()[r * q + v] = sum;
      }
    }
  });
}

}  // namespace mixlab
