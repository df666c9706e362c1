// The convolutional tokenizer (nn/conv_tokenizer.h): equal to a plain loop over its formula,
// float64 gradients, its sizes, and a classifier built on it.
#include <algorithm>

#include "nn/conv_tokenizer.h"
#include "nn/model_size.h"
#include "nn/models.h"
#include "tests/model_configs.h"
#include "tests/test_helpers.h"

using namespace mixlab;
using namespace mixlab::testing;

namespace {

// One stage by its definition, on images [B][C][H][W] flattened: a 3×3 convolution with zero
// padding 1 (weight [out, (i, j, c)] as ConvTokenizer stores it), ReLU, then a 2×2 max-pool.
std::vector<double> plain_stage(const std::vector<double>& x, int64_t b, int64_t c, int64_t h,
                                int64_t w, const std::vector<double>& weight,
                                const std::vector<double>& bias, int64_t out) {
  std::vector<double> conv(b * out * h * w);
  for (int64_t n = 0; n < b; ++n)
    for (int64_t o = 0; o < out; ++o)
      for (int64_t y = 0; y < h; ++y)
        for (int64_t x0 = 0; x0 < w; ++x0) {
          double sum = bias[o];
          for (int64_t i = 0; i < 3; ++i)
            for (int64_t j = 0; j < 3; ++j)
              for (int64_t k = 0; k < c; ++k) {
                const int64_t yy = y + i - 1, xx = x0 + j - 1;
                if (yy < 0 || yy >= h || xx < 0 || xx >= w) continue;
                sum += weight[o * 9 * c + (i * 3 + j) * c + k] * x[((n * c + k) * h + yy) * w + xx];
              }
          conv[((n * out + o) * h + y) * w + x0] = std::max(0.0, sum);
        }
  std::vector<double> pooled(b * out * (h / 2) * (w / 2));
  for (int64_t n = 0; n < b; ++n)
    for (int64_t o = 0; o < out; ++o)
      for (int64_t y = 0; y < h / 2; ++y)
        for (int64_t x0 = 0; x0 < w / 2; ++x0) {
          double m = -1e300;
          for (int64_t i = 0; i < 2; ++i)
            for (int64_t j = 0; j < 2; ++j)
              m = std::max(m, conv[((n * out + o) * h + 2 * y + i) * w + 2 * x0 + j]);
          pooled[((n * out + o) * (h / 2) + y) * (w / 2) + x0] = m;
        }
  return pooled;
}

}  // namespace

TEST_CASE("conv tokenizer: stages, sizes and the neighbourhoods it gathers") {
  CHECK(ConvTokenizer::stage_channels(4, 96) == std::vector<int64_t>{48, 96});
  CHECK(ConvTokenizer::stage_channels(8, 96) == std::vector<int64_t>{24, 48, 96});
  CHECK(ConvTokenizer::stage_channels(2, 5) == std::vector<int64_t>{5});
  for (int64_t p : {0, 1, 3, 6, 7}) CHECK(ConvTokenizer::stage_channels(p, 96).empty());
  Generator gen(1);
  ConvTokenizer t(3, 8, 8, 4, 10, gen);
  CHECK(t.parameter_count() == ConvTokenizer::parameters_for(3, 4, 10));
  CHECK(ConvTokenizer::parameters_for(1, 4, 96) == (9 * 1 * 48 + 48) + (9 * 48 * 96 + 96));
  CHECK_THROWS_WITH_AS(ConvTokenizer(1, 28, 28, 7, 16, gen),
                       doctest::Contains("patch 7 must be a power of two"), Error);
  CHECK_THROWS_WITH_AS(ConvTokenizer(1, 12, 12, 8, 16, gen),
                       doctest::Contains("must divide the image size 12x12"), Error);
  // A 2×3 grid: pixel 0's window has the zero row (6) above and to its left.
  const std::vector<int32_t> index = neighbourhood_index(2, 3);
  CHECK(std::vector<int32_t>(index.begin(), index.begin() + 9) ==
        std::vector<int32_t>{6, 6, 6, 6, 0, 1, 6, 3, 4});
  CHECK(std::vector<int32_t>(index.begin() + 9 * 4, index.begin() + 9 * 5) ==
        std::vector<int32_t>{0, 1, 2, 3, 4, 5, 6, 6, 6});
}

TEST_CASE("conv tokenizer: its neighbourhood index moves with the model and is never saved") {
  Generator gen(3);
  ConvTokenizer t(1, 8, 8, 4, 6, gen);
  // Transient buffers: neither checkpoint keys nor parameters, but shown by print().
  for (const auto& [name, tensor] : t.named_tensors())
    CHECK(name.find("neighbourhood") == std::string::npos);
  CHECK(t.print().find("neighbourhood1[576](buffer, not saved)") != std::string::npos);
  CHECK(t.print().find("neighbourhood2[144](buffer, not saved)") != std::string::npos);
  // to() takes them along: the tokenizer runs on the device its parameters went to, and the
  // float conversion leaves the int32 index as it is.
  Tensor images = Tensor::normal({2, 64}, 0.0, 1.0, gen);
  const std::vector<double> on_cpu = t.forward(images).to_double_vector();
  t.to(Device::ref());
  t.to(DType::F64);
  Tensor on_ref = t.forward(images.to(Device::ref()).to(DType::F64));
  CHECK(on_ref.device() == Device::ref());
  check_close(on_ref.to(Device::cpu()).to_double_vector(), on_cpu, 1e-5);
}

TEST_CASE("conv tokenizer: two stages equal the plain convolution, ReLU and max-pool") {
  const int64_t b = 2, c = 2, side = 8, dim = 6;
  Generator gen(7);
  ConvTokenizer t(c, side, side, 4, dim, gen);
  t.to(DType::F64);
  Tensor images = rand64({b, c * side * side}, 3, false);
  std::vector<double> x = images.to_double_vector();
  int64_t channels = c, h = side;
  for (const auto& conv : t.convs) {
    x = plain_stage(x, b, channels, h, h, conv->weight.to_double_vector(),
                    conv->bias.to_double_vector(), conv->out_features);
    channels = conv->out_features;
    h /= 2;
  }
  // The plain result is [B][d][2][2]; the tokenizer's [B][token][d] in raster order.
  std::vector<double> want(x.size());
  for (int64_t n = 0; n < b; ++n)
    for (int64_t o = 0; o < dim; ++o)
      for (int64_t p = 0; p < 4; ++p) want[(n * 4 + p) * dim + o] = x[(n * dim + o) * 4 + p];
  Tensor got = t.forward(images);
  CHECK(got.shape() == Shape{b, 4, dim});
  check_close(got.to_double_vector(), want, 1e-12);
}

TEST_CASE("conv tokenizer: float64 gradients of the images and every weight") {
  Generator gen(11);
  ConvTokenizer t(1, 4, 4, 2, 3, gen);
  t.to(DType::F64);
  Tensor images = rand64({2, 16}, 5);
  std::vector<Tensor> leaves = {images};
  for (Tensor& p : t.parameters()) leaves.push_back(p);
  auto result = gradcheck_leaves([&] { return t.forward(images); }, leaves);
  INFO("worst: " << result.worst);
  CHECK(result.ok);
}

TEST_CASE("conv tokenizer: a classifier with stem conv plans, builds, saves and trains") {
  ModelConfig c = tiny_classifier("attention");
  c.input = InputKind::Image;
  c.max_len = 49;
  c.stem = ImageStem::Conv;
  Classifier m(c);
  int64_t patch_parameters = 0;
  for (const auto& [name, p] : m.named_parameters())
    if (name.rfind("embed.", 0) == 0) patch_parameters += p.numel();
  CHECK(patch_parameters == ConvTokenizer::parameters_for(1, 4, 16));
  // The plan counts the tokenizer exactly: it differs from the patch stem's plan by the
  // difference of the two embeddings (the patch plan leaves out the projection's bias).
  ModelConfig patch_config = c;
  patch_config.stem = ImageStem::Patch;
  CHECK(planned_parameters(c) - planned_parameters(patch_config) ==
        static_cast<double>(ConvTokenizer::parameters_for(1, 4, 16) - 16 * 16));
  // The JSON of every checkpoint names the stem; without the key a model has patches.
  const Json j = c.to_json();
  CHECK(j.at("stem").as_string() == "conv");
  CHECK(ModelConfig::from_json(j).stem == ImageStem::Conv);
  CHECK_FALSE(patch_config.to_json().contains("stem"));
  CHECK_THROWS_WITH_AS(ModelConfig::from_json(Json::parse(R"({"stem": "resnet"})")),
                       "stem 'resnet' is not one of: patch, conv", Error);
  Tensor images = rand32({2, 28 * 28}, 1);
  Tensor logits = m.forward(images);
  CHECK(logits.shape() == Shape{2, 3});
  sum(logits).backward();
  for (const auto& named : m.named_parameters())
    if (named.first.rfind("embed.", 0) == 0) {
      INFO(named.first);
      CHECK(named.second.grad().defined());
    }
}
