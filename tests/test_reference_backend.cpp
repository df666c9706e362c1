// The reference backend (backends/reference/): small and plain enough to read, complete, and a
// device of its own. The op harness (tests/test_ops_backends.cpp) holds every other backend to
// its kernels one by one; here the command line trains a tiny SCAN translator and a ListOps
// classifier 30 steps with --device ref and with --device cpu, and every logged loss agrees to
// 1e-4 relative: all the kernels, the dropout masks and the optimiser together. The other
// commands (eval, run, predict, inspect) then take --device ref too.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <algorithm>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "io/run_log.h"
#include "nn/mixer_registry.h"
#include "nn/models.h"
#include "tests/app_runner.h"
#include "tests/file_helpers.h"
#include "tests/mixer_harness.h"
#include "tests/model_configs.h"
#include "tests/temp_dir.h"
#include "train/loop/trainer.h"
#include "train/data/scan.h"

namespace fs = std::filesystem;

namespace {

const fs::path kReferenceFolder = fs::path(MIXLAB_SOURCE_DIR) / "backends" / "reference";
constexpr int64_t kReferenceLineBudget = 2500;

// The backend's sources, sorted by name.
std::vector<fs::path> reference_sources() {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(kReferenceFolder))
    if (e.path().extension() == ".cpp" || e.path().extension() == ".h") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  return files;
}

// The training losses a run logged in its metrics.csv, in order.
std::vector<double> logged_train_losses(const std::string& run_folder) {
  std::vector<double> losses;
  for (const auto& row : mixlab::read_metrics_csv(run_folder + "/metrics.csv").rows)
    if (row.phase == "train" && row.values.count(mixlab::kTrainLossColumn))
      losses.push_back(row.values.at(mixlab::kTrainLossColumn));
  return losses;
}

// Runs `mixlab ARGS` with stdin from `input_file` (may be empty: /dev/null); stdout and stderr.
mixlab::testing::Exit mixlab_with_input(const std::string& args, const std::string& input_file,
                                        const std::string& log) {
  return mixlab::testing::run_app_shell(args, log, "", "", input_file);
}

// Trains with `args` on cpu and on ref (each its own run folder) and checks that every logged loss
// agrees to 1e-4 relative and that the loss moved (the run trained). Returns the ref run folder.
std::string train_on_both(const mixlab::testing::TempDir& dir, const std::string& name,
                          const std::vector<std::string>& args) {
  std::vector<std::vector<double>> losses;
  for (const std::string device : {"cpu", "ref"}) {
    const std::string out = dir.file(name + "-" + device);
    std::vector<std::string> full = args;
    full.insert(full.end(),
                {"--steps", "30", "--log-every", "1", "--device", device, "--out", out});
    mixlab::testing::Exit run = mixlab::testing::run_app(full, out + ".log");
    INFO(device << ": " << run.output);
    REQUIRE(run.code == 0);
    CHECK(mixlab::testing::contains(run.output, " on " + device));  // --device was applied
    losses.push_back(logged_train_losses(out));
  }
  const std::vector<double>&cpu = losses[0], &ref = losses[1];
  REQUIRE(cpu.size() == 30);
  REQUIRE(ref.size() == cpu.size());
  CHECK(std::abs(cpu.back() - cpu.front()) > 1e-2);  // it trained: the comparison means something
  for (size_t i = 0; i < cpu.size(); ++i) {
    INFO(name << " step " << i + 1 << ": cpu loss " << cpu[i] << ", ref loss " << ref[i]);
    CHECK(std::abs(ref[i] - cpu[i]) <= 1e-4 * std::abs(cpu[i]));
  }
  return dir.file(name + "-ref");
}

// The loss of `model` (already on `device`) and then every parameter's gradient, on the host.
template <typename Model, typename Loss>
std::vector<std::vector<double>> loss_and_gradients(Model& model, mixlab::Device device,
                                                    Loss loss_of) {
  model.to(device);
  mixlab::Tensor loss = loss_of(device);
  std::vector<std::vector<double>> out{loss.to_double_vector()};
  loss.backward();
  // A parameter the loss does not reach has no gradient on either device (s4d's backward kernel
  // C_b in a causal decoder, mixers.md §16): an empty entry, compared like the others.
  for (const mixlab::Tensor& p : model.parameters())
    out.push_back(p.grad().defined() ? p.grad().to_double_vector() : std::vector<double>{});
  return out;
}

// Every value of `got` within 1e-4 of `want` relative to the largest magnitude of its tensor, or
// within 1e-5 (float32 noise where a gradient is 0 in exact arithmetic: a bias before a norm).
void check_same_values(const std::vector<std::vector<double>>& want,
                       const std::vector<std::vector<double>>& got) {
  REQUIRE(want.size() == got.size());
  for (size_t t = 0; t < want.size(); ++t) {
    REQUIRE(want[t].size() == got[t].size());
    double scale = 0, worst = 0;
    size_t at = 0;
    for (double v : want[t]) scale = std::max(scale, std::abs(v));
    for (size_t i = 0; i < want[t].size(); ++i)
      if (std::abs(want[t][i] - got[t][i]) > worst)
        worst = std::abs(want[t][i] - got[t][i]), at = i;
    INFO((t == 0 ? "the loss" : "gradient of parameter " + std::to_string(t - 1))
         << ": worst element " << at << ", cpu " << want[t][at] << ", ref " << got[t][at]);
    CHECK(worst <= 1e-5 + 1e-4 * scale);
  }
}

}  // namespace

TEST_CASE(
    "reference backend: every mixer's classifier and translator, loss and gradients as on the "
    "CPU") {
  using namespace mixlab;
  const std::vector<int32_t> ids{1, 2, 3, 4, 0, 0, 5, 6, 7, 8, 9, 1,
                                 2, 2, 3, 0, 0, 0, 9, 8, 7, 6, 5, 0};
  const std::vector<int32_t> lengths{4, 6, 3, 5}, labels{0, 1, 2, 1}, tgt_len{4, 3, 3, 2};
  const std::vector<int32_t> tgt_in{1, 3, 4, 5, 1, 6, 5, 0, 1, 3, 3, 0, 1, 4, 0, 0};
  const std::vector<int32_t> tgt_out{3, 4, 5, 2, 6, 5, 2, 0, 3, 3, 2, 0, 4, 2, 0, 0};
  // Each test case: every test name, and the option sets mixers list (attention's rel-bias in
  // the encoder and the decoder's self-attention, a kernel width, ...).
  for (const auto& mc : testing::all_test_cases()) {
    const std::string& name = mc.name;
    INFO(mc.label);
    std::vector<std::vector<double>> results[2];
    int slot = 0;
    for (Device device : {Device::cpu(), Device::ref()}) {
      ModelConfig config = testing::tiny_classifier(name);
      config.mixer_options = mc.options;
      Classifier model(config);
      results[slot++] = loss_and_gradients(model, device, [&](Device d) {
        return cross_entropy(model.forward(Tensor::from_data(ids, {4, 6}).to(d), lengths),
                             Tensor::from_data(labels, {4}).to(d));
      });
    }
    check_same_values(results[0], results[1]);
    const bool causal = testing::case_capabilities(mc).causal;
    const std::string decoder = causal ? name : "attention";
    slot = 0;
    for (Device device : {Device::cpu(), Device::ref()}) {
      ModelConfig config = testing::tiny_translator(name, decoder);
      config.mixer_options = mc.options;
      if (causal) config.decoder_mixer_options = mc.options;
      Translator model(config);
      results[slot++] = loss_and_gradients(model, device, [&](Device d) {
        return cross_entropy(model.forward(Tensor::from_data(ids, {4, 6}).to(d), lengths,
                                           Tensor::from_data(tgt_in, {4, 4}).to(d), tgt_len),
                             Tensor::from_data(tgt_out, {4, 4}).to(d), 0);
      });
    }
    check_same_values(results[0], results[1]);
  }
}

TEST_CASE("reference backend: within its line budget, plain C++ with no #if, threads or SIMD") {
  int64_t lines = 0;
  const std::vector<std::string> forbidden{
      "#if",         "immintrin",         "__m256",
      "__m512",      "parallel_for",      "std::thread",
      "#pragma omp", "caching_allocator", "__builtin_prefetch"};
  for (const fs::path& file : reference_sources()) {
    const std::string text = mixlab::testing::read_file(file.string());
    for (char c : text) lines += c == '\n';
    for (const std::string& word : forbidden)
      CHECK_MESSAGE(text.find(word) == std::string::npos, file.filename().string(), " uses ", word);
  }
  INFO("backends/reference/ has " << lines << " lines");
  CHECK(lines > 0);
  CHECK(lines <= kReferenceLineBudget);
}

TEST_CASE("reference backend: defines every kernel of backends/kernels.def") {
  std::string sources;
  for (const fs::path& file : reference_sources())
    sources += mixlab::testing::read_file(file.string());
    // (The link fails first without a definition; this names the kernel for a reader.)
#define MIXLAB_KERNEL(name, params, args, label)                                          \
  CHECK_MESSAGE(sources.find("ReferenceBackend::" #name "(") != std::string::npos, #name, \
                " has no reference implementation in backends/reference/");
#include "backends/kernels.def"
#undef MIXLAB_KERNEL
}

TEST_CASE("reference backend: a SCAN translator trains to the CPU's losses on --device ref") {
  mixlab::testing::TempDir dir;
  // 120 SCAN pairs as a TSV file (the last 10% held out): a run evaluates a dozen sentences.
  const std::string pairs = dir.file("scan.tsv");
  {
    std::ofstream f(pairs);
    const auto split = mixlab::scan_split("simple", 1);
    for (size_t i = 0; i < 120; ++i) {
      std::string src, tgt;
      for (const auto& w : split.train[i].src) src += (src.empty() ? "" : " ") + w;
      for (const auto& w : split.train[i].tgt) tgt += (tgt.empty() ? "" : " ") + w;
      f << src << "\t" << tgt << "\n";
    }
  }
  const std::string ref_run = train_on_both(
      dir, "scan",
      {"translate", "train", "--data", pairs, "--dim", "16", "--heads", "2", "--layers", "1",
       "--batch", "8", "--lr", "3e-3", "--warmup", "5", "--seed", "3", "--quiet"});
  const std::string checkpoint = ref_run + "/last.safetensors";
  auto eval = mixlab_with_input("translate eval --checkpoint " + checkpoint + " --device ref", "",
                                dir.file("eval.log"));
  INFO(eval.output);
  CHECK(eval.code == 0);
  CHECK(mixlab::testing::contains(eval.output, "exact_match"));
  std::ofstream(dir.file("commands.txt")) << "walk twice\njump left\n";
  auto run = mixlab_with_input("translate run --checkpoint " + checkpoint + " --device ref",
                               dir.file("commands.txt"), dir.file("run.log"));
  INFO(run.output);
  CHECK(run.code == 0);
  CHECK(mixlab::testing::contains(run.output, "I_"));  // an action sequence came out
  auto inspect =
      mixlab_with_input("inspect --checkpoint " + checkpoint +
                            " --input 'walk twice' --device ref --out " + dir.file("inspect"),
                        "", dir.file("inspect.log"));
  INFO(inspect.output);
  CHECK(inspect.code == 0);
  CHECK(fs::exists(dir.file("inspect") + "/mixing.safetensors"));
}

TEST_CASE("reference backend: a ListOps classifier trains to the CPU's losses on --device ref") {
  mixlab::testing::TempDir dir;
  const std::string ref_run = train_on_both(dir, "listops",
                                            {"classify",
                                             "train",
                                             "--data",
                                             "listops",
                                             "--listops-train",
                                             "400",
                                             "--listops-min-len",
                                             "5",
                                             "--listops-len",
                                             "20",
                                             "--dim",
                                             "16",
                                             "--heads",
                                             "2",
                                             "--layers",
                                             "1",
                                             "--batch",
                                             "8",
                                             "--lr",
                                             "3e-3",
                                             "--warmup",
                                             "5",
                                             "--seed",
                                             "4",
                                             "--quiet"});
  const std::string checkpoint = ref_run + "/last.safetensors";
  auto eval = mixlab_with_input("classify eval --checkpoint " + checkpoint + " --device ref", "",
                                dir.file("eval.log"));
  INFO(eval.output);
  CHECK(eval.code == 0);
  CHECK(mixlab::testing::contains(eval.output, "accuracy"));
  std::ofstream(dir.file("lines.txt")) << "[MAX 2 3 ]\n[MIN 4 [MAX 1 9 ] ]\n";
  auto predict = mixlab_with_input("classify predict --checkpoint " + checkpoint + " --device ref",
                                   dir.file("lines.txt"), dir.file("predict.log"));
  INFO(predict.output);
  CHECK(predict.code == 0);
  CHECK(mixlab::testing::contains(predict.output, "\t"));  // label<TAB>probability lines
  auto inspect =
      mixlab_with_input("inspect --checkpoint " + checkpoint +
                            " --input '[MAX 2 3 ]' --device ref --out " + dir.file("inspect"),
                        "", dir.file("inspect.log"));
  INFO(inspect.output);
  CHECK(inspect.code == 0);
  CHECK(fs::exists(dir.file("inspect") + "/mixing.safetensors"));
}
