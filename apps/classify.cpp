// `mixlab classify train|eval|predict`: an encoder of any mixer, pooled, then a linear head.
// One file per subcommand (apps/classify_train.cpp, classify_eval.cpp, classify_predict.cpp);
// the data and model configuration they share are apps/classify_data.h's.
//
// Data (--data): fashion-mnist (Debian's dataset-fashion-mnist; 55,000 train / last 5,000 of
// train as validation / 10,000 test), listops (generated; --listops-* flags), a directory with
// the four IDX files, or a `label<TAB>text` file (last 10% held out). Without --data:
// Fashion-MNIST when installed, else ListOps.
#include "apps/commands.h"

namespace mixlab::app {

void add_classify_commands(CLI::App& root) {
  CLI::App* classify = root.add_subcommand("classify", "image and token-sequence classification");
  classify->require_subcommand(1);
  add_classify_train_command(*classify);
  add_classify_eval_command(*classify);
  add_classify_predict_command(*classify);
}

}  // namespace mixlab::app
