// The classification data and model configuration behind `mixlab classify` (apps/classify_data.h).
#include "apps/classify_data.h"

#include <cmath>
#include <filesystem>
#include <sstream>

#include "nn/conv_tokenizer.h"
#include "train/data/idx.h"
#include "train/data/listops.h"
#include "train/data/seq2seq_text.h"
#include "train/data/vocab.h"
#include "train/loop/tasks.h"

namespace mixlab::app {

namespace {

InMemoryDataset take(const std::vector<Example>& all, size_t from, size_t to) {
  return InMemoryDataset(std::vector<Example>(all.begin() + from, all.begin() + to));
}

int64_t longest_tokens(const std::vector<const InMemoryDataset*>& sets) {
  int64_t n = 0;
  for (auto* s : sets)
    for (const auto& e : s->examples()) n = std::max<int64_t>(n, e.src.size());
  return n;
}

void add_image_info(ClassificationData& d) {
  d.input = InputKind::Image;
  int64_t pixels = d.train.size() ? static_cast<int64_t>(d.train.at(0).features.size()) : 0;
  d.side = static_cast<int64_t>(std::lround(std::sqrt(static_cast<double>(pixels))));
  check(d.side * d.side == pixels, "images of ", pixels, " pixels are not square");
  for (int i = 0; i < 10; ++i) d.labels.push_back(std::to_string(i));
}

}  // namespace

DataDescription describe_classify_data(const std::string& name_in, const ListOpsFlags& lf,
                                       uint64_t seed) {
  std::string name = name_in;
  if (name.empty())
    name = std::filesystem::exists(default_fashion_mnist_dir()) ? "fashion-mnist" : "listops";
  DataDescription d;
  d.seed = seed;
  if (name == "fashion-mnist") {
    d.kind = DataKind::FashionMnist;
    d.path = default_fashion_mnist_dir();
    d.held_out = "the last 5,000 training images";
  } else if (std::filesystem::is_directory(name)) {
    d.kind = DataKind::Idx;
    d.path = absolute_path(name);
    d.held_out = "the last 10% of training images, at most 5,000";
  } else if (name == "listops") {
    d.kind = DataKind::ListOps;
    d.generator = {{"min_len", lf.min_len}, {"max_len", lf.max_len}, {"depth", lf.depth},
                   {"args", lf.args},       {"train", lf.train},     {"valid", lf.valid},
                   {"test", lf.test}};
    d.held_out = "generated valid and test sets";
  } else if (std::filesystem::is_regular_file(name)) {
    d.kind = DataKind::LabelledText;
    d.path = absolute_path(name);
    d.held_out = "the last 10% of lines (validation and test)";
  } else {
    throw UsageError("--data '" + name +
                     "': expected fashion-mnist, listops, a directory of IDX files or a "
                     "label<TAB>text file");
  }
  return d;
}

ClassificationData load_classify_data(const DataDescription& desc, const Vocab* model,
                                      UnknownTokens* unknown, int64_t max_tokens) {
  ClassificationData d;
  if (desc.kind == DataKind::FashionMnist || desc.kind == DataKind::Idx) {
    InMemoryDataset train = load_fashion_mnist(desc.path, "train");
    size_t n = train.size(), hold = std::min<size_t>(5000, n / 10);
    d.train = take(train.examples(), 0, n - hold);
    d.valid = take(train.examples(), n - hold, n);
    d.test = load_fashion_mnist(desc.path, "test");
    add_image_info(d);
    if (desc.kind == DataKind::FashionMnist)
      d.labels = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                  "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};
  } else if (desc.kind == DataKind::ListOps) {
    auto g = [&](const char* key) {
      auto it = desc.generator.find(key);
      check(it != desc.generator.end(), "the ListOps description has no '", key, "'");
      return it->second;
    };
    ListOpsConfig c;
    c.max_depth = g("depth");
    c.max_args = g("args");
    c.min_len = g("min_len");
    c.max_len = g("max_len");
    c.count = g("train") + g("valid") + g("test");
    c.seed = desc.seed;
    InMemoryDataset all = listops_dataset(c);
    d.train = take(all.examples(), 0, g("train"));
    d.valid = take(all.examples(), g("train"), g("train") + g("valid"));
    d.test = take(all.examples(), g("train") + g("valid"), all.size());
    d.vocab = listops_vocab();
    for (int i = 0; i < 10; ++i) d.labels.push_back(std::to_string(i));
  } else if (desc.kind == DataKind::LabelledText) {
    auto texts = read_labelled_text(desc.path, Tokenization::kWords, max_tokens);
    size_t hold = std::max<size_t>(1, texts.size() / 10);
    check(texts.size() > hold, desc.path, ": too few examples to hold out a validation set");
    if (model) {
      // Only the held-out lines are scored: the training lines (their words, their labels)
      // cannot change the result.
      texts.erase(texts.begin(), texts.end() - hold);
      d.labels = desc.labels;
      d.vocab = *model;
      for (const auto& t : texts) unknown->add(t.tokens, d.vocab);
      d.valid = encode_labelled(number_labels(texts, d.labels), d.vocab);
    } else {
      d.labels = label_names(texts);
      auto numbered = number_labels(texts, d.labels);
      std::vector<std::vector<std::string>> tokens;
      for (size_t i = 0; i + hold < numbered.size(); ++i) tokens.push_back(numbered[i].tokens);
      d.vocab = Vocab::build(tokens);
      InMemoryDataset all = encode_labelled(numbered, d.vocab);
      d.train = take(all.examples(), 0, all.size() - hold);
      d.valid = take(all.examples(), all.size() - hold, all.size());
    }
    d.test = d.valid;
  } else {
    fail("the data of kind '", to_string(desc.kind), "' is not classification data");
  }
  d.desc = desc;
  if (!model) d.desc.labels = d.labels;
  d.description = d.desc.summary();
  if (d.input == InputKind::Tokens) d.longest = longest_tokens({&d.train, &d.valid, &d.test});
  return d;
}

ModelConfig classifier_config(const ModelFlags& mf, const CommonFlags& cf,
                              const ClassificationData& d, int64_t patch, const std::string& pool,
                              const std::string& stem) {
  ModelConfig c;
  c.task = ModelTask::Classify;
  apply_model_flags(mf, cf.seed, c);
  c.classes = static_cast<int64_t>(d.labels.size());
  c.pool = parse_pool_kind(pool);  // --pool: checked by the CLI, read once here
  int64_t extra = c.pool == PoolKind::Cls ? 1 : 0;
  c.input = d.input;
  if (d.input == InputKind::Image) {
    c.image_channels = 1;
    c.image_height = c.image_width = d.side;
    if (patch <= 0 || d.side % patch != 0)
      throw UsageError("--patch " + std::to_string(patch) + " must divide the image side " +
                       std::to_string(d.side));
    c.patch = patch;
    c.stem = parse_image_stem(stem);  // --stem: checked by the CLI
    if (c.stem == ImageStem::Conv && ConvTokenizer::stage_channels(patch, c.dim).empty())
      throw UsageError(
          "--stem conv needs a --patch that is a power of two of at least 2 (one "
          "2x2 pooling stage per halving), got " +
          std::to_string(patch));
    c.max_len = (d.side / patch) * (d.side / patch) + extra;
  } else {
    c.vocab = static_cast<int64_t>(d.vocab.size());
    // A file's lines were measured as it was read (naming the line); generated data here.
    const int64_t limit = std::max(kDataLengthCap, mf.max_len);
    if (d.longest > limit)
      throw UsageError(d.description + ": the longest example has " + std::to_string(d.longest) +
                       " tokens, more than " + std::to_string(limit) +
                       ", the longest a model takes its length from; pass --max-len " +
                       std::to_string(d.longest) + " to train on it");
    c.max_len = d.longest + extra;
  }
  if (mf.max_len > 0) c.max_len = std::max(c.max_len, mf.max_len);
  return c;
}

TrainingState classifier_metadata(const ModelConfig& c, const ClassificationData& d) {
  TrainingState s;
  s.config_json = c.to_json().dump();
  s.vocab_src = d.input == InputKind::Tokens ? d.vocab.to_string() : "";
  std::string labels;
  for (const auto& l : d.labels) labels += (labels.empty() ? "" : "\n") + l;
  s.extra["labels"] = labels;
  s.extra["data"] = d.desc.to_json().dump();
  return s;
}

ImageAugmentation image_augmentation(ImageAugmentation flags, const ClassificationData& d) {
  if (!flags.enabled()) return flags;
  if (d.input != InputKind::Image)
    throw UsageError(
        "--augment-crop, --augment-flip, --augment-erase, --augment-mixup and --augment-cutmix "
        "apply to images; " +
        d.description + " holds token sequences");
  flags.channels = 1;
  flags.height = flags.width = d.side;
  flags.background = (0.0f - kFashionMnistMean) / kFashionMnistStd;  // a black pixel
  return flags;
}

std::vector<std::string> checkpoint_labels(const CheckpointInfo& info) {
  std::vector<std::string> labels;
  auto it = info.extra.find("labels");
  if (it == info.extra.end()) return labels;
  std::istringstream in(it->second);
  for (std::string s; std::getline(in, s);) labels.push_back(s);
  return labels;
}

namespace {

// Whether two classifiers take the same kind of input, and images of the same geometry.
bool same_input_kind(const ModelConfig& x, const ModelConfig& y) {
  return x.input == y.input && x.image_channels == y.image_channels &&
         x.image_height == y.image_height && x.image_width == y.image_width;
}

void check_same_classifier_task(const std::string& first, const CheckpointInfo& a,
                                const std::string& other, const CheckpointInfo& b) {
  if (!same_input_kind(a.config, b.config) || a.vocab_src != b.vocab_src ||
      checkpoint_labels(a) != checkpoint_labels(b))
    throw UsageError("--checkpoint " + other + " reads other inputs or names other classes than " +
                     first + "; an ensemble needs models trained on the same data");
}

}  // namespace

std::vector<LoadedModel<Classifier>> load_classifiers(const std::vector<std::string>& checkpoints,
                                                      Device device) {
  std::vector<LoadedModel<Classifier>> models;
  for (const auto& c : checkpoints) {
    models.push_back(load_trained_model<Classifier>(c, device));
    check_same_classifier_task(checkpoints[0], models[0].info, c, models.back().info);
  }
  return models;
}

namespace {
// The examples a description names, without what only changes how they are trained on. The seed
// picks examples only of generated ListOps.
DataDescription examples_of(DataDescription d) {
  d.augment.clear();
  d.teacher.clear();
  if (d.kind != DataKind::ListOps) d.seed = 0;
  return d;
}
}  // namespace

void check_teacher(const std::string& checkpoint, const CheckpointInfo& teacher,
                   const ModelConfig& student, const ClassificationData& data) {
  const auto it = teacher.extra.find("data");
  const DataDescription taught = read_data_description(it == teacher.extra.end() ? "" : it->second);
  const std::string vocab = data.input == InputKind::Tokens ? data.vocab.to_string() : "";
  const std::string named = "--teacher " + checkpoint;
  if (!same_input_kind(teacher.config, student) || teacher.vocab_src != vocab)
    throw UsageError(named + " reads other inputs than the model this run trains (" +
                     data.description + ")");
  if (checkpoint_labels(teacher) != data.labels)
    throw UsageError(named + " names other classes than " + data.description);
  if (examples_of(taught) != examples_of(data.desc))
    throw UsageError(named + " was trained on " + examples_of(taught).summary() +
                     ", and this run trains on " + examples_of(data.desc).summary() +
                     "; a teacher must have been trained on the same training and held-out "
                     "examples, or it has seen the student's validation examples");
}

void add_tta_flag(CLI::App* cmd, std::string& tta) {
  cmd->add_option("--tta", tta,
                  "test-time augmentation: none, or flip (the mean probability of each image and "
                  "its left-right mirror)")
      ->check(CLI::IsMember({"none", "flip"}))
      ->default_val("none")
      ->group(kModelGroup);
}

void apply_tta(ClassificationTask& task, const std::string& tta, const std::string& checkpoint,
               const ModelConfig& config, std::ostream& log) {
  if (tta != "flip") return;
  if (config.input != InputKind::Image)
    throw UsageError("--tta flip: checkpoint '" + checkpoint + "' classifies " +
                     to_string(config.input) + "s; flip averaging is for images");
  task.set_flip_averaging(true);
  log << "test-time augmentation: the mean of each image's and its mirror's probabilities\n";
}

}  // namespace mixlab::app
