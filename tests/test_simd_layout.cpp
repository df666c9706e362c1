// The fast CPU backend's vector-register code lives in backends/cpu/simd/: every other file
// calls functions that exist in every build (simd/float_rows.h and its neighbours) instead of
// branching on the build's instruction set itself.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace {

// "file:line" of each preprocessor condition on the instruction set in `path`.
std::vector<std::string> isa_conditions(const std::filesystem::path& path,
                                        const std::string& name) {
  std::ifstream in(path);
  std::vector<std::string> found;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    const size_t start = line.find_first_not_of(" \t");
    if (start == std::string::npos || line.compare(start, 3, "#if") != 0) continue;
    for (const char* macro : {"MIXLAB_HAS_LANES", "__AVX512", "__AVX2__", "__FMA__"})
      if (line.find(macro) != std::string::npos) {
        found.push_back(name + ":" + std::to_string(number));
        break;
      }
  }
  return found;
}

}  // namespace

TEST_CASE("simd layout: no file of the backends outside cpu/simd/ branches on AVX") {
  namespace fs = std::filesystem;
  const fs::path backends = fs::path(MIXLAB_SOURCE_DIR) / "backends";
  const fs::path simd = backends / "cpu" / "simd";
  REQUIRE(fs::is_directory(simd));
  std::vector<std::string> outside;
  for (const auto& entry : fs::recursive_directory_iterator(backends)) {
    if (!entry.is_regular_file()) continue;
    const fs::path& path = entry.path();
    if (path.parent_path() == simd) continue;
    const std::string name = fs::relative(path, backends).string();
    for (const std::string& at : isa_conditions(path, name)) outside.push_back(at);
  }
  std::string list;
  for (const std::string& at : outside) list += " " + at;
  INFO("branches on the instruction set outside backends/cpu/simd/:", list);
  CHECK(outside.empty());
}
