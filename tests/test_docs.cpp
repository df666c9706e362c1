// The documents the code cites are in the repository: every section reference ("mixers.md §5",
// or a bare section sign and number, which means mixers.md) in the source tree names a numbered
// heading ("## 5. ...") of docs/mixers.md (or of the docs/*.md file it names), every
// "docs/<name>.md" a source file mentions exists, and nothing points outside the repository at
// the workspace's shared folder. Failures name file:line.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
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
