// mixlab: train, evaluate and use token-mixer models from the command line.
//
//   mixlab mixers                                 the mixers and what each supports
//   mixlab classify train|eval|predict [flags]    images (Fashion-MNIST) or token sequences
//   mixlab translate train|eval|run [flags]       sequence to sequence (SCAN, CMUdict G2P, TSV)
//   mixlab average --out AVG C1 C2 ...            checkpoint averaging
//   mixlab export --checkpoint CK --out FILE      weights only (optionally f16)
//   mixlab inspect | study                        the lab (lab/): mixing matrices, mixer studies
//
// Exit codes: 0 success, 1 runtime failure (data, files), 2 usage errors (bad flags, unknown
// mixer names), 130 / 143 interrupted by SIGINT / SIGTERM (after saving a checkpoint).
#include <algorithm>
#include <csignal>
#include <iostream>
#include <string>
#include <vector>

#include "apps/commands.h"
#include "apps/cli_style.h"
#include "apps/common.h"
#include "apps/run_folder.h"
#include "lab/errors.h"
#include "backends/cpu/openblas_kernels.h"
#include "core/parallel.h"
#include "nn/attention_core.h"
#include "nn/mixer_registry.h"
#include "train/run/interrupt.h"

int main(int argc, char** argv) {
  mixlab::reexec_with_better_openblas_kernels(argv);
  CLI::App app{"mixlab: a from-scratch engine for studying token mixers", "mixlab"};
  app.formatter(std::make_shared<mixlab::app::GroupedFormatter>());
  app.set_version_flag("--version", mixlab::app::version_string(),
                       "print the version, git revision, build type and CUDA support");
  app.set_config("--config", "", "read options from a TOML/INI file (as saved in OUT/config.ini)");
  app.require_subcommand(1);
  // A flag given twice takes its last value, so scripts can append overrides to defaults.
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.set_help_all_flag("--help-all", "help for every command");
  mixlab::app::add_mixers_command(app);
  mixlab::app::add_classify_commands(app);
  mixlab::app::add_translate_commands(app);
  mixlab::app::add_average_command(app);
  mixlab::app::add_export_command(app);
  mixlab::app::add_inspect_command(app);
  mixlab::app::add_study_command(app);
  const std::vector<std::string> given(argv + 1, argv + argc);
  mixlab::app::set_program_path(argv[0]);
  try {
    // A bad MIXLAB_ATTENTION_CORE or MIXLAB_NUM_THREADS is refused before any command writes
    // anything.
    try {
      mixlab::attention_core();
      mixlab::num_threads();
    } catch (const mixlab::Error& e) {
      throw mixlab::app::UsageError(e.what());
    }
    std::vector<std::string> args = mixlab::app::resume_config_args(app, given);
    std::reverse(args.begin(), args.end());  // CLI11 takes the vector form last-first
    app.parse(args);
    mixlab::app::check_stdout();
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    std::cerr << mixlab::app::suggest_corrections(app, given);
    return 2;
  } catch (const mixlab::app::UsageError& e) {
    std::cerr << "error: " << e.what() << "\nRun with --help for usage.\n";
    return 2;
  } catch (const mixlab::MixerSpecError& e) {  // a mixer name or option the registry refused
    std::cerr << "error: " << e.what() << "\nRun `mixlab mixers` for every mixer and option.\n";
    return 2;
  } catch (const mixlab::app::Interrupted&) {
    // 128 + the signal, as a shell reports it: 130 for SIGINT, 143 for SIGTERM.
    return 128 + (mixlab::interrupt_signal() != 0 ? mixlab::interrupt_signal() : SIGINT);
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
