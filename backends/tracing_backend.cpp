#include "backends/tracing_backend.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace mixlab {

int debug_level() {
  static const int level = [] {
    const char* env = std::getenv("MIXLAB_DEBUG");
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

std::string shape_of(const View& v) { return join_dims(v.shape, v.ndim); }

class TracingBackend final : public Backend {
 public:
  TracingBackend(Backend& inner, int level) : inner_(inner), level_(level) {}
  ~TracingBackend() override { report(); }

  const char* name() const override { return inner_.name(); }
  DeviceType device_type() const override { return inner_.device_type(); }
  bool supports(DType t) const override { return inner_.supports(t); }

  // Memory traffic is not traced: it is not a kernel.
  void* allocate(size_t bytes) override { return inner_.allocate(bytes); }
  void deallocate(void* p, size_t bytes) override { inner_.deallocate(p, bytes); }
  void copy_from_host(void* d, const void* s, size_t n) override { inner_.copy_from_host(d, s, n); }
  void copy_to_host(void* d, const void* s, size_t n) override { inner_.copy_to_host(d, s, n); }
  void synchronize() override { inner_.synchronize(); }

  void copy(const View& s, const View& d) override {
    run(
        "copy", [&] { return shape_of(d); }, [&] { inner_.copy(s, d); });
  }
  void fill(const View& d, double v) override {
    run(
        "fill", [&] { return shape_of(d); }, [&] { inner_.fill(d, v); });
  }
  void unary(UnaryOp op, const View& x, const View& y, double a) override {
    run(
        "unary", [&] { return shape_of(x); }, [&] { inner_.unary(op, x, y, a); });
  }
  void binary(BinaryOp op, const View& a, const View& b, const View& o) override {
    run(
        "binary", [&] { return shape_of(o); }, [&] { inner_.binary(op, a, b, o); });
  }
  void where(const View& c, const View& a, const View& b, const View& o) override {
    run(
        "where", [&] { return shape_of(o); }, [&] { inner_.where(c, a, b, o); });
  }
  void reduce(ReduceOp op, const View& x, int64_t outer, int64_t n, int64_t inner,
              const View& o) override {
    run(
        "reduce", [&] { return dims(outer, n, inner); },
        [&] { inner_.reduce(op, x, outer, n, inner, o); });
  }
  void logcumsumexp(const View& x, int64_t outer, int64_t n, int64_t inner,
                    const View& y) override {
    run(
        "logcumsumexp", [&] { return dims(outer, n, inner); },
        [&] { inner_.logcumsumexp(x, outer, n, inner, y); });
  }
  void logcumsumexp_backward(const View& x, const View& y, const View& dy, int64_t outer, int64_t n,
                             int64_t inner, const View& dx) override {
    run(
        "logcumsumexp_backward", [&] { return dims(outer, n, inner); },
        [&] { inner_.logcumsumexp_backward(x, y, dy, outer, n, inner, dx); });
  }
  void gemm(const GemmArgs& g) override {
    std::string what = std::to_string(g.batch);
    what += "x[";
    what += std::to_string(g.m) + "x" + std::to_string(g.k);
    what += "]@[";
    what += std::to_string(g.k) + "x" + std::to_string(g.n);
    what += "]";
    run(
        "gemm", [&] { return what; }, [&] { inner_.gemm(g); });
  }
  void softmax(const View& x, const View& y, int64_t rows, int64_t cols, bool log) override {
    run(
        "softmax", [&] { return dims(rows, cols); },
        [&] { inner_.softmax(x, y, rows, cols, log); });
  }
  void softmax_backward(const View& y, const View& dy, const View& dx, int64_t rows, int64_t cols,
                        bool log) override {
    run(
        "softmax_backward", [&] { return dims(rows, cols); },
        [&] { inner_.softmax_backward(y, dy, dx, rows, cols, log); });
  }
  void layer_norm(const View& x, const View& g, const View& b, const View& y, const View& m,
                  const View& r, int64_t rows, int64_t cols, double eps) override {
    run(
        "layer_norm", [&] { return dims(rows, cols); },
        [&] { inner_.layer_norm(x, g, b, y, m, r, rows, cols, eps); });
  }
  void layer_norm_backward(const View& dy, const View& x, const View& m, const View& r,
                           const View& g, const View& dx, const View& dg, const View& db,
                           int64_t rows, int64_t cols) override {
    run(
        "layer_norm_backward", [&] { return dims(rows, cols); },
        [&] { inner_.layer_norm_backward(dy, x, m, r, g, dx, dg, db, rows, cols); });
  }
  void cross_entropy(const View& z, const View& t, const View& l, const View& lse, int64_t rows,
                     int64_t cols, int64_t ignore, double smoothing) override {
    run(
        "cross_entropy", [&] { return dims(rows, cols); },
        [&] { inner_.cross_entropy(z, t, l, lse, rows, cols, ignore, smoothing); });
  }
  void cross_entropy_backward(const View& z, const View& t, const View& lse, const View& s,
                              const View& dz, int64_t rows, int64_t cols, int64_t ignore,
                              double smoothing) override {
    run(
        "cross_entropy_backward", [&] { return dims(rows, cols); },
        [&] { inner_.cross_entropy_backward(z, t, lse, s, dz, rows, cols, ignore, smoothing); });
  }
  void gather_rows(const View& t, const View& i, const View& o, int64_t count,
                   int64_t dim) override {
    run(
        "gather_rows", [&] { return dims(count, dim); },
        [&] { inner_.gather_rows(t, i, o, count, dim); });
  }
  void scatter_add_rows(const View& g, const View& i, const View& d, int64_t count,
                        int64_t dim) override {
    run(
        "scatter_add_rows", [&] { return dims(count, dim); },
        [&] { inner_.scatter_add_rows(g, i, d, count, dim); });
  }
  void dropout_mask(const View& m, double p, uint64_t seed) override {
    run(
        "dropout_mask", [&] { return shape_of(m); }, [&] { inner_.dropout_mask(m, p, seed); });
  }
  void fft(const View& x, const View& y, int64_t outer, int64_t n, int64_t inner,
           bool inverse) override {
    run(
        "fft", [&] { return dims(outer, n, inner); },
        [&] { inner_.fft(x, y, outer, n, inner, inverse); });
  }
  void fft2_real(const View& x, const View& l, const View& y, int64_t batch, int64_t n,
                 int64_t d) override {
    run(
        "fft2_real", [&] { return dims(batch, n, d); },
        [&] { inner_.fft2_real(x, l, y, batch, n, d); });
  }
  void adam_update(const View& p, const View& g, const View& m, const View& v,
                   const AdamArgs& a) override {
    run(
        "adam_update", [&] { return shape_of(p); }, [&] { inner_.adam_update(p, g, m, v, a); });
  }
  void sgd_update(const View& p, const View& g, const View& b, const SgdArgs& a) override {
    run(
        "sgd_update", [&] { return shape_of(p); }, [&] { inner_.sgd_update(p, g, b, a); });
  }

 private:
  struct Stats {
    int64_t calls = 0;
    double seconds = 0;
  };

  static std::string dims(int64_t a, int64_t b) {
    int64_t d[2] = {a, b};
    return join_dims(d, 2);
  }
  static std::string dims(int64_t a, int64_t b, int64_t c) {
    int64_t d[3] = {a, b, c};
    return join_dims(d, 3);
  }

  // `label` (the shapes) is only built when it is printed, at level 2.
  template <typename L, typename F>
  void run(const char* kernel, const L& label, const F& call) {
    auto t0 = std::chrono::steady_clock::now();
    call();
    inner_.synchronize();
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::lock_guard<std::mutex> lock(mutex_);
    Stats& st = stats_[kernel];
    ++st.calls;
    st.seconds += s;
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

}  // namespace mixlab
