// The selective scan of mamba (mixers.md §17; backends/kernels.def, selective_scan) as plain
// single-threaded loops in the element type T (float or double): the formula the CPU and CUDA
// kernels are checked against. Layouts are the kernels': u, delta, y [batch, tokens, channels];
// a [channels, state]; b, c [batch, tokens, state]; d [channels]; all contiguous.
#pragma once
#include <cstdint>

namespace mixlab::reference {

struct ScanDims {
  int64_t batch = 0, tokens = 0, channels = 0, state = 0;
};

// For each item and channel c, with h_{−1} = 0:
//   h_i[c, k] = exp(Δ_i[c] · A[c, k]) · h_{i−1}[c, k] + Δ_i[c] · B_i[k] · u_i[c]
//   y_i[c]    = Σ_k C_i[k] · h_i[c, k] + D[c] · u_i[c]
template <typename T>
void selective_scan(const T* u, const T* delta, const T* a, const T* b, const T* c, const T* d,
                    T* y, ScanDims s);

// Its gradients (all overwritten) from g = dy, walking the tokens backwards with the state's
// gradient dh_i = C_i g_i + exp(Δ_{i+1} A) ⊙ dh_{i+1} (0 past the last token):
//   du_i[c]    = Σ_k dh_i[c, k] Δ_i[c] B_i[k] + D[c] g_i[c]
//   dΔ_i[c]    = Σ_k dh_i[c, k] (A[c, k] exp(Δ_i[c] A[c, k]) h_{i−1}[c, k] + B_i[k] u_i[c])
//   dA[c, k]   = Σ_{items, i} dh_i[c, k] Δ_i[c] exp(Δ_i[c] A[c, k]) h_{i−1}[c, k]
//   dB_i[k]    = Σ_c dh_i[c, k] Δ_i[c] u_i[c]
//   dC_i[k]    = Σ_c g_i[c] h_i[c, k]
//   dD[c]      = Σ_{items, i} g_i[c] u_i[c]
// The states h_i of one (item, channel) are kept for its reverse walk ([tokens + 1, state]).
template <typename T>
void selective_scan_backward(const T* u, const T* delta, const T* a, const T* b, const T* c,
                             const T* d, const T* dy, T* du, T* ddelta, T* da, T* db, T* dc, T* dd,
                             ScanDims s);

}  // namespace mixlab::reference
