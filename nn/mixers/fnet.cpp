// fnet: Fourier mixing (mixers.md §8; Lee-Thorp et al. 2021).
//
//   Y = Re(FFT₂(X)) over the (token, channel) axes, unnormalised:
//   Y = C_N X C_d − S_N X S_d,  C_n[j,k] = cos(2πjk/n),  S_n[j,k] = sin(2πjk/n).
//
// No parameters. Computed by the fft2_real op (FFTW plans cached by size on the CPU; its
// backward is the same map on the upstream gradient), never by O(N²) loops.
// Variable length (the spec's choice, beyond the paper): each example b is transformed at its
// own valid length n_b and its rows ≥ n_b are 0, which gives the padding property and exact
// length equivalence. Option fnet-padded=true reproduces the official code instead (transform
// at the padded length N, padded rows left as computed); such an instance reports
// padding_property = false and exact_length_equivalence = false from capabilities().
// Causal: refused (a Fourier transform mixes every position with every other).
// Choice: when a context carries `valid` but no host `lengths`, the lengths are read from
// `valid` (the number of valid positions per row; padding is on the right).
#include "core/random.h"
#include "nn/mixer_registry.h"
#include "nn/mixers/common.h"
#include "nn/mixing_capture.h"

namespace mixlab {
namespace {

class FNet : public Mixer {
 public:
  explicit FNet(const MixerConfig& c) : Mixer(c), padded_(c.get_bool("fnet-padded", false)) {}
  std::string type_name() const override { return "FNet"; }
  std::string extra_repr() const override { return padded_ ? "padded" : ""; }

  Tensor forward(const Tensor& x, const MixerContext& ctx) override {
    check_input(x, ctx);
    // Y = C X C_d − S X S_d: the token transforms C and S at each example's length.
    Tensor lengths_from = padded_ ? Tensor() : ctx.valid;
    capture_mixing(
        *this, "token DFT, real part cos(2πjk/n)", RowRule::Dft,
        [&] { return dft_matrix(lengths_from, x.size(1), false); }, "frequency", "token");
    capture_mixing(
        *this, "token DFT, imaginary part sin(2πjk/n)", RowRule::Dft,
        [&] { return dft_matrix(lengths_from, x.size(1), true); }, "frequency", "token");
    if (padded_ || !ctx.valid.defined()) return fft2_real(x);
    std::vector<int32_t> lengths = ctx.lengths;
    if (lengths.empty()) {
      for (double v : sum(ctx.valid.detach(), {1}).to_double_vector())
        lengths.push_back(static_cast<int32_t>(v + 0.5));
    }
    check(static_cast<int64_t>(lengths.size()) == x.size(0), config_.name, ": ", lengths.size(),
          " lengths for input ", shape_str(x.shape()));
    return fft2_real(x, Tensor::from_data(lengths, {x.size(0)}, x.device()));
  }

 private:
  bool padded_ = false;
};

}  // namespace

void register_fnet_mixer(MixerRegistry& registry) {
  MixerInfo info;
  info.name = "fnet";
  info.summary =
      "Fourier mixing Re(FFT2(X)) over tokens and channels, no parameters (Lee-Thorp et al. 2021)";
  info.capabilities.length = LengthSupport::Any;
  info.capabilities.causal = false;
  info.capabilities.causal_refusal =
      "a Fourier transform mixes every position with every other, so every output sees the "
      "future.";
  info.options = {
      MixerOption::boolean("fnet-padded", "false",
                           "transform at the padded length like the official code (outputs then "
                           "depend on the padding)")};
  info.adjust_capabilities = [](const MixerConfig& c, MixerCapabilities& caps) {
    if (c.get_bool("fnet-padded", false)) {
      caps.padding_property = false;
      caps.exact_length_equivalence = false;
    }
  };
  info.build = [](const MixerConfig& c) { return std::make_shared<FNet>(c); };
  info.expected_parameters = [](const MixerConfig&) { return int64_t{0}; };
  info.test_names = {"fnet"};
  info.test_options = {{{"fnet-padded", "true"}}};  // its capabilities say what it gives up
  registry.add(std::move(info));
}

}  // namespace mixlab
