// The bad-input table: malformed inputs for every reader and flag, each with the error text it
// must give (file and line for data, the tensor for checkpoints, the flag for flags), run through
// the real executable against an existing run folder whose every file must stay byte-identical
// (hashed before and after). Readers the command line cannot reach directly (JSON, the CMUdict
// formats) are called through their functions. Messages are matched as fragments; `{dir}` in a
// fragment stands for the test's input folder.
#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>
#include <limits>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <zlib.h>

#include "core/error.h"
#include "tests/app_runner.h"
#include "tests/temp_dir.h"
#include "train/run/checkpoint.h"
#include "train/data/cmudict.h"
#include "io/json.h"
#include "io/safetensors.h"
#include "tests/file_helpers.h"

using namespace mixlab;
using mixlab::testing::read_file;
namespace fs = std::filesystem;

namespace {

void put(const fs::path& path, const std::string& content) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << content;
}

std::string gzip(const std::string& text) {
  uLongf size = compressBound(text.size()) + 32;
  std::string out(size, '\0');
  z_stream z{};
  deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);  // +16: gzip wrapper
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  z.avail_in = static_cast<uInt>(text.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

std::string big_endian32(uint32_t v) {
  return {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8),
          static_cast<char>(v)};
}

std::string idx(const std::vector<uint32_t>& dims, const std::string& payload) {
  std::string out = big_endian32(0x0800u | static_cast<uint32_t>(dims.size()));
  for (uint32_t d : dims) out += big_endian32(d);
  return out + payload;
}

// A folder of the four Fashion-MNIST files with 20 blank 28x28 images.
void fashion_dir(const fs::path& dir, const std::string& images, const std::string& labels) {
  for (const char* split : {"train", "t10k"}) {
    put(dir / (std::string(split) + "-images-idx3-ubyte"), images);
    put(dir / (std::string(split) + "-labels-idx1-ubyte"), labels);
  }
}

// Every file of a folder with its content, to compare before and after a refused command.
std::map<std::string, std::string> contents(const fs::path& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) out[e.path().lexically_relative(dir).string()] = read_file(e.path());
  return out;
}

std::vector<std::string> split_args(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> out;
  for (std::string word; in >> word;) out.push_back(word);
  return out;
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
  return s;
}

// A command and what it must say. `code` 1: a runtime failure (bad data or file), 2: usage.
struct CliCase {
  std::string args;  // {dir}: the input folder; the run folder's --out is appended
  std::string message;
  int code;
  std::map<std::string, std::string> env = {};
};

const std::string kModel = " --dim 16 --heads 2 --layers 1 --steps 2 --quiet";

}  // namespace

TEST_CASE("bad input: every refused input names its cause and leaves the run folder unchanged") {
  mixlab::testing::TempDir tmp;
  const fs::path dir = tmp.root;
  // Inputs.
  std::string pairs;
  for (const char* a : {"walk", "run", "jump", "look"})
    for (const char* b : {"walk", "run", "jump", "look"})
      pairs += std::string(a) + " and " + b + "\t" + a + " " + b + "\n";
  put(dir / "pairs.tsv", pairs);
  put(dir / "notab.tsv", "walk\tWALK\njump JUMP\n");
  put(dir / "twotabs.tsv", "walk\tWALK\tX\n");
  put(dir / "nosrc.tsv", "walk\tWALK\n  \tJUMP\n");
  put(dir / "notgt.tsv", "walk\tWALK\njump\t \n");
  put(dir / "utf8.tsv", "walk\tWALK\njump\tJUMP\nl\xFFook\tLOOK\n");
  const std::string gz = gzip(std::string(4000, 'a') + "\tA\n");
  put(dir / "cut.tsv.gz", gz.substr(0, gz.size() / 2));
  put(dir / "lab_notab.tsv", "pos\tgood\nneg bad\n");
  put(dir / "lab_nolabel.tsv", "pos\tgood\n \tbad\n");
  put(dir / "lab_notext.tsv", "pos\tgood\nneg\t  \n");
  put(dir / "lab_utf8.tsv",
      "pos\tgood\nneg\tb\xC3"
      "d\n");
  const std::string images = idx({20, 28, 28}, std::string(20 * 784, '\0'));
  std::string label_bytes;
  for (int i = 0; i < 20; ++i) label_bytes += static_cast<char>(i % 10);
  const std::string labels = idx({20}, label_bytes);
  fashion_dir(dir / "idx_magic", std::string("\0\0\x09\x03", 4) + images.substr(4), labels);
  fashion_dir(dir / "idx_header", images.substr(0, 10), labels);
  fashion_dir(dir / "idx_short", images.substr(0, images.size() - 5), labels);
  fashion_dir(dir / "idx_long", images + "xx", labels);
  fashion_dir(dir / "idx_label", images, idx({20}, std::string(20, '\x0C')));
  fashion_dir(dir / "idx_count", images, idx({19}, std::string(19, '\0')));
  fashion_dir(dir / "idx_size", idx({20, 14, 14}, std::string(20 * 196, '\0')), labels);
  put(dir / "g2p_bad/g014b2b.train", "ABLE\tEY B AH L\nZOO\n");
  put(dir / "g2p_bad/g014b2b.ref", "ABLE\tEY B L\n");
  fs::create_directories(dir / "g2p_none");
  put(dir / "heads.ini", "[translate.train]\nheads=\"abc\"\n");

  // The run folder every command writes to (--out), from a real run.
  const fs::path run = dir / "run";
  mixlab::testing::Exit first =
      mixlab::testing::run_app(split_args("translate train --data " + (dir / "pairs.tsv").string() +
                                          kModel + " --out " + run.string()),
                               (dir / "first.log").string());
  INFO(first.output);
  REQUIRE(first.code == 0);
  // Damaged copies of its checkpoint.
  const std::string good = read_file(run / "last.safetensors");
  put(dir / "cut.safetensors", good.substr(0, good.size() / 2));
  std::string flipped = good;
  flipped[flipped.size() - 3] ^= 0x40;
  put(dir / "flip.safetensors", flipped);
  put(dir / "empty.safetensors", "");
  {
    // A diverged run's checkpoint: a NaN in one weight, with a valid checksum.
    SafetensorsFile f = load_safetensors((run / "last.safetensors").string());
    TensorRecord* r = nullptr;
    for (auto& t : f.tensors)
      if (t.name == "encoder.layers.0.ffn.fc1.weight") r = &t;
    REQUIRE(r != nullptr);
    const float nan = std::numeric_limits<float>::quiet_NaN();
    std::memcpy(r->bytes.data() + 4 * sizeof(float), &nan, sizeof nan);
    f.metadata["mixlab.checksum"] = checkpoint_checksum(f.tensors, f.metadata);
    save_safetensors((dir / "nan.safetensors").string(), f.tensors, f.metadata);
  }

  const std::string T = "translate train --data {dir}/pairs.tsv" + kModel;
  const std::vector<CliCase> cases = {
      // Parallel text (source<TAB>target).
      {"translate train --data {dir}/notab.tsv" + kModel,
       "{dir}/notab.tsv:2: no tab; expected 'source<TAB>target'", 1},
      {"translate train --data {dir}/twotabs.tsv" + kModel,
       "{dir}/twotabs.tsv:1: more than one tab; expected 'source<TAB>target'", 1},
      {"translate train --data {dir}/nosrc.tsv" + kModel, "{dir}/nosrc.tsv:2: empty source", 1},
      {"translate train --data {dir}/notgt.tsv" + kModel, "{dir}/notgt.tsv:2: empty target", 1},
      {"translate train --data {dir}/utf8.tsv" + kModel,
       "{dir}/utf8.tsv:3: invalid UTF-8 (byte 0xFF at column 2)", 1},
      {"translate train --data {dir}/cut.tsv.gz" + kModel,
       "{dir}/cut.tsv.gz: cannot read (unexpected end of file); the file is truncated or corrupt",
       1},
      {"translate train --data {dir}/missing.tsv" + kModel,
       "--data '{dir}/missing.tsv': expected scan, g2p, g2p:WORD_LIST or a source<TAB>target file",
       2},
      // Labelled text (label<TAB>text).
      {"classify train --data {dir}/lab_notab.tsv" + kModel,
       "{dir}/lab_notab.tsv:2: no tab; expected 'label<TAB>text'", 1},
      {"classify train --data {dir}/lab_nolabel.tsv" + kModel,
       "{dir}/lab_nolabel.tsv:2: empty label", 1},
      {"classify train --data {dir}/lab_notext.tsv" + kModel, "{dir}/lab_notext.tsv:2: empty text",
       1},
      {"classify train --data {dir}/lab_utf8.tsv" + kModel,
       "{dir}/lab_utf8.tsv:2: invalid UTF-8 (byte 0xC3 at column 6)", 1},
      // IDX folders.
      {"classify train --data {dir}/idx_magic" + kModel,
       "{dir}/idx_magic/train-images-idx3-ubyte: not an unsigned-byte IDX file (magic 0x903", 1},
      {"classify train --data {dir}/idx_header" + kModel,
       "{dir}/idx_header/train-images-idx3-ubyte: truncated IDX header (10 bytes, need 16 for 3 "
       "dimensions)",
       1},
      {"classify train --data {dir}/idx_short" + kModel,
       "{dir}/idx_short/train-images-idx3-ubyte: truncated IDX file: the header promises 15680 "
       "bytes of data, the file holds 15675",
       1},
      {"classify train --data {dir}/idx_long" + kModel,
       "{dir}/idx_long/train-images-idx3-ubyte: 2 unexpected bytes after the IDX data", 1},
      {"classify train --data {dir}/idx_label" + kModel,
       "{dir}/idx_label/train-labels-idx1-ubyte: label 12 of example 0 is not in 0..9", 1},
      {"classify train --data {dir}/idx_count" + kModel,
       "{dir}/idx_count/train-images-idx3-ubyte holds 20 images but "
       "{dir}/idx_count/train-labels-idx1-ubyte holds 19 labels",
       1},
      {"classify train --data {dir}/idx_size" + kModel,
       "{dir}/idx_size/train-images-idx3-ubyte: expected images of shape [N, 28, 28]", 1},
      // g014b2b through the command line.
      {"translate train --data g2p" + kModel,
       "{dir}/g2p_bad/g014b2b.train:2: expected 'WORD<TAB>PH1 PH2 ...'",
       1,
       {{"MIXLAB_G2P_DIR", (dir / "g2p_bad").string()}}},
      {"translate train --data g2p" + kModel,
       "load_g2p: {dir}/g2p_none/g014b2b.train(.gz) not found",
       1,
       {{"MIXLAB_G2P_DIR", (dir / "g2p_none").string()}}},
      // Config files.
      {"--config {dir}/missing.ini " + T, "{dir}/missing.ini was not readable", 2},
      {"--config {dir}/heads.ini translate train --data {dir}/pairs.tsv --steps 2 --quiet",
       "--heads: Value abc not in range 1 to 1024", 2},
      // Checkpoints.
      {"translate eval --data {dir}/pairs.tsv --checkpoint {dir}/cut.safetensors",
       "safetensors '{dir}/cut.safetensors': tensor \"optimizer.", 1},
      {"translate eval --data {dir}/pairs.tsv --checkpoint {dir}/flip.safetensors",
       "checkpoint '{dir}/flip.safetensors' is corrupt: its checksum is crc32:", 1},
      {"translate run --checkpoint {dir}/flip.safetensors",
       "checkpoint '{dir}/flip.safetensors' is corrupt: its checksum is crc32:", 1},
      {"translate eval --data {dir}/pairs.tsv --checkpoint {dir}/empty.safetensors",
       "safetensors '{dir}/empty.safetensors': truncated: 0 bytes, shorter than the 8-byte header "
       "length",
       1},
      {"translate eval --data {dir}/pairs.tsv --checkpoint {dir}/missing.safetensors",
       "checkpoint '{dir}/missing.safetensors' does not exist", 1},
      {"translate eval --data {dir}/pairs.tsv --checkpoint {dir}/nan.safetensors",
       "tensor 'encoder.layers.0.ffn.fc1.weight' holds 1 non-finite value(s) (the first, element "
       "4, is nan)",
       1},
      // Flags.
      {T + " --mixer nosuch", "unknown mixer 'nosuch' (known mixers: attention,", 2},
      {T + " --decoder-mixer fnet", "mixer 'fnet' cannot be causal: a Fourier transform", 2},
      {T + " --mixer-opt rank=3",
       "mixer 'attention' has no option 'rank' (its options: rel-bias, lsa)", 2},
      {T + " --mixer synth-frandom --mixer-opt rnk=3",
       "mixer 'synth-frandom' has no option 'rnk'; did you mean 'rank'? (its options: rank)", 2},
      {T + " --mixer-opt novalue", "--mixer-opt 'novalue': expected key=value", 2},
      {"translate train --data {dir}/pairs.tsv --dim 10 --heads 3 --layers 1 --steps 2",
       "--dim 10 must be a positive multiple of --heads 3", 2},
      {T + " --pos bogus", "--pos: bogus not in {learned,sinusoidal,none}", 2},
      {T + " --no-such-flag", "The following argument was not expected: --no-such-flag", 2},
      {T + " --threads abc", "--threads: 'abc' is not a whole number of threads from 1 to 256", 2},
      {T + " --device tpu", "unknown device 'tpu': expected cpu, ref, cuda or cuda:N", 2},
      {T + " --tokens bogus", "--tokens: bogus not in {words,chars}", 2},
      {"classify train --data listops --pool bogus" + kModel, "--pool: bogus not in {mean,cls}", 2},
  };
  REQUIRE(contents(run).size() >= 5);
  const std::string dir_text = dir.string();
  for (size_t i = 0; i < cases.size(); ++i) {
    const CliCase& c = cases[i];
    // A training command gets a new --out (an existing run folder is refused on its own, before
    // any reader runs); nothing may appear there, and the finished run beside it must not change.
    // eval/run/predict write no files and take no --out.
    const fs::path fresh = dir / ("out" + std::to_string(i));
    const bool trains = c.args.find(" train") != std::string::npos;
    const std::string args =
        replace_all(c.args, "{dir}", dir_text) + (trains ? " --out " + fresh.string() : "");
    const std::string message = replace_all(c.message, "{dir}", dir_text);
    const auto before = contents(run);
    mixlab::testing::Exit e = mixlab::testing::run_app(
        split_args(args), (dir / ("case" + std::to_string(i) + ".log")).string(), c.env);
    INFO("case " << i << ": mixlab " << args << "\n" << e.output);
    CHECK(e.code == c.code);
    CHECK(e.output.find(message) != std::string::npos);
    CHECK(contents(run) == before);
    CHECK((!fs::exists(fresh) || fs::is_empty(fresh)));
  }
}

TEST_CASE("bad input: JSON and CMUdict readers name the line and what is wrong") {
  mixlab::testing::TempDir tmp;
  const fs::path dir = tmp.root;
  auto error_of = [](const std::function<void()>& action) -> std::string {
    try {
      action();
    } catch (const Error& e) {
      return e.what();
    }
    return "(no error)";
  };
  struct Case {
    std::function<void()> action;
    std::string message;
  };
  put(dir / "nophones.dict", "ABLE  EY1 B AH0 L\nZOO\n");
  put(dir / "alternate.dict", "ABLE  EY1 B AH0 L\nABLE(x)  EY1 B L\n");
  put(dir / "dup.ref", "ABLE\tEY B L\nZOO\tZ UW\nABLE\tEY B AH L\n");
  put(dir / "noref.ref", "ABLE\tEY B L\nZOO\n");
  const std::string d = dir.string();
  const std::vector<Case> cases = {
      {[] { Json::parse("{\"a\": 1,\n \"b\" 2}"); }, "expected ':' at line 2, column 6"},
      {[] { Json::parse("[1, 2"); },
       "json: syntax error while parsing array - unexpected end of input"},
      {[] { Json::parse("{\"a\": tru}"); },
       "json: syntax error while parsing value - invalid literal"},
      {[] { Json::parse("{} x"); }, "expected end of input at line 1, column 4"},
      {[&] { read_cmudict(d + "/nophones.dict"); },
       d + "/nophones.dict:2: expected 'WORD PH1 PH2 ...', got 'ZOO'"},
      {[&] { read_cmudict(d + "/alternate.dict"); },
       d + "/alternate.dict:2: malformed alternate marker in 'ABLE(x)'"},
      {[&] { read_g2p_ref(d + "/dup.ref"); },
       d + "/dup.ref:3: word 'ABLE' already listed on line 1"},
      {[&] { read_g2p_ref(d + "/noref.ref"); },
       d + "/noref.ref:2: expected 'WORD<TAB>PRON1<TAB>PRON2...' (at least one reference)"},
  };
  for (const Case& c : cases) {
    const std::string error = error_of(c.action);
    INFO(error);
    CHECK(error.find(c.message) != std::string::npos);
  }
}
