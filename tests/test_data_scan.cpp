#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <set>

#include "core/error.h"
#include "train/data/scan.h"

using namespace mixlab;
using Tokens = std::vector<std::string>;

namespace {

Tokens split_words(const std::string& text) {
  Tokens out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(' ', start);
    if (end == std::string::npos) end = text.size();
    out.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

// The actions of `command` as scan_all() generated them.
Tokens actions_of(const std::vector<ScanPair>& all, const std::string& command) {
  const Tokens src = split_words(command);
  for (const ScanPair& pair : all) {
    if (pair.src == src) return pair.tgt;
  }
  FAIL("command not generated: ", command);
  return {};
}

}  // namespace

TEST_CASE("data: scan generates all 20910 commands with the published statistics") {
  const std::vector<ScanPair> all = scan_all();
  CHECK(all.size() == 20910);
  std::set<Tokens> distinct;
  std::set<std::string> in_words, out_words;
  size_t max_in = 0, max_out = 0, total_out = 0;
  std::map<size_t, size_t> by_length;
  for (const ScanPair& pair : all) {
    distinct.insert(pair.src);
    in_words.insert(pair.src.begin(), pair.src.end());
    out_words.insert(pair.tgt.begin(), pair.tgt.end());
    max_in = std::max(max_in, pair.src.size());
    max_out = std::max(max_out, pair.tgt.size());
    total_out += pair.tgt.size();
    ++by_length[pair.tgt.size()];
    // The generator and the independent parser agree on every command.
    REQUIRE(scan_interpret(pair.src) == pair.tgt);
  }
  CHECK(distinct.size() == 20910);
  CHECK(in_words.size() == 13);
  CHECK(out_words == std::set<std::string>{"I_WALK", "I_LOOK", "I_RUN", "I_JUMP", "I_TURN_LEFT",
                                           "I_TURN_RIGHT"});
  CHECK(max_in == 9);
  CHECK(max_out == 48);
  CHECK(by_length.count(23) == 0);
  const double mean = static_cast<double>(total_out) / static_cast<double>(all.size());
  CHECK(mean == doctest::Approx(14.3).epsilon(0.005));
}

TEST_CASE("data: scan interpretations checked by hand") {
  const std::vector<ScanPair> all = scan_all();
  const std::string LT = "I_TURN_LEFT", RT = "I_TURN_RIGHT";
  CHECK(actions_of(all, "jump") == Tokens{"I_JUMP"});
  CHECK(actions_of(all, "turn left") == Tokens{LT});
  CHECK(actions_of(all, "run right") == Tokens{RT, "I_RUN"});
  CHECK(actions_of(all, "jump around right") ==
        Tokens{RT, "I_JUMP", RT, "I_JUMP", RT, "I_JUMP", RT, "I_JUMP"});
  CHECK(actions_of(all, "turn around left") == Tokens{LT, LT, LT, LT});
  CHECK(actions_of(all, "turn opposite right") == Tokens{RT, RT});
  CHECK(actions_of(all, "walk opposite left twice") == Tokens{LT, LT, "I_WALK", LT, LT, "I_WALK"});
  CHECK(actions_of(all, "look after run thrice") == Tokens{"I_RUN", "I_RUN", "I_RUN", "I_LOOK"});
  CHECK(actions_of(all, "look and run thrice") == Tokens{"I_LOOK", "I_RUN", "I_RUN", "I_RUN"});
  CHECK(actions_of(all, "walk left and turn right twice") == Tokens{LT, "I_WALK", RT, RT});
  // The longest: 3 x 8 actions on both sides.
  CHECK(actions_of(all, "jump around left thrice and walk around right thrice").size() == 48);
  // Generation order as documented: the first command is "walk opposite left".
  CHECK(all.front().src == split_words("walk opposite left"));
  CHECK(all.back().src == split_words("jump thrice after jump thrice"));

  CHECK_THROWS_AS(scan_interpret(split_words("walk and run and jump")), Error);
  CHECK_THROWS_AS(scan_interpret(split_words("turn")), Error);
  CHECK_THROWS_AS(scan_interpret(split_words("walk twice twice")), Error);
  CHECK_THROWS_AS(scan_interpret(split_words("fly left")), Error);
  CHECK_THROWS_AS(scan_interpret({}), Error);
}

TEST_CASE("data: scan splits have the published sizes") {
  const ScanSplit simple = scan_split("simple", 7);
  CHECK(simple.train.size() == 16728);
  CHECK(simple.test.size() == 4182);
  // Seeded: the same seed gives the same split, another seed another one.
  CHECK(scan_split("simple", 7).test == simple.test);
  CHECK(scan_split("simple", 8).test != simple.test);
  std::set<Tokens> train_commands;
  for (const ScanPair& pair : simple.train) train_commands.insert(pair.src);
  for (const ScanPair& pair : simple.test) CHECK_FALSE(train_commands.count(pair.src));

  const ScanSplit length = scan_split("length");
  CHECK(length.train.size() == 16990);
  CHECK(length.test.size() == 3920);
  for (const ScanPair& pair : length.train) REQUIRE(pair.tgt.size() <= 22);
  for (const ScanPair& pair : length.test) {
    REQUIRE(pair.tgt.size() >= 24);
    REQUIRE(pair.tgt.size() <= 48);
  }

  const ScanSplit jump = scan_split("addprim_jump");
  CHECK(jump.train.size() == 13204);
  CHECK(jump.test.size() == 7706);
  auto has_jump = [](const ScanPair& p) {
    return std::find(p.src.begin(), p.src.end(), "jump") != p.src.end();
  };
  size_t train_with_jump = 0;
  for (const ScanPair& pair : jump.train) {
    if (has_jump(pair)) {
      ++train_with_jump;
      CHECK(pair.src == Tokens{"jump"});
      CHECK(pair.tgt == Tokens{"I_JUMP"});
    }
  }
  CHECK(train_with_jump == 1);
  for (const ScanPair& pair : jump.test) REQUIRE(has_jump(pair));
}

TEST_CASE("data: scan unknown split names the valid ones") {
  try {
    scan_split("around_right");
    FAIL("expected an error");
  } catch (const Error& e) {
    const std::string message = e.what();
    CHECK(message.find("around_right") != std::string::npos);
    CHECK(message.find("simple, length, addprim_jump") != std::string::npos);
  }
}
