// Capturing the mixing matrices a model applies to one input (`mixlab inspect`, `mixlab study`).
//
// A MixingRecorder is a scope: while one is alive on this thread, every mixer's forward pass
// hands its mixing matrix (attention probabilities, a synthesizer's components, gMLP's spatial
// weights, a convolution's kernel laid out as a band, ...) to record_mixing(), which copies it to
// the host as float64. With no recorder alive, a hook costs one branch: the lambda that builds a
// matrix only some mixers have explicitly (FNet's DFT, a convolution's band) never runs.
//
// Each matrix is [B, H, rows, cols] (B = 1 for matrices that do not depend on the input; H = 1
// for mixers without heads) and is labelled with the mixer's dotted module path (found by walking
// the model the recorder was opened on), its registry name, what it is, what its axes index and
// the rule its rows obey, so tests can check the rows and pictures can say what they show.
// Hooks sit on forward paths; a decoding step() that shares a helper with forward() records its
// one row too, so callers open a recorder around forward passes only.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "autograd/grad_mode.h"
#include "nn/mixer.h"

namespace mixlab {

// What a matrix's rows obey, as its mixer's equations say.
enum class RowRule {
  SumToOne,  // softmax (or normalised) rows: each valid row sums to 1
  Free,      // a learned or derived linear map: no constraint on the rows
  Gaussian,  // hcsa: Σ_j exp(−(j − i − o)²/2)/√(2π) over the allowed keys (see hcsa.cpp)
  Band,      // a convolution: row t sums the softmax taps that fall inside the sequence
  Dft,       // FNet: cos rows sum to n at frequency 0 and to 0 elsewhere; sin rows to 0
};
const char* row_rule_text(RowRule rule);

struct MixingMatrix {
  std::string module;  // dotted path of the mixer in the model, e.g. "encoder.layers.0.mixer"
  std::string mixer;   // registry name, e.g. "synth-mix:R+V"
  std::string what;    // e.g. "attention", "component R", "mixture weights softmax(θ)"
  std::string rows = "query", cols = "key";  // what each axis indexes
  RowRule rule = RowRule::Free;
  std::vector<int64_t> shape;  // [B, H, rows, cols]
  std::vector<double> values;  // row-major

  int64_t batch() const { return shape[0]; }
  int64_t heads() const { return shape[1]; }
  int64_t n_rows() const { return shape[2]; }
  int64_t n_cols() const { return shape[3]; }
  double at(int64_t b, int64_t h, int64_t i, int64_t j) const {
    return values[((b * shape[1] + h) * shape[2] + i) * shape[3] + j];
  }
};

class MixingRecorder {
 public:
  // Starts recording on this thread; `root` is the model whose mixers are named by their paths.
  explicit MixingRecorder(const Module& root);
  ~MixingRecorder();
  MixingRecorder(const MixingRecorder&) = delete;
  MixingRecorder& operator=(const MixingRecorder&) = delete;

  const std::vector<MixingMatrix>& matrices() const { return matrices_; }
  void add(MixingMatrix m) { matrices_.push_back(std::move(m)); }
  std::string path_of(const Mixer& mixer) const;

 private:
  std::vector<std::pair<const Module*, std::string>> paths_;
  std::vector<MixingMatrix> matrices_;
  MixingRecorder* previous_;
};

namespace capture_detail {
MixingRecorder*& active_recorder();
void record(MixingRecorder& recorder, const Mixer& mixer, const std::string& what,
            const Tensor& matrix, RowRule rule, const std::string& rows, const std::string& cols);
}  // namespace capture_detail

inline bool mixing_capture_active() { return capture_detail::active_recorder() != nullptr; }

// The hook: `make` builds the matrix (a Tensor of rank 2 to 4, read as [.., rows, cols] with
// missing leading axes of size 1) only when a recorder is active.
template <typename Make>
inline void capture_mixing(const Mixer& mixer, const std::string& what, RowRule rule, Make&& make,
                           const std::string& rows = "query", const std::string& cols = "key") {
  if (MixingRecorder* r = capture_detail::active_recorder()) {
    NoGradGuard no_grad;
    capture_detail::record(*r, mixer, what, make(), rule, rows, cols);
  }
}

// ---- builders for matrices a mixer does not form itself ----

// FNet's token transform: cos(2πjk/n) (sine = false) or sin(2πjk/n) at each example's length
// n_b (read from `valid` [B, N]; undefined: every example has length n), zero beyond it:
// [B, 1, n, n].
Tensor dft_matrix(const Tensor& valid, int64_t n, bool sine);
// A depthwise convolution as a banded matrix: taps [B or 1, N or 1, H, K] (already softmaxed),
// `left` taps before the centre (P), for length n: M[b, h, t, t + m − P] = taps[b, t, h, m].
// Columns where `valid` ([B, N], may be undefined) is 0 are zeroed. Returns [B, H, n, n].
Tensor banded_kernel_matrix(const Tensor& taps, int64_t n, int64_t left, const Tensor& valid);
// The Jacobian of a token MLP Y = W₂ GELU(W₁ T + b₁) + b₂ (applied per channel along the tokens)
// averaged over channels: W₂[:n] diag(mean_c GELU'(H[b, c])) W₁[:, :n], [B, 1, n, n], where H
// [B, d, D] holds the pre-activations. With exact GELU, GELU'(h) = Φ(h) + h φ(h). Columns where
// `valid` ([B, n], may be undefined) is 0 are zeroed (those inputs are zeroed before the MLP).
Tensor token_mlp_jacobian(const Tensor& w1, const Tensor& h, const Tensor& w2, int64_t n,
                          const Tensor& valid);

}  // namespace mixlab
