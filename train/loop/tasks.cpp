#include "train/loop/tasks.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "core/error.h"
#include "train/data/augment.h"
#include "train/data/data_loader.h"
#include "train/loop/metrics.h"
#include "train/run/progress.h"

namespace mixlab {

namespace {

constexpr int32_t kPad = 0;

// Runs `fn` with the model in eval mode, restoring its mode afterwards.
template <typename F>
auto in_eval_mode(Module& m, F&& fn) {
  bool was_training = m.is_training();
  m.eval();
  struct Restore {
    Module& m;
    bool on;
    ~Restore() { m.train(on); }
  } restore{m, was_training};
  NoGradGuard no_grad;
  return fn();
}

DataLoaderOptions eval_loader_options(int64_t batch_size) {
  DataLoaderOptions o;
  o.batch_size = batch_size;
  o.shuffle = false;
  o.pad_id = kPad;
  return o;
}

// A progress bar over the batches of one pass, shown only once the pass has taken a second
// (short evaluations stay silent) and only when the task has somewhere to report.
class LazyProgress {
 public:
  LazyProgress(std::ostream* out, std::string label, int64_t total)
      : out_(out), label_(std::move(label)), total_(total), start_(Clock::now()) {}
  void update(int64_t done) {
    if (!out_) return;
    if (!bar_) {
      if (std::chrono::duration<double>(Clock::now() - start_).count() < 1.0) return;
      bar_ = std::make_unique<ProgressBar>(label_, total_, *out_);
    }
    bar_->update(done);
  }
  void finish() {
    if (bar_) bar_->finish();
  }

 private:
  using Clock = std::chrono::steady_clock;
  std::ostream* out_;
  std::string label_;
  int64_t total_;
  Clock::time_point start_;
  std::unique_ptr<ProgressBar> bar_;
};

// Teacher forcing's split of a [B, T] target batch: decoder inputs tgt[:, :-1] and outputs
// tgt[:, 1:], padded with 0 where short; lengths are the inputs' (each target's length - 1).
void shift_targets(const Batch& b, std::vector<int32_t>& in, std::vector<int32_t>& out,
                   std::vector<int32_t>& lengths) {
  int64_t t = b.tgt_len - 1;
  in.assign(b.size * t, kPad);
  out.assign(b.size * t, kPad);
  lengths.assign(b.size, 0);
  for (int64_t i = 0; i < b.size; ++i) {
    int32_t len = b.tgt_lengths[i] - 1;
    lengths[i] = std::max(len, 0);
    for (int64_t j = 0; j < len; ++j) {
      in[i * t + j] = b.tgt[i * b.tgt_len + j];
      out[i * t + j] = b.tgt[i * b.tgt_len + j + 1];
    }
  }
}

}  // namespace

std::vector<int32_t> strip_target(const std::vector<int32_t>& tgt, int32_t bos, int32_t eos) {
  std::vector<int32_t> out;
  for (size_t i = 0; i < tgt.size(); ++i) {
    if (i == 0 && tgt[i] == bos) continue;
    if (tgt[i] == eos || tgt[i] == kPad) break;
    out.push_back(tgt[i]);
  }
  return out;
}

int64_t TrainTask::tokens(const Batch& b) const {
  int64_t n = 0;
  for (int32_t l : b.src_lengths) n += l;
  for (int32_t l : b.tgt_lengths) n += l;
  return n;
}

namespace {
// An ensemble's logits: the log of the mean of the models' probabilities, a valid logit row (it
// already sums to one). The 1e-30 floor keeps a target that every model rules out (float
// underflow) at a finite loss.
Tensor log_mean_probability(const std::vector<Tensor>& logits) {
  Tensor probs = softmax(logits[0], -1);
  for (size_t i = 1; i < logits.size(); ++i) probs = add(probs, softmax(logits[i], -1));
  return log(add(mul(probs, 1.0 / static_cast<double>(logits.size())), 1e-30));
}

// The index of each row's largest entry of [B, classes] scores (the first, on a tie).
std::vector<int32_t> row_argmax(const Tensor& z) {
  const std::vector<float> v = z.to_float_vector();
  const int64_t rows = z.size(0), classes = z.size(1);
  std::vector<int32_t> out(rows);
  for (int64_t i = 0; i < rows; ++i) {
    const float* row = v.data() + i * classes;
    out[i] = static_cast<int32_t>(std::max_element(row, row + classes) - row);
  }
  return out;
}
}  // namespace

// ---- classification ----
ClassificationTask::ClassificationTask(Classifier& model, Device device, double label_smoothing)
    : model_(model), device_(device), label_smoothing_(label_smoothing) {}

Tensor ClassificationTask::input(const Batch& b) const {
  if (!b.features.empty())
    return Tensor::from_data(b.features, {b.size, static_cast<int64_t>(b.features.size()) / b.size},
                             device_);
  return Tensor::from_data(b.src, {b.size, b.src_len}, device_);
}

Tensor ClassificationTask::model_logits(Classifier& model, const Tensor& x, const Batch& b) {
  return b.features.empty() ? model.forward(x, b.src_lengths) : model.forward(x);
}

Tensor ClassificationTask::logits(const Batch& b, const Tensor& x, bool both_views) {
  std::vector<Tensor> z;
  auto every_model = [&](const Tensor& view) {
    z.push_back(model_logits(model_, view, b));
    for (Classifier* m : others_) z.push_back(model_logits(*m, view, b));
  };
  every_model(x);
  if (both_views) {
    const ModelConfig& c = model_.config();
    std::vector<float> mirrored = b.features;
    mirror_batch(mirrored, c.image_channels, c.image_height, c.image_width);
    every_model(Tensor::from_data(mirrored, x.shape(), device_));
  }
  return z.size() == 1 ? z[0] : log_mean_probability(z);
}

void ClassificationTask::set_flip_averaging(bool on) {
  check(!on || model_.config().input == InputKind::Image,
        "test-time flip averaging needs an image classifier; this one reads ",
        to_string(model_.config().input));
  flip_averaging_ = on;
}

int64_t ClassificationTask::tokens(const Batch& b) const {
  if (!b.features.empty()) {  // max_len counts a class token too, which is no patch
    const ModelConfig& c = model_.config();
    return b.size * (c.max_len - (c.pool == PoolKind::Cls ? 1 : 0));
  }
  return TrainTask::tokens(b);
}

// A mixed batch (train/data/batch_mixing.h) scores each image against both of its labels:
// λ CE(z, y) + (1 - λ) CE(z, y_partner).
Tensor ClassificationTask::label_loss(const Tensor& z, const Batch& b) {
  Tensor labels = Tensor::from_data(b.labels, {b.size}, device_);
  Tensor own = cross_entropy(z, labels, -100, label_smoothing_);
  if (b.mix_labels.empty()) return own;
  Tensor partner_labels = Tensor::from_data(b.mix_labels, {b.size}, device_);
  Tensor partner = cross_entropy(z, partner_labels, -100, label_smoothing_);
  return add(mul(own, b.mix_weight), mul(partner, 1.0 - b.mix_weight));
}

Tensor ClassificationTask::loss(const Batch& b) {
  const Tensor x = input(b);  // one copy of the batch for the model and its teachers
  Tensor z = logits(b, x);
  Tensor data_loss = label_loss(z, b);
  if (teachers_.empty()) return data_loss;
  Tensor taught = Tensor::from_data(teacher_classes(b, x), {b.size}, device_);
  Tensor teacher_loss = cross_entropy(z, taught, -100, label_smoothing_);
  return add(mul(data_loss, 1.0 - teacher_weight_), mul(teacher_loss, teacher_weight_));
}

void ClassificationTask::set_teachers(std::vector<Classifier*> teachers, double weight) {
  for (Classifier* t : teachers) t->eval();
  teachers_ = std::move(teachers);
  teacher_weight_ = weight;
}

std::vector<int32_t> ClassificationTask::teacher_predictions(const Batch& b) {
  return teacher_classes(b, input(b));
}

std::vector<int32_t> ClassificationTask::teacher_classes(const Batch& b, const Tensor& x) {
  NoGradGuard no_grad;
  std::vector<Tensor> logits;
  for (Classifier* t : teachers_) logits.push_back(model_logits(*t, x, b));
  return row_argmax(logits.size() == 1 ? logits[0] : log_mean_probability(logits));
}

Tensor ClassificationTask::probabilities(const Batch& b) {
  return in_eval_mode(model_, [&] { return softmax(logits(b, input(b), flip_averaging_), -1); });
}

std::map<std::string, double> ClassificationTask::evaluate(const Dataset& data) {
  return in_eval_mode(model_, [&] {
    DataLoader loader(data, eval_loader_options(eval_batch_size()));
    loader.start_epoch(0);
    Batch b;
    double loss_sum = 0;
    std::vector<int32_t> predictions, labels;
    LazyProgress progress(progress_, "evaluate", loader.batches_per_epoch());
    for (int64_t done = 1; loader.next(b); ++done) {
      progress.update(done);
      Tensor z = logits(b, input(b), flip_averaging_);
      loss_sum += cross_entropy(z, Tensor::from_data(b.labels, {b.size}, device_)).item() * b.size;
      const std::vector<int32_t> predicted = row_argmax(z);
      predictions.insert(predictions.end(), predicted.begin(), predicted.end());
      labels.insert(labels.end(), b.labels.begin(), b.labels.begin() + b.size);
    }
    progress.finish();
    std::map<std::string, double> m;
    m["loss"] = labels.empty() ? 0.0 : loss_sum / labels.size();
    m["accuracy"] = labels.empty() ? 0.0 : accuracy(predictions, labels);
    return m;
  });
}

// ---- translation ----
TranslationTask::TranslationTask(Translator& model, Device device, double label_smoothing,
                                 DecodeOptions decode)
    : model_(model), device_(device), label_smoothing_(label_smoothing), decode_(decode) {}

Tensor TranslationTask::loss(const Batch& b) { return teacher_forced_loss(b, label_smoothing_); }

Tensor TranslationTask::teacher_forced_loss(const Batch& b, double label_smoothing) {
  std::vector<int32_t> in, out, lengths;
  shift_targets(b, in, out, lengths);
  int64_t t = b.tgt_len - 1;
  Tensor src = Tensor::from_data(b.src, {b.size, b.src_len}, device_);
  Tensor tgt_in = Tensor::from_data(in, {b.size, t}, device_);
  std::vector<Tensor> logits{model_.forward(src, b.src_lengths, tgt_in, lengths)};
  for (Translator* m : others_) logits.push_back(m->forward(src, b.src_lengths, tgt_in, lengths));
  return cross_entropy(logits.size() == 1 ? logits[0] : log_mean_probability(logits),
                       Tensor::from_data(out, {b.size, t}, device_), kPad, label_smoothing);
}

std::vector<std::vector<int32_t>> TranslationTask::translate(const Dataset& data) {
  return in_eval_mode(model_, [&] {
    DataLoader loader(data, eval_loader_options(eval_batch_size()));
    loader.start_epoch(0);
    Batch b;
    std::vector<std::vector<int32_t>> out;
    LazyProgress progress(progress_, decode_.beam > 1 ? "beam decode" : "decode",
                          loader.batches_per_epoch());
    for (int64_t done = 1; loader.next(b); ++done) {
      progress.update(done);
      Tensor src = Tensor::from_data(b.src, {b.size, b.src_len}, device_);
      std::vector<Translator*> models{&model_};
      models.insert(models.end(), others_.begin(), others_.end());
      for (auto& seq : generate_ensemble(models, src, b.src_lengths, decode_))
        out.push_back(std::move(seq));
    }
    progress.finish();
    return out;
  });
}

std::map<std::string, double> TranslationTask::evaluate(const Dataset& data) {
  double loss_sum = 0;
  int64_t loss_tokens = 0;
  in_eval_mode(model_, [&] {
    DataLoader loader(data, eval_loader_options(eval_batch_size()));
    loader.start_epoch(0);
    Batch b;
    while (loader.next(b)) {
      int64_t n = 0;
      for (int32_t l : b.tgt_lengths) n += std::max(0, l - 1);
      // Plain cross-entropy, as ClassificationTask reports: label smoothing is a training
      // device, and a smoothed validation loss would not match `translate eval`'s.
      loss_sum += teacher_forced_loss(b, 0.0).item() * n;
      loss_tokens += n;
    }
    return 0;
  });
  std::vector<std::vector<int32_t>> hyps = translate(data), refs;
  for (size_t i = 0; i < data.size(); ++i) refs.push_back(strip_target(data.get(i).tgt));
  std::map<std::string, double> m;
  m["loss"] = loss_tokens ? loss_sum / loss_tokens : 0.0;
  if (refs.empty()) return m;
  m["exact_match"] = exact_match(hyps, refs);
  m["token_accuracy"] = token_accuracy(hyps, refs, kPad);
  m["bleu"] = corpus_bleu(hyps, refs);
  if (references_.size() == data.size()) {
    G2pScores s = g2p_scores(hyps, references_);
    m["wer"] = s.wer();
    m["per"] = s.per();
  }
  return m;
}

}  // namespace mixlab
