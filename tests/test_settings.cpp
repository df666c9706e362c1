// The settings (core/settings.h): one table of every environment variable mixlab reads,
// documented in docs/design.md, and read nowhere else.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "core/settings.h"

using namespace mixlab;

namespace {

std::string file_text(const std::filesystem::path& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace

TEST_CASE("settings: docs/design.md lists every variable core/settings.h declares") {
  const std::string doc = file_text(std::filesystem::path(MIXLAB_SOURCE_DIR) / "docs/design.md");
  REQUIRE_FALSE(doc.empty());
  for (const SettingInfo& info : setting_table()) {
    INFO(info.name);
    CHECK(doc.find(std::string("`") + info.name + "`") != std::string::npos);
    CHECK(std::string(setting_name(info.setting)) == info.name);
  }
}

TEST_CASE("settings: only core/settings.cpp reads the environment") {
  namespace fs = std::filesystem;
  const fs::path root = MIXLAB_SOURCE_DIR;
  const std::string reader = std::string("get") + "env";  // this file must not match itself
  std::vector<std::string> readers;
  for (const char* folder : {"core", "backends", "io", "autograd", "nn", "train", "lab", "apps",
                             "tests", "fuzz", "bench", "examples"}) {
    if (!fs::is_directory(root / folder)) continue;
    for (const auto& entry : fs::recursive_directory_iterator(root / folder)) {
      const std::string ext = entry.path().extension().string();
      if (ext != ".cpp" && ext != ".h" && ext != ".cu" && ext != ".cuh") continue;
      if (file_text(entry.path()).find(reader) != std::string::npos)
        readers.push_back(fs::relative(entry.path(), root).string());
    }
  }
  CHECK(readers == std::vector<std::string>{"core/settings.cpp"});
}

TEST_CASE("settings: an override replaces the value read, and unsets it with nullptr") {
  const char* before = setting(Setting::FuzzWriteSeeds);
  const std::string saved = before ? before : "";
  override_setting(Setting::FuzzWriteSeeds, "/some/folder");
  CHECK(std::string(setting(Setting::FuzzWriteSeeds)) == "/some/folder");
  CHECK_FALSE(setting_is_one(Setting::FuzzWriteSeeds));
  override_setting(Setting::FuzzWriteSeeds, "1");
  CHECK(setting_is_one(Setting::FuzzWriteSeeds));
  override_setting(Setting::FuzzWriteSeeds, nullptr);
  CHECK(setting(Setting::FuzzWriteSeeds) == nullptr);
  override_setting(Setting::FuzzWriteSeeds, before ? saved.c_str() : nullptr);
}
