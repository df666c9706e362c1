// SCAN (Lake and Baroni 2018), generated from its grammar rather than read from files: every one
// of the 20,910 commands with its action sequence, and the three standard splits.
//
// Commands are word tokens ("jump", "around", "right", ...); actions are the six tokens I_WALK,
// I_LOOK, I_RUN, I_JUMP, I_TURN_LEFT, I_TURN_RIGHT. The grammar and interpretation rules are those
// of docs/datasets.md.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "train/data/seq2seq_text.h"

namespace mixlab {

using ScanPair = Seq2SeqText;  // src: command words, tgt: actions

struct ScanSplit {
  std::vector<ScanPair> train;
  std::vector<ScanPair> test;
};

// All 20,910 commands in a fixed generation order: first the 102 single phrases S, then every
// "S1 and S2", then every "S1 after S2" (S2 varying fastest). Each S is V, "V twice", "V thrice";
// the 34 V are, in order, "x opposite d" and "x around d" for x in walk look run jump turn and
// d in left right, then the ten D ("u left", "u right" for each verb u, "turn left",
// "turn right"), then the four bare verbs.
std::vector<ScanPair> scan_all();

// The names scan_split accepts: "simple", "length", "addprim_jump".
const std::vector<std::string>& scan_split_names();

// A standard split of scan_all():
//   simple       all commands shuffled with SplitMix64(seed) (Fisher-Yates, see rng.h); the first
//                16,728 (80%) train, the other 4,182 test, both in shuffled order.
//   length       train: commands with at most 22 actions (16,990); test: 24 to 48 (3,920).
//   addprim_jump train: commands without "jump" (13,203) plus the bare command "jump";
//                test: every other command containing "jump" (7,706).
// `length` and `addprim_jump` keep generation order and ignore the seed (the loader shuffles).
// An unknown name throws Error listing the valid ones.
ScanSplit scan_split(const std::string& name, uint64_t seed = 0);

// Interprets one command by parsing it against the grammar (independently of the generator, so
// the two check each other). Throws Error for a command the grammar does not produce.
std::vector<std::string> scan_interpret(const std::vector<std::string>& command);

}  // namespace mixlab
