#include "apps/run_folder.h"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <sstream>

#include "apps/common.h"
#include "apps/data_description.h"
#include "io/atomic_file.h"
#include "io/json.h"
#include "train/distributed/distributed.h"

namespace fs = std::filesystem;

namespace mixlab::app {

// Steps and epochs extend a run (the schedule's length follows them); threads and device change
// speed, not the model; the rest is logging and where files go.
const std::vector<std::string> kResumableOptions = {"steps",       "epochs",    "threads",
                                                    "device",      "log-every", "eval-every",
                                                    "keep-epochs", "quiet",     "out"};

namespace {

constexpr const char* kManifestName = ".mixlab-run.json";

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

// config.ini's `data=` as an absolute path when it names a file or folder, so that the run
// folder describes the run from any working directory (`--resume` from elsewhere); a data set
// name (scan, fashion-mnist) stays as it is.
std::string with_absolute_data_path(const std::string& ini) {
  std::istringstream in(ini);
  std::string out;
  for (std::string line; std::getline(in, line);) {
    const std::string t = trim(line);
    if (t.rfind("data=", 0) == 0 || t.rfind("data =", 0) == 0) {
      const std::string value = unquote(trim(t.substr(t.find('=') + 1)));
      if (!value.empty() && fs::path(value).is_relative() && fs::exists(value))
        line = "data=\"" + absolute_path(value) + "\"";
    }
    out += line + "\n";
  }
  return out;
}

}  // namespace

std::string manifest_path(const std::string& dir) {
  return (fs::path(dir) / kManifestName).string();
}

RunManifest read_run_manifest(const std::string& dir) {
  RunManifest m;
  const std::string path = manifest_path(dir);
  if (!fs::is_regular_file(path)) return m;
  try {
    const Json json = Json::parse(read_text(path));
    m.command = json.at("command").as_string();
    for (const Json& f : json.at("files").as_array()) m.files.push_back(f.as_string());
  } catch (const Error& e) {
    throw UsageError(path + " is damaged (" + e.what() +
                     "); the folder's run cannot be told from other files, so nothing in it is "
                     "touched: move what you want to keep and remove the folder by hand");
  }
  for (const auto& name : m.files)
    if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..")
      throw UsageError(path + " lists '" + name + "', which is not a file name in the folder");
  m.exists = true;
  return m;
}

namespace {

// The names in DIR that its run did not write: neither the manifest, nor a file it lists, nor
// a temporary file of an atomic write (io/atomic_file.h).
std::vector<std::string> foreign_entries(const std::string& dir, const RunManifest& m) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name == kManifestName || is_temporary_name(name)) continue;
    const bool listed = std::find(m.files.begin(), m.files.end(), name) != m.files.end();
    if (!listed || !e.is_regular_file() || e.is_symlink())
      out.push_back(name + (e.is_directory() ? "/" : ""));
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string list_names(const std::vector<std::string>& names) {
  std::string out;
  const size_t shown = std::min<size_t>(names.size(), 10);
  for (size_t i = 0; i < shown; ++i) out += (i ? ", " : "") + names[i];
  if (shown < names.size()) out += ", ... " + std::to_string(names.size() - shown) + " more";
  return out;
}

// The manifest of the run now writing into a folder: every file about to be written there
// (announced through io/atomic_file.h) is added and the manifest rewritten before the file is
// made, so it names every file of the run whenever the process stops.
struct ActiveManifest {
  std::mutex mutex;
  std::string dir, canonical_dir;
  RunManifest manifest;
  int observer = 0;

  void write() {
    Json files = Json::array();
    for (const auto& f : manifest.files) files.push_back(f);
    Json json = Json::object();
    json.set("command", manifest.command);
    json.set("files", std::move(files));
    write_file_atomically(manifest_path(dir), std::string_view(json.dump() + "\n"));
  }

  void written(const std::string& path) {
    const fs::path p(path);
    const std::string name = p.filename().string();
    if (name == kManifestName || is_temporary_name(name)) return;
    std::error_code ec;
    const fs::path parent =
        fs::weakly_canonical(p.parent_path().empty() ? "." : p.parent_path(), ec);
    std::lock_guard<std::mutex> lock(mutex);
    if (ec || parent.string() != canonical_dir) return;
    if (std::find(manifest.files.begin(), manifest.files.end(), name) != manifest.files.end())
      return;
    manifest.files.push_back(name);
    write();
  }
};

ActiveManifest& active_manifest() {
  static ActiveManifest m;
  return m;
}

}  // namespace

namespace {

// The files every training run writes, listed at its start: one manifest write then, none while
// the run starts training (a file named here is removed by --overwrite only if it exists).
const char* const kEveryRunWrites[] = {"config.ini",    "model.json",       "metrics.csv",
                                       "metrics.jsonl", "last.safetensors", "best.safetensors",
                                       "curves.svg"};

}  // namespace

void start_run_manifest(const std::string& dir, const std::string& command, bool keep_listed) {
  ActiveManifest& a = active_manifest();
  if (a.observer != 0) remove_write_observer(a.observer);
  fs::create_directories(dir);
  {
    std::lock_guard<std::mutex> lock(a.mutex);
    a.dir = dir;
    a.canonical_dir = fs::weakly_canonical(dir).string();
    a.manifest = keep_listed ? read_run_manifest(dir) : RunManifest();
    a.manifest.command = command;
    a.manifest.exists = true;
    for (const char* name : kEveryRunWrites)
      if (std::find(a.manifest.files.begin(), a.manifest.files.end(), name) ==
          a.manifest.files.end())
        a.manifest.files.push_back(name);
    a.write();
  }
  a.observer = add_write_observer([](const std::string& path) { active_manifest().written(path); });
}

void check_run_folder(const std::string& dir, bool resume, bool overwrite) {
  if (resume && overwrite)
    throw UsageError("--resume continues the run in --out, --overwrite replaces it: give one");
  if (dir.empty()) {
    if (resume) throw UsageError("--resume needs the run's folder: --out DIR");
    return;
  }
  if (fs::exists(dir) && !fs::is_directory(dir))
    throw UsageError("--out " + dir + " is a file, not a folder");
  const bool has_last = fs::exists(fs::path(dir) / "last.safetensors");
  if (resume) {
    if (!fs::exists(dir))
      throw UsageError("--resume: " + dir +
                       " holds no last.safetensors (the folder does not exist); start the run "
                       "without --resume");
    if (!has_last)
      throw UsageError("--resume: " + dir +
                       " holds no last.safetensors: its run stopped before its first checkpoint "
                       "and there is nothing to continue; start it again with --overwrite");
    return;
  }
  if (!fs::exists(dir) || fs::is_empty(dir)) return;
  const RunManifest m = read_run_manifest(dir);
  const std::vector<std::string> foreign = foreign_entries(dir, m);
  if (!m.exists)
    throw UsageError("--out " + dir + " is not empty and holds no mixlab run (no " + kManifestName +
                     "): " + list_names(foreign) +
                     "; nothing there is touched. Choose an empty or new folder");
  if (!overwrite)
    throw UsageError("--out " + dir + " already holds a run; " +
                     (has_last ? std::string("continue it with --resume, ")
                               : std::string("it stopped before its first checkpoint; ")) +
                     "replace it with --overwrite, or choose another --out");
  if (!foreign.empty())
    throw UsageError("--overwrite: " + dir +
                     " holds what its run did not write: " + list_names(foreign) +
                     "; refusing to replace the run there (move them out, or choose another "
                     "--out)");
}

void empty_run_folder(const std::string& dir) {
  if (dir.empty() || !fs::exists(dir)) return;
  const RunManifest m = read_run_manifest(dir);
  for (const auto& name : m.files) {
    const fs::path f = fs::path(dir) / name;
    if (fs::is_regular_file(fs::symlink_status(f))) fs::remove(f);
  }
  remove_stale_temporary_files(dir);
}

std::string config_section(const CLI::App& cmd) {
  const CLI::App* parent = cmd.get_parent();
  if (parent && !parent->get_name().empty() && parent->get_parent())
    return parent->get_name() + "." + cmd.get_name();
  return cmd.get_name();
}

namespace {

// At most 60 characters of a line, bytes other than printable ASCII shown as '?'.
std::string printable(const std::string& line) {
  std::string out;
  for (char c : line.substr(0, 60)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  return line.size() > 60 ? out + "..." : out;
}

const CLI::App* find_subcommand(const CLI::App& app, const std::string& name) {
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; }))
    if (sub->get_name() == name) return sub;
  return nullptr;
}

}  // namespace

void check_config_file(const CLI::App& root, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return;  // CLI11 reports a missing file
  const CLI::App* section = nullptr;
  std::string section_name;
  std::vector<std::string> seen;
  int line_number = 0;
  auto where = [&](const std::string& what) {
    return UsageError(path + ":" + std::to_string(line_number) + ": " + what);
  };
  for (std::string raw; std::getline(in, raw);) {
    ++line_number;
    const std::string line = trim(raw);
    if (line.empty() || line[0] == '#' || line[0] == ';') continue;
    if (line.front() == '[') {
      if (line.size() < 3 || line.back() != ']')
        throw where("unparsable section line '" + line + "'; expected [command.subcommand]");
      section_name = line.substr(1, line.size() - 2);
      const size_t dot = section_name.find('.');
      const CLI::App* command = find_subcommand(root, section_name.substr(0, dot));
      section = command && dot != std::string::npos
                    ? find_subcommand(*command, section_name.substr(dot + 1))
                    : command;
      if (section == nullptr)
        throw where("[" + section_name + "] names no mixlab command (e.g. [classify.train])");
      seen.clear();
      continue;
    }
    const size_t eq = line.find('=');
    if (eq == std::string::npos || eq == 0)
      throw where("unparsable line '" + printable(line) + "'; expected key=value");
    const std::string key = trim(line.substr(0, eq));
    if (section == nullptr)
      throw where("key '" + key + "' before any [section]; settings go under [command.subcommand]");
    const CLI::Option* option = section->get_option_no_throw("--" + key);
    if (option == nullptr || !option->get_configurable())
      throw where(
          "unknown key '" + key + "' in [" + section_name + "]" +
          (option ? " (it cannot be set in a config file; give --" + key + " on the command line)"
                  : std::string(" (see `mixlab ") + section->get_parent()->get_name() + " " +
                        section->get_name() + " --help`)"));
    if (std::find(seen.begin(), seen.end(), key) != seen.end())
      throw where("duplicate key '" + key + "' in [" + section_name + "]");
    seen.push_back(key);
  }
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
  if (has_config && fs::is_regular_file(config)) check_config_file(root, config);
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
  // A run of the other command: say so, rather than report its settings as contradictions.
  const RunManifest manifest = fs::is_directory(out) ? read_run_manifest(out) : RunManifest();
  const std::string stored = (fs::path(out) / "config.ini").string();
  std::string stored_section = manifest.command;
  if (fs::is_regular_file(stored)) {
    const std::vector<std::string> sections = ini_sections(read_text(stored));
    if (!sections.empty()) stored_section = sections.front();
  }
  if (!stored_section.empty() && stored_section != section) {
    std::string other = stored_section;
    std::replace(other.begin(), other.end(), '.', ' ');
    throw UsageError("--resume: " + out + " holds a `" + other + "` run, not a `" + command + " " +
                     sub + "` one; continue it with `mixlab " + other + " --resume --out " + out +
                     "`");
  }
  if (fs::is_regular_file(stored)) {
    check_config_file(root, stored);
    args.insert(args.begin(), {"--config", stored});
  }
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
  // Outputs never alias inputs: data that is one of the files the folder's run writes would be
  // removed by --overwrite or replaced by the run.
  std::error_code ec;
  if (!common.out.empty() && !common.data.empty() && fs::is_directory(common.out, ec) &&
      fs::exists(common.data, ec)) {
    for (const auto& name : read_run_manifest(common.out).files) {
      const fs::path written = fs::path(common.out) / name;
      if (fs::exists(written, ec) && fs::equivalent(written, common.data, ec))
        throw UsageError("--data " + common.data + " is " + written.string() +
                         ", a file the run in --out writes; the run would remove or replace it. "
                         "Move the data out of the run folder");
    }
  }
  if (!train.trainer.resume) return;
  check_resume_options(cmd, common.out);
  const std::string last = Trainer::last_checkpoint(common.out);
  const CheckpointInfo info = read_checkpoint_info(last);
  const bool steps_done = train.steps > 0 && info.step >= train.steps;
  const bool epochs_done = info.epoch >= train.trainer.epochs;
  if (info.step >= 0 && (steps_done || epochs_done))
    throw UsageError("--resume: the run in " + common.out + " is complete at step " +
                     std::to_string(info.step) + " (" +
                     (steps_done ? "--steps " + std::to_string(train.steps)
                                 : "--epochs " + std::to_string(train.trainer.epochs)) +
                     "); raise --steps or --epochs to train it further");
}

namespace {

// A resumed run whose schedule length changed: the length it had, up to the step it stopped at,
// joins the history (train/optim/schedule.h's rule), in train and in cmd's option.
void extend_schedule_history(CLI::App& cmd, TrainFlags& train, const CheckpointInfo& stored) {
  auto count = [&](const char* key) -> int64_t {
    auto it = stored.extra.find(key);
    if (it == stored.extra.end()) return -1;
    try {
      return std::stoll(it->second);
    } catch (const std::exception&) {
      return -1;
    }
  };
  const int64_t per_epoch = count("steps_per_epoch"), total = count("schedule_total"),
                warmup = count("schedule_warmup");
  if (per_epoch < 0 || total < 0 || warmup < 0 || stored.step < 0) return;  // an older run
  const TrainerOptions now = trainer_options(train, CommonFlags());
  const ScheduleLength length = schedule_length(now.max_steps, now.epochs, per_epoch, now.warmup);
  if (length.total_steps == total) return;
  // A cosine that ran to its end stands at its minimum rate: the rule continues from there.
  if (now.schedule == ScheduleKind::Cosine && stored.step >= total)
    std::cerr << "warning: the run's cosine schedule ended at step " << stored.step
              << " at its minimum rate " << now.min_lr
              << "; a longer run continues from that rate (docs/runs.md), so these steps barely "
                 "train. To train longer at a higher rate, train a new run with the longer "
                 "--steps or --epochs\n";
  ScheduleSegment segment;
  segment.until_step = stored.step;
  segment.total_steps = total;
  segment.warmup_steps = warmup;
  // Lengths recorded after this checkpoint belong to a continuation that was discarded (the run
  // resumes from an earlier checkpoint again): the schedule up to here did not see them.
  std::vector<std::string> history;
  for (const auto& item : train.schedule_history)
    if (!item.empty() && parse_schedule_segment(item).until_step < stored.step)
      history.push_back(item);
  history.push_back(to_string(segment));
  train.schedule_history = history;
  CLI::Option* option = cmd.get_option("--schedule-history");
  option->clear();
  for (const auto& item : history) option->add_result(item);
}

}  // namespace

void resume_schedule(CLI::App& cmd, const CommonFlags& common, TrainFlags& train) {
  if (!train.trainer.resume) return;
  extend_schedule_history(cmd, train, read_checkpoint_info(Trainer::last_checkpoint(common.out)));
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
  if (!common.out.empty()) {
    if (train.overwrite) empty_run_folder(common.out);
    start_run_manifest(common.out, config_section(cmd), train.trainer.resume);
  }
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
      " --resume --out " + dir + "\n[" + section + "]\n" +
      with_absolute_data_path(cmd.config_to_str(true, true));
  write_file_atomically(dir + "/config.ini", std::string_view(text));
  write_file_atomically(dir + "/model.json", std::string_view(config.to_json().dump() + "\n"));
}

}  // namespace mixlab::app
