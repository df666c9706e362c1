#include "backends/tracing_backend.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "backends/kernel_products.h"
#include "core/settings.h"

namespace mixlab {

int debug_level() {
  static const int level = [] {
    const char* env = setting(Setting::Debug);
    return env ? std::atoi(env) : 0;
  }();
  return level;
}

namespace {

// Built with += (GCC 12 warns falsely on "literal" + std::string temporaries).
std::string join_dims(const int64_t* d, int n) {
  std::string s("[");
  for (int i = 0; i < n; ++i) {
    if (i) s += ',';
    s += std::to_string(d[i]);
  }
  s += ']';
  return s;
}

// The trace labels of backends/kernels.def.
std::string shape_of(const View& v) { return join_dims(v.shape, v.ndim); }
std::string dims(int64_t a, int64_t b) {
  int64_t d[2] = {a, b};
  return join_dims(d, 2);
}
std::string dims(int64_t a, int64_t b, int64_t c) {
  int64_t d[3] = {a, b, c};
  return join_dims(d, 3);
}
std::string dims(int64_t a, int64_t b, int64_t c, int64_t e) {
  int64_t d[4] = {a, b, c, e};
  return join_dims(d, 4);
}
std::string gemm_label(const GemmArgs& g) {
  std::string what = std::to_string(g.batch);
  what += "x[";
  what += std::to_string(g.m) + "x" + std::to_string(g.k);
  what += "]@[";
  what += std::to_string(g.k) + "x" + std::to_string(g.n);
  what += "]";
  return what;
}

std::string epilogue_label(const GemmArgs& g, GemmEpilogue e) {
  const char* what = e == GemmEpilogue::Bias            ? " +bias"
                     : e == GemmEpilogue::BiasGelu      ? " +bias gelu"
                     : e == GemmEpilogue::BiasGeluSlope ? " +bias gelu gelu'"
                     : e == GemmEpilogue::Times         ? " *aux"
                                                        : " +row sums of A";
  return gemm_label(g) + what;
}

class TracingBackend;

// The tracers alive, for reset_kernel_trace().
struct LiveTracers {
  std::mutex mutex;
  std::vector<TracingBackend*> list;
};
LiveTracers& live_tracers() {
  static LiveTracers* tracers = new LiveTracers;  // never destroyed: tracers outlive statics
  return *tracers;
}

class TracingBackend final : public Backend {
 public:
  TracingBackend(Backend& inner, int level) : inner_(inner), level_(level) {
    kernel_products::set_counting(true);  // the fused kernels' products, for the second table
    LiveTracers& live = live_tracers();
    std::lock_guard<std::mutex> lock(live.mutex);
    live.list.push_back(this);
  }
  ~TracingBackend() override {
    report();
    LiveTracers& live = live_tracers();
    std::lock_guard<std::mutex> lock(live.mutex);
    live.list.erase(std::remove(live.list.begin(), live.list.end(), this), live.list.end());
  }

  void reset() {
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.clear();
  }

  const char* name() const override { return inner_.name(); }
  DeviceType device_type() const override { return inner_.device_type(); }
  bool supports(DType t) const override { return inner_.supports(t); }

  // Memory traffic is not traced: it is not a kernel.
  void* allocate(size_t bytes) override { return inner_.allocate(bytes); }
  void deallocate(void* p, size_t bytes) override { inner_.deallocate(p, bytes); }
  void copy_from_host(void* d, const void* s, size_t n) override { inner_.copy_from_host(d, s, n); }
  void copy_to_host(void* d, const void* s, size_t n) override { inner_.copy_to_host(d, s, n); }
  void synchronize() override { inner_.synchronize(); }

  // Every kernel of backends/kernels.def: timed, counted, and at level 2 printed with its label.
#define MIXLAB_KERNEL(name, params, args, label)                  \
  void name params override {                                     \
    run(                                                          \
        #name, [&] { return label; }, [&] { inner_.name args; }); \
  }
#include "backends/kernels.def"
#undef MIXLAB_KERNEL

 private:
  struct Stats {
    int64_t calls = 0;
    double seconds = 0;
    // A fused kernel's time in its own matrix products (kernel_products.h): its calls' times,
    // each split by the ratio of the cycles its workers counted in products to their cycles in
    // all. 0 for the other kernels, and for a path whose products are not timed (linear
    // attention's plain loops for float64): those are left out of the second table.
    double product_seconds = 0;
  };

  // `label` (the shapes) is only built when it is printed, at level 2.
  template <typename L, typename F>
  void run(const char* kernel, const L& label, const F& call) {
    auto t0 = std::chrono::steady_clock::now();
    call();
    inner_.synchronize();
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const kernel_products::Totals cycles = kernel_products::take();
    std::lock_guard<std::mutex> lock(mutex_);
    Stats& st = stats_[kernel];
    ++st.calls;
    st.seconds += s;
    if (cycles.all > 0) st.product_seconds += s * static_cast<double>(cycles.products) / cycles.all;
    if (level_ >= 2)
      std::fprintf(stderr, "[mixlab %s] %-24s %-28s %9.1f us\n", inner_.name(), kernel,
                   label().c_str(), s * 1e6);
  }

  void report() {
    if (stats_.empty()) return;
    std::vector<std::pair<std::string, Stats>> rows(stats_.begin(), stats_.end());
    std::sort(rows.begin(), rows.end(),
              [](const auto& a, const auto& b) { return a.second.seconds > b.second.seconds; });
    double total = 0;
    for (auto& [k, s] : rows) total += s.seconds;
    std::fprintf(stderr, "\n[mixlab %s] kernel time by kernel (MIXLAB_DEBUG)\n", inner_.name());
    std::fprintf(stderr, "%-24s %10s %12s %12s %7s\n", "kernel", "calls", "total (ms)", "mean (us)",
                 "share");
    for (auto& [k, s] : rows)
      std::fprintf(stderr, "%-24s %10lld %12.2f %12.2f %6.1f%%\n", k.c_str(),
                   static_cast<long long>(s.calls), s.seconds * 1e3, s.seconds / s.calls * 1e6,
                   total > 0 ? 100 * s.seconds / total : 0.0);
    // The fused kernels' own products (kernel_products.h), which the table above counts as the
    // kernels': the rest of such a kernel is its overhead over the products it replaces.
    bool any = false;
    for (auto& [k, s] : rows) any = any || s.product_seconds > 0;
    if (!any) return;
    std::fprintf(stderr, "\n[mixlab %s] matrix products inside fused kernels (MIXLAB_DEBUG)\n",
                 inner_.name());
    std::fprintf(stderr, "%-24s %12s %14s %7s %7s\n", "kernel", "total (ms)", "products (ms)",
                 "of it", "share");
    for (auto& [k, s] : rows)
      if (s.product_seconds > 0)
        std::fprintf(stderr, "%-24s %12.2f %14.2f %6.1f%% %6.1f%%\n", k.c_str(), s.seconds * 1e3,
                     s.product_seconds * 1e3,
                     s.seconds > 0 ? 100 * s.product_seconds / s.seconds : 0.0,
                     total > 0 ? 100 * s.product_seconds / total : 0.0);
  }

  Backend& inner_;
  int level_;
  std::mutex mutex_;
  std::map<std::string, Stats> stats_;
};

}  // namespace

std::unique_ptr<Backend> make_tracing_backend(Backend& inner, int level) {
  return std::make_unique<TracingBackend>(inner, level);
}

void reset_kernel_trace() {
  LiveTracers& live = live_tracers();
  std::lock_guard<std::mutex> lock(live.mutex);
  for (TracingBackend* tracer : live.list) tracer->reset();
}

}  // namespace mixlab
