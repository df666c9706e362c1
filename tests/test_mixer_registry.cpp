// The registry as the one owner of mixer names and options: closest-match suggestions, option
// values refused with their allowed range before anything is built, capabilities handed to a
// mixer when it is built, and the shared step() preamble.
#include <typeinfo>

#include "core/suggest.h"
#include "tests/mixer_harness.h"

using namespace mixlab;
using namespace mixlab::testing;

namespace {

MixerConfig with_options(const std::string& name, std::map<std::string, std::string> options,
                         bool causal = false) {
  MixerConfig c = small_config(name, causal);
  c.options = std::move(options);
  return c;
}

}  // namespace

TEST_CASE("suggest: edit distance counts a swap of neighbours as one edit") {
  CHECK(edit_distance("gmlp", "gmlp") == 0);
  CHECK(edit_distance("gmpl", "gmlp") == 1);
  CHECK(edit_distance("kernal", "kernel") == 1);
  CHECK(edit_distance("", "abc") == 3);
  CHECK(edit_distance("fnet", "attention") > 2);
  const std::vector<std::string> names = {"attention", "gmlp", "amlp", "fnet"};
  CHECK(closest_match("gmpl", names) == std::optional<std::string>("gmlp"));
  CHECK(closest_match("atention", names) == std::optional<std::string>("attention"));
  CHECK_FALSE(closest_match("transformer", names).has_value());
  CHECK_FALSE(closest_match("x", {"y"}).has_value());  // one letter is no evidence of a typo
  CHECK(did_you_mean("fnte", names) == "; did you mean 'fnet'?");
  CHECK(did_you_mean("zzzz", names).empty());
}

TEST_CASE("registry: an unknown mixer name suggests the closest known one") {
  const MixerRegistry& reg = MixerRegistry::instance();
  CHECK_THROWS_WITH_AS(reg.find("gmpl"),
                       doctest::Contains("unknown mixer 'gmpl'; did you mean 'gmlp'?"),
                       MixerSpecError);
  // A family member is matched on the family's name and keeps its components.
  CHECK_THROWS_WITH_AS(reg.find("synth-mx:R+V"), doctest::Contains("did you mean 'synth-mix:R+V'?"),
                       MixerSpecError);
  // Nothing close: no guess, but the list of every mixer.
  CHECK_THROWS_WITH_AS(reg.find("transformer-xl"), doctest::Contains("known mixers: attention"),
                       MixerSpecError);
  try {
    reg.find("transformer-xl");
  } catch (const MixerSpecError& e) {
    CHECK(std::string(e.what()).find("did you mean") == std::string::npos);
  }
  // A malformed member of a known family is refused while checking, before any build.
  CHECK_THROWS_WITH_AS(reg.check_spec("synth-mix:R+X", {}, false, false),
                       doctest::Contains("unknown synthesizer component 'X'"), MixerSpecError);
}

TEST_CASE("registry: an unknown option key suggests the closest option of that mixer") {
  CHECK_THROWS_WITH_AS(make_mixer(with_options("lightconv", {{"kernal", "3"}})),
                       doctest::Contains("mixer 'lightconv' has no option 'kernal'; did you mean "
                                         "'kernel'? (its options: kernel)"),
                       MixerSpecError);
  CHECK_THROWS_WITH_AS(make_mixer(with_options("linear-attention", {{"rank", "3"}})),
                       doctest::Contains("(it takes no options)"), MixerSpecError);
}

TEST_CASE("registry: option values are refused with the option's name and allowed range") {
  const MixerRegistry& reg = MixerRegistry::instance();
  // A typo that would allocate gigabytes of windows is refused by the range, not attempted.
  CHECK_THROWS_WITH_AS(
      reg.check_spec("lightconv", {{"kernel", "100001"}}, false, false),
      doctest::Contains("option kernel=100001 is out of range; allowed: an integer in [1, 255]"),
      MixerSpecError);
  CHECK_THROWS_WITH_AS(reg.check_spec("lightconv", {{"kernel", "3x"}}, false, false),
                       doctest::Contains("kernel=3x is not an integer"), MixerSpecError);
  CHECK_THROWS_WITH_AS(
      reg.check_spec("fnet", {{"fnet-padded", "maybe"}}, false, false),
      doctest::Contains("fnet-padded=maybe is not allowed; allowed: true or false"),
      MixerSpecError);
  CHECK_THROWS_WITH_AS(reg.check_spec("synth-frandom", {{"rank", "0"}}, false, false),
                       doctest::Contains("rank=0 is out of range"), MixerSpecError);
  CHECK_NOTHROW(reg.check_spec("synth-fdense", {{"fd-a", "auto"}}, false, false));
  // A rule that needs the sizes (a must divide ℓ) waits for them: check_spec lets fd-a=3
  // through, building with ℓ = 8 refuses it.
  CHECK_NOTHROW(reg.check_spec("synth-fdense", {{"fd-a", "3"}}, false, false));
  CHECK_THROWS_WITH_AS(make_mixer(with_options("synth-fdense", {{"fd-a", "3"}})),
                       doctest::Contains("fd-a must be a positive divisor of max_len ℓ = 8"),
                       MixerSpecError);
  CHECK(make_mixer(with_options("synth-fdense", {{"fd-a", "4"}})) != nullptr);
  // Uses a mixer does not support, and inconsistent sizes, are the same kind of error.
  CHECK_THROWS_AS(reg.check_spec("fnet", {}, /*causal=*/true, false), MixerSpecError);
  CHECK_THROWS_WITH_AS(reg.check_spec("gmlp", {}, false, /*cross=*/true),
                       doctest::Contains("only dot-product attention can attend to the encoder"),
                       MixerSpecError);
  MixerConfig odd_heads = small_config("attention");
  odd_heads.heads = 3;
  CHECK_THROWS_WITH_AS(make_mixer(odd_heads), doctest::Contains("positive multiple of heads"),
                       MixerSpecError);
}

TEST_CASE("registry: a built mixer holds its entry's capabilities, adjusted by its options") {
  const MixerRegistry& reg = MixerRegistry::instance();
  for (const auto& mc : all_test_cases()) {
    INFO(mc.label);
    auto m = make_mixer(small_config(mc));
    // Without options, the entry's own; with them, as its adjust_capabilities says.
    const MixerCapabilities want =
        mc.options.empty() ? reg.find(mc.name).capabilities : case_capabilities(mc);
    const MixerCapabilities& got = m->capabilities();
    CHECK(got.length == want.length);
    CHECK(got.block == want.block);
    CHECK(got.causal == want.causal);
    CHECK(got.cross == want.cross);
    CHECK(got.left_to_right == want.left_to_right);
    CHECK(got.padding_property == want.padding_property);
    CHECK(got.exact_length_equivalence == want.exact_length_equivalence);
  }
  // What fnet-padded gives up is tested in test_mixers_misc.cpp.
}

TEST_CASE("registry: a gMLP unit takes the block's FFN width unless its hidden option is given") {
  MixerConfig c = small_config("gmlp");
  c.block_ffn_dim = 12;
  CHECK(param(*make_mixer(c), "U.weight").shape() == Shape{12, 8});
  c.options = {{"hidden", "6"}};  // the option wins over the block's width
  CHECK(param(*make_mixer(c), "U.weight").shape() == Shape{6, 8});
  c.options.clear();
  c.block_ffn_dim = 0;  // 0 means 4d, as for the FFN
  CHECK(param(*make_mixer(c), "U.weight").shape() == Shape{32, 8});
  c.block_ffn_dim = 7;  // the unit splits f in halves
  CHECK_THROWS_WITH_AS(make_mixer(c), doctest::Contains("must be even"), MixerSpecError);
  // Mixers that do not replace the FFN ignore the block's width.
  MixerConfig a = small_config("attention");
  a.block_ffn_dim = 7;
  CHECK(make_mixer(a)->parameter_count() ==
        MixerRegistry::instance().find("attention").expected_parameters(a));
}

TEST_CASE("mixers: every step() starts with the same checks") {
  for (const auto& mc : all_test_cases()) {
    if (!case_capabilities(mc).causal) continue;
    INFO(mc.label);
    const std::string& name = mc.name;
    auto causal = build_case(mc, true);
    NoGradGuard no_grad;
    MixerContext ctx;
    ctx.causal = true;
    // Wrong shape of x_t: named with the expected [B, 1, d].
    auto cache = causal->new_cache();
    CHECK_THROWS_WITH_AS(causal->step(rand64({2, 2, 8}, 1, false), *cache, ctx),
                         doctest::Contains("must be [B, 1, 8]"), Error);
    // A cache from another mixer.
    auto other = build64(small_config(name == "attention" ? "lightconv" : "attention", true));
    auto foreign_cache = other->new_cache();
    MixerCache& foreign = *foreign_cache;
    MixerCache& own = *cache;
    if (typeid(foreign) != typeid(own))
      CHECK_THROWS_WITH_AS(causal->step(rand64({2, 1, 8}, 1, false), foreign, ctx),
                           doctest::Contains("got a cache from another mixer"), Error);
    // Decoding past ℓ when the mixer has ℓ-sized parameters; any length otherwise.
    auto fresh = causal->new_cache();
    for (int64_t t = 0; t < 8; ++t) causal->step(rand64({2, 1, 8}, 2 + t, false), *fresh, ctx);
    if (causal->capabilities().length == LengthSupport::Any)
      CHECK_NOTHROW(causal->step(rand64({2, 1, 8}, 20, false), *fresh, ctx));
    else
      CHECK_THROWS_WITH_AS(causal->step(rand64({2, 1, 8}, 20, false), *fresh, ctx),
                           doctest::Contains("decoding position 8 is beyond max_len ℓ = 8"), Error);
  }
}
