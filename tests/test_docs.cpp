// The documents the code cites are in the repository: every section reference ("mixers.md §5",
// or a bare section sign and number, which means mixers.md) in the source tree names a numbered
// heading ("## 5. ...") of docs/mixers.md (or of the docs/*.md file it names), every
// "docs/<name>.md" a source file mentions exists, and nothing points outside the repository at
// the workspace's shared folder; every file path the README and docs/*.md name exists; and no
// file of the repository narrates its own making (the words of a work log, issue numbers,
// commit hashes, dates, before -> after timings): the repository describes the project as it is,
// and its history is `git log`'s. Failures name file:line.
#include <doctest/doctest.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/temp_dir.h"

namespace fs = std::filesystem;

namespace {

// The section sign in UTF-8, spelled with escapes so this file holds no reference itself.
const std::string kSection = "\xc2\xa7";

const fs::path kRoot = MIXLAB_SOURCE_DIR;

// The source files a reader (or a fresh clone) sees: code, build files, scripts and documents,
// outside build folders and hidden folders.
std::vector<fs::path> source_files() {
  static const std::set<std::string> kExtensions{".cpp", ".h",  ".cu", ".cuh", ".cmake",
                                                 ".txt", ".sh", ".py", ".md",  ".in"};
  std::vector<fs::path> files;
  for (auto it = fs::recursive_directory_iterator(kRoot); it != fs::recursive_directory_iterator();
       ++it) {
    std::string name = it->path().filename().string();
    if (it->is_directory() && (name.starts_with(".") || name.starts_with("build"))) {
      it.disable_recursion_pending();
      continue;
    }
    if (it->is_regular_file() && kExtensions.count(it->path().extension().string()))
      files.push_back(it->path());
  }
  return files;
}

// The numbers of a document's "## N. title" headings.
std::set<int> numbered_headings(const fs::path& doc) {
  std::set<int> sections;
  std::ifstream in(doc);
  std::string line;
  static const std::regex heading(R"(^#+\s+(\d+)\.\s)");
  std::smatch m;
  while (std::getline(in, line))
    if (std::regex_search(line, m, heading)) sections.insert(std::stoi(m[1]));
  return sections;
}

struct Reference {
  std::string where;  // file:line
  std::string document;
  int section;
};

// Every section reference: "NAME.md <sign>N" names NAME.md, a bare "<sign>N" names mixers.md.
std::vector<Reference> section_references(const fs::path& file) {
  std::vector<Reference> refs;
  const std::regex pattern("(?:([A-Za-z_-]+)\\.md\\s*)?" + kSection + "\\s?([0-9]+)");
  std::ifstream in(file);
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    for (std::sregex_iterator it(line.begin(), line.end(), pattern), end; it != end; ++it) {
      std::string doc = (*it)[1].matched ? (*it)[1].str() + ".md" : "mixers.md";
      refs.push_back({fs::relative(file, kRoot).string() + ":" + std::to_string(number), doc,
                      std::stoi((*it)[2].str())});
    }
  }
  return refs;
}

// Every file of the repository: git's tracked files and the untracked ones it does not ignore
// when the source tree is a checkout, else every file outside build and hidden folders.
std::vector<fs::path> repository_files() {
  std::vector<fs::path> files;
  const std::string command = "git -C '" + kRoot.string() +
                              "' ls-files -z --cached --others --exclude-standard 2>/dev/null";
  if (FILE* pipe = popen(command.c_str(), "r")) {
    std::string name;
    for (int c; (c = std::fgetc(pipe)) != EOF;) {
      if (c != '\0') {
        name.push_back(static_cast<char>(c));
      } else {
        if (fs::is_regular_file(kRoot / name)) files.push_back(kRoot / name);
        name.clear();
      }
    }
    if (pclose(pipe) == 0 && !files.empty()) return files;
  }
  files.clear();
  for (auto it = fs::recursive_directory_iterator(kRoot); it != fs::recursive_directory_iterator();
       ++it) {
    std::string name = it->path().filename().string();
    if (it->is_directory() && (name.starts_with(".") || name.starts_with("build"))) {
      it.disable_recursion_pending();
      continue;
    }
    if (it->is_regular_file()) files.push_back(it->path());
  }
  return files;
}

// A file's text, or nothing for a binary file (one holding a NUL byte).
std::optional<std::string> text_of(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  std::string s = text.str();
  if (s.find('\0') != std::string::npos) return std::nullopt;
  return s;
}

// The part of a line that is prose: a Markdown line whole, in code the comment after `//` (C++,
// CUDA) or `#` (scripts, CMake, Python); empty for a line of code without a comment.
std::string prose_of(const fs::path& file, const std::string& line) {
  const std::string ext = file.extension().string();
  const std::string name = file.filename().string();
  if (ext == ".md" || (ext == ".txt" && name != "CMakeLists.txt")) return line;
  size_t at = std::string::npos;
  if (ext == ".cpp" || ext == ".h" || ext == ".cu" || ext == ".cuh" || ext == ".def" ||
      ext == ".c" || ext == ".in")
    at = line.find("//");
  else if (ext == ".sh" || ext == ".py" || ext == ".cmake" || name == "CMakeLists.txt" ||
           ext == ".supp" || ext == ".dict" || name.starts_with("."))
    at = line.find('#');
  return at == std::string::npos ? std::string() : line.substr(at);
}

// A word of 7 to 12 (or 40) hexadecimal digits with a letter and a digit among them, not the
// fraction of a decimal number: how git abbreviates (or spells out) a commit.
bool has_commit_hash(const std::string& prose) {
  auto is_word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  for (size_t i = 0; i < prose.size();) {
    if (!is_word(prose[i])) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < prose.size() && is_word(prose[j])) ++j;
    const std::string word = prose.substr(i, j - i);
    const bool hex = std::all_of(word.begin(), word.end(),
                                 [](char c) { return std::isdigit(c) || (c >= 'a' && c <= 'f'); });
    const bool letter = std::any_of(word.begin(), word.end(), [](char c) { return c >= 'a'; });
    const bool digit =
        std::any_of(word.begin(), word.end(), [](char c) { return std::isdigit(c); });
    const bool fraction = i > 0 && prose[i - 1] == '.';
    if (hex && letter && digit && !fraction &&
        ((word.size() >= 7 && word.size() <= 12) || word.size() == 40))
      return true;
    i = j;
  }
  return false;
}

// What a line says of the project's history, or empty. The words are spelled in pieces so that
// this file does not hold them itself.
std::string history_in(const fs::path& file, const std::string& line) {
  static const std::regex work_log(std::string("sess") + "ion", std::regex::icase);
  static const std::regex issue_number(std::string("\\biss") + "ues?\\s*#?[0-9]",
                                       std::regex::icase);
  static const std::regex date(R"(\b(19|20)[0-9]{2}-[01][0-9]-[0-3][0-9]\b)");
  static const std::regex timing(
      R"([0-9][0-9.,]*\s*(ms|us|µs|ns|s)?\s*(->|→)\s*[0-9][0-9.,]*(-[0-9][0-9.,]*)?\s*(ms|us|µs|ns|s)\b)");
  if (std::regex_search(line, work_log)) return "a work-log word";
  if (std::regex_search(line, issue_number)) return "an issue number";
  const std::string prose = prose_of(file, line);
  if (std::regex_search(prose, date)) return "a date";
  if (std::regex_search(prose, timing)) return "a before -> after timing";
  if (has_commit_hash(prose)) return "a commit hash";
  return {};
}

}  // namespace

TEST_CASE("docs: every section reference in the source tree resolves to a heading") {
  REQUIRE(fs::exists(kRoot / "docs" / "mixers.md"));
  REQUIRE(numbered_headings(kRoot / "docs" / "mixers.md").count(13));
  std::vector<std::string> dangling;
  size_t checked = 0;
  for (const auto& file : source_files()) {
    for (const auto& ref : section_references(file)) {
      ++checked;
      fs::path doc = kRoot / "docs" / ref.document;
      if (!fs::exists(doc) || !numbered_headings(doc).count(ref.section))
        dangling.push_back(ref.where + ": " + ref.document + " " + kSection +
                           std::to_string(ref.section));
    }
  }
  for (const auto& d : dangling) FAIL_CHECK("dangling section reference " << d);
  CHECK(dangling.empty());
  CHECK(checked > 30);  // the scan found the mixers' references (it can fail)
}

TEST_CASE("docs: every docs/*.md the sources cite exists and none points outside the repository") {
  const std::regex cited(R"(docs/([A-Za-z0-9_-]+\.md))");
  const std::string outside = std::string("shared") + "/docs";
  std::vector<std::string> problems;
  for (const auto& file : source_files()) {
    std::ifstream in(file);
    std::string line;
    std::string where_file = fs::relative(file, kRoot).string();
    for (int number = 1; std::getline(in, line); ++number) {
      std::string where = where_file + ":" + std::to_string(number);
      if (line.find("../" + outside) != std::string::npos)
        problems.push_back(where + ": points at ../" + outside + " (outside the repository)");
      for (std::sregex_iterator it(line.begin(), line.end(), cited), end; it != end; ++it)
        if (!fs::exists(kRoot / "docs" / (*it)[1].str()))
          problems.push_back(where + ": cites missing docs/" + (*it)[1].str());
    }
  }
  for (const auto& p : problems) FAIL_CHECK(p);
  CHECK(problems.empty());
}

TEST_CASE("docs: the reference scanner finds what it should (it can fail)") {
  // A temporary file with two references to mixers.md (one dangling) and one to datasets.md.
  mixlab::testing::TempDir dir;
  fs::path file = dir.file("probe.cpp");
  {
    std::ofstream out(file);
    out << "// mixers.md " << kSection << "2 and " << kSection << "99\n"
        << "// datasets.md " << kSection << "1\n";
  }
  auto refs = section_references(file);
  REQUIRE(refs.size() == 3);
  CHECK(refs[0].document == "mixers.md");
  CHECK(refs[0].section == 2);
  CHECK(refs[1].document == "mixers.md");
  CHECK(refs[1].section == 99);
  CHECK(refs[2].document == "datasets.md");
  std::set<int> sections = numbered_headings(kRoot / "docs" / "mixers.md");
  CHECK(sections.count(2));
  CHECK_FALSE(sections.count(99));
}

TEST_CASE("docs: the tutorial's code excerpts are the shipped linear-attention file, verbatim") {
  auto read = [](const fs::path& p) {
    std::ifstream in(p);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  };
  const std::string tutorial = read(kRoot / "docs" / "add-a-mixer.md");
  const std::string source = read(kRoot / "nn" / "mixers" / "linear_attention.cpp");
  REQUIRE(!source.empty());
  int blocks = 0;
  for (size_t open = tutorial.find("```cpp\n"); open != std::string::npos;
       open = tutorial.find("```cpp\n", open + 1)) {
    size_t begin = open + 7, close = tutorial.find("```", begin);
    REQUIRE(close != std::string::npos);
    std::string block = tutorial.substr(begin, close - begin);
    int line = 1 + static_cast<int>(std::count(tutorial.begin(), tutorial.begin() + begin, '\n'));
    INFO("docs/add-a-mixer.md:" << line << " is not in nn/mixers/linear_attention.cpp:\n" << block);
    CHECK(source.find(block) != std::string::npos);
    ++blocks;
  }
  CHECK(blocks >= 6);
}

TEST_CASE("docs: no file of the repository narrates its history (naming file and line)") {
  std::vector<std::string> found;
  size_t scanned = 0;
  for (const auto& file : repository_files()) {
    auto text = text_of(file);
    if (!text) continue;
    ++scanned;
    std::istringstream in(*text);
    std::string line;
    for (int number = 1; std::getline(in, line); ++number) {
      std::string what = history_in(file, line);
      if (!what.empty())
        found.push_back(fs::relative(file, kRoot).string() + ":" + std::to_string(number) + ": " +
                        what + ": " + line.substr(0, 160));
    }
  }
  for (const auto& f : found) FAIL_CHECK(f);
  CHECK(found.empty());
  CHECK(scanned > 300);  // the scan read the tree (it can fail)
}

TEST_CASE("docs: the history scanner finds what it should and spares constants (it can fail)") {
  const fs::path md = "probe.md", cpp = "probe.cpp", sh = "probe.sh";
  const std::string word = std::string("Sess") + "ion";
  CHECK(history_in(md, word + " 12 measured it") == "a work-log word");
  CHECK(history_in(cpp, "int x = 0;  // " + std::string("iss") + "ue 14 asks") ==
        "an issue number");
  CHECK(history_in(md, "measured at 3d565d2 on a Zen 4") == "a commit hash");
  CHECK(history_in(sh, "# built against b1c0d38") == "a commit hash");
  CHECK(history_in(md, "run on 2026-12-05") == "a date");
  const std::string arrow = std::string("-") + ">", right_arrow = std::string("\u2192");
  CHECK(history_in(cpp, "// forward 203 " + arrow + " 145 us per call") ==
        "a before -> after timing");
  CHECK(history_in(cpp, "// 4.87 " + right_arrow + " 3.57 ms a step") ==
        "a before -> after timing");
  // Constants, checksums and prose that only look alike stay clean.
  CHECK(history_in(cpp, "  float t = c * 1.44269504088896341f + 1.061405429f;").empty());
  CHECK(history_in(cpp, "  static const char* kHex = \"0123456789abcdef\";").empty());
  CHECK(history_in(md, "md5 `8d4fb7e6c68d591d4c3dfef9ec88bf0d`, 1 -> 2 threads 1.89x").empty());
  CHECK(history_in(md, "the d=128 translator, 1407147 parameters, batch 128").empty());
  CHECK(history_in(cpp, "uint32_t seed = 0x9e3779b9u;  // the golden ratio").empty());
}

namespace {

// The repository's top-level folders (of its tracked files): where a path a page names starts.
std::set<std::string> top_level_folders() {
  std::set<std::string> folders;
  for (const auto& file : repository_files()) {
    auto rel = fs::relative(file, kRoot);
    if (std::distance(rel.begin(), rel.end()) > 1) folders.insert(rel.begin()->string());
  }
  return folders;
}

// Paths the pages cite in other projects' repositories, which look like this one's.
const std::set<std::string> kOtherProjects{
    "examples/linformer/",  // fairseq's, in mixers.md's list of reference implementations
};

// The file paths a page names that do not exist: every word of path characters with a slash
// that starts at a top-level folder (`nn/mixers/attention.cpp`, `backends/cpu/`), taken from the
// repository's root, and every relative Markdown link, taken from the page's folder.
std::vector<std::string> missing_paths(const fs::path& page, const std::set<std::string>& tops) {
  static const std::regex path_word(R"([A-Za-z0-9_.+-]+(/[A-Za-z0-9_.+-]*)+)");
  static const std::regex link(R"(\]\(([^)#\s]+)(#[^)\s]*)?\))");
  std::vector<std::string> missing;
  std::ifstream in(page);
  std::string line;
  const std::string where_file = fs::relative(page, kRoot).string();
  for (int number = 1; std::getline(in, line); ++number) {
    const std::string where = where_file + ":" + std::to_string(number) + ": ";
    for (std::sregex_iterator it(line.begin(), line.end(), path_word), end; it != end; ++it) {
      const std::string path = it->str();
      const size_t at = static_cast<size_t>(it->position());
      const size_t after = at + path.size();
      if (at > 0 && std::string("/.~$-").find(line[at - 1]) != std::string::npos) continue;
      if (after < line.size() && std::string("*{<").find(line[after]) != std::string::npos)
        continue;  // a pattern (`tests/test_mixers_*.cpp`), not a path
      if (!tops.count(path.substr(0, path.find('/')))) continue;
      // A folder ends with a slash and a file has an extension; anything else ("examples/s")
      // is a word with a slash in it.
      const std::string last = path.substr(path.rfind('/') + 1);
      if (!path.ends_with("/") && last.find('.') == std::string::npos) continue;
      if (kOtherProjects.count(path)) continue;
      if (!fs::exists(kRoot / path)) missing.push_back(where + path);
    }
    for (std::sregex_iterator it(line.begin(), line.end(), link), end; it != end; ++it) {
      const std::string target = (*it)[1].str();
      if (target.find("://") != std::string::npos || target.starts_with("mailto:")) continue;
      if (!fs::exists(page.parent_path() / target)) missing.push_back(where + "link " + target);
    }
  }
  return missing;
}

}  // namespace

TEST_CASE("docs: every file path the README and docs/*.md name exists") {
  const auto tops = top_level_folders();
  REQUIRE(tops.count("docs"));
  REQUIRE(tops.count("nn"));
  std::vector<fs::path> pages{kRoot / "README.md"};
  for (const auto& e : fs::directory_iterator(kRoot / "docs"))
    if (e.path().extension() == ".md") pages.push_back(e.path());
  REQUIRE(pages.size() > 10);
  std::vector<std::string> missing;
  for (const auto& page : pages)
    for (const auto& m : missing_paths(page, tops)) missing.push_back(m);
  for (const auto& m : missing) FAIL_CHECK("names a path that does not exist: " << m);
  CHECK(missing.empty());
}

TEST_CASE("docs: the path scanner finds what it should (it can fail)") {
  mixlab::testing::TempDir dir;
  fs::path page = dir.file("probe.md");
  {
    std::ofstream out(page);
    out << "`nn/mixers/attention.cpp`, `nn/mixers/no_such_mixer.cpp`, `backends/cpu/`,\n"
        << "[a page](no-such-page.md), `build/mixlab`, `~/.local/lib`, https://github.com/a/b\n";
  }
  auto missing = missing_paths(page, top_level_folders());
  REQUIRE(missing.size() == 2);
  CHECK(missing[0].ends_with("nn/mixers/no_such_mixer.cpp"));
  CHECK(missing[1].ends_with("link no-such-page.md"));
}

TEST_CASE("docs: the front door and the measurement pages stay short") {
  // A newcomer reads the README in five minutes; the speed and GPU pages hold the current tables,
  // not their history.
  const std::vector<std::pair<std::string, long>> limits{
      {"README.md", 250}, {"docs/speed.md", 400}, {"docs/gpu.md", 250}};
  for (const auto& limit : limits) {
    const std::string& page = limit.first;  // not a structured binding: INFO captures it
    const long most = limit.second;
    std::ifstream in(kRoot / page);
    REQUIRE(in.good());
    long lines = 0;
    for (std::string line; std::getline(in, line);) ++lines;
    INFO(page << " has " << lines << " lines");
    CHECK(lines <= most);
    CHECK(lines > 20);
  }
}
