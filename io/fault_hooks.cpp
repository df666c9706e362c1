#include "io/fault_hooks.h"

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string_view>
#include <thread>

#include "core/settings.h"

namespace mixlab::fault_hooks {

namespace {

bool names(std::string_view pattern, const std::string& path) {
  return pattern == "*" || pattern == std::filesystem::path(path).filename().string();
}

}  // namespace

int64_t enospc_limit(const std::string& path) {
  const char* name = setting(Setting::FaultEnospc);
  if (name == nullptr || !names(name, path)) return -1;
  return 4096;
}

void pause_before_rename(const std::string& path) {
  const char* spec = setting(Setting::FaultPauseBeforeRename);
  if (spec == nullptr) return;
  const std::string_view text(spec);
  const size_t colon = text.rfind(':');
  if (colon == std::string_view::npos || !names(text.substr(0, colon), path)) return;
  const long milliseconds = std::strtol(spec + colon + 1, nullptr, 10);
  if (milliseconds > 0) std::this_thread::sleep_for(std::chrono::milliseconds(milliseconds));
}

}  // namespace mixlab::fault_hooks
