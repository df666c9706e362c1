#include "nn/layers.h"

#include <cmath>

#include "autograd/ops.h"
#include "nn/init.h"

namespace mixlab {

// ---- Linear ----
Linear::Linear(int64_t in, int64_t out, bool with_bias, Generator& gen)
    : in_features(in), out_features(out) {
  weight = register_parameter("weight", init::xavier_uniform({out, in}, gen));
  if (with_bias) bias = register_parameter("bias", init::zeros({out}));
}
std::string Linear::extra_repr() const {
  return "in=" + std::to_string(in_features) + ", out=" + std::to_string(out_features) +
         (bias.defined() ? "" : ", bias=false");
}
Tensor Linear::forward(const Tensor& x) const { return linear(x, weight, bias); }

// ---- Embedding ----
Embedding::Embedding(int64_t vocab, int64_t dim, Generator& gen) {
  weight = register_parameter("weight", init::normal({vocab, dim}, 0.02, gen));
}
std::string Embedding::extra_repr() const {
  return "vocab=" + std::to_string(weight.size(0)) + ", dim=" + std::to_string(weight.size(1));
}
Tensor Embedding::forward(const Tensor& ids) const { return embedding(weight, ids); }

// ---- LayerNorm ----
LayerNorm::LayerNorm(int64_t dim, double eps_) : eps(eps_) {
  weight = register_parameter("weight", init::ones({dim}));
  bias = register_parameter("bias", init::zeros({dim}));
}
std::string LayerNorm::extra_repr() const { return "dim=" + std::to_string(weight.size(0)); }
Tensor LayerNorm::forward(const Tensor& x) const { return layer_norm(x, weight, bias, eps); }

// ---- Affine and LayerScale (ResMLP) ----
Affine::Affine(int64_t dim) {
  alpha = register_parameter("alpha", init::ones({dim}));
  beta = register_parameter("beta", init::zeros({dim}));
}
Tensor Affine::forward(const Tensor& x) const { return scale_shift(x, alpha, beta); }

LayerScale::LayerScale(int64_t dim, double init_value) {
  gamma = register_parameter("gamma", init::constant({dim}, init_value));
}
Tensor LayerScale::forward(const Tensor& x) const { return scale_shift(x, gamma, Tensor()); }

// ---- Dropout ----
std::string Dropout::extra_repr() const { return "p=" + std::to_string(p); }
Tensor Dropout::forward(const Tensor& x) const {
  if (!is_training() || p == 0.0) return x;
  return dropout(x, p, true, default_generator().next_u64());
}

// ---- FeedForward ----
FeedForward::FeedForward(int64_t dim, int64_t hidden, Generator& gen) {
  fc1 = register_module("fc1", std::make_shared<Linear>(dim, hidden, true, gen));
  fc2 = register_module("fc2", std::make_shared<Linear>(hidden, dim, true, gen));
}
Tensor FeedForward::forward(const Tensor& x) const {
  // fc2(gelu(fc1(x))) as one op: biases and GELU in the products' epilogues (feed_forward).
  return feed_forward(x, fc1->weight, fc1->bias, fc2->weight, fc2->bias);
}

// ---- positions ----
PositionKind parse_position_kind(const std::string& name) {
  if (name == "learned") return PositionKind::Learned;
  if (name == "sinusoidal") return PositionKind::Sinusoidal;
  if (name == "none") return PositionKind::None;
  fail("unknown positional embedding '", name, "': expected learned, sinusoidal or none");
}
std::string to_string(PositionKind kind) {
  switch (kind) {
    case PositionKind::Learned:
      return "learned";
    case PositionKind::Sinusoidal:
      return "sinusoidal";
    case PositionKind::None:
      return "none";
  }
  return "?";
}

PositionalEmbedding::PositionalEmbedding(PositionKind k, int64_t max_len_, int64_t dim,
                                         Generator& gen)
    : kind(k), max_len(max_len_) {
  if (kind == PositionKind::Learned) {
    table = register_parameter("weight", init::normal({max_len, dim}, 0.02, gen));
  } else if (kind == PositionKind::Sinusoidal) {
    // PE[t, 2i] = sin(t / 10000^(2i/d)), PE[t, 2i+1] = cos(t / 10000^(2i/d))
    std::vector<float> pe(max_len * dim);
    for (int64_t t = 0; t < max_len; ++t)
      for (int64_t i = 0; i < dim; ++i) {
        double angle = t / std::pow(10000.0, static_cast<double>(i - i % 2) / dim);
        pe[t * dim + i] = static_cast<float>(i % 2 == 0 ? std::sin(angle) : std::cos(angle));
      }
    table = register_buffer("table", Tensor::from_data(pe, {max_len, dim}));
  }
}
std::string PositionalEmbedding::extra_repr() const {
  return to_string(kind) + ", max_len=" + std::to_string(max_len);
}
Tensor PositionalEmbedding::forward(const Tensor& x, int64_t offset) const {
  if (kind == PositionKind::None) return x;
  int64_t n = x.size(-2);
  if (offset + n > max_len)
    fail("positional embedding: positions up to ", offset + n, " exceed max_len ℓ = ", max_len,
         " (input ", shape_str(x.shape()), "); build the model with a larger --max-len");
  Tensor p = narrow(table, 0, offset, n);
  if (p.dtype() != x.dtype()) p = p.to(x.dtype());
  return add(x, p);
}

// ---- PatchEmbedding ----
PatchEmbedding::PatchEmbedding(int64_t c, int64_t h, int64_t w, int64_t p, int64_t dim,
                               Generator& gen)
    : channels(c), height(h), width(w), patch(p) {
  check(p > 0 && h % p == 0 && w % p == 0, "patch embedding: patch ", p,
        " must divide the image size ", h, "x", w);
  proj = register_module("proj", std::make_shared<Linear>(c * p * p, dim, true, gen));
}
std::string PatchEmbedding::extra_repr() const {
  return std::to_string(channels) + "x" + std::to_string(height) + "x" + std::to_string(width) +
         ", patch=" + std::to_string(patch);
}
Tensor PatchEmbedding::forward(const Tensor& images) const {
  int64_t b = images.size(0);
  if (images.numel() != b * channels * height * width)
    fail("patch embedding: images ", shape_str(images.shape()), " do not hold ", channels, "x",
         height, "x", width, " pixels each");
  int64_t gh = height / patch, gw = width / patch;
  // [B, C, gh, p, gw, p] -> [B, gh, gw, C, p, p]: raster order of patches, (c, row, col) inside.
  Tensor x = reshape(images, {b, channels, gh, patch, gw, patch});
  x = reshape(permute(x, {0, 2, 4, 1, 3, 5}), {b, gh * gw, channels * patch * patch});
  return proj->forward(x);
}

}  // namespace mixlab
