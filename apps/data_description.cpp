#include "apps/data_description.h"

#include <filesystem>

#include "core/error.h"

namespace mixlab::app {

Json DataDescription::to_json() const {
  Json j = Json::object();
  j.set("kind", kind);
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
  if (!labels.empty()) {
    Json l = Json::array();
    for (const auto& name : labels) l.push_back(name);
    j.set("labels", l);
  }
  return j;
}

DataDescription DataDescription::from_json(const Json& j) {
  DataDescription d;
  d.kind = j.at("kind").as_string();
  auto text = [&](const char* key, std::string& out) {
    if (const Json* v = j.find(key)) out = v->as_string();
  };
  text("path", d.path);
  text("split", d.split);
  text("tokens", d.tokens);
  text("held_out", d.held_out);
  if (const Json* v = j.find("seed")) d.seed = static_cast<uint64_t>(v->as_int64());
  if (const Json* g = j.find("generator"))
    for (const auto& [k, v] : g->as_object()) d.generator[k] = v.as_int64();
  if (const Json* l = j.find("labels"))
    for (const auto& v : l->as_array()) d.labels.push_back(v.as_string());
  return d;
}

std::string DataDescription::summary() const {
  std::string s;
  if (kind == "scan")
    s = "SCAN " + split + " split";
  else if (kind == "g2p")
    s = "CMUdict g014b2b";
  else if (kind == "tsv")
    s = "parallel text " + path + " (" + tokens + ")";
  else if (kind == "fashion-mnist")
    s = "Fashion-MNIST (" + path + ")";
  else if (kind == "idx")
    s = "IDX images " + path;
  else if (kind == "labelled-text")
    s = "labelled text " + path;
  else if (kind == "listops") {
    s = "ListOps (generated";
    for (const auto& [k, v] : generator) s += ", " + k + " " + std::to_string(v);
    s += ")";
  } else {
    s = kind;
  }
  s += " (seed " + std::to_string(seed);
  if (!held_out.empty()) s += "; held out: " + held_out;
  return s + ")";
}

DataDescription read_data_description(const std::string& stored) {
  if (!stored.empty() && stored[0] == '{') return DataDescription::from_json(Json::parse(stored));
  // The sentences of older checkpoints.
  DataDescription d;
  auto after = [&](const std::string& prefix) { return stored.substr(prefix.size()); };
  auto starts = [&](const std::string& prefix) { return stored.rfind(prefix, 0) == 0; };
  if (starts("SCAN ")) {
    d.kind = "scan";
    d.split = after("SCAN ").substr(0, after("SCAN ").find(' '));
  } else if (starts("CMUdict")) {
    d.kind = "g2p";
  } else if (starts("parallel text ")) {
    d.kind = "tsv";
    d.path = after("parallel text ");
    d.tokens = "words";
  } else if (starts("ListOps")) {
    d.kind = "listops";
  } else if (starts("Fashion-MNIST")) {
    d.kind = "fashion-mnist";
  } else if (starts("labelled text ")) {
    d.kind = "labelled-text";
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
