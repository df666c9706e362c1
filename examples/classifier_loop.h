// The data, training loop and checkpoint shared by train_classifier.cpp and custom_mixer.cpp:
// everything a small training program needs from the library, with no `mixlab` app involved.
//
// The task: 4 to 12 tokens from {1, 2, 3, 4} (0 pads); the label: does token 1 occur more often
// than token 2 (never a tie)? Padding must not count, so the valid-length mask matters.
#pragma once
#include <cstdio>
#include <string>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "nn/models.h"
#include "train/run/checkpoint.h"
#include "train/data/data_loader.h"
#include "train/optim/optimizer.h"

namespace example {
using namespace mixlab;

inline InMemoryDataset make_data(size_t count, uint64_t seed) {
  Generator gen(seed);
  InMemoryDataset data;
  while (data.size() < count) {
    Example e;
    const int length = 4 + static_cast<int>(gen.below(9));
    int balance = 0;  // (count of 1) - (count of 2)
    for (int i = 0; i < length; ++i) {
      e.src.push_back(1 + static_cast<int32_t>(gen.below(4)));
      balance += (e.src.back() == 1) - (e.src.back() == 2);
    }
    if (balance == 0) continue;
    e.label = balance > 0;
    data.examples().push_back(std::move(e));
  }
  return data;
}

// The model's logits for a collated batch.
inline Tensor logits(Classifier& model, const Batch& batch) {
  return model.forward(Tensor::from_data(batch.src, {batch.size, batch.src_len}),
                       batch.src_lengths);
}

inline double accuracy(Classifier& model, const Dataset& data) {
  NoGradGuard no_grad;
  model.eval();
  DataLoaderOptions in_order;  // every example once, in data order
  in_order.batch_size = 64;
  in_order.shuffle = false;
  DataLoader loader(data, in_order);
  loader.start_epoch(0);
  Batch batch;
  int64_t correct = 0;
  while (loader.next(batch)) {
    const std::vector<float> scores = logits(model, batch).to_float_vector();
    for (int64_t i = 0; i < batch.size; ++i)
      correct += (scores[2 * i + 1] > scores[2 * i]) == (batch.labels[i] == 1);
  }
  model.train();
  return static_cast<double>(correct) / static_cast<double>(data.size());
}

// Trains a classifier with `mixer`, saves a training checkpoint to `checkpoint`, loads its
// weights into a fresh model and checks that it scores the same. Returns 0 on success.
inline int train_classifier(const std::string& mixer, const std::string& checkpoint) {
  ModelConfig config;  // a tiny model: one block of width 32
  config.mixer = mixer;
  config.dim = 32;
  config.heads = 2;
  config.layers = 1;
  config.max_len = 12;
  config.vocab = 5;
  config.classes = 2;
  config.dropout = 0.0;
  Classifier model(config);
  const InMemoryDataset train = make_data(2000, 1), test = make_data(500, 2);

  Adam optimizer(param_groups(model, 0.0), {.lr = 3e-3});
  DataLoaderOptions shuffled;  // a new order every epoch, drawn from the seed
  shuffled.batch_size = 32;
  shuffled.seed = 7;
  DataLoader loader(train, shuffled);
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    loader.start_epoch(epoch);
    Batch batch;
    double total = 0;
    while (loader.next(batch)) {
      Tensor loss =
          cross_entropy(logits(model, batch), Tensor::from_data(batch.labels, {batch.size}));
      optimizer.zero_grad();
      loss.backward();
      optimizer.step();
      total += loss.item();
    }
    std::printf("epoch %lld: train loss %.3f, test accuracy %.3f\n",
                static_cast<long long>(epoch + 1), total / loader.batches_per_epoch(),
                accuracy(model, test));
  }

  TrainingState state;  // what a resumable checkpoint records besides the tensors
  state.step = optimizer.steps_taken();
  state.epoch = loader.epoch() + 1;
  state.config_json = config.to_json().dump();
  save_checkpoint(checkpoint, model, optimizer, state);
  Classifier reloaded(config);
  load_weights(checkpoint, reloaded);
  const double before = accuracy(model, test), after = accuracy(reloaded, test);
  std::printf("%s: test accuracy %.3f; reloaded from %s: %.3f\n", mixer.c_str(), before,
              checkpoint.c_str(), after);
  if (before == after && before >= 0.9) return 0;
  std::printf("FAILED: the accuracy is below 0.9, or the reloaded model scores differently\n");
  return 1;
}

}  // namespace example
