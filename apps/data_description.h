// What a run trained on, stored as a JSON object in every checkpoint (metadata extra["data"]),
// so that `eval`, `predict` and `run` rebuild the same data without being told:
//   {"kind":"scan","split":"length","seed":0,"held_out":"5% of train, chosen by the seed"}
//   {"kind":"tsv","path":"/abs/pairs.tsv","tokens":"words","held_out":"the last 10% of lines"}
//   {"kind":"listops","seed":3,"generator":{"min_len":16,"max_len":128,...},"labels":[...]}
// Kinds: translation scan | g2p | tsv; classification fashion-mnist | idx | listops |
// labelled-text. Paths are absolute, so a checkpoint works from any directory.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "io/json.h"

namespace mixlab::app {

// The kinds of data; the JSON holds the names to_string gives ("scan", "fashion-mnist", ...).
enum class DataKind { Scan, G2p, Tsv, FashionMnist, Idx, ListOps, LabelledText };
std::string to_string(DataKind kind);
DataKind parse_data_kind(std::string_view name);  // names the valid kinds when `name` is none

struct DataDescription {
  DataKind kind = DataKind::Scan;
  std::string path;    // the file or folder read; empty for generated and shipped sets
  std::string split;   // scan: simple | length | addprim_jump
  std::string tokens;  // tsv: words | chars
  uint64_t seed = 0;   // generated data and seeded hold-outs
  std::map<std::string, int64_t> generator;  // listops: min_len, max_len, depth, args, counts
  std::string held_out;                      // how validation (and test) examples were chosen
  std::vector<std::string> labels;           // classification: class names in id order
  std::string augment;  // training images: the augmentation (train/data/augment.h), "" = none
  // g2p: the file the training words' targets were read from (`--train-targets`, sequence-level
  // distillation), "" = the dictionary's.
  std::string train_targets;
  // classification: the teachers whose predicted classes are a second set of training labels
  // (`--teacher`, hard distillation) and that set's weight; "" = none.
  std::string teacher;

  Json to_json() const;
  static DataDescription from_json(const Json& json);
  // One line for people: "SCAN length split (seed 0; valid: 5% of train, chosen by the seed)".
  std::string summary() const;
  bool operator==(const DataDescription&) const = default;
};

// The description in a checkpoint's extra["data"]: the JSON object, or the sentence checkpoints
// written before it held ("SCAN simple split", "parallel text FILE", ...), read back as well as
// it allows. Throws Error when neither.
DataDescription read_data_description(const std::string& stored);

// An absolute, normal form of a data path, so that descriptions compare and work from anywhere.
std::string absolute_path(const std::string& path);

}  // namespace mixlab::app
