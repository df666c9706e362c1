#include "backends/kernel_products.h"

#include <chrono>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace mixlab::kernel_products {
namespace {

std::atomic<uint64_t> product_total{0}, all_total{0};

}  // namespace

void set_counting(bool on) { counting_flag.store(on, std::memory_order_relaxed); }

uint64_t now() {
#if defined(__x86_64__)
  return __rdtsc();
#else
  return static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
#endif
}

uint64_t& pending_product_cycles() {
  thread_local uint64_t cycles = 0;
  return cycles;
}

ItemsSpan::~ItemsSpan() {
  if (!start_) return;
  product_total.fetch_add(pending_product_cycles(), std::memory_order_relaxed);
  all_total.fetch_add(now() - start_, std::memory_order_relaxed);
  pending_product_cycles() = 0;
}

Totals take() {
  return {product_total.exchange(0, std::memory_order_relaxed),
          all_total.exchange(0, std::memory_order_relaxed)};
}

}  // namespace mixlab::kernel_products
