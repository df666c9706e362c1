#include "lab/inspect.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <sstream>

#include "lab/errors.h"
#include "lab/svg.h"
#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "core/strings.h"
#include "nn/mixing_capture.h"
#include "nn/models.h"
#include "io/atomic_file.h"
#include "train/run/checkpoint.h"
#include "train/run/checkpoint_info.h"
#include "train/data/idx.h"
#include "io/json.h"
#include "io/safetensors.h"
#include "train/data/vocab.h"

namespace mixlab::lab {

namespace {

// "encoder.layers.1.mixer" -> "encoder layer 1";
// "decoder.layers.0.cross" -> "decoder layer 0, cross".
std::string layer_name(const std::string& module) {
  std::vector<std::string> parts;
  std::stringstream ss(module);
  for (std::string p; std::getline(ss, p, '.');) parts.push_back(p);
  if (parts.size() == 4 && parts[0] == "encoder" && parts[1] == "layers")
    return "encoder layer " + parts[2];
  if (parts.size() == 4 && parts[0] == "decoder" && parts[1] == "layers")
    return "decoder layer " + parts[2] + (parts[3] == "cross" ? ", cross" : ", self");
  return module;
}

// File-name safe: letters, digits and '-' only.
std::string slug(const std::string& text) {
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c))
      out += static_cast<char>(std::tolower(c));
    else if (!out.empty() && out.back() != '-')
      out += '-';
  }
  while (!out.empty() && out.back() == '-') out.pop_back();
  return out;
}

std::vector<std::string> numbered(const std::string& prefix, int64_t n) {
  std::vector<std::string> out;
  for (int64_t i = 0; i < n; ++i) out.push_back(prefix + std::to_string(i));
  return out;
}

// What a model saw: token labels of the encoder's and the decoder's sequences.
struct Sequences {
  std::vector<std::string> source, target;
};

// Labels of one axis of a captured matrix.
std::vector<std::string> axis_labels(const std::string& axis, int64_t n, const MixingMatrix& m,
                                     const Sequences& seq, bool is_row) {
  bool decoder = m.module.rfind("decoder.", 0) == 0;
  bool cross_key = decoder && !is_row && m.module.size() >= 6 &&
                   m.module.compare(m.module.size() - 6, 6, ".cross") == 0;
  if (axis == "query" || axis == "key" || axis == "token") {
    const auto& tokens = decoder && !cross_key ? seq.target : seq.source;
    if (static_cast<int64_t>(tokens.size()) == n) return tokens;
  }
  if (axis == "component") {
    // "synth-mix:R+V" -> R, V
    std::vector<std::string> out;
    std::string rest = m.mixer.substr(m.mixer.find(':') + 1);
    std::stringstream ss(rest);
    for (std::string p; std::getline(ss, p, '+');) out.push_back(p);
    if (static_cast<int64_t>(out.size()) == n) return out;
  }
  if (axis == "memory slot") return numbered("s", n);
  if (axis == "projected key") return numbered("p", n);
  if (axis == "frequency") return numbered("k=", n);
  return numbered("", n);
}

std::vector<std::string> read_lines(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  for (std::string s; std::getline(ss, s);) out.push_back(s);
  return out;
}

struct ImageInput {
  std::vector<float> features;
  std::vector<uint8_t> gray;
  int side = 0;
  int label = -1;
};

ImageInput load_image(const InspectOptions& o) {
  std::string dir =
      o.data.empty() || o.data == "fashion-mnist" ? default_fashion_mnist_dir() : o.data;
  InMemoryDataset test = load_fashion_mnist(dir, "test");
  if (o.image < 0 || o.image >= static_cast<int64_t>(test.size()))
    throw UsageError("--image " + std::to_string(o.image) + ": the test set of " + dir + " has " +
                     std::to_string(test.size()) + " images (0-" +
                     std::to_string(static_cast<int64_t>(test.size()) - 1) + ")");
  const Example& e = test.at(o.image);
  ImageInput in;
  in.features = e.features;
  in.label = e.label;
  in.side = static_cast<int>(std::lround(std::sqrt(static_cast<double>(e.features.size()))));
  for (float f : e.features) {
    double pixel = (f * kFashionMnistStd + kFashionMnistMean) * 255.0;
    in.gray.push_back(static_cast<uint8_t>(std::clamp(std::lround(pixel), 0L, 255L)));
  }
  return in;
}

std::string argmax_answer(const Tensor& logits, const std::vector<std::string>& labels) {
  std::vector<double> v = softmax(logits, -1).to_double_vector();
  size_t k = std::max_element(v.begin(), v.end()) - v.begin();
  std::string name = k < labels.size() ? labels[k] : std::to_string(k);
  return name + " (probability " + std::to_string(v[k]).substr(0, 5) + ")";
}

std::string html_page(const InspectOptions& o, const ModelConfig& c, const std::string& input,
                      const std::string& answer,
                      const std::vector<std::pair<std::string, std::vector<std::string>>>& groups) {
  std::string h =
      "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>mixlab inspect</title>\n"
      "<style>body{font-family:sans-serif;margin:24px;max-width:1800px}"
      ".grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(420px,1fr));gap:14px}"
      "figure{margin:0}img{max-width:100%;border:1px solid #ddd}"
      "figcaption{font-size:12px;color:#555}code{background:#f4f4f4}</style></head><body>\n";
  h += "<h1>Mixing matrices</h1>\n<p>checkpoint <code>" + xml_escape(o.checkpoint) +
       "</code>: " + xml_escape(to_string(c.task)) + ", mixer <b>" + xml_escape(c.mixer) + "</b>";
  if (c.task == ModelTask::Translate)
    h += ", decoder self-mixer <b>" + xml_escape(c.decoder_mixer) + "</b>, cross <b>" +
         xml_escape(c.cross) + "</b>";
  h += ", d=" + std::to_string(c.dim) + ", h=" + std::to_string(c.heads) +
       ", layers=" + std::to_string(c.layers) + "</p>\n<p>input: <code>" + xml_escape(input) +
       "</code><br>answer: <b>" + xml_escape(answer) + "</b></p>\n" +
       "<p>Each picture is one layer and head; colours are viridis over the matrix's own range "
       "(the colour bar gives the values; open a picture to read each cell's value). The raw "
       "matrices are in <code>mixing.safetensors</code>.</p>\n";
  for (const auto& [heading, files] : groups) {
    h += "<h2>" + xml_escape(heading) + "</h2>\n<div class=\"grid\">\n";
    for (const auto& f : files)
      h += "<figure><a href=\"" + f + "\"><img src=\"" + f + "\" loading=\"lazy\"></a>" +
           "<figcaption>" + xml_escape(f) + "</figcaption></figure>\n";
    h += "</div>\n";
  }
  return h + "</body></html>\n";
}

}  // namespace

InspectResult run_inspect(const InspectOptions& o) {
  CheckpointInfo info = read_checkpoint_info(o.checkpoint);
  const ModelConfig& c = info.config;
  std::vector<MixingMatrix> matrices;
  Sequences seq;
  std::string input_text = o.input, answer;
  ImageInput image;
  NoGradGuard no_grad;
  if (c.task == ModelTask::Classify) {
    Classifier model(c);
    load_weights(o.checkpoint, model);
    model.to(o.device);
    model.eval();
    Tensor inputs;
    if (c.input == InputKind::Image) {
      if (o.image < 0) throw UsageError("this checkpoint classifies images: pass --image N");
      image = load_image(o);
      inputs = Tensor::from_data(image.features, {1, static_cast<int64_t>(image.features.size())})
                   .to(o.device);
      seq.source = numbered("p", (image.side / c.patch) * (image.side / c.patch));
      input_text = "test image " + std::to_string(o.image) + " of " +
                   (o.data.empty() ? "fashion-mnist" : o.data) + " (label " +
                   std::to_string(image.label) + ")";
    } else {
      if (o.input.empty()) throw UsageError("this checkpoint classifies tokens: pass --input TEXT");
      Vocab vocab = Vocab::from_string(info.vocab_src);
      seq.source = tokenize_words(o.input);
      std::vector<int32_t> ids = vocab.encode(seq.source);
      if (static_cast<int64_t>(ids.size()) > c.max_len)
        throw UsageError("--input has " + std::to_string(ids.size()) +
                         " tokens; the model takes at most max_len = " + std::to_string(c.max_len));
      inputs = Tensor::from_data(ids, {1, static_cast<int64_t>(ids.size())}).to(o.device);
    }
    if (c.pool == PoolKind::Cls) seq.source.insert(seq.source.begin(), "[CLS]");
    MixingRecorder recorder(model);
    Tensor logits = model.forward(inputs);
    matrices = recorder.matrices();
    answer = argmax_answer(logits, read_lines(info.extra["labels"]));
  } else {
    if (o.input.empty()) throw UsageError("a translator needs --input TEXT (the source)");
    Translator model(c);
    load_weights(o.checkpoint, model);
    model.to(o.device);
    model.eval();
    Vocab src = Vocab::from_string(info.vocab_src), tgt = Vocab::from_string(info.vocab_tgt);
    std::string kind = info.extra.count("src_tokens") ? info.extra["src_tokens"] : "words";
    seq.source = kind == "chars" ? tokenize_chars(o.input) : tokenize_words(o.input);
    std::vector<int32_t> src_ids = src.encode(seq.source, false, true);
    seq.source.push_back("<eos>");
    if (static_cast<int64_t>(src_ids.size()) > c.max_len)
      throw UsageError(
          "--input has " + std::to_string(src_ids.size()) +
          " tokens with <eos>; the model takes at most max_len = " + std::to_string(c.max_len));
    Tensor source =
        Tensor::from_data(src_ids, {1, static_cast<int64_t>(src_ids.size())}).to(o.device);
    std::vector<int32_t> out_ids;
    if (!o.target.empty()) {
      // A target the model cannot read is refused, never mapped to <unk> or cut short: the
      // matrices of a different target would be shown under this one's name.
      const std::vector<std::string> words = tokenize_words(o.target);
      std::vector<std::string> unknown;
      for (const auto& w : words)
        if (!tgt.contains(w) && std::find(unknown.begin(), unknown.end(), w) == unknown.end())
          unknown.push_back(w);
      if (!unknown.empty())
        throw UsageError("--target: " + std::to_string(unknown.size()) +
                         " token(s) not in the model's target vocabulary: " + join(unknown, ", "));
      if (static_cast<int64_t>(words.size()) + 1 > c.tgt_max_len)
        throw UsageError("--target has " + std::to_string(words.size()) +
                         " tokens; with <bos> the model takes at most tgt_max_len = " +
                         std::to_string(c.tgt_max_len) + ", so at most " +
                         std::to_string(c.tgt_max_len - 1));
      out_ids = tgt.encode(words);
    } else {
      DecodeOptions d;
      d.max_len = c.tgt_max_len - 1;
      d.bos = Vocab::kBos;
      d.eos = Vocab::kEos;
      out_ids = model.generate(source, {static_cast<int32_t>(src_ids.size())}, d).at(0);
    }
    std::vector<int32_t> tgt_in{Vocab::kBos};
    tgt_in.insert(tgt_in.end(), out_ids.begin(), out_ids.end());
    if (static_cast<int64_t>(tgt_in.size()) > c.tgt_max_len) tgt_in.resize(c.tgt_max_len);
    seq.target = {"<bos>"};
    for (size_t i = 1; i < tgt_in.size(); ++i) seq.target.push_back(tgt.token(tgt_in[i]));
    answer = join(std::vector<std::string>(seq.target.begin() + 1, seq.target.end()), " ");
    if (!o.target.empty()) answer = "teacher-forced target: " + answer;
    MixingRecorder recorder(model);
    model.forward(source, {},
                  Tensor::from_data(tgt_in, {1, static_cast<int64_t>(tgt_in.size())}).to(o.device),
                  {});
    matrices = recorder.matrices();
  }

  namespace fs = std::filesystem;
  fs::create_directories(o.out + "/heatmaps");
  InspectResult result;
  std::vector<TensorRecord> records;
  Json described = Json::array();
  std::vector<std::pair<std::string, std::vector<std::string>>> groups;
  int index = 0;
  for (const MixingMatrix& m : matrices) {
    std::string name = m.module + "." + slug(m.what);
    auto rows = axis_labels(m.rows, m.n_rows(), m, seq, true);
    auto cols = axis_labels(m.cols, m.n_cols(), m, seq, false);
    TensorRecord r{name, "F64", m.shape, {}};
    r.bytes.resize(m.values.size() * sizeof(double));
    std::memcpy(r.bytes.data(), m.values.data(), r.bytes.size());
    records.push_back(std::move(r));
    Json d = Json::object();
    d.set("name", name);
    d.set("module", m.module);
    d.set("mixer", m.mixer);
    d.set("what", m.what);
    d.set("rows", m.rows);
    d.set("cols", m.cols);
    d.set("rule", row_rule_text(m.rule));
    Json rl = Json::array(), cl = Json::array();
    for (const auto& s : rows) rl.push_back(s);
    for (const auto& s : cols) cl.push_back(s);
    d.set("row_labels", rl);
    d.set("col_labels", cl);
    described.push_back(d);

    std::string heading = layer_name(m.module) + ": " + m.what + " (" + m.mixer + ")";
    if (groups.empty() || groups.back().first != heading) groups.push_back({heading, {}});
    for (int64_t h = 0; h < m.heads(); ++h) {
      Heatmap map;
      map.title = layer_name(m.module) + (m.heads() > 1 ? " · head " + std::to_string(h) : "") +
                  " · " + m.what;
      map.subtitle = m.module + " (" + m.mixer + "): " + row_rule_text(m.rule);
      map.rows = m.n_rows();
      map.cols = m.n_cols();
      map.values.assign(m.values.begin() + h * map.rows * map.cols,
                        m.values.begin() + (h + 1) * map.rows * map.cols);
      map.row_labels = rows;
      map.col_labels = cols;
      map.row_axis = m.rows;
      map.col_axis = m.cols;
      char prefix[16];
      std::snprintf(prefix, sizeof prefix, "%02d", index);
      std::string file = "heatmaps/" + std::string(prefix) + "-" + slug(m.module) + "-" +
                         slug(m.what) + "-h" + std::to_string(h) + ".svg";
      write_file_atomically(o.out + "/" + file, std::string_view(heatmap_svg(map)));
      result.heatmaps.push_back(file);
      groups.back().second.push_back(file);

      // Image classifiers: a square token-by-token matrix over the patches, drawn on the image.
      int64_t first = c.pool == PoolKind::Cls ? 1 : 0;
      int64_t patches = static_cast<int64_t>(seq.source.size()) - first;
      if (c.input == InputKind::Image && c.task == ModelTask::Classify && m.rows == "query" &&
          m.cols == "key" && m.n_rows() == patches + first && m.n_cols() == patches + first) {
        std::vector<std::vector<double>> w(patches, std::vector<double>(patches));
        for (int64_t q = 0; q < patches; ++q)
          for (int64_t k = 0; k < patches; ++k) w[q][k] = m.at(0, h, q + first, k + first);
        std::string pfile = "patches/" + std::string(prefix) + "-" + slug(m.module) + "-" +
                            slug(m.what) + "-h" + std::to_string(h) + ".svg";
        fs::create_directories(o.out + "/patches");
        write_file_atomically(o.out + "/" + pfile, std::string_view(patch_attention_svg(
                                                       map.title + " on the image", image.gray,
                                                       image.side, static_cast<int>(c.patch), w)));
        groups.back().second.push_back(pfile);
      }
    }
    ++index;
  }
  save_safetensors(o.out + "/mixing.safetensors", records,
                   {{"matrices", described.dump()}, {"input", input_text}});
  result.answer = answer;
  result.index_html = o.out + "/index.html";
  write_file_atomically(result.index_html,
                        std::string_view(html_page(o, c, input_text, answer, groups)));
  return result;
}

}  // namespace mixlab::lab
