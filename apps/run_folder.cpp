#include "apps/run_folder.h"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "apps/common.h"
#include "io/atomic_file.h"
#include "train/distributed/distributed.h"

namespace fs = std::filesystem;

namespace mixlab::app {

// Steps and epochs extend a run (the schedule's length follows them); threads and device change
// speed, not the model; the rest is logging and where files go.
const std::vector<std::string> kResumableOptions = {"steps",       "epochs",    "threads",
                                                    "device",      "log-every", "eval-every",
                                                    "keep-epochs", "quiet",     "out"};

namespace {

// What a training run writes (and nothing else): the only files --overwrite removes.
bool is_run_file(const fs::directory_entry& e) {
  if (!e.is_regular_file()) return false;
  const std::string name = e.path().filename().string();
  if (name.find(".tmp.") != std::string::npos) return true;  // a killed run's temporary
  for (const char* ext :
       {".safetensors", ".ini", ".json", ".jsonl", ".csv", ".svg", ".png", ".log"})
    if (e.path().extension() == ext) return true;
  return false;
}

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r"), e = s.find_last_not_of(" \t\r");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// key -> value of an INI text as CLI11 writes it (comments and section lines skipped).
std::map<std::string, std::string> ini_values(const std::string& text) {
  std::map<std::string, std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    line = trim(line);
    if (line.empty() || line[0] == '#' || line[0] == ';' || line[0] == '[') continue;
    size_t eq = line.find('=');
    if (eq == std::string::npos) continue;
    out[trim(line.substr(0, eq))] = trim(line.substr(eq + 1));
  }
  return out;
}

std::vector<std::string> ini_sections(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    line = trim(line);
    if (line.size() > 2 && line.front() == '[' && line.back() == ']')
      out.push_back(line.substr(1, line.size() - 2));
  }
  return out;
}

std::string unquote(const std::string& v) {
  if (v.size() >= 2 && (v.front() == '"' || v.front() == '\'') && v.back() == v.front())
    return v.substr(1, v.size() - 2);
  return v;
}

// Equal as written, or as numbers (1e-3 and 0.001 are one learning rate).
bool same_value(const std::string& a_in, const std::string& b_in) {
  std::string a = unquote(a_in), b = unquote(b_in);
  if (a == b) return true;
  double x = 0, y = 0;
  auto [pa, ea] = std::from_chars(a.data(), a.data() + a.size(), x);
  auto [pb, eb] = std::from_chars(b.data(), b.data() + b.size(), y);
  return ea == std::errc() && eb == std::errc() && pa == a.data() + a.size() &&
         pb == b.data() + b.size() && x == y;
}

}  // namespace

void check_run_folder(const std::string& dir, bool resume, bool overwrite) {
  if (resume && overwrite)
    throw UsageError("--resume continues the run in --out, --overwrite replaces it: give one");
  if (dir.empty()) {
    if (resume) throw UsageError("--resume needs the run's folder: --out DIR");
    return;
  }
  if (fs::exists(dir) && !fs::is_directory(dir))
    throw UsageError("--out " + dir + " is a file, not a folder");
  if (resume) {
    if (!fs::exists(fs::path(dir) / "last.safetensors"))
      throw UsageError("--resume: " + dir +
                       " holds no last.safetensors to continue; start the run without --resume");
    return;
  }
  if (!fs::exists(dir) || fs::is_empty(dir)) return;
  if (!overwrite)
    throw UsageError("--out " + dir +
                     " already holds a run; continue it with --resume, replace it with "
                     "--overwrite, or choose another --out");
  for (const auto& e : fs::directory_iterator(dir))
    if (!is_run_file(e))
      throw UsageError("--overwrite: " + dir + " holds " + e.path().filename().string() +
                       ", which a run does not write; refusing to empty the folder");
}

void empty_run_folder(const std::string& dir) {
  if (dir.empty() || !fs::exists(dir)) return;
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir))
    if (is_run_file(e)) files.push_back(e.path());
  for (const auto& f : files) fs::remove(f);
}

std::string config_section(const CLI::App& cmd) {
  const CLI::App* parent = cmd.get_parent();
  if (parent && !parent->get_name().empty() && parent->get_parent())
    return parent->get_name() + "." + cmd.get_name();
  return cmd.get_name();
}

std::vector<std::string> resume_config_args(const CLI::App& root, std::vector<std::string> args) {
  // The root options come before the command: --config FILE, --help, --version.
  size_t i = 0;
  std::string config;
  bool has_config = false;
  for (; i < args.size() && args[i].rfind("-", 0) == 0; ++i) {
    if (args[i] == "--config" && i + 1 < args.size()) {
      has_config = true;
      config = args[++i];
    } else if (args[i].rfind("--config=", 0) == 0) {
      has_config = true;
      config = args[i].substr(9);
    }
  }
  if (i + 1 >= args.size()) return args;
  const std::string command = args[i], sub = args[i + 1];
  if ((command != "translate" && command != "classify") || sub != "train") return args;
  const std::string section = command + "." + sub;
  if (has_config) {
    if (!fs::is_regular_file(config)) return args;  // CLI11 reports the missing file
    std::vector<std::string> sections = ini_sections(read_text(config));
    if (std::find(sections.begin(), sections.end(), section) == sections.end()) {
      std::string found;
      for (const auto& s : sections) found += (found.empty() ? "" : ", ") + ("[" + s + "]");
      throw UsageError("--config " + config + " has no [" + section +
                       "] section, so none of its settings would apply to `" + command + " " + sub +
                       "`" + (found.empty() ? std::string() : " (it holds " + found + ")"));
    }
    return args;
  }
  std::string out;
  bool resume = false;
  for (size_t k = i + 2; k < args.size(); ++k) {
    if (args[k] == "--resume") resume = true;
    if (args[k] == "--out" && k + 1 < args.size()) out = args[k + 1];
    if (args[k].rfind("--out=", 0) == 0) out = args[k].substr(6);
  }
  if (!resume) return args;
  if (out.empty()) {
    const CLI::Option* o = root.get_subcommand(command)->get_subcommand(sub)->get_option("--out");
    out = o->get_default_str();
  }
  const std::string stored = (fs::path(out) / "config.ini").string();
  if (fs::is_regular_file(stored)) args.insert(args.begin(), {"--config", stored});
  return args;
}

void check_resume_options(const CLI::App& cmd, const std::string& dir) {
  const std::string path = (fs::path(dir) / "config.ini").string();
  if (!fs::is_regular_file(path)) return;
  std::map<std::string, std::string> stored = ini_values(read_text(path));
  std::map<std::string, std::string> now = ini_values(cmd.config_to_str(true, false));
  std::string clashes;
  for (const auto& [key, value] : now) {
    if (std::find(kResumableOptions.begin(), kResumableOptions.end(), key) !=
        kResumableOptions.end())
      continue;
    auto it = stored.find(key);
    if (it == stored.end() || same_value(it->second, value)) continue;
    clashes += "\n  --" + key + " " + unquote(value) + ", but the run has " + key + "=" +
               unquote(it->second);
  }
  if (clashes.empty()) return;
  std::string allowed;
  for (const auto& k : kResumableOptions) allowed += (allowed.empty() ? "--" : ", --") + k;
  throw UsageError("--resume: these flags contradict the run stored in " + path + ":" + clashes +
                   "\nA resumed run may change only " + allowed +
                   "; to train another model, use another --out (or --overwrite)");
}

void check_resume_model(const ModelConfig& built, const ModelConfig& stored,
                        const std::string& checkpoint) {
  const Json a = built.to_json(), b = stored.to_json();
  if (a == b) return;
  std::string clashes;
  for (const auto& [key, value] : a.as_object()) {
    const Json* s = b.find(key);
    if (s && *s == value) continue;
    clashes += "\n  " + key + ": now " + value.dump() + ", the checkpoint has " +
               (s ? s->dump() : std::string("nothing"));
  }
  throw UsageError("--resume: the model these flags build is not the one in " + checkpoint + ":" +
                   clashes);
}

void check_before_training(const CLI::App& cmd, const CommonFlags& common,
                           const TrainFlags& train) {
  // [distributed] rank 0 owns the folder: other ranks would see the run it has just begun.
  if (is_primary_process()) check_run_folder(common.out, train.trainer.resume, train.overwrite);
  if (train.trainer.resume) check_resume_options(cmd, common.out);
}

void open_run_folder(const CLI::App& cmd, const CommonFlags& common, const TrainFlags& train,
                     const ModelConfig& built, const std::string& data_json) {
  if (train.trainer.resume) {
    const std::string last = Trainer::last_checkpoint(common.out);
    CheckpointInfo stored = read_checkpoint_info(last);
    check_resume_model(built, stored.config, last);
    const std::string& data = stored.extra["data"];
    if (!data.empty() && data[0] == '{' && data != data_json)
      throw UsageError("--resume: the data these flags name, " + data_json +
                       ", is not the run's, " + data + " (" + last + ")");
  }
  if (train.overwrite) empty_run_folder(common.out);
  save_run_config(cmd, built, common.out);
}

void save_run_config(const CLI::App& cmd, const ModelConfig& config, const std::string& dir) {
  if (dir.empty()) return;
  fs::create_directories(dir);
  const std::string section = config_section(cmd);
  std::string command = section;
  std::replace(command.begin(), command.end(), '.', ' ');
  std::string text =
      "# The settings of this run, every option with its value.\n# Replay it:   mixlab --config " +
      dir + "/config.ini " + command + " --out NEW_DIR\n# Continue it: mixlab " + command +
      " --resume --out " + dir + "\n[" + section + "]\n" + cmd.config_to_str(true, true);
  write_file_atomically(dir + "/config.ini", std::string_view(text));
  write_file_atomically(dir + "/model.json", std::string_view(config.to_json().dump() + "\n"));
}

}  // namespace mixlab::app
