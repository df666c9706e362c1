#include "train/data/scan.h"

#include <algorithm>
#include <numeric>

#include "core/error.h"
#include "core/strings.h"
#include "train/data/rng.h"

namespace mixlab {

namespace {

using Tokens = std::vector<std::string>;

const Tokens kVerbs = {"walk", "look", "run", "jump"};
const Tokens kDirections = {"left", "right"};

std::string verb_action(const std::string& verb) {
  if (verb == "walk") return "I_WALK";
  if (verb == "look") return "I_LOOK";
  if (verb == "run") return "I_RUN";
  if (verb == "jump") return "I_JUMP";
  fail("SCAN: '", verb, "' is not a verb (walk, look, run, jump)");
}

std::string turn_action(const std::string& direction) {
  if (direction == "left") return "I_TURN_LEFT";
  if (direction == "right") return "I_TURN_RIGHT";
  fail("SCAN: '", direction, "' is not a direction (left, right)");
}

bool is_verb(const std::string& word) {
  return std::find(kVerbs.begin(), kVerbs.end(), word) != kVerbs.end();
}

void append(Tokens& out, const Tokens& more) { out.insert(out.end(), more.begin(), more.end()); }

Tokens repeat(const Tokens& once, int times) {
  Tokens out;
  for (int i = 0; i < times; ++i) append(out, once);
  return out;
}

// [[x d]] for x a verb or "turn": the turn, then the verb's action when x is a verb.
Tokens turn_then(const std::string& x, const std::string& direction) {
  Tokens out = {turn_action(direction)};
  if (x != "turn") out.push_back(verb_action(x));
  return out;
}

// The 34 forms of V with their meanings, in the order documented in scan.h.
std::vector<ScanPair> all_v() {
  std::vector<ScanPair> v;
  Tokens firsts = kVerbs;
  firsts.push_back("turn");
  for (const std::string& x : firsts) {
    for (const std::string& d : kDirections) {
      // [[x opposite d]]: turn twice, then act; [[x around d]]: (turn, act) four times.
      Tokens opposite = {turn_action(d), turn_action(d)};
      if (x != "turn") opposite.push_back(verb_action(x));
      v.push_back({{x, "opposite", d}, opposite});
      v.push_back({{x, "around", d}, repeat(turn_then(x, d), 4)});
    }
  }
  for (const std::string& x : firsts) {
    for (const std::string& d : kDirections) v.push_back({{x, d}, turn_then(x, d)});
  }
  for (const std::string& u : kVerbs) v.push_back({{u}, {verb_action(u)}});
  return v;
}

std::vector<ScanPair> all_s() {
  std::vector<ScanPair> s;
  for (const ScanPair& v : all_v()) {
    s.push_back(v);
    ScanPair twice = {v.src, repeat(v.tgt, 2)};
    twice.src.push_back("twice");
    s.push_back(twice);
    ScanPair thrice = {v.src, repeat(v.tgt, 3)};
    thrice.src.push_back("thrice");
    s.push_back(thrice);
  }
  return s;
}

// Recursive-descent interpretation of V and S, over command[begin, end).
Tokens interpret_v(const Tokens& c, size_t begin, size_t end) {
  const size_t n = end - begin;
  auto bad = [&]() -> Tokens {
    std::string phrase;
    for (size_t i = begin; i < end; ++i) phrase += (i > begin ? " " : "") + c[i];
    fail("SCAN: '", phrase, "' is not a valid phrase of the grammar");
  };
  auto is_direction = [](const std::string& w) { return w == "left" || w == "right"; };
  if (n == 1) return is_verb(c[begin]) ? Tokens{verb_action(c[begin])} : bad();
  const std::string& x = c[begin];
  if (!is_verb(x) && x != "turn") return bad();
  if (n == 2) return is_direction(c[begin + 1]) ? turn_then(x, c[begin + 1]) : bad();
  if (n != 3 || !is_direction(c[begin + 2])) return bad();
  const std::string& d = c[begin + 2];
  if (c[begin + 1] == "around") return repeat(turn_then(x, d), 4);
  if (c[begin + 1] != "opposite") return bad();
  Tokens out = {turn_action(d), turn_action(d)};
  if (x != "turn") out.push_back(verb_action(x));
  return out;
}

Tokens interpret_s(const Tokens& c, size_t begin, size_t end) {
  check(end > begin, "SCAN: empty phrase");
  if (c[end - 1] == "twice") return repeat(interpret_v(c, begin, end - 1), 2);
  if (c[end - 1] == "thrice") return repeat(interpret_v(c, begin, end - 1), 3);
  return interpret_v(c, begin, end);
}

}  // namespace

std::vector<ScanPair> scan_all() {
  const std::vector<ScanPair> s = all_s();
  std::vector<ScanPair> all;
  all.reserve(s.size() + 2 * s.size() * s.size());
  for (const ScanPair& one : s) all.push_back(one);
  for (const std::string conjunction : {"and", "after"}) {
    for (const ScanPair& first : s) {
      for (const ScanPair& second : s) {
        ScanPair pair;
        pair.src = first.src;
        pair.src.push_back(conjunction);
        append(pair.src, second.src);
        // [[x1 and x2]] = [[x1]] [[x2]];  [[x1 after x2]] = [[x2]] [[x1]]
        pair.tgt = conjunction == "and" ? first.tgt : second.tgt;
        append(pair.tgt, conjunction == "and" ? second.tgt : first.tgt);
        all.push_back(std::move(pair));
      }
    }
  }
  return all;
}

const std::vector<std::string>& scan_split_names() {
  static const std::vector<std::string> names = {"simple", "length", "addprim_jump"};
  return names;
}

ScanSplit scan_split(const std::string& name, uint64_t seed) {
  const auto& names = scan_split_names();
  if (std::find(names.begin(), names.end(), name) == names.end())
    fail("SCAN: unknown split '", name, "'; valid splits: ", join(names));
  std::vector<ScanPair> all = scan_all();
  ScanSplit split;
  if (name == "simple") {
    std::vector<size_t> order(all.size());
    std::iota(order.begin(), order.end(), size_t{0});
    SplitMix64 rng(seed);
    rng.shuffle(order);
    const size_t train_size = all.size() * 4 / 5;  // 16,728 of 20,910
    for (size_t i = 0; i < order.size(); ++i) {
      (i < train_size ? split.train : split.test).push_back(std::move(all[order[i]]));
    }
  } else if (name == "length") {
    for (ScanPair& pair : all) {
      (pair.tgt.size() <= 22 ? split.train : split.test).push_back(std::move(pair));
    }
  } else {  // addprim_jump
    for (ScanPair& pair : all) {
      const bool has_jump = std::find(pair.src.begin(), pair.src.end(), "jump") != pair.src.end();
      const bool bare_jump = pair.src.size() == 1 && has_jump;
      (!has_jump || bare_jump ? split.train : split.test).push_back(std::move(pair));
    }
  }
  return split;
}

std::vector<std::string> scan_interpret(const std::vector<std::string>& command) {
  for (const std::string conjunction : {"and", "after"}) {
    auto at = std::find(command.begin(), command.end(), conjunction);
    if (at == command.end()) continue;
    const auto split = static_cast<size_t>(at - command.begin());
    Tokens first = interpret_s(command, 0, split);
    Tokens second = interpret_s(command, split + 1, command.size());
    if (conjunction == "after") std::swap(first, second);
    append(first, second);
    return first;
  }
  return interpret_s(command, 0, command.size());
}

}  // namespace mixlab
