// Each subcommand family registers itself on the root CLI11 app.
#pragma once
#include <CLI/CLI.hpp>

namespace mixlab::app {

void add_mixers_command(CLI::App& root);
void add_classify_commands(CLI::App& root);
void add_translate_commands(CLI::App& root);
void add_average_command(CLI::App& root);
void add_export_command(CLI::App& root);   // apps/export.cpp
void add_inspect_command(CLI::App& root);  // apps/inspect.cpp
void add_study_command(CLI::App& root);    // apps/study.cpp

}  // namespace mixlab::app
