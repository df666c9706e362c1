#include "apps/cli_style.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <ostream>
#include <sstream>

#include "apps/common.h"

namespace mixlab::app {

std::string GroupedFormatter::make_help(const CLI::App* app, std::string name,
                                        CLI::AppFormatMode mode) const {
  if (mode == CLI::AppFormatMode::Sub) return make_expanded(app);
  std::stringstream out;
  if (app->get_name().empty() && app->get_parent() != nullptr && app->get_group() != "Subcommands")
    out << app->get_group() << ':';
  out << make_description(app) << make_usage(app, name) << make_positionals(app)
      << ordered_groups(app, mode) << make_subcommands(app, mode) << '\n'
      << make_footer(app);
  return out.str();
}

std::string GroupedFormatter::ordered_groups(const CLI::App* app, CLI::AppFormatMode mode) const {
  std::vector<std::string> groups = {kDataGroup,     kModelGroup,  kOptimisationGroup,
                                     kDecodingGroup, kOutputGroup, kRunGroup};
  for (const auto& g : app->get_groups())
    if (std::find(groups.begin(), groups.end(), g) == groups.end()) groups.push_back(g);
  std::stringstream out;
  for (const std::string& group : groups) {
    std::vector<const CLI::Option*> opts = app->get_options([&](const CLI::Option* opt) {
      return opt->get_group() == group && opt->nonpositional() &&
             (mode != CLI::AppFormatMode::Sub ||
              (app->get_help_ptr() != opt && app->get_help_all_ptr() != opt));
    });
    if (!group.empty() && !opts.empty()) out << make_group(group, false, opts) << "\n";
  }
  return out.str();
}

namespace {
std::string& program_storage() {
  static std::string path = "mixlab";
  return path;
}
}  // namespace

void set_program_path(const std::string& path) { program_storage() = path; }
const std::string& program_path() { return program_storage(); }

std::string shell_quote(const std::string& text) {
  bool plain = !text.empty();
  for (char c : text)
    plain = plain && (std::isalnum(static_cast<unsigned char>(c)) ||
                      std::string("_./:=+,-").find(c) != std::string::npos);
  if (plain) return text;
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

void print_where_and_next(std::ostream& out, const std::string& dir,
                          const std::vector<std::string>& next) {
  if (!dir.empty() && std::filesystem::is_directory(dir)) {
    std::vector<std::string> files;
    for (const auto& e : std::filesystem::directory_iterator(dir))
      if (e.is_regular_file()) files.push_back(e.path().filename().string());
    std::sort(files.begin(), files.end());
    out << "\nrun folder: " << dir << "\n";
    std::string line;
    for (const auto& f : files) {
      if (!line.empty() && line.size() + 2 + f.size() > 78) {
        out << line << "\n";
        line.clear();
      }
      line += (line.empty() ? "  " : "  ") + f;
    }
    if (!line.empty()) out << line << "\n";
  }
  if (next.empty()) return;
  out << "next:\n";
  for (const auto& command : next) out << "  " << command << "\n";
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1])});
      diagonal = up;
    }
  }
  return row[b.size()];
}

namespace {

// The closest of `names` to `word`, or "" when none is close enough to be a typo.
std::string closest(const std::string& word, const std::vector<std::string>& names) {
  std::string best;
  size_t best_distance = std::max<size_t>(2, word.size() / 3) + 1;
  for (const auto& n : names) {
    size_t d = edit_distance(word, n);
    if (d < best_distance) {
      best_distance = d;
      best = n;
    }
  }
  return best;
}

std::vector<std::string> long_names(const CLI::App* app) {
  std::vector<std::string> names;
  for (; app; app = app->get_parent())
    for (const CLI::Option* o : app->get_options())
      for (const auto& n : o->get_lnames()) names.push_back("--" + n);
  return names;
}

}  // namespace

std::string suggest_corrections(const CLI::App& root, const std::vector<std::string>& args) {
  std::string out;
  const CLI::App* app = &root;
  bool options_started = false;
  for (const std::string& arg : args) {
    if (arg.rfind("--", 0) == 0 && arg.size() > 2) {
      options_started = true;
      std::string name = arg.substr(0, arg.find('='));
      std::vector<std::string> known = long_names(app);
      if (std::find(known.begin(), known.end(), name) != known.end()) continue;
      std::string guess = closest(name, known);
      if (!guess.empty()) out += "unknown flag '" + name + "'; did you mean '" + guess + "'?\n";
      continue;
    }
    if (options_started || arg.empty() || arg[0] == '-') continue;
    // A word before any flag names a subcommand of the command so far.
    std::vector<std::string> subs;
    for (const CLI::App* s : app->get_subcommands({})) subs.push_back(s->get_name());
    if (subs.empty()) break;
    auto it = std::find(subs.begin(), subs.end(), arg);
    if (it != subs.end()) {
      app = app->get_subcommand(arg);
      continue;
    }
    std::string guess = closest(arg, subs);
    if (!guess.empty()) out += "unknown command '" + arg + "'; did you mean '" + guess + "'?\n";
    break;
  }
  return out;
}

}  // namespace mixlab::app
