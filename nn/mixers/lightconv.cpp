// lightconv and dynconv: lightweight and dynamic convolutions (mixers.md §11; Wu et al. 2019).
//
//   G = GLU(X W_g + b_g)          (W_g : d → 2d, GLU(a‖b) = a ⊙ σ(b)); invalid rows of G zeroed
//   D[t,c] = Σ_{m=0}^{K−1} w̃[⌊c/d_h⌋, m] · G[t + m − P, c]      (G = 0 outside the sequence)
//   Y = D W_o + b_o
//
// H = h kernels of odd width K (option kernel, default 7; an even or non-positive width is an
// error), channel c uses kernel ⌊c/d_h⌋, kernels softmax-normalised over their K taps;
// P = ⌊K/2⌋ (centred) or K − 1 (causal).
//   lightconv: w ∈ R^{H×K} trainable, w̃ = softmax(w) (the same kernel at every position).
//   dynconv:   w_t = reshape(G_t W_dyn, [H, K]) per position t (W_dyn : d → H·K, no bias),
//              w̃_t = softmax(w_t) over the taps.
// Any length; padding exact (G zeroed at invalid rows, exactly as zeros outside the sequence,
// so exact length equivalence holds too); causal exact. Incremental decoding keeps the last
// K − 1 rows of G.
// Params light 2d² + 2d + HK + d² + d; dynamic 2d² + 2d + d·H·K + d² + d.
//
// Implementation: D is one token_conv op (autograd/ops/token_conv.cpp), a kernel that reads the
// K neighbouring rows of G itself: no padded copy of G, no stacked windows.
// Init (the spec says "Xavier"): W_g, W_dyn, W_o xavier with zero biases; lightconv's raw kernel
// w is Glorot-uniform on the [H, K] matrix read as [out = H, in = K], i.e. U(±√(6/(H+K))).
// (fairseq initialises its [H, 1, K] weight with fan_in = K and fan_out = H·K; the spec's "xavier
// on the [out, in] matrix" reading is used instead.)
// Parameter names: w_g, w (lightconv) or w_dyn (dynconv), w_o.
#include "core/random.h"
#include "nn/init.h"
#include "nn/layers.h"
#include "nn/mixer_registry.h"
#include "nn/mixers/common.h"
#include "nn/mixing_capture.h"

namespace mixlab {
namespace {

constexpr int64_t kDefaultKernel = 7;
// Far wider than any sequence a mixlab task has.
constexpr int64_t kMaxKernel = 255;

int64_t kernel_width(const MixerConfig& c) { return c.get_int("kernel", kDefaultKernel); }

class Convolution : public Mixer {
 public:
  Convolution(const MixerConfig& c, bool dynamic) : Mixer(c), dynamic_(dynamic) {
    kernel_ = kernel_width(c);
    int64_t h = c.heads;
    Generator gen(c.seed);
    w_g = register_module("w_g", std::make_shared<Linear>(c.dim, 2 * c.dim, true, gen));
    if (dynamic_)
      w_dyn = register_module("w_dyn", std::make_shared<Linear>(c.dim, h * kernel_, false, gen));
    else
      w = register_parameter("w", init::xavier_uniform({h, kernel_}, gen));
    w_o = register_module("w_o", std::make_shared<Linear>(c.dim, c.dim, true, gen));
  }
  std::string type_name() const override {
    return dynamic_ ? "DynamicConvolution" : "LightweightConvolution";
  }
  std::string extra_repr() const override { return "kernel=" + std::to_string(kernel_); }

  Tensor forward(const Tensor& x, const MixerContext& ctx) override {
    check_input(x, ctx);
    int64_t n = x.size(1);
    Tensor g = glu(w_g->forward(x));
    if (ctx.valid.defined()) g = mul(g, unsqueeze(ctx.valid, -1));
    int64_t left = config_.causal ? kernel_ - 1 : kernel_ / 2;
    Tensor taps = taps_of(g);
    capture_mixing(*this, "kernel as a banded matrix", RowRule::Band,
                   [&] { return banded_kernel_matrix(taps, n, left, ctx.valid); });
    return w_o->forward(token_conv(g, taps, left));
  }

  // Incremental decoding (causal, P = K − 1): the last K − 1 rows of G.
  struct Cache : MixerCache {
    Tensor g;  // [B, K − 1, d]
    std::vector<Tensor*> batch_tensors() override { return {&g}; }
    bool reorderable() const override { return true; }
  };
  std::unique_ptr<MixerCache> new_cache() const override { return std::make_unique<Cache>(); }

  Tensor step(const Tensor& x_t, MixerCache& base, const MixerContext&) override {
    auto& cache = begin_step<Cache>(x_t, base);
    Tensor g = glu(w_g->forward(x_t));  // [B, 1, d]
    Tensor window = g;
    if (kernel_ > 1) {
      if (!cache.g.defined())
        cache.g = Tensor::zeros({x_t.size(0), kernel_ - 1, x_t.size(2)}, x_t.dtype(), x_t.device());
      window = concat({cache.g, g}, 1);  // [B, K, d]
      cache.g = contiguous(narrow(window, 1, 1, kernel_ - 1));
    }
    ++cache.position;
    // The window's last row, convolved causally with this step's taps ([B or 1, 1, H, K]: the
    // same taps for every row of the window; only the last row's output is kept).
    Tensor d_all = token_conv(window, taps_of(g), kernel_ - 1);
    return w_o->forward(narrow(d_all, 1, kernel_ - 1, 1));
  }

 private:
  // The softmax-normalised taps [B, N, H, K] (dynconv, from G [B, N, d]) or [1, 1, H, K].
  Tensor taps_of(const Tensor& g) const {
    int64_t h = config_.heads;
    if (!dynamic_) return reshape(softmax(w, -1), {1, 1, h, kernel_});
    return softmax(reshape(w_dyn->forward(g), {g.size(0), g.size(1), h, kernel_}), -1);
  }

  bool dynamic_;
  int64_t kernel_ = kDefaultKernel;
  std::shared_ptr<Linear> w_g, w_dyn, w_o;
  Tensor w;
};

MixerInfo conv_info(const std::string& name, bool dynamic) {
  MixerInfo info;
  info.name = name;
  info.summary = dynamic ? "dynamic convolution: per-position softmax kernels predicted from GLU "
                           "inputs, depthwise over tokens (Wu et al. 2019)"
                         : "lightweight convolution: shared softmax-normalised depthwise kernels "
                           "over tokens after a GLU (Wu et al. 2019)";
  info.capabilities.length = LengthSupport::Any;
  info.options = {MixerOption::integer(
      "kernel", "7", "kernel width K (odd)", 1, kMaxKernel,
      [](int64_t k, const MixerConfig&) -> std::string {
        if (k % 2 == 1) return "";
        return "kernel width K must be a positive odd number (a centred kernel "
               "needs ⌊K/2⌋ taps on each side)";
      })};
  info.build = [dynamic](const MixerConfig& c) {
    return std::make_shared<Convolution>(c, dynamic);
  };
  info.expected_parameters = [dynamic](const MixerConfig& c) {
    int64_t d = c.dim, h = c.heads, k = kernel_width(c);
    return 2 * d * d + 2 * d + (dynamic ? d * h * k : h * k) + d * d + d;
  };
  // The default K = 7 is wider than the shared tests' sequences; these fit inside them.
  info.test_options = {{{"kernel", "3"}}, {{"kernel", "5"}}};
  return info;
}

}  // namespace

void register_conv_mixers(MixerRegistry& registry) {
  registry.add(conv_info("lightconv", false));
  registry.add(conv_info("dynconv", true));
}

}  // namespace mixlab
