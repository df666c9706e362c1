// The INI/TOML config reader that `mixlab --config FILE` uses (CLI11's ConfigINI, as set up in
// apps/main.cpp): any text is read into items or refused with CLI::ConfigError / ParseError.
#include <sstream>
#include <string>

#include <CLI/CLI.hpp>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  try {
    CLI::ConfigINI reader;
    for (const CLI::ConfigItem& item : reader.from_config(in)) (void)item.fullname();
  } catch (const CLI::ParseError&) {
  }
  return 0;
}
