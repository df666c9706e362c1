// `mixlab classify predict`: the class and its probability for each input, one line each: the
// images of an IDX file (--images), or lines of tokens read from stdin. Several checkpoints
// predict as an ensemble: the mean of their class probabilities, as `classify eval` scores them.
#include <unistd.h>

#include <algorithm>
#include <iostream>
#include <sstream>

#include "apps/classify_data.h"
#include "apps/commands.h"
#include "apps/eval_command.h"
#include "train/data/data_loader.h"
#include "train/data/idx.h"
#include "train/data/vocab.h"
#include "train/loop/tasks.h"

namespace mixlab::app {

namespace {

struct ClassifyPredictArgs {
  CommonFlags common;
  std::vector<std::string> checkpoints;
  std::string images;
  std::string tta = "none";
};

// "label<TAB>probability" for each example, in order.
std::vector<std::string> predict_labels(ClassificationTask& task,
                                        const std::vector<std::string>& labels,
                                        std::vector<Example> examples) {
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
}

// The images of an IDX file [n, rows, cols], standardized as in training.
std::vector<Example> idx_image_examples(const std::string& path) {
  IdxArray idx = read_idx(path);
  check(idx.dims.size() == 3, path, ": expected an image file [n, rows, cols]");
  int64_t n = idx.dims[0], px = idx.dims[1] * idx.dims[2];
  std::vector<Example> examples;
  for (int64_t i = 0; i < n; ++i) {
    Example ex;
    for (int64_t j = 0; j < px; ++j)
      ex.features.push_back((idx.data[i * px + j] / 255.0f - kFashionMnistMean) / kFashionMnistStd);
    examples.push_back(std::move(ex));
  }
  return examples;
}

// Why a line of tokens cannot be classified; empty when it can.
std::string line_problem(const std::vector<std::string>& tokens, int64_t max_len) {
  std::string problem;
  if (tokens.empty()) problem = "the line is empty";
  if (static_cast<int64_t>(tokens.size()) > max_len)
    problem = std::to_string(tokens.size()) + " tokens, more than the " + std::to_string(max_len) +
              " the model takes";
  return problem;
}

// On a terminal each line is answered as it is typed; otherwise all lines go through in
// batches. A line that cannot be classified is reported and answered with an empty line, so
// output line N still belongs to input line N.
void predict_token_lines(ClassificationTask& task, const std::vector<std::string>& labels,
                         const Vocab& vocab, int64_t max_len) {
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
    const std::string problem = line_problem(tokens, max_len);
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
      std::vector<std::string> answer = slot.back() < 0
                                            ? std::vector<std::string>{""}
                                            : predict_labels(task, labels, {examples.back()});
      std::cout << answer[0] << "\n" << std::flush;
      check_stdout();
      std::cerr << "> " << std::flush;
    }
  }
  if (terminal) return;
  std::vector<std::string> answers = predict_labels(task, labels, std::move(examples));
  for (int64_t s : slot) std::cout << (s < 0 ? std::string() : answers[s]) << "\n";
}

void run_classify_predict(const ClassifyPredictArgs& p) {
  Device device = setup_runtime(p.common);
  std::vector<LoadedModel<Classifier>> models = load_classifiers(p.checkpoints, device);
  LoadedModel<Classifier>& l = models[0];
  std::cerr << "data: " << read_data_description(l.info.extra["data"]).summary() << "\n";
  if (models.size() > 1)
    std::cerr << "ensemble: the mean of " << models.size() << " models' probabilities\n";
  const std::vector<std::string> labels = checkpoint_labels(l.info);
  ClassificationTask task(*l.model, device);
  task.set_ensemble(ensemble_others(models));
  apply_tta(task, p.tta, p.checkpoints[0], l.info.config, std::cerr);
  if (!p.images.empty()) {
    for (const auto& line : predict_labels(task, labels, idx_image_examples(p.images)))
      std::cout << line << "\n";
    return;
  }
  check(l.info.config.input != InputKind::Image,
        "this checkpoint classifies images: pass --images FILE");
  check(!l.info.vocab_src.empty(), "checkpoint '", p.checkpoints[0],
        "' classifies tokens but holds an empty vocabulary (metadata vocab_src); it is damaged "
        "or was not written by mixlab");
  // A line must fit every model of the ensemble, beside the [CLS] position of --pool cls.
  int64_t max_len = l.info.config.max_len;
  for (const auto& m : models)
    max_len =
        std::min(max_len, m.info.config.max_len - (m.info.config.pool == PoolKind::Cls ? 1 : 0));
  predict_token_lines(task, labels, Vocab::from_string(l.info.vocab_src), max_len);
}

}  // namespace

void add_classify_predict_command(CLI::App& classify) {
  auto p = std::make_shared<ClassifyPredictArgs>();
  CLI::App* predict = classify.add_subcommand(
      "predict", "class and probability for each input: token lines on stdin, or --images IDX");
  add_runtime_flags(predict, p->common);
  predict
      ->add_option("--checkpoint", p->checkpoints,
                   "a .safetensors checkpoint; several predict as an ensemble (the mean of "
                   "their class probabilities)")
      ->required()
      ->group(kModelGroup);
  predict->add_option("--images", p->images, "an IDX image file (else: token lines on stdin)");
  add_tta_flag(predict, p->tta);
  predict->callback([p] { run_classify_predict(*p); });
}

}  // namespace mixlab::app
