// `mixlab classify train|eval|predict`: an encoder of any mixer, pooled, then a linear head.
//
// Data (--data): fashion-mnist (Debian's dataset-fashion-mnist; 55,000 train / last 5,000 of
// train as validation / 10,000 test), listops (generated; --listops-* flags), a directory with
// the four IDX files, or a `label<TAB>text` file (last 10% held out). Without --data:
// Fashion-MNIST when installed, else ListOps.
//
// Expected output of `mixlab classify train --steps 200`: a progress bar per epoch, the valid
// accuracy, and a summary table; files in --out (default runs/classify): best.safetensors,
// last.safetensors, metrics.csv, curves.png, config.ini, model.json.
#include <cmath>
#include <filesystem>
#include <iostream>

#include "apps/commands.h"
#include "apps/common.h"
#include "autograd/grad_mode.h"
#include "train/data/idx.h"
#include "train/data/listops.h"
#include "train/data/seq2seq_text.h"
#include "train/data/text_files.h"
#include "train/data_loader.h"
#include "train/distributed.h"
#include "train/interrupt.h"
#include "train/vocab.h"

namespace mixlab::app {

namespace {

struct ListOpsFlags {
  int64_t min_len = 16, max_len = 128, depth = 6, args = 5;
  int64_t train = 20000, valid = 1000, test = 1000;
};

struct ClassificationData {
  InMemoryDataset train, valid, test;
  std::string input = "tokens";
  Vocab vocab;
  std::vector<std::string> labels;
  int64_t longest = 0;
  int64_t side = 0;  // images: height = width
  std::string description;
};

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
  d.input = "image";
  int64_t pixels = d.train.size() ? static_cast<int64_t>(d.train.at(0).features.size()) : 0;
  d.side = static_cast<int64_t>(std::lround(std::sqrt(static_cast<double>(pixels))));
  check(d.side * d.side == pixels, "images of ", pixels, " pixels are not square");
  for (int i = 0; i < 10; ++i) d.labels.push_back(std::to_string(i));
}

ClassificationData load_data(const std::string& name_in, const ListOpsFlags& lf, uint64_t seed) {
  std::string name = name_in;
  if (name.empty())
    name = std::filesystem::exists(default_fashion_mnist_dir()) ? "fashion-mnist" : "listops";
  ClassificationData d;
  if (name == "fashion-mnist" || std::filesystem::is_directory(name)) {
    std::string dir = name == "fashion-mnist" ? default_fashion_mnist_dir() : name;
    InMemoryDataset train = load_fashion_mnist(dir, "train");
    size_t n = train.size(), hold = std::min<size_t>(5000, n / 10);
    d.train = take(train.examples(), 0, n - hold);
    d.valid = take(train.examples(), n - hold, n);
    d.test = load_fashion_mnist(dir, "test");
    add_image_info(d);
    if (name == "fashion-mnist")
      d.labels = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                  "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};
    d.description = "Fashion-MNIST (" + dir + ")";
  } else if (name == "listops") {
    ListOpsConfig c;
    c.max_depth = lf.depth;
    c.max_args = lf.args;
    c.min_len = lf.min_len;
    c.max_len = lf.max_len;
    c.count = lf.train + lf.valid + lf.test;
    c.seed = seed;
    InMemoryDataset all = listops_dataset(c);
    d.train = take(all.examples(), 0, lf.train);
    d.valid = take(all.examples(), lf.train, lf.train + lf.valid);
    d.test = take(all.examples(), lf.train + lf.valid, all.size());
    d.vocab = listops_vocab();
    for (int i = 0; i < 10; ++i) d.labels.push_back(std::to_string(i));
    d.description = "ListOps (generated: length " + std::to_string(lf.min_len) + "-" +
                    std::to_string(lf.max_len) + ", depth " + std::to_string(lf.depth) + ", args " +
                    std::to_string(lf.args) + ", seed " + std::to_string(seed) + ")";
  } else if (std::filesystem::is_regular_file(name)) {
    auto texts = read_labelled_text(name);
    d.labels = label_names(texts);
    auto numbered = number_labels(texts, d.labels);
    std::vector<std::vector<std::string>> tokens;
    size_t hold = std::max<size_t>(1, numbered.size() / 10);
    check(numbered.size() > hold, name, ": too few examples to hold out a validation set");
    for (size_t i = 0; i + hold < numbered.size(); ++i) tokens.push_back(numbered[i].tokens);
    d.vocab = Vocab::build(tokens);
    InMemoryDataset all = encode_labelled(numbered, d.vocab);
    d.train = take(all.examples(), 0, all.size() - hold);
    d.valid = take(all.examples(), all.size() - hold, all.size());
    d.test = d.valid;
    d.description = "labelled text " + name + " (last " + std::to_string(hold) +
                    " lines held out for validation and test)";
  } else {
    throw UsageError("--data '" + name +
                     "': expected fashion-mnist, listops, a directory of IDX files or a "
                     "label<TAB>text file");
  }
  if (d.input == "tokens") d.longest = longest_tokens({&d.train, &d.valid, &d.test});
  return d;
}

ModelConfig model_config_for(const ModelFlags& mf, const CommonFlags& cf,
                             const ClassificationData& d, int64_t patch, const std::string& pool) {
  ModelConfig c;
  c.task = "classify";
  apply_model_flags(mf, cf.seed, c);
  c.classes = static_cast<int64_t>(d.labels.size());
  c.pool = pool;
  int64_t extra = pool == "cls" ? 1 : 0;
  if (d.input == "image") {
    c.input = "image";
    c.image_channels = 1;
    c.image_height = c.image_width = d.side;
    if (patch <= 0 || d.side % patch != 0)
      throw UsageError("--patch " + std::to_string(patch) + " must divide the image side " +
                       std::to_string(d.side));
    c.patch = patch;
    c.max_len = (d.side / patch) * (d.side / patch) + extra;
  } else {
    c.input = "tokens";
    c.vocab = static_cast<int64_t>(d.vocab.size());
    c.max_len = d.longest + extra;
  }
  if (mf.max_len > 0) c.max_len = std::max(c.max_len, mf.max_len);
  return c;
}

TrainingState metadata_for(const ModelConfig& c, const ClassificationData& d,
                           const std::string& data) {
  TrainingState s;
  s.config_json = c.to_json().dump();
  s.vocab_src = d.input == "tokens" ? d.vocab.to_string() : "";
  std::string labels;
  for (const auto& l : d.labels) labels += (labels.empty() ? "" : "\n") + l;
  s.extra["labels"] = labels;
  s.extra["data"] = data;
  return s;
}

// The model and its data, rebuilt from a checkpoint for eval and predict.
struct Loaded {
  CheckpointInfo info;
  std::unique_ptr<Classifier> model;
};
Loaded load_model(const std::string& checkpoint, Device device) {
  Loaded l;
  l.info = read_checkpoint_info(checkpoint);
  l.model = std::make_unique<Classifier>(l.info.config);
  load_weights(checkpoint, *l.model);
  l.model->to(device);
  l.model->eval();
  return l;
}

}  // namespace

void add_classify_commands(CLI::App& root) {
  CLI::App* classify = root.add_subcommand("classify", "image and token-sequence classification");
  classify->require_subcommand(1);

  // ---- train ----
  struct TrainArgs {
    CommonFlags common;
    ModelFlags model;
    TrainFlags train;
    ListOpsFlags listops;
    int64_t patch = 4;
    std::string pool = "mean";
  };
  auto a = std::make_shared<TrainArgs>();
  a->common.out = "runs/classify";
  a->train.trainer.batch_size = 128;
  a->train.trainer.epochs = 10;
  CLI::App* train = classify->add_subcommand("train", "train a classifier");
  add_common_flags(train, a->common);
  add_model_flags(train, a->model);
  add_train_flags(train, a->train);
  train->add_option("--patch", a->patch, "image patch size p (p x p pixels per token)")
      ->capture_default_str();
  train->add_option("--pool", a->pool, "mean (over valid tokens) or cls (a class token)")
      ->capture_default_str();
  train->add_option("--listops-min-len", a->listops.min_len, "ListOps: shortest expression")
      ->capture_default_str();
  train->add_option("--listops-len", a->listops.max_len, "ListOps: longest expression")
      ->capture_default_str();
  train->add_option("--listops-depth", a->listops.depth, "ListOps: maximum depth")
      ->capture_default_str();
  train->add_option("--listops-args", a->listops.args, "ListOps: maximum arguments")
      ->capture_default_str();
  train->add_option("--listops-train", a->listops.train, "ListOps: training examples")
      ->capture_default_str();
  train->callback([a, train] {
    Device device = setup_runtime(a->common);
    if (a->pool != "mean" && a->pool != "cls") throw UsageError("--pool must be mean or cls");
    ClassificationData d = load_data(a->common.data, a->listops, a->common.seed);
    if (a->train.train_limit > 0 && a->train.train_limit < static_cast<int64_t>(d.train.size()))
      d.train.examples().resize(a->train.train_limit);
    ModelConfig config = model_config_for(a->model, a->common, d, a->patch, a->pool);
    Classifier model(config);
    model.to(device);
    std::cerr << "data: " << d.description << ": " << d.train.size() << " train, " << d.valid.size()
              << " valid, " << d.test.size() << " test\n"
              << "model: " << config.mixer << " classifier, " << model.parameter_count()
              << " parameters, max_len " << config.max_len << "\n";
    save_run_config(*train, config, a->common.out);
    ClassificationTask task(model, device, a->train.label_smoothing);
    Trainer trainer(task, d.train, &d.valid, trainer_options(a->train, a->common),
                    metadata_for(config, d, d.description));
    TrainResult r = trainer.run();
    if (r.interrupted) throw Interrupted();
    if (!is_primary_process()) return;  // [distributed] ranks > 0 stop after training
    std::map<std::string, double> test;
    if (!a->common.out.empty() && std::filesystem::exists(Trainer::best_checkpoint(a->common.out)))
      load_weights(Trainer::best_checkpoint(a->common.out), model);
    test = task.evaluate(d.test);
    print_summary("classify: " + config.mixer + " on " + d.description, model.parameter_count(), r,
                  test);
  });

  // ---- eval ----
  struct EvalArgs {
    CommonFlags common;
    std::string checkpoint;
    ListOpsFlags listops;
  };
  auto e = std::make_shared<EvalArgs>();
  CLI::App* eval = classify->add_subcommand("eval", "accuracy of a checkpoint on a test set");
  add_common_flags(eval, e->common);
  eval->add_option("--checkpoint", e->checkpoint, "a .safetensors checkpoint")->required();
  eval->callback([e] {
    Device device = setup_runtime(e->common);
    Loaded l = load_model(e->checkpoint, device);
    std::string data = e->common.data.empty() ? l.info.extra["data"] : e->common.data;
    if (data.rfind("ListOps", 0) == 0) data = "listops";
    if (data.rfind("Fashion-MNIST", 0) == 0) data = "fashion-mnist";
    ClassificationData d = load_data(data, e->listops, e->common.seed);
    ClassificationTask task(*l.model, device);
    for (const auto& [k, v] : task.evaluate(d.test)) std::cout << "test " << k << " " << v << "\n";
  });

  // ---- predict ----
  struct PredictArgs {
    CommonFlags common;
    std::string checkpoint, images;
  };
  auto p = std::make_shared<PredictArgs>();
  CLI::App* predict = classify->add_subcommand(
      "predict", "class and probability for each input: token lines on stdin, or --images IDX");
  add_common_flags(predict, p->common);
  predict->add_option("--checkpoint", p->checkpoint, "a .safetensors checkpoint")->required();
  predict->add_option("--images", p->images, "an IDX image file (else: token lines on stdin)");
  predict->callback([p] {
    Device device = setup_runtime(p->common);
    Loaded l = load_model(p->checkpoint, device);
    std::vector<std::string> labels;
    std::istringstream ls(l.info.extra["labels"]);
    for (std::string s; std::getline(ls, s);) labels.push_back(s);
    ClassificationTask task(*l.model, device);
    auto print = [&](const Batch& b) {
      std::vector<float> probs = task.probabilities(b).to_float_vector();
      int64_t c = static_cast<int64_t>(probs.size()) / b.size;
      for (int64_t i = 0; i < b.size; ++i) {
        const float* row = probs.data() + i * c;
        int64_t k = std::max_element(row, row + c) - row;
        std::cout << (k < static_cast<int64_t>(labels.size()) ? labels[k] : std::to_string(k))
                  << "\t" << row[k] << "\n";
      }
    };
    std::vector<Example> examples;
    if (!p->images.empty()) {
      IdxArray idx = read_idx(p->images);
      check(idx.dims.size() == 3, p->images, ": expected an image file [n, rows, cols]");
      int64_t n = idx.dims[0], px = idx.dims[1] * idx.dims[2];
      for (int64_t i = 0; i < n; ++i) {
        Example ex;
        for (int64_t j = 0; j < px; ++j)
          ex.features.push_back((idx.data[i * px + j] / 255.0f - kFashionMnistMean) /
                                kFashionMnistStd);
        examples.push_back(std::move(ex));
      }
    } else {
      check(!l.info.vocab_src.empty(), "this checkpoint classifies images: pass --images FILE");
      Vocab vocab = Vocab::from_string(l.info.vocab_src);
      for (std::string line; std::getline(std::cin, line);) {
        Example ex;
        ex.src = vocab.encode(tokenize_words(line));
        check(!ex.src.empty(), "predict: an empty input line");
        check(static_cast<int64_t>(ex.src.size()) <= l.info.config.max_len, "predict: a line of ",
              ex.src.size(), " tokens is longer than the model's max_len ", l.info.config.max_len);
        examples.push_back(std::move(ex));
      }
    }
    InMemoryDataset data(std::move(examples));
    DataLoaderOptions o;
    o.batch_size = 256;
    o.shuffle = false;
    DataLoader loader(data, o);
    loader.start_epoch(0);
    Batch b;
    while (loader.next(b)) print(b);
  });
}

}  // namespace mixlab::app
