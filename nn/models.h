// The two model families of mixers.md §1: a classifier (tokens or image patches → encoder →
// mean over valid tokens or a class token → Linear) and a translator (encoder-decoder with a
// causal self-mixer and dot-product cross-attention), both configured by a ModelConfig.
#pragma once
#include <memory>
#include <vector>

#include "nn/blocks.h"
#include "nn/conv_tokenizer.h"
#include "nn/decoding.h"
#include "nn/model_config.h"

namespace mixlab {

class Encoder : public Module {
 public:
  // block.drop_path is the deepest block's rate; block i gets drop_path_rate(it, i, depth).
  Encoder(const BlockConfig& block, int64_t depth, Generator& gen);
  std::string type_name() const override { return "Encoder"; }
  // x [B, N, d], or the real tokens' rows [R, d] when ctx.rows is defined (then so is the result).
  Tensor forward(const Tensor& x, const MixerContext& ctx);
  // Whether every block's mixer has the padding property (so its blocks may run on rows).
  bool mixers_have_padding_property() const;

 private:
  std::shared_ptr<ModuleList<EncoderBlock>> layers_;
  std::shared_ptr<BlockNorm> final_norm_;
};

// Whether a model runs its blocks on the real tokens alone when a batch has padding
// (nn/token_rows.h). It applies only where every mixer has the padding property, so outputs at
// valid positions are the padded path's up to float rounding (dropout draws its masks over the
// rows, so a training step's masks differ). Auto skips the padding on the CPU, where a step's
// time is its arithmetic; on a GPU the small models' steps are bound by the host's kernel
// launches (docs/gpu.md), and the rows raise the translator's calls from 256 to 365 a step
// (the gathers, one attention call per group of equal lengths), so Auto keeps the padded path
// there until that is measured. Skip and Keep decide on every device.
enum class PaddingRows { Auto, Skip, Keep };
// What a model left at Auto does: the process's choice (the command line's --padding), itself
// Auto unless set.
void set_default_padding_rows(PaddingRows mode);
PaddingRows default_padding_rows();

class Classifier : public Module {
 public:
  explicit Classifier(const ModelConfig& config);
  std::string type_name() const override { return "Classifier"; }
  // inputs: int32 token ids [B, N] (with lengths; empty = all valid) or images [B, C·H·W].
  Tensor forward(const Tensor& inputs, const std::vector<int32_t>& lengths = {});
  const ModelConfig& config() const { return config_; }
  // Whether forward() runs the encoder on the real tokens alone (PaddingRows; default Auto).
  void set_padding_rows(PaddingRows mode) { padding_rows_ = mode; }
  bool skips_padding(Device device = Device::cpu()) const;

 private:
  ModelConfig config_;
  PaddingRows padding_rows_ = PaddingRows::Auto;
  bool rows_allowed_ = false;
  std::shared_ptr<Embedding> tokens_;
  std::shared_ptr<PatchEmbedding> patches_;
  std::shared_ptr<ConvTokenizer> conv_tokens_;  // instead of patches_ with stem conv
  Tensor cls_token_;
  std::shared_ptr<PositionalEmbedding> positions_;
  std::shared_ptr<Encoder> encoder_;
  std::shared_ptr<Linear> head_;
  std::shared_ptr<Dropout> drop_;
};

// The encoder's output and its validity, as the decoder's cross-attention needs it.
struct Memory {
  Tensor states;  // [B, S, d]
  Tensor valid;   // [B, S]
  std::vector<int32_t> lengths;
  // When the encoder ran on the real tokens: their rows and its output on them ([R_S, d], the
  // valid rows of `states`), for cross-attention to project without the padding.
  TokenRows rows;
  Tensor packed;
};

class Translator : public Module {
 public:
  explicit Translator(const ModelConfig& config);
  std::string type_name() const override { return "Translator"; }
  const ModelConfig& config() const { return config_; }
  // As Classifier's: encoder and decoder on the real tokens of a padded batch (PaddingRows,
  // default Auto; every mixer, the cross mixer included, must have the padding property).
  void set_padding_rows(PaddingRows mode) { padding_rows_ = mode; }
  bool skips_padding(Device device = Device::cpu()) const;

  Memory encode(const Tensor& src, const std::vector<int32_t>& src_lengths);
  // Teacher-forced logits [B, T, V] for target inputs [B, T] (starting with <bos>).
  Tensor decode(const Memory& memory, const Tensor& tgt_in,
                const std::vector<int32_t>& tgt_lengths);
  Tensor forward(const Tensor& src, const std::vector<int32_t>& src_lengths, const Tensor& tgt_in,
                 const std::vector<int32_t>& tgt_lengths);

  // Generation without <bos> and <eos> in the results. Greedy and beam search both decode
  // incrementally (each mixer's cache reuses earlier positions).
  std::vector<std::vector<int32_t>> generate(const Tensor& src,
                                             const std::vector<int32_t>& src_lengths,
                                             const DecodeOptions& options);

  // Incremental decoding state for a batch.
  struct State {
    Memory memory;
    std::vector<DecoderBlockCache> caches;
    int64_t position = 0;
  };
  State start(const Memory& memory);
  // Logits [B, V] for the next position given the newest tokens [B] (int32).
  Tensor step(State& state, const std::vector<int32_t>& tokens);
  // Reorders a state's batch rows (beam search): row i <- row index[i].
  void reorder(State& state, const std::vector<int32_t>& index);

 private:
  Tensor logits_from(const Tensor& h);
  // encode() with the source's rows in `order` (token_rows; empty: by length).
  Memory encode(const Tensor& src, const std::vector<int32_t>& src_lengths,
                const std::vector<int64_t>& order);

  ModelConfig config_;
  PaddingRows padding_rows_ = PaddingRows::Auto;
  bool rows_allowed_ = false;
  std::shared_ptr<Embedding> src_embed_, tgt_embed_;
  std::shared_ptr<PositionalEmbedding> src_pos_, tgt_pos_;
  std::shared_ptr<Encoder> encoder_;
  std::shared_ptr<ModuleList<DecoderBlock>> decoder_;
  std::shared_ptr<BlockNorm> decoder_norm_;  // registered with decoder_ as "decoder"
  std::shared_ptr<Linear> head_;
  Tensor head_bias_;  // used with a tied head
  std::shared_ptr<Dropout> drop_;
};

// Decodes with several translators as one: each encodes the source and keeps its own caches, and
// every step scores tokens by the mean of their next-token probabilities (fairseq's
// EnsembleModel). The models must share their vocabularies; outputs stop at the shortest target
// limit among them. One model decodes exactly as Translator::generate.
std::vector<std::vector<int32_t>> generate_ensemble(const std::vector<Translator*>& models,
                                                    const Tensor& src,
                                                    const std::vector<int32_t>& src_lengths,
                                                    const DecodeOptions& options);

// The valid mask [B, N] and host lengths for a batch (empty lengths = all valid).
MixerContext make_context(const std::vector<int32_t>& lengths, int64_t n, DType dtype,
                          Device device, bool causal);

}  // namespace mixlab
