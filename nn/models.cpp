#include "nn/models.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "nn/init.h"
#include "nn/mixer_registry.h"
#include "nn/model_size.h"

namespace mixlab {

namespace {

// Each layer's mixer gets its own seed, derived from the model seed and its place.
MixerConfig mixer_config(const ModelConfig& c, const std::string& name,
                         const std::map<std::string, std::string>& options, int64_t max_len,
                         bool causal, uint64_t salt) {
  MixerConfig m;
  m.name = name;
  m.dim = c.dim;
  m.heads = c.heads;
  m.max_len = max_len;
  m.causal = causal;
  m.options = options;
  m.seed = part_seed(c.seed, salt);
  m.block_ffn_dim = c.ffn_dim;
  return m;
}

BlockConfig block_config(const ModelConfig& c, MixerConfig mixer) {
  BlockConfig b;
  b.mixer = std::move(mixer);
  b.ffn_dim = c.ffn_dim;
  b.dropout = c.dropout;
  b.drop_path = c.drop_path;
  return b;
}

// Gathers batch rows of t (any rank): row i <- row index[i].
Tensor gather_batch(const Tensor& t, const std::vector<int32_t>& index) {
  if (!t.defined()) return t;
  return select_rows(t, Tensor::from_data(index, {static_cast<int64_t>(index.size())}, t.device()));
}

// The decoder's blocks and final norm under one name, as the encoder's: "decoder.layers.N.*" and
// "decoder.final_norm.*" (train/run/checkpoint_names.h renames the older "decoder.N.*" and
// "decoder_norm.*" on load).
class DecoderStack : public Module {
 public:
  DecoderStack(std::shared_ptr<ModuleList<DecoderBlock>> layers,
               std::shared_ptr<BlockNorm> final_norm) {
    register_module("layers", std::move(layers));
    register_module("final_norm", std::move(final_norm));
  }
  std::string type_name() const override { return "Decoder"; }
};

}  // namespace

MixerContext make_context(const std::vector<int32_t>& lengths, int64_t n, DType dtype,
                          Device device, bool causal) {
  MixerContext ctx;
  ctx.causal = causal;
  if (!lengths.empty()) {
    for (int32_t l : lengths)
      check(l >= 0 && l <= n, "sequence length ", l, " outside [0, ", n, "]");
    ctx.lengths = lengths;
    ctx.valid = length_mask(lengths, n, dtype, device);
  }
  return ctx;
}

namespace {
PaddingRows g_default_padding_rows = PaddingRows::Auto;

bool use_rows(PaddingRows mode, bool allowed, Device device) {
  if (mode == PaddingRows::Auto) mode = g_default_padding_rows;
  return allowed && (mode == PaddingRows::Skip || (mode == PaddingRows::Auto && device.is_host()));
}
}  // namespace

void set_default_padding_rows(PaddingRows mode) { g_default_padding_rows = mode; }
PaddingRows default_padding_rows() { return g_default_padding_rows; }

bool Classifier::skips_padding(Device device) const {
  return use_rows(padding_rows_, rows_allowed_, device);
}
bool Translator::skips_padding(Device device) const {
  return use_rows(padding_rows_, rows_allowed_, device);
}

// ---- Encoder ----
Encoder::Encoder(const BlockConfig& block, int64_t depth, Generator& gen) {
  layers_ = register_module("layers", std::make_shared<ModuleList<EncoderBlock>>());
  BlockStyle style = BlockStyle::PreNorm;
  for (int64_t i = 0; i < depth; ++i) {
    BlockConfig b = block;
    b.mixer.seed = block.mixer.seed + 101 * i;
    b.drop_path = drop_path_rate(block.drop_path, i, depth);
    layers_->push_back(std::make_shared<EncoderBlock>(b, gen));
    style = (*layers_)[i]->mixer()->capabilities().block;
  }
  final_norm_ = register_module("final_norm", std::make_shared<BlockNorm>(style, block.mixer.dim));
}

Tensor Encoder::forward(const Tensor& x, const MixerContext& ctx) {
  Tensor h = x;
  for (const auto& layer : *layers_) h = layer->forward(h, ctx);
  return final_norm_->forward(h);
}

bool Encoder::mixers_have_padding_property() const {
  for (const auto& layer : *layers_)
    if (!layer->mixer()->capabilities().padding_property) return false;
  return true;
}

// ---- Classifier ----
Classifier::Classifier(const ModelConfig& c) : config_(c) {
  check(c.task == ModelTask::Classify, "Classifier: config task is '", to_string(c.task), "'");
  check(c.classes > 1, "Classifier: needs at least 2 classes, got ", c.classes);
  check_model_size(c);  // before any allocation: sizes come from flags, files and data
  Generator gen(c.seed);
  if (c.input == InputKind::Tokens) {
    check(c.vocab > 0, "Classifier: token input needs a vocabulary size");
    tokens_ = register_module("embed", std::make_shared<Embedding>(c.vocab, c.dim, gen));
  } else if (c.stem == ImageStem::Conv) {
    conv_tokens_ = register_module(
        "embed", std::make_shared<ConvTokenizer>(c.image_channels, c.image_height, c.image_width,
                                                 c.patch, c.dim, gen));
  } else {
    patches_ = register_module(
        "embed", std::make_shared<PatchEmbedding>(c.image_channels, c.image_height, c.image_width,
                                                  c.patch, c.dim, gen));
  }
  if (c.pool == PoolKind::Cls)
    cls_token_ = register_parameter("cls_token", init::normal({1, 1, c.dim}, 0.02, gen));
  positions_ = register_module(
      "positions", std::make_shared<PositionalEmbedding>(c.positions, c.max_len, c.dim, gen));
  encoder_ = register_module(
      "encoder", std::make_shared<Encoder>(block_config(c, mixer_config(c, c.mixer, c.mixer_options,
                                                                        c.max_len, false, 1)),
                                           c.layers, gen));
  head_ = register_module("head", std::make_shared<Linear>(c.dim, c.classes, true, gen));
  rows_allowed_ = encoder_->mixers_have_padding_property();
}

Tensor Classifier::forward(const Tensor& inputs, const std::vector<int32_t>& lengths_in) {
  std::vector<int32_t> lengths = lengths_in;
  Tensor x = tokens_        ? tokens_->forward(inputs)
             : conv_tokens_ ? conv_tokens_->forward(inputs)
                            : patches_->forward(inputs);
  int64_t b = x.size(0);
  if (cls_token_.defined()) {
    x = concat({expand(cls_token_.to(x.dtype()), {b, 1, config_.dim}), x}, 1);
    for (int32_t& l : lengths) l += 1;
  }
  x = positions_->forward(x);
  MixerContext ctx = make_context(lengths, x.size(1), x.dtype(), x.device(), false);
  if (skips_padding(x.device())) ctx.rows = token_rows(lengths, x.size(1), x.device());
  // On the real tokens' rows, placed back (zeros at the padding) for the pooling.
  Tensor h = ctx.rows.defined()
                 ? unpack_rows(encoder_->forward(pack_rows(x, ctx.rows), ctx), ctx.rows)
                 : encoder_->forward(x, ctx);
  Tensor pooled;
  if (cls_token_.defined()) {
    pooled = reshape(narrow(h, 1, 0, 1), {b, config_.dim});
  } else if (ctx.valid.defined()) {
    std::vector<float> inv(b);
    for (int64_t i = 0; i < b; ++i) inv[i] = 1.0f / std::max(1, lengths[i]);
    Tensor scale = Tensor::from_data(inv, {b, 1}).to(h.dtype()).to(h.device());
    pooled = mul(sum(mul(h, unsqueeze(ctx.valid, 2)), {1}), scale);
  } else {
    pooled = mean(h, {1});
  }
  return head_->forward(pooled);
}

// ---- Translator ----
Translator::Translator(const ModelConfig& c) : config_(c) {
  check(c.task == ModelTask::Translate, "Translator: config task is '", to_string(c.task), "'");
  check(c.vocab > 0 && c.tgt_vocab > 0, "Translator: source and target vocabularies are needed");
  check_model_size(c);
  Generator gen(c.seed);
  src_embed_ = register_module("src_embed", std::make_shared<Embedding>(c.vocab, c.dim, gen));
  tgt_embed_ = register_module("tgt_embed", std::make_shared<Embedding>(c.tgt_vocab, c.dim, gen));
  src_pos_ = register_module(
      "src_pos", std::make_shared<PositionalEmbedding>(c.positions, c.max_len, c.dim, gen));
  tgt_pos_ = register_module(
      "tgt_pos", std::make_shared<PositionalEmbedding>(c.positions, c.tgt_max_len, c.dim, gen));
  encoder_ = register_module(
      "encoder", std::make_shared<Encoder>(block_config(c, mixer_config(c, c.mixer, c.mixer_options,
                                                                        c.max_len, false, 1)),
                                           c.layers, gen));
  decoder_ = std::make_shared<ModuleList<DecoderBlock>>();
  for (int64_t i = 0; i < c.decoder_layers; ++i) {
    BlockConfig self = block_config(c, mixer_config(c, c.decoder_mixer, c.decoder_mixer_options,
                                                    c.tgt_max_len, true, 2 + 101 * i));
    self.drop_path = drop_path_rate(c.drop_path, i, c.decoder_layers);
    MixerConfig cross = mixer_config(c, c.cross, {}, c.max_len, false, 3 + 101 * i);
    cross.cross = true;
    decoder_->push_back(std::make_shared<DecoderBlock>(self, cross, gen));
  }
  // The decoder's final norm follows its self-mixer's block style (mixers.md §1): a per-channel
  // affine map after resmlp blocks (decoder.final_norm.affine.*), LayerNorm otherwise.
  decoder_norm_ = std::make_shared<BlockNorm>(
      MixerRegistry::instance().find(c.decoder_mixer).capabilities.block, c.dim);
  register_module("decoder", std::make_shared<DecoderStack>(decoder_, decoder_norm_));
  if (c.tie_output)
    head_bias_ = register_parameter("head_bias", init::zeros({c.tgt_vocab}));
  else
    head_ = register_module("head", std::make_shared<Linear>(c.dim, c.tgt_vocab, true, gen));
  rows_allowed_ = encoder_->mixers_have_padding_property();
  for (const auto& block : *decoder_)
    rows_allowed_ = rows_allowed_ && block->self_mixer()->capabilities().padding_property &&
                    block->cross_mixer()->capabilities().padding_property;
}

Tensor Translator::logits_from(const Tensor& h) {
  Tensor n = decoder_norm_->forward(h);
  return head_ ? head_->forward(n) : linear(n, tgt_embed_->weight, head_bias_);
}

Memory Translator::encode(const Tensor& src, const std::vector<int32_t>& src_lengths) {
  return encode(src, src_lengths, {});
}

Memory Translator::encode(const Tensor& src, const std::vector<int32_t>& src_lengths,
                          const std::vector<int64_t>& order) {
  Tensor x = src_pos_->forward(src_embed_->forward(src));
  MixerContext ctx = make_context(src_lengths, x.size(1), x.dtype(), x.device(), false);
  Memory m;
  if (skips_padding(x.device())) ctx.rows = token_rows(src_lengths, x.size(1), x.device(), order);
  if (ctx.rows.defined()) {
    m.rows = ctx.rows;
    m.packed = encoder_->forward(pack_rows(x, ctx.rows), ctx);
    m.states = unpack_rows(m.packed, ctx.rows);
  } else {
    m.states = encoder_->forward(x, ctx);
  }
  m.valid = ctx.valid;
  m.lengths = ctx.lengths;
  return m;
}

namespace {
MixerContext cross_context(const Memory& m) {
  MixerContext ctx;
  ctx.memory = m.states;
  ctx.memory_valid = m.valid;
  ctx.memory_lengths = m.lengths;
  ctx.memory_rows = m.rows;
  ctx.memory_packed = m.packed;
  return ctx;
}
}  // namespace

Tensor Translator::decode(const Memory& memory, const Tensor& tgt_in,
                          const std::vector<int32_t>& tgt_lengths) {
  Tensor y = tgt_pos_->forward(tgt_embed_->forward(tgt_in));
  MixerContext self_ctx = make_context(tgt_lengths, y.size(1), y.dtype(), y.device(), true);
  MixerContext cross_ctx = cross_context(memory);
  // The target's rows in the memory's sequence order, so that cross-attention runs on the rows
  // of both (cross_groups).
  if (skips_padding(y.device()) && !tgt_lengths.empty())
    self_ctx.rows = cross_ctx.rows =
        token_rows(tgt_lengths, y.size(1), y.device(),
                   memory.rows.defined() ? memory.rows.order : std::vector<int64_t>());
  if (self_ctx.rows.defined()) y = pack_rows(y, self_ctx.rows);
  for (const auto& block : *decoder_) y = block->forward(y, self_ctx, cross_ctx);
  // Logits of the real tokens placed back into [B, T, V], zero at the padding (the loss skips it).
  return self_ctx.rows.defined() ? unpack_rows(logits_from(y), self_ctx.rows) : logits_from(y);
}

Tensor Translator::forward(const Tensor& src, const std::vector<int32_t>& src_lengths,
                           const Tensor& tgt_in, const std::vector<int32_t>& tgt_lengths) {
  // Both sides' rows in one order, by (source length, target length): long groups for the
  // encoder's self-attention and for cross-attention.
  bool both = !src_lengths.empty() && src_lengths.size() == tgt_lengths.size();
  return decode(encode(src, src_lengths,
                       both ? order_by_lengths(src_lengths, tgt_lengths) : std::vector<int64_t>()),
                tgt_in, tgt_lengths);
}

Translator::State Translator::start(const Memory& memory) {
  State s;
  s.memory = memory;
  for (const auto& block : *decoder_) s.caches.push_back(block->new_cache());
  return s;
}

Tensor Translator::step(State& state, const std::vector<int32_t>& tokens) {
  int64_t b = static_cast<int64_t>(tokens.size());
  Device device = state.memory.states.device();
  Tensor ids = Tensor::from_data(tokens, {b, 1}, device);
  Tensor y = tgt_pos_->forward(tgt_embed_->forward(ids), state.position);
  MixerContext self_ctx;
  self_ctx.causal = true;
  MixerContext cross_ctx = cross_context(state.memory);
  for (size_t i = 0; i < decoder_->size(); ++i)
    y = (*decoder_)[i]->step(y, state.caches[i], self_ctx, cross_ctx);
  ++state.position;
  return reshape(logits_from(y), {b, -1});
}

void Translator::reorder(State& state, const std::vector<int32_t>& index) {
  state.memory.states = gather_batch(state.memory.states, index);
  state.memory.rows = TokenRows();  // the packed rows follow the old batch order
  state.memory.packed = Tensor();
  state.memory.valid = gather_batch(state.memory.valid, index);
  if (!state.memory.lengths.empty()) {
    std::vector<int32_t> lengths;
    for (int32_t i : index) lengths.push_back(state.memory.lengths[i]);
    state.memory.lengths = lengths;
  }
  for (auto& c : state.caches) {
    reorder_cache(*c.self, index);
    reorder_cache(*c.cross, index);
  }
}

std::vector<std::vector<int32_t>> Translator::generate(const Tensor& src,
                                                       const std::vector<int32_t>& src_lengths,
                                                       const DecodeOptions& options) {
  return generate_ensemble({this}, src, src_lengths, options);
}

namespace {

// Next-token log-probabilities of one or more translators over the same rows.
class TranslatorScorer : public NextTokenScorer {
 public:
  TranslatorScorer(const std::vector<Translator*>& models, const Tensor& src,
                   const std::vector<int32_t>& src_lengths)
      : models_(models) {
    for (Translator* m : models_) states_.push_back(m->start(m->encode(src, src_lengths)));
  }
  std::vector<float> next_log_probs(const std::vector<int32_t>& tokens) override {
    std::vector<std::vector<float>> each;
    for (size_t m = 0; m < models_.size(); ++m)
      each.push_back(log_softmax(models_[m]->step(states_[m], tokens), -1).to_float_vector());
    if (each.size() == 1) return each[0];
    for (size_t m = 1; m < each.size(); ++m)
      check(each[m].size() == each[0].size(), "generate_ensemble: model ", m, " has ",
            each[m].size() / tokens.size(), " target tokens, model 0 has ",
            each[0].size() / tokens.size());
    // log(mean_m p_m), computed as a log-sum-exp in double.
    std::vector<float> mean(each[0].size());
    const double log_n = std::log(static_cast<double>(each.size()));
    for (size_t i = 0; i < mean.size(); ++i) {
      double top = -std::numeric_limits<double>::infinity();
      for (const auto& lp : each) top = std::max(top, static_cast<double>(lp[i]));
      if (top == -std::numeric_limits<double>::infinity()) {
        mean[i] = static_cast<float>(top);
        continue;
      }
      double sum = 0;
      for (const auto& lp : each) sum += std::exp(lp[i] - top);
      mean[i] = static_cast<float>(top + std::log(sum) - log_n);
    }
    return mean;
  }
  void reorder(const std::vector<int32_t>& index) override {
    for (size_t m = 0; m < models_.size(); ++m) models_[m]->reorder(states_[m], index);
  }

 private:
  std::vector<Translator*> models_;
  std::vector<Translator::State> states_;
};

}  // namespace

std::vector<std::vector<int32_t>> generate_ensemble(const std::vector<Translator*>& models,
                                                    const Tensor& src,
                                                    const std::vector<int32_t>& src_lengths,
                                                    const DecodeOptions& options) {
  NoGradGuard no_grad;
  check(!models.empty(), "generate: no model");
  check(options.beam >= 1, "generate: beam must be at least 1");
  DecodeOptions o = options;
  // Position t of the target uses positional row t: <bos> plus max_len tokens must fit in ℓ.
  for (Translator* m : models)
    o.max_len = std::min<int64_t>(o.max_len, m->config().tgt_max_len - 1);
  TranslatorScorer scorer(models, src, src_lengths);
  int64_t b = src.size(0);
  return o.beam == 1 ? greedy_search(scorer, b, o) : beam_search(scorer, b, o);
}

}  // namespace mixlab
