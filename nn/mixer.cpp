#include "nn/mixer.h"

#include <sstream>

#include "autograd/ops.h"

namespace mixlab {

namespace {
const std::string* find_option(const MixerConfig& c, const std::string& key) {
  auto it = c.options.find(key);
  return it == c.options.end() ? nullptr : &it->second;
}
}  // namespace

int64_t MixerConfig::get_int(const std::string& key, int64_t fallback) const {
  const std::string* v = find_option(*this, key);
  if (!v) return fallback;
  try {
    size_t used = 0;
    int64_t out = std::stoll(*v, &used);
    if (used == v->size()) return out;
  } catch (...) {
  }
  fail(name, ": option ", key, "=", *v, " is not an integer");
}

double MixerConfig::get_double(const std::string& key, double fallback) const {
  const std::string* v = find_option(*this, key);
  if (!v) return fallback;
  try {
    size_t used = 0;
    double out = std::stod(*v, &used);
    if (used == v->size()) return out;
  } catch (...) {
  }
  fail(name, ": option ", key, "=", *v, " is not a number");
}

bool MixerConfig::get_bool(const std::string& key, bool fallback) const {
  const std::string* v = find_option(*this, key);
  if (!v) return fallback;
  if (*v == "1" || *v == "true" || *v == "yes" || *v == "on" || v->empty()) return true;
  if (*v == "0" || *v == "false" || *v == "no" || *v == "off") return false;
  fail(name, ": option ", key, "=", *v, " is not a boolean (true/false)");
}

std::string MixerConfig::get_string(const std::string& key, const std::string& fallback) const {
  const std::string* v = find_option(*this, key);
  return v ? *v : fallback;
}

std::string MixerConfig::str() const {
  std::ostringstream out;
  out << name << "(d=" << dim << ", h=" << heads << ", max_len=" << max_len;
  if (causal) out << ", causal";
  if (cross) out << ", cross";
  for (const auto& [k, v] : options) out << ", " << k << "=" << v;
  out << ")";
  return out.str();
}

void Mixer::check_input(const Tensor& x, const MixerContext& ctx) const {
  check_input_shape(x.shape(), ctx);
}

void Mixer::check_input_shape(const Shape& x, const MixerContext& ctx) const {
  if (x.size() != 3 || x[2] != config_.dim)
    fail(config_.name, ": input ", shape_str(x), " must be [B, N, ", config_.dim, "]");
  if (capabilities().length != LengthSupport::Any && x[1] > config_.max_len)
    fail(config_.name, ": input length ", x[1], " exceeds max_len ℓ = ", config_.max_len,
         " (input ", shape_str(x), "); build the mixer with a larger max_len");
  if (ctx.valid.defined() && ctx.valid.shape() != Shape{x[0], x[1]})
    fail(config_.name, ": valid mask ", shape_str(ctx.valid.shape()), " does not match input ",
         shape_str(x));
  if (ctx.causal != config_.causal)
    fail(config_.name, ": built ", config_.causal ? "causal" : "non-causal", " but called with a ",
         ctx.causal ? "causal" : "non-causal", " context");
  if (config_.cross) {
    check(ctx.memory.defined(), config_.name, ": cross-mixer called without memory");
    check(ctx.memory.dim() == 3 && ctx.memory.size(0) == x[0] && ctx.memory.size(2) == config_.dim,
          config_.name, ": memory ", shape_str(ctx.memory.shape()), " does not fit input ",
          shape_str(x));
  }
}

void Mixer::check_rows(const Tensor& x_rows, const MixerContext& ctx) const {
  check(ctx.rows.defined(), config_.name, ": forward_rows() called without the batch's rows");
  if (x_rows.dim() != 2 || x_rows.size(0) != ctx.rows.count() || x_rows.size(1) != config_.dim)
    fail(config_.name, ": rows ", shape_str(x_rows.shape()), " must be [", ctx.rows.count(), ", ",
         config_.dim, "] (the batch's real tokens)");
  // The padded layout's checks, on the shape the rows stand for.
  check_input_shape({ctx.rows.batch, ctx.rows.length, config_.dim}, ctx);
}

Tensor Mixer::forward_rows(const Tensor& x_rows, const MixerContext& ctx) {
  check_rows(x_rows, ctx);
  return pack_rows(forward(unpack_rows(x_rows, ctx.rows), ctx), ctx.rows);
}

void Mixer::check_step(const Tensor& x_t, const MixerCache& cache) const {
  check(config_.causal || config_.cross, config_.name,
        ": step() (incremental decoding) needs a mixer built causal");
  check(x_t.dim() == 3 && x_t.size(1) == 1 && x_t.size(2) == config_.dim, config_.name,
        ": step() input ", shape_str(x_t.shape()), " must be [B, 1, ", config_.dim, "]");
  check(capabilities().length == LengthSupport::Any || cache.position < config_.max_len,
        config_.name, ": decoding position ", cache.position,
        " is beyond max_len ℓ = ", config_.max_len, "; build the mixer with a larger max_len");
}

namespace {
struct PrefixCache : MixerCache {
  Tensor prefix;  // every input so far, [B, t, d]
  std::vector<Tensor*> batch_tensors() override { return {&prefix}; }
  bool reorderable() const override { return true; }
};
}  // namespace

void reorder_cache(MixerCache& cache, const std::vector<int32_t>& index) {
  check(cache.reorderable(), "reorder_cache: this mixer's cache cannot be reordered");
  for (Tensor* t : cache.batch_tensors()) {
    if (!t || !t->defined()) continue;
    *t = select_rows(*t,
                     Tensor::from_data(index, {static_cast<int64_t>(index.size())}, t->device()));
  }
}

std::unique_ptr<MixerCache> Mixer::new_cache() const { return std::make_unique<PrefixCache>(); }

Tensor Mixer::step(const Tensor& x_t, MixerCache& cache, const MixerContext& ctx) {
  auto* c = &begin_step<PrefixCache>(x_t, cache);
  c->prefix = c->prefix.defined() ? concat({c->prefix, x_t}, 1) : x_t;
  ++c->position;
  MixerContext full = ctx;
  full.valid = Tensor();
  full.lengths.clear();
  Tensor y = forward(c->prefix, full);
  return narrow(y, 1, y.size(1) - 1, 1);
}

}  // namespace mixlab
