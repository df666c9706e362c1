#include "apps/data_description.h"

#include <filesystem>

#include "core/enum_names.h"
#include "core/error.h"

namespace mixlab::app {

namespace {
constexpr EnumName<DataKind> kDataKindNames[] = {{DataKind::Scan, "scan"},
                                                 {DataKind::G2p, "g2p"},
                                                 {DataKind::Tsv, "tsv"},
                                                 {DataKind::FashionMnist, "fashion-mnist"},
                                                 {DataKind::Idx, "idx"},
                                                 {DataKind::ListOps, "listops"},
                                                 {DataKind::LabelledText, "labelled-text"}};
}  // namespace

std::string to_string(DataKind kind) { return enum_to_string(kDataKindNames, kind); }
DataKind parse_data_kind(std::string_view name) {
  return enum_parse(kDataKindNames, "data kind", name);
}

Json DataDescription::to_json() const {
  Json j = Json::object();
  j.set("kind", to_string(kind));
  if (!path.empty()) j.set("path", path);
  if (!split.empty()) j.set("split", split);
  if (!tokens.empty()) j.set("tokens", tokens);
  j.set("seed", seed);
  if (!generator.empty()) {
    Json g = Json::object();
    for (const auto& [k, v] : generator) g.set(k, v);
    j.set("generator", g);
  }
  if (!held_out.empty()) j.set("held_out", held_out);
  if (!augment.empty()) j.set("augment", augment);
  if (!train_targets.empty()) j.set("train_targets", train_targets);
  if (!teacher.empty()) j.set("teacher", teacher);
  if (!labels.empty()) {
    Json l = Json::array();
    for (const auto& name : labels) l.push_back(name);
    j.set("labels", l);
  }
  return j;
}

DataDescription DataDescription::from_json(const Json& j) {
  DataDescription d;
  d.kind = parse_data_kind(j.at("kind").as_string());
  auto text = [&](const char* key, std::string& out) {
    if (const Json* v = j.find(key)) out = v->as_string();
  };
  text("path", d.path);
  text("split", d.split);
  text("tokens", d.tokens);
  text("held_out", d.held_out);
  text("augment", d.augment);
  text("train_targets", d.train_targets);
  text("teacher", d.teacher);
  if (const Json* v = j.find("seed")) d.seed = static_cast<uint64_t>(v->as_int64());
  if (const Json* g = j.find("generator"))
    for (const auto& [k, v] : g->as_object()) d.generator[k] = v.as_int64();
  if (const Json* l = j.find("labels"))
    for (const auto& v : l->as_array()) d.labels.push_back(v.as_string());
  return d;
}

std::string DataDescription::summary() const {
  std::string s;
  switch (kind) {
    case DataKind::Scan:
      s = "SCAN " + split + " split";
      break;
    case DataKind::G2p:
      s = path.empty() ? "CMUdict g014b2b" : "CMUdict word list " + path;
      break;
    case DataKind::Tsv:
      s = "parallel text " + path + " (" + tokens + ")";
      break;
    case DataKind::FashionMnist:
      s = "Fashion-MNIST (" + path + ")";
      break;
    case DataKind::Idx:
      s = "IDX images " + path;
      break;
    case DataKind::LabelledText:
      s = "labelled text " + path;
      break;
    case DataKind::ListOps:
      s = "ListOps (generated";
      for (const auto& [k, v] : generator) s += ", " + k + " " + std::to_string(v);
      s += ")";
      break;
  }
  s += " (seed " + std::to_string(seed);
  if (!held_out.empty()) s += "; held out: " + held_out;
  if (!augment.empty()) s += "; training images augmented: " + augment;
  if (!train_targets.empty()) s += "; training targets from " + train_targets;
  if (!teacher.empty()) s += "; distilled from " + teacher;
  return s + ")";
}

DataDescription read_data_description(const std::string& stored) {
  if (!stored.empty() && stored[0] == '{') return DataDescription::from_json(Json::parse(stored));
  // The sentences of older checkpoints.
  DataDescription d;
  auto after = [&](const std::string& prefix) { return stored.substr(prefix.size()); };
  auto starts = [&](const std::string& prefix) { return stored.rfind(prefix, 0) == 0; };
  if (starts("SCAN ")) {
    d.kind = DataKind::Scan;
    d.split = after("SCAN ").substr(0, after("SCAN ").find(' '));
  } else if (starts("CMUdict")) {
    d.kind = DataKind::G2p;
  } else if (starts("parallel text ")) {
    d.kind = DataKind::Tsv;
    d.path = after("parallel text ");
    d.tokens = "words";
  } else if (starts("ListOps")) {
    d.kind = DataKind::ListOps;
  } else if (starts("Fashion-MNIST")) {
    d.kind = DataKind::FashionMnist;
  } else if (starts("labelled text ")) {
    d.kind = DataKind::LabelledText;
    d.path = after("labelled text ").substr(0, after("labelled text ").find(" (last"));
  } else {
    fail("the checkpoint's data description '", stored,
         "' is not one mixlab wrote; pass --data to say which data to use");
  }
  return d;
}

std::string absolute_path(const std::string& path) {
  return std::filesystem::absolute(path).lexically_normal().string();
}

}  // namespace mixlab::app
