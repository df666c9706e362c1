// `mixlab translate eval`: a checkpoint (or an ensemble of several) scored on the test or the
// validation set of the data it was trained on, or of the data --data names, with a few sample
// translations next to their references.
#include <algorithm>
#include <iostream>

#include "apps/commands.h"
#include "apps/eval_command.h"
#include "apps/translate_data.h"

namespace mixlab::app {

namespace {

struct TranslateEvalArgs {
  CommonFlags common;
  DecodeFlags decode;
  std::vector<std::string> checkpoints;
  std::string split, tokens, on = "test";
};

// The checkpoint's data unless --data names other data; its split, tokens and seed unless given.
DataDescription translate_eval_data(const CLI::App& cmd, const TranslateEvalArgs& e,
                                    const DataDescription& stored) {
  if (e.common.data.empty() && e.split.empty() && e.tokens.empty() &&
      !cmd.get_option("--seed")->count())
    return stored;
  std::string data = e.common.data;
  if (data.empty() && stored.path.empty())  // generated or shipped: scan, g2p
    data = to_string(stored.kind);
  else if (data.empty())  // a file, or a G2P word list
    data = stored.kind == DataKind::G2p ? "g2p:" + stored.path : stored.path;
  const std::string split = !e.split.empty() ? e.split : stored.split;
  const std::string tokens = !e.tokens.empty() ? e.tokens : stored.tokens;
  return describe_translate_data(data, split.empty() ? "simple" : split,
                                 tokens.empty() ? "words" : tokens,
                                 eval_seed(cmd, e.common, stored));
}

// The scored pairs must fit the checkpoint's vocabularies and lengths (a usage error).
void check_pairs_fit(const std::string& checkpoint, const LoadedTranslator& l,
                     const TranslationData& d, const DataDescription& stored,
                     UnknownTokens& unknown) {
  int64_t tokens = 0, longest_src = 0, longest_tgt = 0;
  for (const auto& p : d.test) {
    unknown.add(p.src, l.src);
    unknown.add(p.tgt, l.tgt);
    tokens += static_cast<int64_t>(p.src.size() + p.tgt.size());
    longest_src = std::max<int64_t>(longest_src, static_cast<int64_t>(p.src.size()) + 1);
    longest_tgt = std::max<int64_t>(longest_tgt, static_cast<int64_t>(p.tgt.size()) + 2);
  }
  // +1 for <eos> on the source, +2 for <bos>/<eos> on the target, as in training.
  check_data_fits_checkpoint(checkpoint, stored.summary(), d.desc.summary(), unknown.total(),
                             tokens, longest_src, l.info.config.max_len);
  check_data_fits_checkpoint(checkpoint, stored.summary(), d.desc.summary(), 0, 0, longest_tgt,
                             l.info.config.tgt_max_len);
}

void run_translate_eval(const CLI::App& cmd, const TranslateEvalArgs& e) {
  Device device = setup_runtime(e.common);
  std::vector<LoadedTranslator> models = load_translators(e.checkpoints, device);
  LoadedTranslator& l = models[0];
  const DataDescription stored = read_data_description(l.info.extra["data"]);
  const DataDescription desc = translate_eval_data(cmd, e, stored);
  print_eval_data(std::cerr, desc, stored);
  // Lines as long as the model takes are read; the check below refuses longer ones.
  TranslationData d = load_translate_data(
      desc, std::max({kDataLengthCap, l.info.config.max_len, l.info.config.tgt_max_len}));
  if (e.on == "valid") {  // score the held-out set through the same path as the test set
    d.test = std::move(d.valid);
    d.test_refs = std::move(d.valid_refs);
  }
  UnknownTokens unknown;
  check_pairs_fit(e.checkpoints.front(), l, d, stored, unknown);
  unknown.report(std::cerr);
  TranslationTask task(*l.model, device, 0.0, decode_options(e.decode, l.info.config));
  task.set_ensemble(ensemble_others(models));
  task.set_progress(&std::cerr);
  print_metrics(std::cout, e.on, test_and_show(task, d, l.src, l.tgt, 5));
}

}  // namespace

void add_translate_eval_command(CLI::App& translate) {
  auto e = std::make_shared<TranslateEvalArgs>();
  CLI::App* eval = translate.add_subcommand(
      "eval", "score a checkpoint (or an ensemble) on the test or validation set");
  add_data_flags(eval, e->common,
                 "scan, g2p, g2p:WORD_LIST (words in g014b2b.ref's format, all scored) or a "
                 "source<TAB>target file (default: the checkpoint's)");
  add_runtime_flags(eval, e->common);
  add_decode_flags(eval, e->decode);
  eval->add_option("--checkpoint", e->checkpoints,
                   "a .safetensors checkpoint; several decode as an ensemble (the mean of their "
                   "next-token probabilities)")
      ->required()
      ->group(kModelGroup);
  eval->add_option("--split", e->split, "SCAN split (default: the checkpoint's)")
      ->check(CLI::IsMember({"simple", "length", "addprim_jump"}))
      ->group(kDataGroup);
  eval->add_option("--tokens", e->tokens, "TSV data: words or chars (default: the checkpoint's)")
      ->check(CLI::IsMember({"words", "chars"}))
      ->group(kDataGroup);
  eval->add_option("--on", e->on,
                   "score the test set, or the validation set held out from train (for choosing "
                   "a checkpoint; g2p's dev set is fixed, scan's and a file's follow --seed)")
      ->check(CLI::IsMember({"test", "valid"}))
      ->capture_default_str()
      ->group(kDataGroup);
  eval->callback([e, eval] { run_translate_eval(*eval, *e); });
}

}  // namespace mixlab::app
