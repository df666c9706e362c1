#include "nn/mixing_capture.h"

#include <cmath>
#include <numbers>

#include "autograd/ops.h"

namespace mixlab {

const char* row_rule_text(RowRule rule) {
  switch (rule) {
    case RowRule::SumToOne:
      return "each row sums to 1";
    case RowRule::Free:
      return "a linear map: rows obey no constraint";
    case RowRule::Gaussian:
      return "rows sum the fixed Gaussian weights of the allowed keys (about 1 inside the "
             "sequence)";
    case RowRule::Band:
      return "row t sums the softmax taps that fall inside the sequence (1 away from the ends)";
    case RowRule::Dft:
      return "cos rows sum to n at frequency 0 and to 0 elsewhere; sin rows sum to 0";
  }
  return "";
}

namespace {

void collect_paths(const Module& m, const std::string& path,
                   std::vector<std::pair<const Module*, std::string>>& out) {
  if (dynamic_cast<const Mixer*>(&m)) out.emplace_back(&m, path);
  for (const auto& [name, child] : m.children())
    collect_paths(*child, path.empty() ? name : path + "." + name, out);
}

}  // namespace

MixingRecorder::MixingRecorder(const Module& root) {
  collect_paths(root, "", paths_);
  previous_ = capture_detail::active_recorder();
  capture_detail::active_recorder() = this;
}

MixingRecorder::~MixingRecorder() { capture_detail::active_recorder() = previous_; }

std::string MixingRecorder::path_of(const Mixer& mixer) const {
  for (const auto& [module, path] : paths_)
    if (module == &mixer) return path.empty() ? "mixer" : path;
  return "mixer";  // a mixer used on its own (the recorder was opened on it or elsewhere)
}

namespace capture_detail {

MixingRecorder*& active_recorder() {
  thread_local MixingRecorder* recorder = nullptr;
  return recorder;
}

void record(MixingRecorder& recorder, const Mixer& mixer, const std::string& what,
            const Tensor& matrix, RowRule rule, const std::string& rows, const std::string& cols) {
  check(matrix.dim() >= 2 && matrix.dim() <= 4, "capture_mixing(", mixer.config().name, ", ", what,
        "): a matrix must have 2 to 4 axes, got ", shape_str(matrix.shape()));
  MixingMatrix m;
  m.module = recorder.path_of(mixer);
  m.mixer = mixer.config().name;
  m.what = what;
  m.rows = rows;
  m.cols = cols;
  m.rule = rule;
  m.shape.assign(4 - matrix.dim(), 1);
  for (int64_t s : matrix.shape()) m.shape.push_back(s);
  m.values = matrix.detach().to_double_vector();
  recorder.add(std::move(m));
}

}  // namespace capture_detail

namespace {
// Lengths from a right-padded valid mask [B, N] (undefined: one example of length n).
std::vector<int64_t> lengths_of(const Tensor& valid, int64_t n) {
  if (!valid.defined()) return {n};
  std::vector<double> v = valid.detach().to_double_vector();
  std::vector<int64_t> out(static_cast<size_t>(valid.size(0)), 0);
  for (size_t i = 0; i < v.size(); ++i)
    if (v[i] != 0.0) ++out[i / static_cast<size_t>(n)];
  return out;
}
}  // namespace

Tensor dft_matrix(const Tensor& valid, int64_t n, bool sine) {
  std::vector<int64_t> lengths = lengths_of(valid, n);
  int64_t b = static_cast<int64_t>(lengths.size());
  std::vector<double> v(static_cast<size_t>(b * n * n), 0.0);
  for (int64_t bi = 0; bi < b; ++bi) {
    int64_t len = lengths[bi];
    for (int64_t j = 0; j < len; ++j)
      for (int64_t k = 0; k < len; ++k) {
        // (j·k mod len) keeps the angle small, so long sequences lose no precision.
        double angle = 2.0 * std::numbers::pi * double((j * k) % len) / double(len);
        v[(bi * n + j) * n + k] = sine ? std::sin(angle) : std::cos(angle);
      }
  }
  return Tensor::from_data(v, {b, 1, n, n});
}

Tensor banded_kernel_matrix(const Tensor& taps, int64_t n, int64_t left, const Tensor& valid) {
  check(taps.dim() == 4, "banded_kernel_matrix: taps must be [B, N, H, K], got ",
        shape_str(taps.shape()));
  int64_t b = taps.size(0), tn = taps.size(1), h = taps.size(2), k = taps.size(3);
  std::vector<double> t = taps.detach().to_double_vector();
  std::vector<double> ok;
  if (valid.defined()) ok = valid.detach().to_double_vector();
  int64_t out_b = valid.defined() ? valid.size(0) : b;
  std::vector<double> m(static_cast<size_t>(out_b * h * n * n), 0.0);
  for (int64_t bi = 0; bi < out_b; ++bi)
    for (int64_t hi = 0; hi < h; ++hi)
      for (int64_t row = 0; row < n; ++row)
        for (int64_t tap = 0; tap < k; ++tap) {
          int64_t col = row + tap - left;
          if (col < 0 || col >= n) continue;
          if (!ok.empty() && ok[bi * n + col] == 0.0) continue;
          int64_t src_b = b == 1 ? 0 : bi, src_t = tn == 1 ? 0 : row;
          m[((bi * h + hi) * n + row) * n + col] = t[((src_b * tn + src_t) * h + hi) * k + tap];
        }
  return Tensor::from_data(m, {out_b, h, n, n});
}

Tensor token_mlp_jacobian(const Tensor& w1, const Tensor& h, const Tensor& w2, int64_t n,
                          const Tensor& valid) {
  int64_t hidden = w1.size(0), l = w1.size(1), b = h.size(0), d = h.size(1);
  check(h.dim() == 3 && h.size(2) == hidden && w2.size(0) == l && w2.size(1) == hidden && n <= l,
        "token_mlp_jacobian: W₁ ", shape_str(w1.shape()), ", H ", shape_str(h.shape()), ", W₂ ",
        shape_str(w2.shape()), " do not fit together");
  std::vector<double> a = w1.detach().to_double_vector(), z = h.detach().to_double_vector(),
                      c = w2.detach().to_double_vector();
  std::vector<double> ok;
  if (valid.defined()) ok = valid.detach().to_double_vector();
  std::vector<double> out(static_cast<size_t>(b * n * n), 0.0);
  for (int64_t bi = 0; bi < b; ++bi) {
    std::vector<double> slope(static_cast<size_t>(hidden), 0.0);  // mean_c GELU'(H[b, c, s])
    for (int64_t ch = 0; ch < d; ++ch)
      for (int64_t s = 0; s < hidden; ++s) {
        double x = z[(bi * d + ch) * hidden + s];
        double cdf = 0.5 * (1.0 + std::erf(x / std::numbers::sqrt2));
        double pdf = std::exp(-0.5 * x * x) / std::sqrt(2.0 * std::numbers::pi);
        slope[s] += (cdf + x * pdf) / static_cast<double>(d);
      }
    for (int64_t i = 0; i < n; ++i)
      for (int64_t s = 0; s < hidden; ++s) {
        double left = c[i * hidden + s] * slope[s];
        for (int64_t j = 0; j < n; ++j)
          if (ok.empty() || ok[bi * n + j] != 0.0) out[(bi * n + i) * n + j] += left * a[s * l + j];
      }
  }
  return Tensor::from_data(out, {b, 1, n, n});
}

}  // namespace mixlab
