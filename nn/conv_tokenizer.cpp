#include "nn/conv_tokenizer.h"

#include "autograd/ops.h"
#include "core/error.h"

namespace mixlab {

std::vector<int64_t> ConvTokenizer::stage_channels(int64_t patch, int64_t dim) {
  int64_t stages = 0;
  while ((int64_t{2} << stages) <= patch) ++stages;
  if (patch < 2 || (int64_t{1} << stages) != patch) return {};
  std::vector<int64_t> out;
  for (int64_t s = 1; s <= stages; ++s) out.push_back(std::max<int64_t>(1, dim >> (stages - s)));
  return out;
}

int64_t ConvTokenizer::parameters_for(int64_t channels, int64_t patch, int64_t dim) {
  int64_t total = 0, in = channels;
  for (int64_t out : stage_channels(patch, dim)) {
    total += 9 * in * out + out;
    in = out;
  }
  return total;
}

std::vector<int32_t> neighbourhood_index(int64_t h, int64_t w) {
  std::vector<int32_t> index(h * w * 9);
  for (int64_t y = 0; y < h; ++y)
    for (int64_t x = 0; x < w; ++x)
      for (int64_t i = 0; i < 3; ++i)
        for (int64_t j = 0; j < 3; ++j) {
          const int64_t yy = y + i - 1, xx = x + j - 1;
          const bool inside = yy >= 0 && yy < h && xx >= 0 && xx < w;
          index[(y * w + x) * 9 + i * 3 + j] = static_cast<int32_t>(inside ? yy * w + xx : h * w);
        }
  return index;
}

ConvTokenizer::ConvTokenizer(int64_t c, int64_t h, int64_t w, int64_t p, int64_t dim,
                             Generator& gen)
    : channels(c), height(h), width(w), patch(p) {
  const std::vector<int64_t> widths = stage_channels(p, dim);
  check(!widths.empty(), "convolutional tokenizer: patch ", p,
        " must be a power of two of at least 2 (one 2x2 pooling stage per halving)");
  check(h % p == 0 && w % p == 0, "convolutional tokenizer: patch ", p,
        " must divide the image size ", h, "x", w);
  int64_t in = c, grid_h = h, grid_w = w;
  for (size_t s = 0; s < widths.size(); ++s) {
    convs.push_back(register_module("conv" + std::to_string(s + 1),
                                    std::make_shared<Linear>(9 * in, widths[s], true, gen)));
    neighbourhoods_.push_back(register_buffer(
        "neighbourhood" + std::to_string(s + 1),
        Tensor::from_data(neighbourhood_index(grid_h, grid_w), {grid_h * grid_w * 9}), false));
    in = widths[s];
    grid_h /= 2;
    grid_w /= 2;
  }
}

std::string ConvTokenizer::extra_repr() const {
  return std::to_string(channels) + "x" + std::to_string(height) + "x" + std::to_string(width) +
         ", patch=" + std::to_string(patch) + ", stages=" + std::to_string(convs.size());
}

Tensor ConvTokenizer::forward(const Tensor& images) const {
  const int64_t b = images.size(0);
  if (images.numel() != b * channels * height * width)
    fail("convolutional tokenizer: images ", shape_str(images.shape()), " do not hold ", channels,
         "x", height, "x", width, " pixels each");
  // Pixels first, [H·W, B, C], so that a pixel's neighbours are rows select_rows can gather.
  Tensor x = contiguous(permute(reshape(images, {b, channels, height * width}), {2, 0, 1}));
  int64_t h = height, w = width;
  for (size_t s = 0; s < convs.size(); ++s) {
    const auto& conv = convs[s];
    const int64_t c = x.size(2);
    // conv: y[p] = W · [x[q] for q in the 3×3 neighbourhood of p, zeros outside] + bias.
    Tensor padded = concat({x, Tensor::zeros({1, b, c}, x.dtype(), x.device())}, 0);
    Tensor windows = reshape(select_rows(padded, neighbourhoods_[s]), {h * w, 9, b, c});
    windows = reshape(contiguous(permute(windows, {0, 2, 1, 3})), {h * w, b, 9 * c});
    Tensor y = relu(conv->forward(windows));  // [H·W, B, C_out]
    // 2×2 max-pool, stride 2: [H, W] -> [H/2, W/2].
    y = max(reshape(y, {h / 2, 2, w / 2, 2, b, y.size(2)}), {1, 3});
    h /= 2;
    w /= 2;
    x = reshape(y, {h * w, b, y.size(-1)});
  }
  return contiguous(permute(x, {1, 0, 2}));  // [B, tokens, d]
}

}  // namespace mixlab
