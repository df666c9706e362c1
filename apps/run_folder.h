// A run folder is the run: `--out DIR` holds one training run (config.ini, model.json,
// checkpoints, metrics), and the rules below keep a second command from silently mixing
// another run into it.
//
//   - The manifest DIR/.mixlab-run.json names the command and every file the run wrote, kept
//     up to date as each file is written (start_run_manifest). It is how a run's files are told
//     from a user's: nothing else decides what may be removed.
//   - A non-empty DIR without a manifest is refused (usage error) listing what is in it, with or
//     without --overwrite: it holds no run, so none of it is mixlab's to touch.
//   - DIR holding a run, without --resume: refused (usage error), nothing in DIR touched,
//     unless --overwrite, which removes exactly the files the manifest lists (and stale
//     temporaries of atomic writes, `.mixlab-tmp.*`), right before the new run writes. A folder
//     holding anything else (a file the run did not write, a subfolder) is refused, listing it.
//   - --resume: DIR must hold last.safetensors. main() reads DIR/config.ini as the defaults of
//     the command (resume_config_args), so the run continues with every stored setting; a flag
//     given on the command line may change only what can change on resume (kResumableOptions),
//     any other flag that contradicts config.ini is refused naming both values. A run that is
//     complete, or of another command, is refused saying so. Another --steps or --epochs
//     extends the schedule by the rule in train/optim/schedule.h, recorded in config.ini's
//     schedule-history so that --config replays the run (docs/runs.md).
//   - config.ini is read strictly (check_config_file), stores data paths absolute, and is
//     sectioned ([translate.train] / [classify.train]) so that
//     `mixlab --config DIR/config.ini translate train` reads it back; it is written atomically,
//     and only after the model and data were built and checked.
#pragma once
#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "nn/model_config.h"

namespace mixlab::app {

// Options a resumed run may change (long names without dashes).
extern const std::vector<std::string> kResumableOptions;

// A run folder's manifest (.mixlab-run.json): the command ("classify.train") and the names of
// the files its run wrote, in the order written.
struct RunManifest {
  bool exists = false;
  std::string command;
  std::vector<std::string> files;
};
// The manifest of DIR (exists false when there is none); a damaged one is a UsageError.
RunManifest read_run_manifest(const std::string& dir);
std::string manifest_path(const std::string& dir);

// Begins the manifest of a run writing into DIR for `command` (keeping the files already listed
// when `keep_listed`: a resumed run), and from then on adds every file written in DIR.
void start_run_manifest(const std::string& dir, const std::string& command, bool keep_listed);

// Before anything is built or written: refuses (UsageError) a DIR that holds a run without
// --resume or --overwrite, --resume without DIR/last.safetensors, and both flags at once.
void check_run_folder(const std::string& dir, bool resume, bool overwrite);

// Removes the files DIR's manifest lists and stale temporaries (--overwrite), right before the
// new run writes its first file.
void empty_run_folder(const std::string& dir);

// The section name of a subcommand in config.ini: "translate.train".
std::string config_section(const CLI::App& cmd);

// main(): when ARGS (without the program name) resume a run (`X train --resume`) and no
// --config is given, returns ARGS with `--config OUT/config.ini` in front so the stored
// settings become the defaults. Also checks an explicit --config FILE holds a section for the
// invoked train command (UsageError otherwise: CLI11 would silently ignore every key).
std::vector<std::string> resume_config_args(const CLI::App& root, std::vector<std::string> args);

// Strict reading of an INI file given to --config (or a run's config.ini on --resume): every
// line is blank, a comment, a [command.subcommand] naming a command, or key=value with a key
// that is an option of that command, given once per section. Anything else is a UsageError
// naming the file, the line and the key (CLI11 alone would ignore an unknown key silently).
void check_config_file(const CLI::App& root, const std::string& path);

// On --resume: every option of `cmd` now in effect that is not resumable must equal the run's
// stored config.ini (UsageError naming the option and both values).
void check_resume_options(const CLI::App& cmd, const std::string& dir);

// On --resume: the model now built must be the checkpoint's (UsageError naming the setting and
// both values): catches an edited config.ini or a run without one.
void check_resume_model(const ModelConfig& built, const ModelConfig& stored,
                        const std::string& checkpoint);

struct CommonFlags;
struct TrainFlags;

// What every train command does before building anything: check_run_folder, and on --resume
// check_resume_options and that the run is not complete already (a UsageError, exit 2: "the run
// is complete at step N; raise --steps or --epochs").
void check_before_training(const CLI::App& cmd, const CommonFlags& common, const TrainFlags& train);

// What it does once the model and data are built and checked, before training: on --resume
// check_resume_model against OUT/last.safetensors, and the data description (JSON) must be the
// checkpoint's; with --overwrite empty the folder; then
// save_run_config.
void open_run_folder(const CLI::App& cmd, const CommonFlags& common, const TrainFlags& train,
                     const ModelConfig& built, const std::string& data_json);

// On --resume with another length (--steps or --epochs), the run's schedule so far joins
// train.schedule_history (and cmd's option, so config.ini records it). Every process calls it,
// before trainer_options reads train: all ranks must follow one schedule.
void resume_schedule(CLI::App& cmd, const CommonFlags& common, TrainFlags& train);

// Writes DIR/config.ini (sectioned, every option with its value) and DIR/model.json.
void save_run_config(const CLI::App& cmd, const ModelConfig& config, const std::string& dir);

}  // namespace mixlab::app
