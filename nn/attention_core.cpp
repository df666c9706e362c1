#include "nn/attention_core.h"

#include <atomic>
#include <cstdlib>
#include <string>

#include "core/error.h"
#include "nn/mixing_capture.h"
#include "core/settings.h"

namespace mixlab {

namespace {

// -1: not chosen yet (MIXLAB_ATTENTION_CORE is read at first use); else an AttentionCore.
std::atomic<int> chosen{-1};

}  // namespace

const char* attention_core_name(AttentionCore core) {
  return core == AttentionCore::Math ? "math" : "fused";
}

AttentionCore parse_attention_core(const char* text, const char* what) {
  const std::string name = text ? text : "";
  if (name == "fused") return AttentionCore::Fused;
  if (name == "math") return AttentionCore::Math;
  throw Error(std::string(what) + ": unknown attention core '" + name +
              "' (expected 'fused' or 'math')");
}

AttentionCore attention_core() {
  int core = chosen.load(std::memory_order_relaxed);
  if (core < 0) {
    const char* env = setting(Setting::AttentionCore);
    const AttentionCore from_env =
        env ? parse_attention_core(env, "MIXLAB_ATTENTION_CORE") : AttentionCore::Fused;
    int expected = -1;  // a set_attention_core() that raced this read wins
    chosen.compare_exchange_strong(expected, static_cast<int>(from_env));
    core = chosen.load(std::memory_order_relaxed);
  }
  return static_cast<AttentionCore>(core);
}

void set_attention_core(AttentionCore core) {
  chosen.store(static_cast<int>(core), std::memory_order_relaxed);
}

bool math_attention() { return mixing_capture_active() || attention_core() == AttentionCore::Math; }

}  // namespace mixlab
