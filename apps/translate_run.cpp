// `mixlab translate run`: translates lines from stdin to stdout with a checkpoint (several decode
// as an ensemble). Sources end with <eos> and no <bos>, as in training (docs/interop.md).
#include <unistd.h>

#include <algorithm>
#include <iostream>

#include "apps/commands.h"
#include "apps/eval_command.h"
#include "apps/translate_data.h"
#include "core/strings.h"

namespace mixlab::app {

namespace {

struct TranslateRunArgs {
  CommonFlags common;
  DecodeFlags decode;
  std::vector<std::string> checkpoints;
  int64_t batch = 1;  // lines decoded together (1: each as soon as it is read)
};

void run_translate_run(const TranslateRunArgs& r) {
  Device device = setup_runtime(r.common);
  std::vector<LoadedTranslator> loaded = load_translators(r.checkpoints, device);
  LoadedTranslator& l = loaded[0];
  std::vector<Translator*> models{l.model.get()};
  for (Translator* m : ensemble_others(loaded)) models.push_back(m);
  int64_t max_len = l.info.config.max_len;
  for (const LoadedTranslator& m : loaded) max_len = std::min(max_len, m.info.config.max_len);
  std::string kind = l.info.extra.count("src_tokens") ? l.info.extra["src_tokens"] : "words";
  std::string sep = l.info.extra.count("tgt_join") ? l.info.extra["tgt_join"] : " ";
  DecodeOptions o = decode_options(r.decode, l.info.config);
  std::cerr << "data: " << read_data_description(l.info.extra["data"]).summary() << "; "
            << l.src.size() << " source tokens\n";
  // On a terminal, a prompt before each line.
  const bool terminal = ::isatty(STDIN_FILENO) && ::isatty(STDERR_FILENO);
  auto prompt = [&] {
    if (terminal) std::cerr << "> " << std::flush;
  };
  if (terminal) std::cerr << "one line to translate at a time (Ctrl-D ends)\n";
  prompt();
  // Lines wait for a full --batch (or the end of the input) and decode as one padded batch,
  // printed in their order: the same outputs up to float rounding, several times faster.
  std::vector<std::vector<int32_t>> pending;  // encoded lines; empty for a skipped one
  auto flush = [&] {
    std::vector<int32_t> lengths;
    int64_t longest = 0;
    for (const auto& ids : pending)
      if (!ids.empty()) {
        lengths.push_back(static_cast<int32_t>(ids.size()));
        longest = std::max<int64_t>(longest, static_cast<int64_t>(ids.size()));
      }
    std::vector<std::vector<int32_t>> out;
    if (!lengths.empty()) {
      const int64_t rows = static_cast<int64_t>(lengths.size());
      std::vector<int32_t> padded(rows * longest, Vocab::kPad);
      int64_t row = 0;
      for (const auto& ids : pending)
        if (!ids.empty()) std::copy(ids.begin(), ids.end(), padded.begin() + longest * row++);
      out =
          generate_ensemble(models, Tensor::from_data(padded, {rows, longest}, device), lengths, o);
    }
    size_t next = 0;
    for (const auto& ids : pending)
      std::cout << (ids.empty() ? "" : join(l.tgt.decode(out[next++]), sep)) << "\n";
    std::cout << std::flush;
    check_stdout();
    pending.clear();
  };
  for (std::string line; std::getline(std::cin, line); prompt()) {
    std::vector<std::string> tokens = tokenize_line(line, kind);
    UnknownTokens unknown;
    unknown.add(tokens, l.src);
    unknown.report(std::cerr);
    std::vector<int32_t> ids = l.src.encode(tokens, false, true);
    if (static_cast<int64_t>(ids.size()) > max_len) {
      std::cerr << "warning: input of " << ids.size() << " tokens is longer than max_len "
                << max_len << "; skipped\n";
      ids.clear();
    }
    pending.push_back(std::move(ids));
    if (static_cast<int64_t>(pending.size()) >= r.batch) flush();
  }
  flush();
}

}  // namespace

void add_translate_run_command(CLI::App& translate) {
  auto r = std::make_shared<TranslateRunArgs>();
  CLI::App* run = translate.add_subcommand("run", "translate lines from stdin to stdout");
  add_runtime_flags(run, r->common);
  add_decode_flags(run, r->decode);
  run->add_option("--checkpoint", r->checkpoints,
                  "a .safetensors checkpoint; several decode as an ensemble")
      ->required()
      ->group(kModelGroup);
  run->add_option("--batch", r->batch,
                  "lines decoded together, each batch printed once complete (1: every line as "
                  "soon as it is read, for interactive use)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{65536}))
      ->group(kDecodingGroup);
  run->callback([r] { run_translate_run(*r); });
}

}  // namespace mixlab::app
