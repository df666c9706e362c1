// `mixlab translate train|eval|run`: an encoder-decoder whose encoder uses --mixer, whose
// decoder self-mixer uses --decoder-mixer (causal-capable mixers only) and whose
// cross-mixer is dot-product attention. One file per subcommand (apps/translate_train.cpp,
// translate_eval.cpp, translate_run.cpp); the data, decoding flags and checkpoint loading they
// share are apps/translate_data.h's.
//
// Data (--data): scan (generated; --split simple|length|addprim_jump; 5% of train held out for
// validation), g2p (CMUdict g014b2b shipped in data/g2p: 2,670 training words held out as the
// dev set, the same for every --seed; test = the 12,000 test words scored with all their
// references), or a `source<TAB>target` file (--tokens words|chars; last 10% held out). Default:
// SCAN simple.
#include "apps/commands.h"

namespace mixlab::app {

void add_translate_commands(CLI::App& root) {
  CLI::App* translate = root.add_subcommand("translate", "sequence-to-sequence models");
  translate->require_subcommand(1);
  add_translate_train_command(*translate);
  add_translate_eval_command(*translate);
  add_translate_run_command(*translate);
}

}  // namespace mixlab::app
