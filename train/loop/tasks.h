// Tasks adapt a model to the generic training loop (train/loop/trainer.h): how a batch becomes a
// loss, and how a data set is evaluated. Both tasks move batches to the model's device.
#pragma once
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "nn/models.h"
#include "train/data/dataset.h"

namespace mixlab {

class TrainTask {
 public:
  virtual ~TrainTask() = default;
  virtual Module& model() = 0;
  virtual Tensor loss(const Batch& batch) = 0;       // mean loss of the batch, recorded
  virtual int64_t tokens(const Batch& batch) const;  // tokens in the batch (for tok/s)
  // Metrics over a whole data set, "loss" included; the model is put in eval mode and back.
  virtual std::map<std::string, double> evaluate(const Dataset& data) = 0;
  // The metric that selects the best checkpoint (higher is better).
  virtual std::string primary_metric() const = 0;
  // Every metric evaluate() may return (the columns of metrics.csv).
  virtual std::vector<std::string> metric_names() const = 0;
  virtual int64_t eval_batch_size() const { return 128; }
  // Where evaluation and decoding report progress (a bar that appears once the work has taken
  // a second); nullptr, the default, reports nothing.
  void set_progress(std::ostream* out) { progress_ = out; }

 protected:
  std::ostream* progress_ = nullptr;
};

class ClassificationTask : public TrainTask {
 public:
  ClassificationTask(Classifier& model, Device device, double label_smoothing = 0.0);
  Module& model() override { return model_; }
  Tensor loss(const Batch& batch) override;
  std::map<std::string, double> evaluate(const Dataset& data) override;
  std::string primary_metric() const override { return "accuracy"; }
  std::vector<std::string> metric_names() const override { return {"loss", "accuracy"}; }
  // An image's tokens are its patches, a text's its words.
  int64_t tokens(const Batch& batch) const override;
  // Class probabilities [B, classes] for a batch (eval mode, no graph).
  Tensor probabilities(const Batch& batch);
  // More classifiers (in eval mode, the same inputs and classes) that score together with this
  // task's model from now on: the probabilities become the mean of the models', and the loss the
  // cross-entropy of that mean. Empty: the task's model alone.
  void set_ensemble(std::vector<Classifier*> others) { others_ = std::move(others); }
  // Test-time flip averaging, for image classifiers: each image is also scored mirrored
  // left-right, and evaluate() and probabilities() take the mean probability over both views
  // (and over the ensemble's models). The training loss never uses it. Off by default; an Error
  // for a token classifier.
  void set_flip_averaging(bool on);
  // Hard distillation (DeiT; Touvron et al. 2021): trained classifiers that read the same inputs
  // and name the same classes. Each training batch is also scored against the class they
  // predict for it (the argmax of their mean probability, in eval mode, on the batch as
  // augmented): loss = (1 - weight) · L(z, y) + weight · CE(z, ŷ_teacher). Empty: off.
  void set_teachers(std::vector<Classifier*> teachers, double weight);
  // The teachers' predicted class for each example of a batch.
  std::vector<int32_t> teacher_predictions(const Batch& batch);

 private:
  // The batch's input on the device, built once for every model that reads it: its images
  // [B, pixels] or its token ids [B, S].
  Tensor input(const Batch& batch) const;
  // `model`'s logits for `x`, the input of `batch`.
  static Tensor model_logits(Classifier& model, const Tensor& x, const Batch& batch);
  // The log of the mean probability over the model, its ensemble and, with `both_views`, the
  // mirrored images (the model alone: its logits).
  Tensor logits(const Batch& batch, const Tensor& x, bool both_views = false);
  // The teachers' predicted classes for `x`, the input of `batch`.
  std::vector<int32_t> teacher_classes(const Batch& batch, const Tensor& x);
  Tensor label_loss(const Tensor& z, const Batch& batch);  // the data's labels, mixed or not
  Classifier& model_;
  Device device_;
  double label_smoothing_;
  std::vector<Classifier*> others_;
  std::vector<Classifier*> teachers_;
  double teacher_weight_ = 0.0;
  bool flip_averaging_ = false;
};

class TranslationTask : public TrainTask {
 public:
  // Targets are [<bos>, y..., <eos>]; the decoder reads tgt[:-1] and predicts tgt[1:].
  TranslationTask(Translator& model, Device device, double label_smoothing = 0.0,
                  DecodeOptions decode = {});
  Module& model() override { return model_; }
  Tensor loss(const Batch& batch) override;
  // loss (teacher forced, without label smoothing), exact_match, token_accuracy, bleu; with
  // references (one list per example, e.g. every pronunciation of a word) also wer and per as in
  // G2P papers.
  std::map<std::string, double> evaluate(const Dataset& data) override;
  std::string primary_metric() const override { return "exact_match"; }
  std::vector<std::string> metric_names() const override {
    return {"loss", "exact_match", "token_accuracy", "bleu", "wer", "per"};
  }
  // Several references per example for the next evaluate() calls on a data set of this size.
  void set_references(std::vector<std::vector<std::vector<int32_t>>> references) {
    references_ = std::move(references);
  }
  // More models (in eval mode, same vocabularies) that decode and score together with this
  // task's model from now on: see generate_ensemble. The loss becomes the ensemble's, the
  // cross-entropy of the mean of the models' probabilities. Empty: the task's model alone.
  void set_ensemble(std::vector<Translator*> others) { others_ = std::move(others); }
  // Generated outputs (without <bos>/<eos>) for every example of a data set, in order.
  std::vector<std::vector<int32_t>> translate(const Dataset& data);
  DecodeOptions& decode_options() { return decode_; }

 private:
  Tensor teacher_forced_loss(const Batch& batch, double label_smoothing);
  Translator& model_;
  std::vector<Translator*> others_;
  Device device_;
  double label_smoothing_;
  DecodeOptions decode_;
  std::vector<std::vector<std::vector<int32_t>>> references_;
};

// The reference output of an encoded target: without <bos>, up to (not including) <eos>.
std::vector<int32_t> strip_target(const std::vector<int32_t>& tgt, int32_t bos = 1,
                                  int32_t eos = 2);

}  // namespace mixlab
