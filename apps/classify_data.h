// What `mixlab classify train|eval|predict` share: the data (Fashion-MNIST, IDX folders, ListOps,
// label<TAB>text files), the model's configuration from the flags and the data, and a classifier
// rebuilt from its checkpoint.
#pragma once
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "apps/common.h"
#include "apps/data_description.h"
#include "apps/eval_command.h"
#include "nn/models.h"
#include "train/data/augment.h"
#include "train/data/dataset.h"
#include "train/data/text_files.h"

namespace mixlab {
class ClassificationTask;
}

namespace mixlab::app {

// The ListOps generator's flags (--listops-*).
struct ListOpsFlags {
  int64_t min_len = 16, max_len = 128, depth = 6, args = 5;
  int64_t train = 20000, valid = 1000, test = 1000;
};

struct ClassificationData {
  InMemoryDataset train, valid, test;
  InputKind input = InputKind::Tokens;
  Vocab vocab;
  std::vector<std::string> labels;
  int64_t longest = 0;
  int64_t side = 0;  // images: height = width
  DataDescription desc;
  std::string description;  // desc.summary()
};

// The data the flags name (usage errors for names that are none of the kinds). Without a name:
// Fashion-MNIST when installed, else ListOps.
DataDescription describe_classify_data(const std::string& name, const ListOpsFlags& listops,
                                       uint64_t seed);

// Loads the described data. `model` (eval): the checkpoint's vocabulary, which labelled text is
// encoded with instead of one built from the file (unknown tokens counted into `unknown`); the
// labels are then desc.labels.
ClassificationData load_classify_data(const DataDescription& desc, const Vocab* model = nullptr,
                                      UnknownTokens* unknown = nullptr,
                                      int64_t max_tokens = kDataLengthCap);

// The classifier's configuration: the model flags, --patch, --pool and --stem, and the data's
// shape.
ModelConfig classifier_config(const ModelFlags& mf, const CommonFlags& cf,
                              const ClassificationData& d, int64_t patch, const std::string& pool,
                              const std::string& stem = "patch");

// What every checkpoint stores beside the weights: the config, vocabulary, labels and data.
TrainingState classifier_metadata(const ModelConfig& c, const ClassificationData& d);

// The training images' augmentation: the flags' choices with the data's geometry. Token data
// cannot be augmented (a usage error naming the flag).
ImageAugmentation image_augmentation(ImageAugmentation flags, const ClassificationData& d);

// The class names in id order, as the checkpoint stores them (one per line).
std::vector<std::string> checkpoint_labels(const CheckpointInfo& info);

// The checkpoints' classifiers, in eval mode on `device`. Several make an ensemble, whose models
// must read the same inputs and name the same classes as the first (a usage error naming both
// checkpoints).
std::vector<LoadedModel<Classifier>> load_classifiers(const std::vector<std::string>& checkpoints,
                                                      Device device);

// A distillation teacher (`classify train --teacher`) must read the student's inputs, name its
// classes, and have been trained on the same training and held-out examples, or it would have
// seen the student's validation data. A usage error naming the checkpoint and what differs.
void check_teacher(const std::string& checkpoint, const CheckpointInfo& teacher,
                   const ModelConfig& student, const ClassificationData& data);

// `classify eval|predict --tta none|flip`: test-time augmentation. flip scores each image and its
// left-right mirror and takes the mean of their probabilities.
void add_tta_flag(CLI::App* cmd, std::string& tta);
// Applies --tta to `task`, saying so on `log`. flip for a checkpoint that classifies tokens is a
// usage error naming the checkpoint.
void apply_tta(ClassificationTask& task, const std::string& tta, const std::string& checkpoint,
               const ModelConfig& config, std::ostream& log);

}  // namespace mixlab::app
