// Each subcommand family registers itself on the root CLI11 app.
#pragma once
#include <CLI/CLI.hpp>

namespace mixlab::app {

void add_mixers_command(CLI::App& root);
void add_classify_commands(CLI::App& root);   // apps/classify.cpp: the three below
void add_translate_commands(CLI::App& root);  // apps/translate.cpp: the three below
void add_average_command(CLI::App& root);
void add_export_command(CLI::App& root);   // apps/export.cpp
void add_inspect_command(CLI::App& root);  // apps/inspect.cpp
void add_study_command(CLI::App& root);    // apps/study.cpp

// One file per subcommand, each registering itself under its family's command.
void add_classify_train_command(CLI::App& classify);    // apps/classify_train.cpp
void add_classify_eval_command(CLI::App& classify);     // apps/classify_eval.cpp
void add_classify_predict_command(CLI::App& classify);  // apps/classify_predict.cpp
void add_translate_train_command(CLI::App& translate);  // apps/translate_train.cpp
void add_translate_eval_command(CLI::App& translate);   // apps/translate_eval.cpp
void add_translate_run_command(CLI::App& translate);    // apps/translate_run.cpp

}  // namespace mixlab::app
