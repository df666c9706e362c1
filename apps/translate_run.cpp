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
  for (std::string line; std::getline(std::cin, line); prompt()) {
    std::vector<std::string> tokens = tokenize_line(line, kind);
    UnknownTokens unknown;
    unknown.add(tokens, l.src);
    unknown.report(std::cerr);
    std::vector<int32_t> ids = l.src.encode(tokens, false, true);
    if (static_cast<int64_t>(ids.size()) > max_len) {
      std::cerr << "warning: input of " << ids.size() << " tokens is longer than max_len "
                << max_len << "; skipped\n";
      std::cout << "\n";
      continue;
    }
    int64_t n = static_cast<int64_t>(ids.size());
    Tensor src = Tensor::from_data(ids, {1, n}, device);
    auto out = generate_ensemble(models, src, {static_cast<int32_t>(n)}, o);
    std::cout << join(l.tgt.decode(out[0]), sep) << "\n" << std::flush;
    check_stdout();
  }
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
  run->callback([r] { run_translate_run(*r); });
}

}  // namespace mixlab::app
