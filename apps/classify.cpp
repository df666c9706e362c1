// `mixlab classify train|eval|predict`: an encoder of any mixer, pooled, then a linear head.
//
// Data (--data): fashion-mnist (Debian's dataset-fashion-mnist; 55,000 train / last 5,000 of
// train as validation / 10,000 test), listops (generated; --listops-* flags), a directory with
// the four IDX files, or a `label<TAB>text` file (last 10% held out). Without --data:
// Fashion-MNIST when installed, else ListOps.
//
// Expected output of `mixlab classify train --steps 200`: a progress bar per epoch, the valid
// accuracy, and a summary table; files in --out (default runs/classify): best.safetensors,
// last.safetensors, metrics.csv, curves.svg, config.ini, model.json.
#include <cmath>
#include <filesystem>
#include <sstream>

#include <unistd.h>
#include <iostream>

#include "apps/commands.h"
#include "apps/cli_style.h"
#include "apps/common.h"
#include "apps/data_description.h"
#include "apps/run_folder.h"
#include "autograd/grad_mode.h"
#include "nn/model_size.h"
#include "train/data/idx.h"
#include "train/data/listops.h"
#include "train/data/seq2seq_text.h"
#include "train/data/text_files.h"
#include "train/data/data_loader.h"
#include "train/distributed/distributed.h"
#include "train/run/interrupt.h"
#include "train/data/vocab.h"

namespace mixlab::app {

namespace {

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

// The data the flags name (usage errors for names that are none of the kinds).
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

// Loads the described data. `model` (eval): the checkpoint's vocabulary, which labelled text is
// encoded with instead of one built from the file (unknown tokens counted into `unknown`); the
// labels are then desc.labels.
ClassificationData load_classify_data(const DataDescription& desc, const Vocab* model = nullptr,
                                      UnknownTokens* unknown = nullptr,
                                      int64_t max_tokens = kDataLengthCap) {
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

ModelConfig model_config_for(const ModelFlags& mf, const CommonFlags& cf,
                             const ClassificationData& d, int64_t patch, const std::string& pool) {
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

TrainingState metadata_for(const ModelConfig& c, const ClassificationData& d) {
  TrainingState s;
  s.config_json = c.to_json().dump();
  s.vocab_src = d.input == InputKind::Tokens ? d.vocab.to_string() : "";
  std::string labels;
  for (const auto& l : d.labels) labels += (labels.empty() ? "" : "\n") + l;
  s.extra["labels"] = labels;
  s.extra["data"] = d.desc.to_json().dump();
  return s;
}

// The training images' augmentation: the flags' choices with the data's geometry. Token data
// cannot be augmented (a usage error naming the flag).
ImageAugmentation image_augmentation(ImageAugmentation flags, const ClassificationData& d) {
  if (!flags.enabled()) return flags;
  if (d.input != InputKind::Image)
    throw UsageError("--augment-crop, --augment-flip and --augment-erase apply to images; " +
                     d.description + " holds token sequences");
  flags.channels = 1;
  flags.height = flags.width = d.side;
  flags.background = (0.0f - kFashionMnistMean) / kFashionMnistStd;  // a black pixel
  return flags;
}

// The class names in id order, as the checkpoint stores them (one per line).
std::vector<std::string> checkpoint_labels(const CheckpointInfo& info) {
  std::vector<std::string> labels;
  auto it = info.extra.find("labels");
  if (it == info.extra.end()) return labels;
  std::istringstream in(it->second);
  for (std::string s; std::getline(in, s);) labels.push_back(s);
  return labels;
}

// The model and its data, rebuilt from a checkpoint for eval and predict.
struct LoadedClassifier {
  CheckpointInfo info;
  std::unique_ptr<Classifier> model;
};
LoadedClassifier load_classifier(const std::string& checkpoint, Device device) {
  LoadedClassifier l;
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
    ImageAugmentation augment;
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
      ->capture_default_str()
      ->check(CLI::Range(1, 1024))
      ->group(kModelGroup);
  train->add_option("--pool", a->pool, "mean (over valid tokens) or cls (a class token)")
      ->capture_default_str()
      ->check(CLI::IsMember({"mean", "cls"}))
      ->group(kModelGroup);
  auto listops = [&](const char* name, int64_t& value, const char* help) {
    train->add_option(name, value, help)
        ->capture_default_str()
        ->check(CLI::Range(int64_t{1}, int64_t{10000000}))
        ->group(kDataGroup);
  };
  listops("--listops-min-len", a->listops.min_len, "ListOps: shortest expression");
  listops("--listops-len", a->listops.max_len, "ListOps: longest expression");
  listops("--listops-depth", a->listops.depth, "ListOps: maximum depth");
  listops("--listops-args", a->listops.args, "ListOps: maximum arguments");
  listops("--listops-train", a->listops.train, "ListOps: training examples");
  train
      ->add_option("--augment-crop", a->augment.crop_pad,
                   "images: pad P pixels on every side, then crop back at a random offset (0: off)")
      ->capture_default_str()
      ->check(CLI::Range(0, 8))
      ->group(kDataGroup);
  train->add_flag("--augment-flip", a->augment.flip, "images: random horizontal flip")
      ->group(kDataGroup);
  train
      ->add_option("--augment-erase", a->augment.erase,
                   "images: probability of random erasing of one rectangle (0: off)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0))
      ->group(kDataGroup);
  train->callback([a, train] {
    Device device = setup_runtime(a->common);
    check_before_training(*train, a->common, a->train);
    // The mixer's name and options before any data is generated (ListOps takes a while).
    parse_mixer_options(a->model.mixer, a->model.mixer_options);
    const DataDescription desc = describe_classify_data(a->common.data, a->listops, a->common.seed);
    const int64_t length_limit = std::max(kDataLengthCap, a->model.max_len);
    if (desc.kind == DataKind::ListOps && a->listops.max_len > length_limit)
      throw UsageError("--listops-len " + std::to_string(a->listops.max_len) + " is more than " +
                       std::to_string(length_limit) +
                       ", the longest a model takes its length from; pass --max-len " +
                       std::to_string(a->listops.max_len) + " as well to train on it");
    ClassificationData d = load_classify_data(desc, nullptr, nullptr, length_limit);
    if (a->train.train_limit > 0 && a->train.train_limit < static_cast<int64_t>(d.train.size()))
      d.train.examples().resize(a->train.train_limit);
    ModelConfig config = model_config_for(a->model, a->common, d, a->patch, a->pool);
    resume_schedule(*train, a->common, a->train);
    TrainerOptions trainer_opts = trainer_options(a->train, a->common);
    trainer_opts.augment = image_augmentation(a->augment, d);
    d.desc.augment = a->augment.enabled() ? trainer_opts.augment.describe() : "";
    d.description = d.desc.summary();
    Classifier model = build_model<Classifier>(config);
    try {
      check_batch_size(config, a->train.trainer.batch_size);
    } catch (const Error& e) {
      throw UsageError(e.what());
    }
    model.to(device);
    std::cerr << "data: " << d.description << ": " << d.train.size() << " train, " << d.valid.size()
              << " valid, " << d.test.size() << " test\n"
              << "model: " << config.mixer << " classifier, " << model.parameter_count()
              << " parameters, max_len " << config.max_len << ", on " << describe_device(device)
              << "\n";
    if (is_primary_process())  // [distributed] rank 0 alone owns the run folder
      open_run_folder(*train, a->common, a->train, config, d.desc.to_json().dump());
    ClassificationTask task(model, device, a->train.label_smoothing);
    Trainer trainer(task, d.train, &d.valid, trainer_opts, metadata_for(config, d));
    TrainResult r = trainer.run();
    const std::string& out = a->common.out;
    const std::string mixlab = shell_quote(program_path());
    const std::string resume = mixlab + " classify train --resume --out " + shell_quote(out);
    if (r.interrupted) {
      print_where_and_next(std::cerr, out, {resume});
      throw Interrupted();
    }
    if (!is_primary_process()) return;  // [distributed] ranks > 0 stop after training
    std::map<std::string, double> test;
    int64_t scored_step = r.steps;  // the test row names the step of the model it scored
    if (!out.empty() && std::filesystem::exists(Trainer::best_checkpoint(out))) {
      load_weights(Trainer::best_checkpoint(out), model);
      if (r.best_step >= 0) scored_step = r.best_step;
    }
    test = task.evaluate(d.test);
    trainer.log_test(test, scored_step);
    print_summary("classify: " + config.mixer + " on " + d.description, model.parameter_count(), r,
                  test);
    if (out.empty()) return;
    const std::string best = shell_quote(Trainer::best_checkpoint(out));
    std::string predict = mixlab + " classify predict --checkpoint " + best;
    if (d.input == InputKind::Image)
      predict += " --images IDX_IMAGE_FILE";
    else
      predict = "echo " +
                shell_quote(d.desc.kind == DataKind::ListOps ? "[MAX 3 [MIN 4 7 ] 2 ]"
                                                             : "A LINE OF TOKENS") +
                " | " + predict;
    print_where_and_next(
        std::cout, out,
        {predict, mixlab + " classify eval --checkpoint " + best,
         mixlab + " --config " + shell_quote(out + "/config.ini") + " classify train --epochs " +
             std::to_string(a->train.trainer.epochs * 2) + " --out " +
             shell_quote(out + "-longer") + "   # the same run with twice the epochs, anew"});
  });

  // ---- eval ----
  struct EvalArgs {
    CommonFlags common;
    std::string checkpoint;
    ListOpsFlags listops;
  };
  auto e = std::make_shared<EvalArgs>();
  CLI::App* eval = classify->add_subcommand("eval", "accuracy of a checkpoint on a test set");
  add_data_flags(eval, e->common,
                 "fashion-mnist, listops, an IDX folder or a label<TAB>text file (default: the "
                 "checkpoint's)");
  add_runtime_flags(eval, e->common);
  eval->add_option("--checkpoint", e->checkpoint, "a .safetensors checkpoint")
      ->required()
      ->group(kModelGroup);
  eval->callback([e, eval] {
    Device device = setup_runtime(e->common);
    LoadedClassifier l = load_classifier(e->checkpoint, device);
    // The checkpoint's data unless --data names other data; always the checkpoint's
    // vocabulary and labels, so a file is scored with the numbers the model was trained with.
    DataDescription stored = read_data_description(l.info.extra["data"]);
    DataDescription desc = stored;
    if (!e->common.data.empty()) {
      desc = describe_classify_data(
          e->common.data, e->listops,
          eval->get_option("--seed")->count() ? e->common.seed : stored.seed);
      if (desc.kind == DataKind::ListOps && stored.kind == DataKind::ListOps)
        desc.generator = stored.generator;
    }
    if (desc.kind == DataKind::ListOps && desc.generator.empty())  // an older checkpoint
      desc = describe_classify_data("listops", e->listops, desc.seed);
    desc.labels = checkpoint_labels(l.info);
    const bool images = desc.kind == DataKind::FashionMnist || desc.kind == DataKind::Idx;
    if (images != (l.info.config.input == InputKind::Image))
      throw UsageError("--data: " + desc.summary() + " holds " + (images ? "images" : "tokens") +
                       ", but the checkpoint classifies " + to_string(l.info.config.input) + "s");
    std::cerr << "data: " << desc.summary() << (desc == stored ? ", the checkpoint's" : "") << "\n";
    Vocab vocab = l.info.vocab_src.empty() ? Vocab() : Vocab::from_string(l.info.vocab_src);
    UnknownTokens unknown;
    // Lines as long as the model takes are read; the check below refuses longer ones.
    ClassificationData d =
        load_classify_data(desc, &vocab, &unknown, std::max(kDataLengthCap, l.info.config.max_len));
    if (!images) {
      int64_t tokens = 0, longest = 0;
      for (const auto& ex : d.test.examples()) {
        tokens += static_cast<int64_t>(ex.src.size());
        longest = std::max<int64_t>(longest, static_cast<int64_t>(ex.src.size()));
      }
      // +1 for the [CLS] position of --pool cls, as in training.
      const int64_t extra = l.info.config.pool == PoolKind::Cls ? 1 : 0;
      check_data_fits_checkpoint(e->checkpoint, stored.summary(), desc.summary(), unknown.total(),
                                 tokens, longest + extra, l.info.config.max_len);
    }
    unknown.report(std::cerr);
    ClassificationTask task(*l.model, device);
    task.set_progress(&std::cerr);
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
  add_runtime_flags(predict, p->common);
  predict->add_option("--checkpoint", p->checkpoint, "a .safetensors checkpoint")
      ->required()
      ->group(kModelGroup);
  predict->add_option("--images", p->images, "an IDX image file (else: token lines on stdin)");
  predict->callback([p] {
    Device device = setup_runtime(p->common);
    LoadedClassifier l = load_classifier(p->checkpoint, device);
    std::cerr << "data: " << read_data_description(l.info.extra["data"]).summary() << "\n";
    std::vector<std::string> labels;
    std::istringstream ls(l.info.extra["labels"]);
    for (std::string s; std::getline(ls, s);) labels.push_back(s);
    ClassificationTask task(*l.model, device);
    // "label<TAB>probability" for each example, in order.
    auto predict_all = [&](std::vector<Example> examples) {
      InMemoryDataset data(std::move(examples));
      DataLoaderOptions o;
      o.batch_size = 256;
      o.shuffle = false;
      DataLoader loader(data, o);
      loader.start_epoch(0);
      std::vector<std::string> out;
      for (Batch b; loader.next(b);) {
        std::vector<float> probs = task.probabilities(b).to_float_vector();
        int64_t c = static_cast<int64_t>(probs.size()) / b.size;
        for (int64_t i = 0; i < b.size; ++i) {
          const float* row = probs.data() + i * c;
          int64_t k = std::max_element(row, row + c) - row;
          std::ostringstream line;
          line << (k < static_cast<int64_t>(labels.size()) ? labels[k] : std::to_string(k)) << "\t"
               << row[k];
          out.push_back(line.str());
        }
      }
      return out;
    };
    if (!p->images.empty()) {
      IdxArray idx = read_idx(p->images);
      check(idx.dims.size() == 3, p->images, ": expected an image file [n, rows, cols]");
      int64_t n = idx.dims[0], px = idx.dims[1] * idx.dims[2];
      std::vector<Example> examples;
      for (int64_t i = 0; i < n; ++i) {
        Example ex;
        for (int64_t j = 0; j < px; ++j)
          ex.features.push_back((idx.data[i * px + j] / 255.0f - kFashionMnistMean) /
                                kFashionMnistStd);
        examples.push_back(std::move(ex));
      }
      for (const auto& line : predict_all(std::move(examples))) std::cout << line << "\n";
      return;
    }
    check(l.info.config.input != InputKind::Image,
          "this checkpoint classifies images: pass --images FILE");
    check(!l.info.vocab_src.empty(), "checkpoint '", p->checkpoint,
          "' classifies tokens but holds an empty vocabulary (metadata vocab_src); it is damaged "
          "or was not written by mixlab");
    Vocab vocab = Vocab::from_string(l.info.vocab_src);
    // On a terminal each line is answered as it is typed; otherwise all lines go through in
    // batches. A line that cannot be classified is reported and answered with an empty line,
    // so output line N still belongs to input line N.
    const bool terminal = ::isatty(STDIN_FILENO) && ::isatty(STDERR_FILENO);
    if (terminal) std::cerr << "one line of tokens per prediction (Ctrl-D ends)\n> " << std::flush;
    std::vector<Example> examples;
    std::vector<int64_t> slot;  // per input line: its example, or -1 when skipped
    int64_t line_number = 0;
    for (std::string line; std::getline(std::cin, line);) {
      ++line_number;
      std::vector<std::string> tokens = tokenize_words(line);
      UnknownTokens unknown;
      unknown.add(tokens, vocab);
      unknown.report(std::cerr);
      std::string problem;
      if (tokens.empty()) problem = "the line is empty";
      if (static_cast<int64_t>(tokens.size()) > l.info.config.max_len)
        problem = std::to_string(tokens.size()) + " tokens, longer than the model's max_len " +
                  std::to_string(l.info.config.max_len);
      if (!problem.empty()) {
        std::cerr << "warning: line " << line_number << ": " << problem << "; skipped\n";
        slot.push_back(-1);
      } else {
        Example ex;
        ex.src = vocab.encode(tokens);
        slot.push_back(static_cast<int64_t>(examples.size()));
        examples.push_back(std::move(ex));
      }
      if (terminal) {
        std::vector<std::string> answer =
            slot.back() < 0 ? std::vector<std::string>{""} : predict_all({examples.back()});
        std::cout << answer[0] << "\n" << std::flush;
        check_stdout();
        std::cerr << "> " << std::flush;
      }
    }
    if (terminal) return;
    std::vector<std::string> answers = predict_all(std::move(examples));
    for (int64_t s : slot) std::cout << (s < 0 ? std::string() : answers[s]) << "\n";
  });
}

}  // namespace mixlab::app
