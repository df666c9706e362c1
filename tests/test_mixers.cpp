// Every mixer in the registry against every property its capabilities claim: shape, parameter
// count (the spec's formula), float64 gradients for input and every parameter (plain, padded,
// causal), the padding property, exact length equivalence, causality, refusals, the ℓ limit,
// and incremental decoding equal to the full forward. Each runs over every test case: each
// test name, and the option sets a mixer lists (attention's rel-bias, a kernel width, ...).
#include "tests/mixer_harness.h"

using namespace mixlab;
using namespace mixlab::testing;

TEST_CASE("mixers: the registry holds every mixer of the specification") {
  for (const char* name : {"attention",
                           "synth-random",
                           "synth-fixed",
                           "synth-dense",
                           "synth-frandom",
                           "synth-fdense",
                           "synth-mix:R+V",
                           "mlp-mixer",
                           "resmlp",
                           "ffonly",
                           "external",
                           "fnet",
                           "gmlp",
                           "amlp",
                           "hcsa",
                           "lightconv",
                           "dynconv",
                           "linformer",
                           "linear-attention",
                           "s4d",
                           "hyena"}) {
    INFO(name);
    CHECK(MixerRegistry::instance().contains(name));
  }
  CHECK_THROWS_WITH_AS(make_mixer(small_config("no-such-mixer")), doctest::Contains("known mixers"),
                       Error);
}

TEST_CASE("mixers: output shape and parameter count from the spec's formula") {
  for (const auto& mc : all_test_cases()) {
    INFO(mc.label);
    const MixerInfo& info = MixerRegistry::instance().find(mc.name);
    for (auto [d, h, l] : std::vector<std::array<int64_t, 3>>{{8, 2, 8}, {12, 3, 10}}) {
      MixerConfig c = small_config(mc);
      c.dim = d, c.heads = h, c.max_len = l;
      auto m = make_mixer(c);
      CHECK(m->parameter_count() == info.expected_parameters(c));
      Tensor x = rand32({2, 5, d}, 3);
      Tensor y = m->forward(x, context_for(x, {}, false));
      CHECK(y.shape() == x.shape());
    }
  }
}

TEST_CASE("mixers: float64 gradcheck of input and every parameter plain padded and causal") {
  for (const auto& mc : all_test_cases()) {
    std::vector<bool> modes{false};
    if (case_capabilities(mc).causal) modes.push_back(true);
    for (bool causal : modes) {
      for (std::vector<int32_t> lengths : {std::vector<int32_t>{}, std::vector<int32_t>{5, 3}}) {
        const std::string what =
            mc.label + (causal ? " causal" : "") + (lengths.empty() ? "" : " padded");
        INFO(what);
        auto m = build_case(mc, causal);
        Tensor x = rand64({2, 5, 8}, 7);
        MixerContext ctx = context_for(x, lengths, causal);
        std::vector<Tensor> leaves{x};
        for (auto& p : m->parameters()) leaves.push_back(p);
        auto result = gradcheck_leaves([&] { return m->forward(x, ctx); }, leaves);
        INFO("worst: " << result.worst);
        CHECK(result.ok);
      }
    }
  }
}

TEST_CASE("mixers: padding property (padded contents do not reach valid outputs)") {
  for (const auto& mc : all_test_cases()) {
    auto m = build_case(mc);
    if (!m->capabilities().padding_property) continue;
    INFO(mc.label);
    NoGradGuard no_grad;
    Tensor x1 = rand64({2, 6, 8}, 5, false);
    // Same valid rows, different padding rows (batch 1 has length 2).
    Tensor noise = rand64({2, 6, 8}, 6, false);
    Tensor keep = reshape(length_mask({6, 2}, 6, DType::F64), {2, 6, 1});
    Tensor x2 = add(mul(x1, keep), mul(noise, add(neg(keep), 1.0)));
    MixerContext ctx = context_for(x1, {6, 2}, false);
    Tensor y1 = m->forward(x1, ctx), y2 = m->forward(x2, ctx);
    check_close(rows_of(y1, 0, 0, 6), rows_of(y2, 0, 0, 6), 1e-12);
    check_close(rows_of(y1, 1, 0, 2), rows_of(y2, 1, 0, 2), 1e-12);
  }
}

TEST_CASE("mixers: exact length equivalence (padded to N equals alone at length n)") {
  for (const auto& mc : all_test_cases()) {
    auto m = build_case(mc);
    if (!m->capabilities().exact_length_equivalence) continue;
    INFO(mc.label);
    NoGradGuard no_grad;
    Tensor x = rand64({1, 7, 8}, 8, false);
    Tensor padded = m->forward(x, context_for(x, {4}, false));
    Tensor alone_in = contiguous(narrow(x, 1, 0, 4));
    Tensor alone = m->forward(alone_in, context_for(alone_in, {}, false));
    check_close(rows_of(padded, 0, 0, 4), rows_of(alone, 0, 0, 4), 1e-12);
  }
}

TEST_CASE("mixers: causal property (inputs after i do not change output i)") {
  for (const auto& mc : all_test_cases()) {
    if (!case_capabilities(mc).causal) continue;
    INFO(mc.label);
    auto m = build_case(mc, true);
    NoGradGuard no_grad;
    Tensor x1 = rand64({2, 6, 8}, 9, false);
    Tensor later = reshape(length_mask({3, 3}, 6, DType::F64), {2, 6, 1});  // 1 for i < 3
    Tensor x2 = add(mul(x1, later), mul(rand64({2, 6, 8}, 10, false), add(neg(later), 1.0)));
    Tensor y1 = m->forward(x1, context_for(x1, {}, true));
    Tensor y2 = m->forward(x2, context_for(x2, {}, true));
    for (int b = 0; b < 2; ++b) check_close(rows_of(y1, b, 0, 3), rows_of(y2, b, 0, 3), 1e-12);
    // And the future does matter somewhere (the test can fail).
    CHECK(rows_of(y1, 0, 3, 6) != rows_of(y2, 0, 3, 6));
  }
}

// A mixer that reads left to right in every mode (mamba, hyena: capabilities.left_to_right) is
// held to the causal property in its encoder instance too, and that instance must compute the
// same function as the causal one.
TEST_CASE("mixers: left-to-right mixers are causal in their non-causal instance too") {
  int checked = 0;
  for (const auto& mc : all_test_cases()) {
    MixerCapabilities caps = case_capabilities(mc);
    if (!caps.left_to_right) continue;
    INFO(mc.label);
    CHECK(caps.causal);  // a left-to-right mixer can always be a decoder's
    auto m = build_case(mc, false);
    auto causal = build_case(mc, true);
    NoGradGuard no_grad;
    Tensor x1 = rand64({2, 6, 8}, 9, false);
    Tensor later = reshape(length_mask({3, 3}, 6, DType::F64), {2, 6, 1});  // 1 for i < 3
    Tensor x2 = add(mul(x1, later), mul(rand64({2, 6, 8}, 10, false), add(neg(later), 1.0)));
    Tensor y1 = m->forward(x1, context_for(x1, {}, false));
    Tensor y2 = m->forward(x2, context_for(x2, {}, false));
    for (int b = 0; b < 2; ++b) check_close(rows_of(y1, b, 0, 3), rows_of(y2, b, 0, 3), 1e-12);
    CHECK(rows_of(y1, 0, 3, 6) != rows_of(y2, 0, 3, 6));
    Tensor y_causal = causal->forward(x1, context_for(x1, {}, true));
    check_close(y1.to_double_vector(), y_causal.to_double_vector(), 1e-12);
    ++checked;
  }
  CHECK(checked > 0);  // mamba claims it
}

TEST_CASE("mixers: left-to-right mixers see only the past in an encoder too") {
  // A mixer that reads left to right in every mode (mamba, hyena: §17, §18) keeps the causal
  // property when built for an encoder (causal = false); every other mixer that is not refused
  // in an encoder lets some later input change an earlier output there, so the claim is
  // checked both ways.
  for (const auto& mc : all_test_cases()) {
    auto m = build_case(mc, false);
    INFO(mc.label);
    NoGradGuard no_grad;
    Tensor x1 = rand64({2, 6, 8}, 17, false);
    Tensor later = reshape(length_mask({3, 3}, 6, DType::F64), {2, 6, 1});  // 1 for i < 3
    Tensor x2 = add(mul(x1, later), mul(rand64({2, 6, 8}, 18, false), add(neg(later), 1.0)));
    Tensor y1 = m->forward(x1, context_for(x1, {}, false));
    Tensor y2 = m->forward(x2, context_for(x2, {}, false));
    bool past_unchanged = true;
    for (int b = 0; b < 2; ++b) {
      auto before = rows_of(y1, b, 0, 3), after = rows_of(y2, b, 0, 3);
      for (size_t e = 0; e < before.size(); ++e)
        past_unchanged = past_unchanged && std::abs(before[e] - after[e]) <= 1e-12;
    }
    CHECK(past_unchanged == m->capabilities().left_to_right);
    if (m->capabilities().left_to_right) CHECK(rows_of(y1, 0, 3, 6) != rows_of(y2, 0, 3, 6));
  }
}

TEST_CASE("mixers: refusals and the length limit are clear errors") {
  auto causal_names = MixerRegistry::instance().causal_names();
  for (const auto& info : MixerRegistry::instance().all()) {
    const std::string& name = info.test_names.front();
    INFO(name);
    if (!info.capabilities.causal) {
      try {
        make_mixer(small_config(name, true));
        FAIL("a causal " << name << " was built");
      } catch (const Error& e) {
        std::string msg = e.what();
        CHECK(msg.find(name) != std::string::npos);
        CHECK(msg.find("Mixers that support causal use: ") != std::string::npos);
        CHECK(msg.find(causal_names.front()) != std::string::npos);
        CHECK(!info.capabilities.causal_refusal.empty());
      }
    }
    if (info.capabilities.length != LengthSupport::Any) {
      auto m = make_mixer(small_config(name));
      Tensor x = rand32({1, 9, 8}, 4);  // ℓ = 8
      CHECK_THROWS_WITH_AS(m->forward(x, context_for(x, {}, false)), doctest::Contains("max_len"),
                           Error);
    }
  }
}

TEST_CASE("mixers: incremental decoding equals the full forward at every position") {
  for (const auto& mc : all_test_cases()) {
    if (!case_capabilities(mc).causal) continue;
    INFO(mc.label);
    check_decoding_equals_forward(*build_case(mc, true), rand64({2, 6, 8}, 12, false));
  }
}

TEST_CASE("mixers: cross-attention masks invalid memory and has the padding property") {
  MixerConfig c = small_config("attention");
  c.cross = true;
  auto m = build64(c);
  NoGradGuard no_grad;
  Tensor x = rand64({2, 3, 8}, 13, false);
  Tensor mem1 = rand64({2, 5, 8}, 14, false);
  Tensor keep = reshape(length_mask({5, 2}, 5, DType::F64), {2, 5, 1});
  Tensor mem2 = add(mul(mem1, keep), mul(rand64({2, 5, 8}, 15, false), add(neg(keep), 1.0)));
  MixerContext ctx;
  ctx.memory_valid = length_mask({5, 2}, 5, DType::F64);
  ctx.memory_lengths = {5, 2};
  ctx.memory = mem1;
  Tensor y1 = m->forward(x, ctx);
  ctx.memory = mem2;
  Tensor y2 = m->forward(x, ctx);
  check_close(y1.to_double_vector(), y2.to_double_vector(), 1e-12);
  // A fully masked memory row gives attention weights 0: the output is the bias b_O.
  ctx.memory_valid = length_mask({0, 2}, 5, DType::F64);
  Tensor y3 = m->forward(x, ctx);
  auto bias = m->named_parameters().back().second.to_double_vector();
  auto row = rows_of(y3, 0, 0, 1);
  check_close(row, bias, 1e-12);
}

TEST_CASE("mixers: caches reorder their batch rows for beam search") {
  for (const auto& mc : all_test_cases()) {
    if (!case_capabilities(mc).causal) continue;
    INFO(mc.label);
    auto m = build_case(mc, true);
    NoGradGuard no_grad;
    Tensor x = rand64({2, 4, 8}, 16, false);
    Tensor swapped = concat({narrow(x, 0, 1, 1), narrow(x, 0, 0, 1)}, 0);
    MixerContext ctx = context_for(x, {}, true);
    // Decode three positions, swap the two rows of the cache, decode the fourth position with
    // swapped inputs: the same as decoding the swapped batch from the start.
    auto cache = m->new_cache();
    for (int64_t t = 0; t < 3; ++t) m->step(contiguous(narrow(x, 1, t, 1)), *cache, ctx);
    REQUIRE(cache->reorderable());
    reorder_cache(*cache, {1, 0});
    Tensor y = m->step(contiguous(narrow(swapped, 1, 3, 1)), *cache, ctx);
    auto reference = m->new_cache();
    Tensor y_ref;
    for (int64_t t = 0; t < 4; ++t)
      y_ref = m->step(contiguous(narrow(swapped, 1, t, 1)), *reference, ctx);
    check_close(y.to_double_vector(), y_ref.to_double_vector(), 1e-10);
  }
}
