// How the command line presents itself: --help groups in a fixed order, --version, and "did you
// mean" suggestions for mistyped subcommands and flags.
#pragma once
#include <CLI/CLI.hpp>

#include <string>
#include <vector>

namespace mixlab::app {

// --help lists option groups in the order Data, Model, Optimisation, Decoding, Output, Run (then
// any other), whatever order the options were added in.
class GroupedFormatter : public CLI::Formatter {
 public:
  // CLI11's make_help with ordered_groups() in place of its (non-virtual) make_groups().
  std::string make_help(const CLI::App* app, std::string name,
                        CLI::AppFormatMode mode) const override;

 private:
  std::string ordered_groups(const CLI::App* app, CLI::AppFormatMode mode) const;
};

// "mixlab 0.1.0 (git <revision>, Release build, CUDA on)".
std::string version_string();

// For a command line CLI11 refused: "did you mean ...?" lines for each flag the invoked command
// does not know and for an unknown subcommand name, when a known one is close (edit distance).
// `args` are the arguments without the program name, in order.
std::string suggest_corrections(const CLI::App& root, const std::vector<std::string>& args);

// The program as invoked (argv[0]), for commands printed to be pasted back; "mixlab" until set.
void set_program_path(const std::string& path);
const std::string& program_path();

// `text` quoted for a POSIX shell when it holds anything but [A-Za-z0-9_./:=+,-].
std::string shell_quote(const std::string& text);

// The end of a command that wrote files: the folder, the files in it, and ready-to-paste next
// commands (each a full command line).
void print_where_and_next(std::ostream& out, const std::string& dir,
                          const std::vector<std::string>& next);

// Levenshtein distance (for suggestions; public for tests).
size_t edit_distance(const std::string& a, const std::string& b);

}  // namespace mixlab::app
