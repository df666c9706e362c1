#include "train/data/listops.h"

#include <algorithm>
#include <unordered_set>

#include "core/error.h"
#include "train/data/rng.h"

namespace mixlab {

namespace {

// Internally a token is one byte: 0..9 the digits, then the operators, then "]". An expression is
// then a std::string of codes — compact, and directly usable as the duplicate-detection key.
const std::vector<std::string> kOperators = {"[MIN", "[MAX", "[MED", "[SM"};
constexpr char kFirstOp = 10;
constexpr char kClose = 14;
const std::string kCloseToken = "]";

constexpr double kLeafProbability = 0.75;

std::string token_of(char code) {
  if (code < kFirstOp) return std::string(1, static_cast<char>('0' + code));
  if (code < kClose) return kOperators[static_cast<size_t>(code - kFirstOp)];
  return kCloseToken;
}

// Appends one random tree to `out`. Returns false as soon as `out` would grow past `max_len`, so
// a hopelessly long tree is abandoned early; the draw is still fully determined by the seed.
bool generate_tree(int depth, const ListOpsConfig& config, SplitMix64& rng, std::string& out) {
  if (static_cast<int64_t>(out.size()) >= config.max_len) return false;
  const bool leaf = depth >= config.max_depth || rng.uniform() < kLeafProbability;
  if (leaf) {
    out.push_back(static_cast<char>(rng.below(10)));
    return true;
  }
  out.push_back(static_cast<char>(kFirstOp + rng.below(kOperators.size())));
  const int64_t children = rng.between(2, config.max_args);
  for (int64_t i = 0; i < children; ++i) {
    if (!generate_tree(depth + 1, config, rng, out)) return false;
  }
  out.push_back(kClose);
  return static_cast<int64_t>(out.size()) <= config.max_len;
}

int32_t apply(char op, std::vector<int32_t>& args) {
  switch (op - kFirstOp) {
    case 0:
      return *std::min_element(args.begin(), args.end());
    case 1:
      return *std::max_element(args.begin(), args.end());
    case 2: {
      // [MED: int(np.median(args)) — the middle value, or the two middles' mean truncated.
      std::sort(args.begin(), args.end());
      const size_t n = args.size();
      return n % 2 == 1 ? args[n / 2] : (args[n / 2 - 1] + args[n / 2]) / 2;
    }
    default: {
      int64_t sum = 0;
      for (int32_t a : args) sum += a;
      return static_cast<int32_t>(sum % 10);
    }
  }
}

int32_t eval_codes(const std::string& codes) {
  // One frame per open operator: its code and the values of the children closed so far.
  struct Frame {
    char op;
    std::vector<int32_t> args;
  };
  std::vector<Frame> stack;
  bool have_result = false;
  int32_t result = 0;
  for (size_t i = 0; i < codes.size(); ++i) {
    const char code = codes[i];
    check(!have_result, "listops_eval: token ", i, " ('", token_of(code),
          "') after the end of the expression");
    int32_t value = -1;
    if (code < kFirstOp) {
      value = code;
    } else if (code < kClose) {
      stack.push_back({code, {}});
      continue;
    } else {
      check(!stack.empty(), "listops_eval: token ", i, ": ']' without an open operator");
      check(!stack.back().args.empty(), "listops_eval: token ", i, ": ", token_of(stack.back().op),
            " has no arguments");
      value = apply(stack.back().op, stack.back().args);
      stack.pop_back();
    }
    if (stack.empty()) {
      have_result = true;
      result = value;
    } else {
      stack.back().args.push_back(value);
    }
  }
  check(!codes.empty(), "listops_eval: empty expression");
  check(stack.empty(), "listops_eval: ", stack.size(), " operator(s) not closed");
  return result;
}

// Runs the generator and hands each kept expression (as codes) and its label to `keep`.
template <typename Keep>
void generate(const ListOpsConfig& config, Keep&& keep) {
  check(config.max_depth >= 1, "listops: max_depth must be at least 1, got ", config.max_depth);
  check(config.max_args >= 2, "listops: max_args must be at least 2, got ", config.max_args);
  check(config.min_len >= 1 && config.min_len <= config.max_len,
        "listops: need 1 <= min_len <= max_len, got min_len ", config.min_len, ", max_len ",
        config.max_len);
  check(config.count >= 0, "listops: count must be non-negative, got ", config.count);

  SplitMix64 rng(config.seed);
  std::unordered_set<std::string> seen;
  const int64_t max_draws = 1000 * config.count + 100000;
  std::string codes;
  int64_t kept = 0;
  int64_t draws = 0;
  while (kept < config.count) {
    check(draws < max_draws, "listops: only ", kept, " of ", config.count,
          " distinct expressions after ", draws, " draws with max_depth ", config.max_depth,
          ", max_args ", config.max_args, ", lengths ", config.min_len, "..", config.max_len,
          "; widen the length window or ask for fewer");
    ++draws;
    codes.clear();
    if (!generate_tree(1, config, rng, codes)) continue;
    if (static_cast<int64_t>(codes.size()) < config.min_len) continue;
    if (!seen.insert(codes).second) continue;
    keep(codes, eval_codes(codes));
    ++kept;
  }
}

}  // namespace

std::vector<LabelledTokens> listops_generate(const ListOpsConfig& config) {
  std::vector<LabelledTokens> examples;
  generate(config, [&](const std::string& codes, int32_t label) {
    LabelledTokens example;
    example.tokens.reserve(codes.size());
    for (char code : codes) example.tokens.push_back(token_of(code));
    example.label = label;
    examples.push_back(std::move(example));
  });
  return examples;
}

InMemoryDataset listops_dataset(const ListOpsConfig& config) {
  const Vocab vocab = listops_vocab();
  std::vector<int32_t> id_of_code;
  for (char code = 0; code <= kClose; ++code) id_of_code.push_back(vocab.id(token_of(code)));
  std::vector<Example> examples;
  generate(config, [&](const std::string& codes, int32_t label) {
    Example example;
    example.src.reserve(codes.size());
    for (char code : codes) example.src.push_back(id_of_code[static_cast<size_t>(code)]);
    example.label = label;
    examples.push_back(std::move(example));
  });
  return InMemoryDataset(std::move(examples));
}

int32_t listops_eval(const std::vector<std::string>& tokens) {
  std::string codes;
  codes.reserve(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    const std::string& t = tokens[i];
    if (t.size() == 1 && t[0] >= '0' && t[0] <= '9') {
      codes.push_back(static_cast<char>(t[0] - '0'));
    } else if (t == kCloseToken) {
      codes.push_back(kClose);
    } else {
      auto op = std::find(kOperators.begin(), kOperators.end(), t);
      check(op != kOperators.end(), "listops_eval: token ", i, ": unknown token '", t, "'");
      codes.push_back(static_cast<char>(kFirstOp + (op - kOperators.begin())));
    }
  }
  return eval_codes(codes);
}

Vocab listops_vocab() {
  Vocab vocab;
  for (char code = 0; code <= kClose; ++code) vocab.add(token_of(code));
  return vocab;
}

}  // namespace mixlab
