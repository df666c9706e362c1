#include "core/float_env.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#define MIXLAB_HAVE_MXCSR 1
#endif

namespace mixlab {
namespace {

std::atomic<bool>& setting() {
  static std::atomic<bool> on{true};
  return on;
}

#ifdef MIXLAB_HAVE_MXCSR
constexpr unsigned kFlushToZero = 0x8000;       // MXCSR.FTZ: subnormal results become 0
constexpr unsigned kDenormalsAreZero = 0x0040;  // MXCSR.DAZ: subnormal inputs read as 0
constexpr unsigned kFlushBits = kFlushToZero | kDenormalsAreZero;
#endif

}  // namespace

bool flush_denormals() { return setting().load(std::memory_order_relaxed); }
void set_flush_denormals(bool on) { setting().store(on); }

ScopedFlushDenormals::ScopedFlushDenormals() {
#ifdef MIXLAB_HAVE_MXCSR
  if (!flush_denormals()) return;
  saved_ = _mm_getcsr();
  if ((saved_ & kFlushBits) != kFlushBits) {
    _mm_setcsr(saved_ | kFlushBits);
    changed_ = true;
  }
#endif
}

ScopedFlushDenormals::~ScopedFlushDenormals() {
#ifdef MIXLAB_HAVE_MXCSR
  if (changed_) _mm_setcsr(saved_);
#endif
}

}  // namespace mixlab
