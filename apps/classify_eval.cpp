// `mixlab classify eval`: a checkpoint's (or an ensemble's) loss and accuracy on the test set of
// the data it was trained on, or of the data --data names (scored with the checkpoint's
// vocabulary and labels).
#include <algorithm>
#include <iostream>
#include <string>
#include <vector>

#include "apps/classify_data.h"
#include "apps/commands.h"
#include "apps/eval_command.h"
#include "train/loop/tasks.h"

namespace mixlab::app {

namespace {

struct ClassifyEvalArgs {
  CommonFlags common;
  std::vector<std::string> checkpoints;
  ListOpsFlags listops;
  std::string tta = "none";
};

// The checkpoint's data unless --data names other data (a ListOps generator keeps the
// checkpoint's settings); always the checkpoint's labels.
DataDescription classify_eval_data(const CLI::App& cmd, const ClassifyEvalArgs& e,
                                   const CheckpointInfo& info, const DataDescription& stored) {
  DataDescription desc = stored;
  if (!e.common.data.empty()) {
    desc = describe_classify_data(e.common.data, e.listops, eval_seed(cmd, e.common, stored));
    if (desc.kind == DataKind::ListOps && stored.kind == DataKind::ListOps)
      desc.generator = stored.generator;
  }
  if (desc.kind == DataKind::ListOps && desc.generator.empty())  // an older checkpoint
    desc = describe_classify_data("listops", e.listops, desc.seed);
  desc.labels = checkpoint_labels(info);
  return desc;
}

// Token data other than the checkpoint's must fit its vocabulary and length (a usage error).
void check_tokens_fit(const std::string& checkpoint, const ModelConfig& config,
                      const ClassificationData& d, const DataDescription& stored,
                      const UnknownTokens& unknown) {
  int64_t tokens = 0, longest = 0;
  for (const auto& ex : d.test.examples()) {
    tokens += static_cast<int64_t>(ex.src.size());
    longest = std::max<int64_t>(longest, static_cast<int64_t>(ex.src.size()));
  }
  // +1 for the [CLS] position of --pool cls, as in training.
  const int64_t extra = config.pool == PoolKind::Cls ? 1 : 0;
  check_data_fits_checkpoint(checkpoint, stored.summary(), d.desc.summary(), unknown.total(),
                             tokens, longest + extra, config.max_len);
}

void run_classify_eval(const CLI::App& cmd, const ClassifyEvalArgs& e) {
  Device device = setup_runtime(e.common);
  std::vector<LoadedModel<Classifier>> models = load_classifiers(e.checkpoints, device);
  LoadedModel<Classifier>& l = models[0];
  // Always the checkpoint's vocabulary and labels, so a file is scored with the numbers the
  // model was trained with.
  const DataDescription stored = read_data_description(l.info.extra["data"]);
  const DataDescription desc = classify_eval_data(cmd, e, l.info, stored);
  const bool images = desc.kind == DataKind::FashionMnist || desc.kind == DataKind::Idx;
  if (images != (l.info.config.input == InputKind::Image))
    throw UsageError("--data: " + desc.summary() + " holds " + (images ? "images" : "tokens") +
                     ", but the checkpoint classifies " + to_string(l.info.config.input) + "s");
  print_eval_data(std::cerr, desc, stored);
  if (models.size() > 1)
    std::cerr << "ensemble: the mean of " << models.size() << " models' probabilities\n";
  Vocab vocab = l.info.vocab_src.empty() ? Vocab() : Vocab::from_string(l.info.vocab_src);
  UnknownTokens unknown;
  int64_t longest_model = 0;
  for (const auto& m : models) longest_model = std::max(longest_model, m.info.config.max_len);
  // Lines as long as the models take are read; the check below refuses longer ones.
  ClassificationData d =
      load_classify_data(desc, &vocab, &unknown, std::max(kDataLengthCap, longest_model));
  if (!images)
    for (size_t i = 0; i < models.size(); ++i)
      check_tokens_fit(e.checkpoints[i], models[i].info.config, d, stored, unknown);
  unknown.report(std::cerr);
  ClassificationTask task(*l.model, device);
  task.set_ensemble(ensemble_others(models));
  apply_tta(task, e.tta, e.checkpoints[0], l.info.config, std::cerr);
  task.set_progress(&std::cerr);
  print_metrics(std::cout, "test", task.evaluate(d.test));
}

}  // namespace

void add_classify_eval_command(CLI::App& classify) {
  auto e = std::make_shared<ClassifyEvalArgs>();
  CLI::App* eval = classify.add_subcommand("eval", "accuracy of a checkpoint on a test set");
  add_data_flags(eval, e->common,
                 "fashion-mnist, listops, an IDX folder or a label<TAB>text file (default: the "
                 "checkpoint's)");
  add_runtime_flags(eval, e->common);
  eval->add_option("--checkpoint", e->checkpoints,
                   "a .safetensors checkpoint; several score as an ensemble (the mean of their "
                   "class probabilities)")
      ->required()
      ->group(kModelGroup);
  add_tta_flag(eval, e->tta);
  eval->callback([e, eval] { run_classify_eval(*eval, *e); });
}

}  // namespace mixlab::app
