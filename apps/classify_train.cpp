// `mixlab classify train`: an encoder of any mixer, pooled, then a linear head, trained on the
// data apps/classify_data.h reads; the sequence around it is apps/train_command.h's.
//
// Expected output of `mixlab classify train --steps 200`: a progress bar per epoch, the valid
// accuracy, and a summary table; files in --out (default runs/classify): best.safetensors,
// last.safetensors, metrics.csv, curves.svg, config.ini, model.json.
#include <algorithm>
#include <iostream>
#include <sstream>

#include "apps/classify_data.h"
#include "apps/cli_style.h"
#include "apps/commands.h"
#include "apps/train_command.h"
#include "train/loop/tasks.h"

namespace mixlab::app {

namespace {

// The classifier's part of the train command (apps/train_command.h).
struct ClassifyTrain {
  using Model = Classifier;
  static constexpr const char* kTask = "classify";
  TrainCommandFlags flags;
  ListOpsFlags listops;
  int64_t patch = 4;
  std::string pool = "mean";
  std::string stem = "patch";
  ImageAugmentation augment;
  std::vector<std::string> teacher_paths;
  double distill_weight = 0.5;
  std::vector<LoadedModel<Classifier>> teachers;
  ClassificationData data;

  ClassifyTrain() {
    flags.common.out = "runs/classify";
    flags.train.trainer.batch_size = 128;
    flags.train.trainer.epochs = 10;
  }

  void add_flags(CLI::App* cmd) {
    cmd->add_option("--patch", patch, "image patch size p (p x p pixels per token)")
        ->capture_default_str()
        ->check(CLI::Range(1, 1024))
        ->group(kModelGroup);
    cmd->add_option("--stem", stem,
                    "images: patch (p x p patches, one linear map) or conv (log2 p stages of 3x3 "
                    "convolution, ReLU and 2x2 max-pool)")
        ->capture_default_str()
        ->check(CLI::IsMember({"patch", "conv"}))
        ->group(kModelGroup);
    cmd->add_option("--pool", pool, "mean (over valid tokens) or cls (a class token)")
        ->capture_default_str()
        ->check(CLI::IsMember({"mean", "cls"}))
        ->group(kModelGroup);
    auto listops_option = [&](const char* name, int64_t& value, const char* help) {
      cmd->add_option(name, value, help)
          ->capture_default_str()
          ->check(CLI::Range(int64_t{1}, int64_t{10000000}))
          ->group(kDataGroup);
    };
    listops_option("--listops-min-len", listops.min_len, "ListOps: shortest expression");
    listops_option("--listops-len", listops.max_len, "ListOps: longest expression");
    listops_option("--listops-depth", listops.depth, "ListOps: maximum depth");
    listops_option("--listops-args", listops.args, "ListOps: maximum arguments");
    listops_option("--listops-train", listops.train, "ListOps: training examples");
    cmd->add_option(
           "--augment-crop", augment.crop_pad,
           "images: pad P pixels on every side, then crop back at a random offset (0: off)")
        ->capture_default_str()
        ->check(CLI::Range(0, 8))
        ->group(kDataGroup);
    cmd->add_flag("--augment-flip", augment.flip, "images: random horizontal flip")
        ->group(kDataGroup);
    cmd->add_option("--augment-erase", augment.erase,
                    "images: probability of random erasing of one rectangle (0: off)")
        ->capture_default_str()
        ->check(CLI::Range(0.0, 1.0))
        ->group(kDataGroup);
    cmd->add_option("--augment-mixup", augment.mixup,
                    "images: mixup, each batch blended with itself reversed under one "
                    "λ ~ Beta(α, α); the α (0: off)")
        ->capture_default_str()
        ->check(CLI::Range(0.0, 10.0))
        ->group(kDataGroup);
    cmd->add_option("--augment-cutmix", augment.cutmix,
                    "images: CutMix, a box of the reversed batch pasted in, its area 1 - λ with "
                    "λ ~ Beta(α, α); the α (0: off; with mixup, each batch picks one)")
        ->capture_default_str()
        ->check(CLI::Range(0.0, 10.0))
        ->group(kDataGroup);
    // Stored absolute in config.ini, so that --resume finds the teachers from any directory.
    cmd->add_option("--teacher", teacher_paths,
                    "hard distillation: trained classifiers (.safetensors) whose predicted class "
                    "for each training batch is a second label; several predict together (the "
                    "mean of their probabilities)")
        ->transform(CLI::Validator(
            [](std::string& path) {
              if (!path.empty()) path = absolute_path(path);
              return std::string();
            },
            "FILE"))
        ->group(kOptimisationGroup);
    cmd->add_option("--distill-weight", distill_weight,
                    "with --teacher: the loss is (1 - w) · CE(labels) + w · CE(teacher's class)")
        ->capture_default_str()
        ->check(CLI::Range(0.0, 1.0))
        ->group(kOptimisationGroup);
  }

  ModelConfig prepare() {
    // The mixer's name and options before any data is generated (ListOps takes a while).
    parse_mixer_options(flags.model.mixer, flags.model.mixer_options);
    const DataDescription desc =
        describe_classify_data(flags.common.data, listops, flags.common.seed);
    const int64_t length_limit = std::max(kDataLengthCap, flags.model.max_len);
    if (desc.kind == DataKind::ListOps && listops.max_len > length_limit)
      throw UsageError("--listops-len " + std::to_string(listops.max_len) + " is more than " +
                       std::to_string(length_limit) +
                       ", the longest a model takes its length from; pass --max-len " +
                       std::to_string(listops.max_len) + " as well to train on it");
    data = load_classify_data(desc, nullptr, nullptr, length_limit);
    const int64_t limit = flags.train.train_limit;
    if (limit > 0 && limit < static_cast<int64_t>(data.train.size()))
      data.train.examples().resize(limit);
    const ModelConfig config =
        classifier_config(flags.model, flags.common, data, patch, pool, stem);
    load_teachers(config);
    return config;
  }

  // The teachers, checked against this run's data before anything is written.
  void load_teachers(const ModelConfig& config) {
    // config.ini stores a run without a teacher as `teacher=""`.
    std::erase(teacher_paths, std::string());
    if (teacher_paths.empty()) {
      if (distill_weight != 0.5)  // the default
        throw UsageError("--distill-weight weighs the labels of --teacher, and none was given");
      return;
    }
    teachers = load_classifiers(teacher_paths, Device::cpu());
    for (size_t i = 0; i < teachers.size(); ++i)
      check_teacher(teacher_paths[i], teachers[i].info, config, data);
    data.desc.teacher = (teachers.size() == 1 ? "the classifier " : "the mean of the classifiers ");
    for (size_t i = 0; i < teacher_paths.size(); ++i)
      data.desc.teacher += (i == 0 ? "" : ", ") + teacher_paths[i];
    std::ostringstream weight;
    weight << distill_weight;
    data.desc.teacher += " (hard, weight " + weight.str() + ")";
  }

  void adjust(TrainerOptions& options) {
    options.augment = image_augmentation(augment, data);
    data.desc.augment = augment.enabled() ? options.augment.describe() : "";
    data.description = data.desc.summary();
  }

  void describe(std::ostream& out, const ModelConfig& config, const Model& model, Device device) {
    out << "data: " << data.description << ": " << data.train.size() << " train, "
        << data.valid.size() << " valid, " << data.test.size() << " test\n"
        << "model: " << config.mixer << " classifier, " << model.parameter_count()
        << " parameters, max_len " << config.max_len << ", on " << describe_device(device) << "\n";
  }

  std::string data_json() const { return data.desc.to_json().dump(); }
  ClassificationTask make_task(Model& model, Device device) {
    ClassificationTask task(model, device, flags.train.label_smoothing);
    std::vector<Classifier*> teacher_models;
    for (auto& t : teachers) {
      t.model->to(device);
      teacher_models.push_back(t.model.get());
    }
    if (!teacher_models.empty()) task.set_teachers(teacher_models, distill_weight);
    return task;
  }
  const Dataset& train_set() const { return data.train; }
  const Dataset* valid_set() const { return &data.valid; }
  TrainingState metadata(const ModelConfig& config) const {
    return classifier_metadata(config, data);
  }
  std::map<std::string, double> test(ClassificationTask& task) { return task.evaluate(data.test); }
  std::string title(const ModelConfig& config) const {
    return "classify: " + config.mixer + " on " + data.description;
  }

  // Predicting with the best checkpoint, and scoring it.
  std::vector<std::string> next_commands(const std::string& mixlab, const std::string& best) const {
    std::string predict = mixlab + " classify predict --checkpoint " + best;
    if (data.input == InputKind::Image)
      predict += " --images IDX_IMAGE_FILE";
    else
      predict = "echo " +
                shell_quote(data.desc.kind == DataKind::ListOps ? "[MAX 3 [MIN 4 7 ] 2 ]"
                                                                : "A LINE OF TOKENS") +
                " | " + predict;
    return {predict, mixlab + " classify eval --checkpoint " + best};
  }
};

}  // namespace

void add_classify_train_command(CLI::App& classify) {
  add_train_command<ClassifyTrain>(classify, "train a classifier");
}

}  // namespace mixlab::app
