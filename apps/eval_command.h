// What the commands that use a trained model share (classify eval|predict, translate eval|run):
// the model rebuilt from its checkpoint, and how eval names and scores its data.
#pragma once
#include <CLI/CLI.hpp>

#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "apps/common.h"
#include "apps/data_description.h"
#include "train/run/checkpoint.h"

namespace mixlab::app {

// A model and its checkpoint's metadata, in eval mode on `device`.
template <typename Model>
struct LoadedModel {
  CheckpointInfo info;
  std::unique_ptr<Model> model;
};

template <typename Model>
LoadedModel<Model> load_trained_model(const std::string& checkpoint, Device device) {
  LoadedModel<Model> l;
  l.info = read_checkpoint_info(checkpoint);
  l.model = std::make_unique<Model>(l.info.config);
  load_weights(checkpoint, *l.model);
  l.model->to(device);
  l.model->eval();
  return l;
}

// An ensemble's models after the first: the ones a task's set_ensemble averages with it.
template <typename Loaded>
auto ensemble_others(std::vector<Loaded>& models) {
  std::vector<decltype(models[0].model.get())> out;
  for (size_t i = 1; i < models.size(); ++i) out.push_back(models[i].model.get());
  return out;
}

// eval reads the checkpoint's data with the checkpoint's seed unless --seed was given.
uint64_t eval_seed(const CLI::App& cmd, const CommonFlags& common, const DataDescription& stored);

// "data: <summary>", ", the checkpoint's" when it is the data the checkpoint was trained on.
void print_eval_data(std::ostream& out, const DataDescription& scored,
                     const DataDescription& stored);

// One line per metric: "<set> <name> <value>" ("test accuracy 0.91").
void print_metrics(std::ostream& out, const std::string& set,
                   const std::map<std::string, double>& metrics);

}  // namespace mixlab::app
