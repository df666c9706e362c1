// resmlp: the cross-patch linear layer of ResMLP (Touvron et al. 2021; mixers.md §5).
//
//   Y[i, :] = Σ_j A[i, j] X[j, :] + a[i]          (Y = A X + a along tokens)
//
// A ∈ R^{ℓ×ℓ} (init normal std 0.02), a ∈ R^ℓ (init 0), used as written (not Linear layers).
// N ≤ ℓ uses A[:N, :N] and a[:N]. Padding: the columns of A at invalid positions are zeroed
// (done by zeroing X's invalid rows, which is the same product), so the padding property and
// exact length equivalence hold. Causal: exact with A ← A ⊙ tril. Params ℓ² + ℓ (the block's
// affine norms and LayerScales belong to the block: capabilities.block = ResMLP).
// Parameters: A [ℓ, ℓ], a [ℓ].
// Incremental decoding caches the inputs: row t is A[t, :t+1] X[:t+1] + a[t] (O(t·d) per step,
// which is what the row costs in the full product too).
#include "core/random.h"
#include "nn/init.h"
#include "nn/mixer_registry.h"
#include "nn/mixers/common.h"
#include "nn/mixing_capture.h"

namespace mixlab {
namespace {

class ResMlp : public Mixer {
 public:
  explicit ResMlp(const MixerConfig& c) : Mixer(c) {
    Generator gen(c.seed);
    A = register_parameter("A", init::normal({c.max_len, c.max_len}, 0.02, gen));
    a = register_parameter("a", init::zeros({c.max_len}));
  }
  std::string type_name() const override { return "ResMlp"; }
  std::string extra_repr() const override { return "max_len=" + std::to_string(config_.max_len); }

  Tensor forward(const Tensor& x, const MixerContext& ctx) override {
    check_input(x, ctx);
    int64_t n = x.size(1);
    Tensor a_n = narrow(narrow(A, 0, 0, n), 1, 0, n);
    if (config_.causal) a_n = mul(a_n, tril_mask(n, n, 0, x.dtype(), x.device()));
    capture_mixing(*this, "token-mixing matrix A", RowRule::Free, [&] { return a_n; });
    Tensor y = matmul(a_n, mixers::zero_invalid_rows(x, ctx.valid));  // [N,N]·[B,N,d]
    return add(y, reshape(narrow(a, 0, 0, n), {n, 1}));
  }

  struct Cache : MixerCache {
    Tensor inputs;  // [B, t, d]: every input row so far
    std::vector<Tensor*> batch_tensors() override { return {&inputs}; }
    bool reorderable() const override { return true; }
  };
  std::unique_ptr<MixerCache> new_cache() const override { return std::make_unique<Cache>(); }

  Tensor step(const Tensor& x_t, MixerCache& base, const MixerContext&) override {
    auto& cache = begin_step<Cache>(x_t, base);
    int64_t t = cache.position;
    cache.inputs = cache.inputs.defined() ? concat({cache.inputs, x_t}, 1) : x_t;
    ++cache.position;
    Tensor row = narrow(narrow(A, 0, t, 1), 1, 0, t + 1);  // A[t, :t+1], [1, t+1]
    return add(matmul(row, cache.inputs), narrow(a, 0, t, 1));
  }

 private:
  Tensor A, a;
};

}  // namespace

void register_resmlp_mixer(MixerRegistry& registry) {
  MixerInfo info;
  info.name = "resmlp";
  info.summary = "cross-patch linear layer Y = A X + a along tokens (Touvron et al. 2021)";
  info.capabilities.length = LengthSupport::UpToMaxLen;
  info.capabilities.block = BlockStyle::ResMLP;
  info.build = [](const MixerConfig& c) { return std::make_shared<ResMlp>(c); };
  info.expected_parameters = [](const MixerConfig& c) { return c.max_len * c.max_len + c.max_len; };
  registry.add(std::move(info));
}

}  // namespace mixlab
