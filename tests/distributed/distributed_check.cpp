// Checks of data-parallel training (train/distributed/distributed.h), run by CTest and
// tests/gpu/check.sh.
//
//   distributed_check collectives [--device cuda]     under mpirun: each rank checks broadcast,
//                                                     the ordered all-reduce, all_gather and the
//                                                     failure agreement (NCCL with --device cuda)
//   distributed_check collectives-under-mpirun --mpirun M --self EXE [--np N] [--device D]
//   distributed_check training --mixlab EXE --mpirun M --work DIR
//                                                     2 ranks against 1 rank with twice the batch,
//                                                     two 2-rank runs, a resume, a refused resume
//                                                     with another rank count, a divergence
//
// Exit status: 0 passed, 1 failed (the reason printed), 77 skipped (no MPI in this build), 2 usage.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "train/distributed/distributed.h"
#include "io/safetensors.h"

namespace fs = std::filesystem;
using namespace mixlab;

namespace {

constexpr int kSkip = 77;

[[noreturn]] void failed(const std::string& why) {
  std::cerr << "FAILED: " << why << "\n";
  std::exit(1);
}

void expect(bool ok, const std::string& why) {
  if (!ok) failed(why);
}

std::map<std::string, std::string> parse_flags(int argc, char** argv, int first) {
  std::map<std::string, std::string> flags;
  for (int i = first; i + 1 < argc; i += 2) flags[argv[i]] = argv[i + 1];
  return flags;
}

// ---- collectives, one rank's view ----

int collectives(const std::map<std::string, std::string>& flags) {
  const bool cuda = flags.count("--device") && flags.at("--device") == "cuda";
  Device device = cuda ? Device::cuda(0) : Device::cpu();
  std::unique_ptr<Communicator> comm =
      cuda ? make_nccl_communicator(device) : make_mpi_communicator();
  const int rank = comm->rank(), size = comm->size();
  const std::string who =
      comm->name() + " rank " + std::to_string(rank) + "/" + std::to_string(size) + ": ";

  // Broadcast: rank 0's values reach everyone.
  std::vector<float> mine(1000);
  for (size_t i = 0; i < mine.size(); ++i) mine[i] = rank == 0 ? 0.5f * i : -1.0f;
  Tensor b = Tensor::from_data(mine, {1000}, device);
  comm->broadcast(b, 0);
  std::vector<float> got = b.to_float_vector();
  for (size_t i = 0; i < got.size(); ++i)
    expect(got[i] == 0.5f * i,
           who + "broadcast: element " + std::to_string(i) + " is " + std::to_string(got[i]));

  // Ordered sum: values whose float32 sum depends on the order (1 and tiny parts), over a length
  // that does not split evenly across ranks. Expected: float64 in rank order, rounded once.
  const int64_t n = 1037;
  auto value = [](int r, int64_t i) {
    return r % 2 == 0 ? 1.0f + static_cast<float>(i) : 3e-8f * static_cast<float>(i + r + 1);
  };
  std::vector<float> local(n);
  for (int64_t i = 0; i < n; ++i) local[i] = value(rank, i);
  Tensor s = Tensor::from_data(local, {n}, device);
  comm->all_reduce_sum(s);
  std::vector<float> sum = s.to_float_vector();
  for (int64_t i = 0; i < n; ++i) {
    double expected = 0;
    for (int r = 0; r < size; ++r) expected += value(r, i);
    expect(sum[i] == static_cast<float>(expected),
           who + "all_reduce_sum: element " + std::to_string(i) + " is " + std::to_string(sum[i]) +
               ", expected " + std::to_string(expected));
  }
  // Every rank holds the same bits: gather a checksum of the raw words.
  uint64_t h = 1469598103934665603ull;
  for (float v : sum) {
    uint32_t w;
    std::memcpy(&w, &v, 4);
    h = (h ^ w) * 1099511628211ull;
  }
  std::vector<double> sums = comm->all_gather({static_cast<double>(h >> 12)});
  for (double x : sums) expect(x == sums[0], who + "all_reduce_sum: ranks disagree on the bits");

  // all_gather in rank order.
  std::vector<double> gathered = comm->all_gather({double(rank), 10.0 * rank});
  expect(gathered.size() == 2u * size, who + "all_gather: wrong length");
  for (int r = 0; r < size; ++r)
    expect(gathered[2 * r] == r && gathered[2 * r + 1] == 10.0 * r, who + "all_gather: order");

  // Failure agreement.
  expect(comm->first_failed_rank(false) == -1, who + "first_failed_rank: none failed");
  expect(comm->first_failed_rank(rank == size - 1) == size - 1,
         who + "first_failed_rank: the last rank failed");
  comm->barrier();
  std::cout << who << "ok\n";
  return 0;
}

// ---- driving processes ----

struct Ran {
  int status = -1;
  std::string output;  // stdout and stderr
};

Ran run(const std::string& command) {
  Ran r;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  expect(pipe != nullptr, "cannot run " + command);
  char buffer[4096];
  size_t got;
  while ((got = fread(buffer, 1, sizeof buffer, pipe)) > 0) r.output.append(buffer, got);
  int status = pclose(pipe);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

std::string mpirun_prefix(const std::string& mpirun, int np) {
  std::string p = mpirun + " -np " + std::to_string(np) + " --oversubscribe";
  if (geteuid() == 0) p += " --allow-run-as-root";  // CI runs as root
  return p + " -x MIXLAB_NUM_THREADS=1";
}

int collectives_under_mpirun(const std::map<std::string, std::string>& flags) {
  const std::string mpirun = flags.count("--mpirun") ? flags.at("--mpirun") : "";
  if (mpirun.empty()) {
    std::cout << "SKIPPED: this build has no MPI (install libopenmpi-dev and openmpi-bin)\n";
    return kSkip;
  }
  const bool cuda = flags.count("--device") && flags.at("--device") == "cuda";
  if (cuda && !nccl_available()) {
    std::cout << "SKIPPED: this build has no NCCL (it needs the CUDA backend and MPI)\n";
    return kSkip;
  }
  if (cuda && !device_available(DeviceType::CUDA)) {
    std::cout << "SKIPPED: no CUDA GPU on this machine: the NCCL collectives are not run\n";
    return kSkip;
  }
  const int np = flags.count("--np") ? std::stoi(flags.at("--np")) : 2;
  std::string cmd = mpirun_prefix(mpirun, np) + " " + flags.at("--self") + " collectives";
  if (flags.count("--device")) cmd += " --device " + flags.at("--device");
  Ran r = run(cmd);
  std::cout << r.output;
  expect(r.status == 0,
         "the collectives failed under mpirun (status " + std::to_string(r.status) + ")");
  size_t oks = 0;
  for (size_t at = 0; (at = r.output.find(": ok\n", at)) != std::string::npos; ++at) ++oks;
  expect(oks == static_cast<size_t>(np), "expected " + std::to_string(np) + " ranks to report ok");
  return 0;
}

// The losses of one phase ("train" or "valid") of a run's metrics.csv, as written (shortest
// round-trip text), from `first_epoch` on.
std::vector<std::string> losses(const std::string& dir, const std::string& phase = "train",
                                int first_epoch = 0) {
  std::ifstream in(dir + "/metrics.csv");
  expect(in.good(), "no metrics.csv in " + dir);
  std::string line;
  std::getline(in, line);
  std::vector<std::string> header;
  std::stringstream hs(line);
  for (std::string cell; std::getline(hs, cell, ',');) header.push_back(cell);
  // A train row's loss is its log window's mean; the other phases' is their "loss".
  const std::string name = phase == "train" ? "train_loss_window" : "loss";
  size_t col = std::find(header.begin(), header.end(), name) - header.begin();
  expect(col < header.size() && header.size() > 2 && header[2] == "epoch",
         dir + "/metrics.csv has no epoch or loss column");
  std::vector<std::string> out;
  while (std::getline(in, line)) {
    std::vector<std::string> cells;
    std::stringstream ls(line);
    for (std::string cell; std::getline(ls, cell, ',');) cells.push_back(cell);
    if (cells.size() > col && cells[0] == phase && std::stoi(cells[2]) >= first_epoch)
      out.push_back(cells[col]);
  }
  return out;
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The model's tensors (not the optimizer's) of a checkpoint, as float64.
std::map<std::string, std::vector<double>> weights(const std::string& path) {
  SafetensorsFile f = load_safetensors(path);
  std::map<std::string, std::vector<double>> out;
  for (const TensorRecord& t : f.tensors) {
    if (t.name.rfind("optimizer.", 0) == 0 || t.dtype != "F32") continue;
    std::vector<double> v(t.bytes.size() / 4);
    for (size_t i = 0; i < v.size(); ++i) {
      float x;
      std::memcpy(&x, t.bytes.data() + 4 * i, 4);
      v[i] = x;
    }
    out[t.name] = v;
  }
  return out;
}

int training(const std::map<std::string, std::string>& flags) {
  const std::string mpirun = flags.count("--mpirun") ? flags.at("--mpirun") : "";
  if (mpirun.empty()) {
    std::cout << "SKIPPED: this build has no MPI (install libopenmpi-dev and openmpi-bin)\n";
    return kSkip;
  }
  const std::string mixlab = flags.at("--mixlab");
  const fs::path work = flags.at("--work");
  fs::remove_all(work);
  fs::create_directories(work);

  // A tiny translation task from a file: targets of different lengths, so the two ranks' halves
  // of a batch hold different numbers of target tokens (the token-weighted average matters).
  const std::string data = (work / "pairs.tsv").string();
  {
    std::ofstream out(data);
    const char* words[] = {"a", "b", "c", "d", "e", "f"};
    // 125 pairs: 113 train after the 10% hold-out, 7 x 16 + 1, so the last global batch of an
    // epoch has one example and rank 0's share of it is empty.
    for (int i = 0; i < 125; ++i) {
      std::string src, tgt;
      int len = 1 + (i * 7) % 5;
      for (int k = 0; k < len; ++k) {
        src += std::string(k ? " " : "") + words[(i + k) % 6];
        tgt += std::string(k ? " " : "") + words[(i + 2 * k + 1) % 6];
        if ((i + k) % 3 == 0) tgt += std::string(" ") + words[k % 6];
      }
      out << src << "\t" << tgt << "\n";
    }
  }
  // Dropout 0: masks are drawn per element of a rank's own batch tensor, so with dropout the
  // 2-rank run and the 1-rank run would (correctly) draw different masks.
  const std::string common = " translate train --data " + data +
                             " --dim 16 --heads 2 --layers 1 --ffn-dim 32 --dropout 0 --seed 5"
                             " --threads 1 --quiet --schedule constant --warmup 1 --lr 3e-3"
                             " --log-every 1 --epochs 50";
  auto train = [&](int np, int batch, int steps, const std::string& out,
                   const std::string& extra = "") {
    std::string cmd = (np == 1 ? mixlab : mpirun_prefix(mpirun, np) + " " + mixlab) + common +
                      " --batch " + std::to_string(batch) + " --steps " + std::to_string(steps) +
                      " --out " + (work / out).string() + extra;
    return run(cmd);
  };
  auto must = [&](const Ran& r, const std::string& what) {
    if (r.status != 0) failed(what + " exited with " + std::to_string(r.status) + ":\n" + r.output);
  };

  const int steps = 10;  // the first epoch (8 steps) and 2 more
  must(train(1, 16, steps, "one"), "the 1-rank run");
  must(train(2, 8, steps, "two"), "the first 2-rank run");
  must(train(2, 8, steps, "two-again"), "the second 2-rank run");

  // Two 2-rank runs: bit-identical losses and weights.
  std::vector<std::string> one = losses((work / "one").string());
  std::vector<std::string> two = losses((work / "two").string());
  expect(one.size() == static_cast<size_t>(steps) && two.size() == one.size(),
         "expected " + std::to_string(steps) + " train rows in each metrics.csv");
  expect(two == losses((work / "two-again").string()), "two 2-rank runs logged different losses");
  auto w2 = weights((work / "two/last.safetensors").string());
  expect(w2 == weights((work / "two-again/last.safetensors").string()),
         "two 2-rank runs ended with different weights");
  expect(load_safetensors((work / "two/last.safetensors").string())
                 .metadata.at("extra")
                 .find("\"world_size\":\"2\"") != std::string::npos,
         "the 2-rank checkpoint does not record world_size 2");

  // 2 ranks x batch 8 against 1 rank x batch 16: the same loss curve to float32 rounding.
  double worst = 0;
  for (size_t i = 0; i < one.size(); ++i) {
    double a = std::stod(one[i]), b = std::stod(two[i]);
    worst = std::max(worst, std::fabs(a - b) / std::max(std::fabs(a), 1e-12));
  }
  // Attention key biases are left out: their exact gradient is zero (softmax ignores a shift
  // shared by a row's logits), so they receive rounding noise, which Adam normalises into
  // steps of about ±lr whose signs differ between the two runs. The loss does not see them.
  double worst_weight = 0;
  auto w1 = weights((work / "one/last.safetensors").string());
  for (auto& [name, v] : w1) {
    if (name.ends_with(".w_k.bias")) continue;
    for (size_t i = 0; i < v.size(); ++i)
      worst_weight = std::max(worst_weight, std::fabs(v[i] - w2.at(name)[i]));
  }
  std::cout << "2 ranks vs 1 rank with twice the batch, " << steps
            << " steps: largest relative loss difference " << worst
            << ", largest weight difference " << worst_weight << "\n";
  expect(worst < 1e-5, "loss curves differ by more than 1e-5 (relative)");
  expect(worst_weight < 1e-5, "final weights differ by more than 1e-5");
  expect(one[0] == two[0] || std::fabs(std::stod(one[0]) - std::stod(two[0])) < 1e-6,
         "the first step's losses differ");

  // Accumulation: 2 ranks x batch 4 x 2 micro-batches against 1 rank x batch 8 x 2.
  must(train(1, 8, 4, "accumulate-one", " --accumulate 2"), "the 1-rank run with --accumulate");
  must(train(2, 4, 4, "accumulate-two", " --accumulate 2"), "the 2-rank run with --accumulate");
  std::vector<std::string> acc1 = losses((work / "accumulate-one").string());
  std::vector<std::string> acc2 = losses((work / "accumulate-two").string());
  expect(acc1.size() == 4 && acc2.size() == 4, "expected 4 train rows with --accumulate 2");
  for (size_t i = 0; i < acc1.size(); ++i)
    expect(
        std::fabs(std::stod(acc1[i]) - std::stod(acc2[i])) <= 1e-5 * std::fabs(std::stod(acc1[i])),
        "with --accumulate 2, step " + std::to_string(i + 1) + ": " + acc1[i] + " (1 rank) vs " +
            acc2[i] + " (2 ranks)");

  // Resume: 3 steps, then on to 10, equals the uninterrupted 2-rank run bit for bit.
  must(train(2, 8, 3, "resumed"), "the 2-rank run of 3 steps");
  must(train(2, 8, steps, "resumed", " --resume"), "the resumed 2-rank run");
  // (The train rows are running means since the start of the epoch or of the process, so
  // those of the epoch the resume cut differ by construction; later epochs and the validation
  // rows compare exactly; metrics.csv numbers epochs from 1.)
  expect(losses((work / "resumed").string(), "train", 2) ==
                 losses((work / "two").string(), "train", 2) &&
             losses((work / "resumed").string(), "valid", 2) ==
                 losses((work / "two").string(), "valid", 2),
         "the resumed run's losses differ from the uninterrupted run's");
  expect(weights((work / "resumed/last.safetensors").string()) == w2,
         "the resumed run's weights differ from the uninterrupted run's");

  // A different number of ranks is refused, and nothing in the run folder changes.
  const std::string ckpt = (work / "two/last.safetensors").string();
  const std::string before = read_bytes(ckpt),
                    metrics_before = read_bytes((work / "two/metrics.csv").string());
  // (Same --batch, the per-rank size: a different one is refused earlier, as a changed flag.)
  Ran refused = train(1, 8, steps + 2, "two", " --resume");
  expect(refused.status == 1, "resuming a 2-rank run with 1 process exited with " +
                                  std::to_string(refused.status) + ":\n" + refused.output);
  expect(refused.output.find("written by a run of 2 data-parallel processes") != std::string::npos,
         "the refusal does not say why:\n" + refused.output);
  expect(read_bytes(ckpt) == before &&
             read_bytes((work / "two/metrics.csv").string()) == metrics_before,
         "a refused resume changed the run folder");

  // Divergence on the ranks stops both, and rank 0 alone reports it.
  Ran diverged = train(2, 8, steps, "diverged", " --lr 1e30 --clip 0");
  expect(diverged.status != 0, "a diverging 2-rank run exited with 0");
  size_t reports = 0;
  for (size_t at = 0; (at = diverged.output.find("training diverged", at)) != std::string::npos;
       ++at)
    ++reports;
  expect(reports == 1, "expected one report of the divergence, got " + std::to_string(reports) +
                           ":\n" + diverged.output);
  // A signal to one rank stops both at the same step, and rank 0 saves that step.
  {
    const fs::path dir = work / "signalled";
    fs::create_directories(dir);
    const std::string cmd = mpirun_prefix(mpirun, 2) + " sh -c 'echo $$ > " +
                            (dir / "pid.").string() + "$OMPI_COMM_WORLD_RANK; exec " + mixlab +
                            common + " --batch 2 --steps 1000000 --out " + (dir / "out").string() +
                            "'";
    FILE* job = popen((cmd + " > " + (dir / "log").string() + " 2>&1").c_str(), "r");
    expect(job != nullptr, "cannot start " + cmd);
    bool signalled = false;
    for (int tries = 0; tries < 600 && !signalled; ++tries) {  // up to 60 s
      usleep(100000);
      std::ifstream pid_file(dir / "pid.1");
      pid_t pid = 0;
      if (fs::exists(dir / "out/metrics.csv") && losses((dir / "out").string()).size() >= 3 &&
          (pid_file >> pid) && pid > 0)
        signalled = kill(pid, SIGTERM) == 0;
    }
    const auto signal_time = fs::file_time_type::clock::now();
    const int status = pclose(job);
    const std::string log = read_bytes((dir / "log").string());
    expect(signalled, "the signalled run never got going:\n" + log);
    expect(status != 0, "a SIGTERM to rank 1 did not stop the job:\n" + log);
    expect(
        fs::last_write_time(dir / "out/last.safetensors") >= signal_time - std::chrono::seconds(1),
        "no checkpoint was saved after the signal:\n" + log);
    SafetensorsFile saved = load_safetensors((dir / "out/last.safetensors").string());
    const std::vector<std::string> logged = losses((dir / "out").string());
    std::ifstream metrics(dir / "out/metrics.csv");
    std::string line, last_train;
    while (std::getline(metrics, line))
      if (line.rfind("train,", 0) == 0) last_train = line;
    expect(last_train.rfind("train," + saved.metadata.at("step") + ",", 0) == 0,
           "the saved step " + saved.metadata.at("step") + " is not the last logged one (" +
               last_train + ")");
  }
  std::cout << "ok\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: distributed_check collectives|collectives-under-mpirun|training ...\n";
    return 2;
  }
  const std::string mode = argv[1];
  auto flags = parse_flags(argc, argv, 2);
  try {
    if (mode == "collectives") return collectives(flags);
    if (mode == "collectives-under-mpirun") return collectives_under_mpirun(flags);
    if (mode == "training") return training(flags);
  } catch (const std::exception& e) {
    std::cerr << "FAILED: " << e.what() << "\n";
    return 1;
  }
  std::cerr << "distributed_check: unknown mode " << mode << "\n";
  return 2;
}
