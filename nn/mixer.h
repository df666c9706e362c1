// The token-mixer interface (docs/mixers.md §0). A mixer maps X [B, N, d] to Y [B, N, d]
// moving information between positions; everything else in a block is shared by all mixers.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "nn/module.h"
#include "nn/token_rows.h"

namespace mixlab {

// What a mixer is built with. `options` holds the mixer's own settings by name (e.g. "rank",
// "kernel"), validated against the registry's list for that mixer.
struct MixerConfig {
  std::string name = "attention";  // registry name, e.g. "attention", "synth-mix:R+V"
  int64_t dim = 64;                // d
  int64_t heads = 4;               // h
  int64_t max_len = 64;            // ℓ
  bool causal = false;             // built for causal (decoder) use
  bool cross = false;              // keys/values come from ctx.memory (cross-attention)
  // The block's FFN width f (0: 4d). A mixer that replaces the FFN (gmlp, amlp: BlockStyle::Unit)
  // takes it as its own hidden width unless its options say otherwise.
  int64_t block_ffn_dim = 0;
  std::map<std::string, std::string> options;
  uint64_t seed = 0;  // initialisation seed

  int64_t get_int(const std::string& key, int64_t fallback) const;
  double get_double(const std::string& key, double fallback) const;
  bool get_bool(const std::string& key, bool fallback) const;
  std::string get_string(const std::string& key, const std::string& fallback) const;
  std::string str() const;  // "attention(d=64, h=4, ℓ=64, causal)" for messages and logs
};

// The per-call context of §0. `valid` is [B, N] with 1 for real tokens and 0 for padding
// (padding on the right), in x's dtype and device; undefined means every position is valid.
// `lengths` are the same facts on the host (empty when every position is valid).
// `rows`, when defined, says the block runs on the real tokens alone (nn/token_rows.h): the
// mixer is called through forward_rows with x [R, d], and `valid`/`lengths` still describe the
// padded [B, N] layout. A cross mixer may then also get the memory's real rows (memory_rows,
// memory_packed [R_M, d]) beside the padded memory.
struct MixerContext {
  Tensor valid;
  std::vector<int32_t> lengths;
  bool causal = false;
  Tensor memory;  // cross mixers: [B, M, d]
  Tensor memory_valid;
  std::vector<int32_t> memory_lengths;
  TokenRows rows;
  TokenRows memory_rows;
  Tensor memory_packed;
};

// How a mixer handles sequence length (§13).
enum class LengthSupport {
  Any,             // any N
  UpToMaxLen,      // N ≤ ℓ (slices ℓ-sized parameters)
  PaddedToMaxLen,  // N ≤ ℓ, padded to ℓ inside the mixer
};

// What the block around a mixer looks like (§1's per-mixer exceptions).
enum class BlockStyle {
  PreNorm,    // x + Drop(Mixer(LN(x))), x + Drop(FFN(LN(x)))
  ResMLP,     // Affine norms and LayerScale on every sublayer
  NoPreNorm,  // ffonly: no LN before the mixer (it normalises across tokens itself)
  Unit,       // gmlp/amlp: the unit replaces mixer and FFN: x + Drop(Unit(LN(x)))
};

struct MixerCapabilities {
  LengthSupport length = LengthSupport::Any;
  bool padding_property = true;
  bool exact_length_equivalence = true;
  bool causal = true;          // false: the registry refuses causal instances
  std::string causal_refusal;  // one sentence: why not (when causal == false)
  bool cross = false;          // can be a cross-mixer (keys/values from memory)
  std::string cross_refusal;   // one sentence: why not, when an option takes `cross` away
  bool left_to_right = false;  // reads left to right in every mode, encoder included (§17, §18)
  BlockStyle block = BlockStyle::PreNorm;
};

// Per-sequence state for incremental decoding; each mixer subclasses it.
struct MixerCache {
  virtual ~MixerCache() = default;
  int64_t position = 0;  // how many positions have been consumed
  // The cache's tensors whose first axis is the batch, so beam search can reorder hypotheses
  // (nullptr entries are skipped). A cache that returns false from reorderable() makes beam
  // search recompute prefixes instead.
  virtual std::vector<Tensor*> batch_tensors() { return {}; }
  virtual bool reorderable() const { return false; }
};

// Reorders (and duplicates) the batch rows of every cached tensor: row i <- row index[i].
void reorder_cache(MixerCache& cache, const std::vector<int32_t>& index);

class Mixer : public Module {
 public:
  explicit Mixer(MixerConfig config) : config_(std::move(config)) {}
  const MixerConfig& config() const { return config_; }
  // What this instance supports: handed over by the registry when it builds the mixer (its entry,
  // adjusted by the options), so nothing looks it up while running.
  const MixerCapabilities& capabilities() const { return capabilities_; }

  // Y [B, N, d] from X [B, N, d]. Implementations start with check_input().
  virtual Tensor forward(const Tensor& x, const MixerContext& ctx) = 0;

  // The same map on the real tokens alone: x_rows [R, d] are the rows ctx.rows lists, the result
  // is their R output rows. The default places them in a zero-padded [B, N, d], runs forward() and
  // takes the valid rows back, which is exact for a mixer with the padding property (the models
  // pack their tokens only when every mixer has it). Mixers whose own projections are
  // position-wise override it to run those on the rows alone (attention).
  virtual Tensor forward_rows(const Tensor& x_rows, const MixerContext& ctx);

  // Incremental decoding (causal mixers): consume x_t [B, 1, d], the next position, and return
  // its output row [B, 1, d], equal to forward() over the whole prefix at that position. The
  // default keeps the prefix and re-runs forward (correct, not fast); mixers override it to
  // reuse earlier work (cached K/V, rows, the last K-1 inputs).
  virtual std::unique_ptr<MixerCache> new_cache() const;
  virtual Tensor step(const Tensor& x_t, MixerCache& cache, const MixerContext& ctx);

 protected:
  // Checks X against d, the length limit ℓ (an error naming ℓ), ctx.valid's shape and the
  // causal flag, so every mixer fails the same clear way.
  void check_input(const Tensor& x, const MixerContext& ctx) const;
  void check_input_shape(const Shape& x, const MixerContext& ctx) const;
  // forward_rows' check: ctx.rows is defined and x_rows is [R, d] for its R.
  void check_rows(const Tensor& x_rows, const MixerContext& ctx) const;

  // The preamble of every step(): the cache is this mixer's own kind (CacheT), the mixer was
  // built for decoding (causal, or a cross-mixer), x_t is [B, 1, d], and a mixer with ℓ-sized
  // parameters has not run past ℓ. Returns the cache as CacheT.
  template <typename CacheT>
  CacheT& begin_step(const Tensor& x_t, MixerCache& cache) const {
    auto* own = dynamic_cast<CacheT*>(&cache);
    if (!own) fail(config_.name, ": step() got a cache from another mixer");
    check_step(x_t, *own);
    return *own;
  }

  MixerConfig config_;

 private:
  friend class MixerRegistry;
  void check_step(const Tensor& x_t, const MixerCache& cache) const;
  MixerCapabilities capabilities_;
};

}  // namespace mixlab
