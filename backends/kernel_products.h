// The time fused kernels spend in their own matrix products, for MIXLAB_DEBUG's table
// (backends/tracing_backend.cpp).
//
// Why: a fused kernel does its products among other work. The attention core forms q kᵀ, P v
// and the backward's four products in registers between the softmax, its recomputation and the
// copies; unfused, those products were gemm calls of their own and the table counted them as
// products. The table times kernels, not the lines inside them, so without this it reads the
// whole core as "not products", and a kernel writer cannot see what the core's overhead is.
//
// How: while the tracer counts, each worker of a fused kernel adds up the clock cycles of its
// chunk of items (an ItemsSpan in the kernel) and of the product calls inside it (a ProductSpan
// in the product routines themselves: cpu/gemm_rows.h, cpu/register_sums.h's
// weighted_sum_rows, the attention core's rows_against_keys); after the call the tracer takes
// the two totals and splits the call's time by their ratio. A product routine called outside
// an ItemsSpan (fft2_real's) counts nothing: the next ItemsSpan starts from zero. The clock is
// the time-stamp counter (rdtsc) on x86-64, a few cycles a read; elsewhere steady_clock.
// Counting is off unless MIXLAB_DEBUG is set; off, a span costs one relaxed load and a branch.
//
//   parallel_for(items, 1, [&](int64_t begin, int64_t end) {
//     kernel_products::ItemsSpan counted;   // this worker's chunk
//     for (...) {
//       gemm_rows(...);                     // counted as products
//       softmax(...);                       // counted as the rest
//     }
//   });
#pragma once
#include <atomic>
#include <cstdint>

namespace mixlab::kernel_products {

// Whether fused kernels count their products' cycles: set by the tracer before the first kernel.
void set_counting(bool on);
inline std::atomic<bool> counting_flag{false};
inline bool counting() { return counting_flag.load(std::memory_order_relaxed); }

// The cycle counter.
uint64_t now();

// Cycles of product calls on this thread since its current ItemsSpan began.
uint64_t& pending_product_cycles();

// A worker's chunk of a fused kernel's items: at its end, its cycles and its product calls'
// cycles are added to the totals the tracer takes.
class ItemsSpan {
 public:
  ItemsSpan() : start_(counting() ? now() : 0) { pending_product_cycles() = 0; }
  ~ItemsSpan();
  ItemsSpan(const ItemsSpan&) = delete;
  ItemsSpan& operator=(const ItemsSpan&) = delete;

 private:
  uint64_t start_;
};

// A product call inside an ItemsSpan: its cycles count as products.
class ProductSpan {
 public:
  ProductSpan() : start_(counting() ? now() : 0) {}
  ~ProductSpan() {
    if (start_) pending_product_cycles() += now() - start_;
  }
  ProductSpan(const ProductSpan&) = delete;
  ProductSpan& operator=(const ProductSpan&) = delete;

 private:
  uint64_t start_;
};

// The cycles added since the last take (products, and the items' in all), reset to 0.
struct Totals {
  uint64_t products = 0, all = 0;
};
Totals take();

}  // namespace mixlab::kernel_products
