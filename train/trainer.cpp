#include "train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>

#include "autograd/ops.h"
#include "train/atomic_file.h"
#include "train/data_loader.h"
#include "train/distributed.h"
#include "train/grad_utils.h"
#include "train/interrupt.h"
#include "train/optimizer.h"
#include "train/plot.h"
#include "train/progress.h"
#include "train/run_log.h"
#include "train/schedule.h"
#include "train/summary.h"

namespace mixlab {

namespace {

std::unique_ptr<Optimizer> make_optimizer(const TrainerOptions& o, const Module& model) {
  auto groups = param_groups(model, o.weight_decay);
  if (o.optimizer == "sgd") {
    SgdOptions s;
    s.lr = o.lr;
    s.momentum = o.momentum;
    return std::make_unique<Sgd>(std::move(groups), s);
  }
  AdamOptions a;
  a.lr = o.lr;
  a.beta1 = o.beta1;
  a.beta2 = o.beta2;
  a.eps = o.eps;
  if (o.optimizer == "adam") return std::make_unique<Adam>(std::move(groups), a);
  if (o.optimizer == "adamw") return std::make_unique<AdamW>(std::move(groups), a);
  fail("unknown optimizer '", o.optimizer, "': expected adamw, adam or sgd");
}

std::string fmt(double v, const char* f = "%.4g") {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

}  // namespace

Trainer::Trainer(TrainTask& task, const Dataset& train, const Dataset* valid,
                 TrainerOptions options, TrainingState metadata)
    : task_(task),
      train_(train),
      valid_(valid),
      options_(std::move(options)),
      metadata_(std::move(metadata)) {
  check(options_.batch_size > 0, "trainer: batch size must be positive");
  check(options_.accumulate > 0, "trainer: accumulate must be positive");
  check(train_.size() > 0, "trainer: the training set is empty");
}

TrainResult Trainer::run() {
  const TrainerOptions& o = options_;
  Module& model = task_.model();
  DataParallel dp(model);  // [distributed] one process, or one rank of mpirun -np N
  DataLoaderOptions lo;
  lo.batch_size = o.batch_size * dp.size();  // [distributed] global batch, sliced per rank
  lo.shard_index = dp.rank();                // [distributed]
  lo.shard_count = dp.size();                // [distributed]
  lo.shuffle = true;
  lo.seed = o.seed;
  lo.bucket_by_length = o.bucket_by_length;
  lo.prefetch = o.prefetch;
  DataLoader loader(train_, lo);
  int64_t steps_per_epoch = (loader.batches_per_epoch() + o.accumulate - 1) / o.accumulate;
  int64_t total_steps = o.max_steps > 0 ? o.max_steps : steps_per_epoch * o.epochs;

  auto optimizer = make_optimizer(o, model);
  ScheduleOptions so;
  so.kind = o.schedule;
  so.lr = o.lr;
  so.warmup_steps = std::max<int64_t>(1, std::min(o.warmup, total_steps));
  so.total_steps = std::max<int64_t>(total_steps, so.warmup_steps + 1);
  so.min_lr = o.min_lr;
  so.step_size = std::max<int64_t>(1, steps_per_epoch);
  auto schedule = make_schedule(so);

  bool files = !o.out_dir.empty() && dp.is_root();  // [distributed] rank 0 alone writes
  const bool quiet = o.quiet || !dp.is_root();      // [distributed] and prints
  TrainingState state = metadata_;
  int64_t start_epoch = 0, skip = 0;
  if (files) std::filesystem::create_directories(o.out_dir);
  if (o.resume) {
    check(!o.out_dir.empty(), "--resume needs an output directory");
    std::string path = last_checkpoint(o.out_dir);
    check(std::filesystem::exists(path), "--resume: no checkpoint at ", path);
    TrainingState saved = load_checkpoint(path, model, *optimizer);
    dp.check_resume(saved, path);  // [distributed] same number of ranks only
    restore_rng(saved);
    state.step = saved.step;
    if (saved.extra.count("best_metric")) state.extra["best_metric"] = saved.extra["best_metric"];
    start_epoch = saved.epoch;
    skip = saved.loader_position;
    if (!quiet)
      std::cerr << "resumed from " << path << " at step " << saved.step << ", epoch "
                << saved.epoch + 1 << "\n";
  }
  dp.start(model, state);  // [distributed] rank 0's parameters everywhere; per-rank dropout
  std::unique_ptr<MetricsLog> log;
  if (files) {
    std::vector<std::string> columns = task_.metric_names();
    if (std::find(columns.begin(), columns.end(), "lr") == columns.end()) columns.push_back("lr");
    log = std::make_unique<MetricsLog>(o.out_dir + "/metrics.csv", columns);
  }

  TrainResult result;
  double best = state.extra.count("best_metric") ? std::stod(state.extra["best_metric"]) : -1e300;
  auto save = [&](const std::string& path, int64_t epoch, int64_t position) {
    if (!files) return;
    state.epoch = epoch;
    state.loader_position = position;
    if (best > -1e300) state.extra["best_metric"] = std::to_string(best);
    capture_rng(state);
    save_checkpoint(path, model, *optimizer, state);
  };
  double eval_seconds = 0;  // excluded from the training throughput
  auto evaluate = [&](int64_t epoch, int64_t position) {
    if (!valid_ || valid_->size() == 0 || !dp.is_root()) return;  // [distributed] rank 0 only
    auto e0 = std::chrono::steady_clock::now();
    auto metrics = task_.evaluate(*valid_);
    eval_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - e0).count();
    result.last_valid = metrics;
    if (log) log->log("valid", state.step, epoch, metrics);
    double primary =
        metrics.count(task_.primary_metric()) ? metrics[task_.primary_metric()] : -metrics["loss"];
    if (!quiet) {
      std::cerr << "  valid @ step " << state.step << ":";
      for (auto& [k, v] : metrics) std::cerr << " " << k << " " << fmt(v);
      std::cerr << "\n";
    }
    if (primary > best) {
      best = primary;
      result.best_valid = metrics;
      result.best_step = state.step;
      save(best_checkpoint(o.out_dir), epoch, position);
    }
  };

  install_interrupt_handler();
  auto t0 = std::chrono::steady_clock::now();
  int64_t examples = 0, tokens = 0;
  bool stop = o.max_steps > 0 && state.step >= o.max_steps;
  model.train();
  Batch batch;
  for (int64_t epoch = start_epoch; epoch < o.epochs && !stop; ++epoch) {
    loader.start_epoch(epoch, skip);
    skip = 0;
    ProgressBar bar("epoch " + std::to_string(epoch + 1) + "/" + std::to_string(o.epochs),
                    steps_per_epoch, std::cerr);
    int64_t epoch_step = loader.position() / o.accumulate;
    double running = 0;
    int64_t running_n = 0;
    bool epoch_done = false;
    while (!stop) {
      int64_t got = 0;
      double loss_value = 0;
      for (int64_t k = 0; k < o.accumulate; ++k) {
        if (!loader.next(batch)) break;
        // [distributed] a rank's slice of a global batch smaller than the world is empty.
        Tensor loss = batch.size > 0 ? task_.loss(batch) : Tensor();
        double v = loss.defined() ? loss.item() : 0.0;
        // [distributed] the global loss and this rank's weight in it; stops every rank together
        // when one rank's loss is not finite (rank 0 reports it).
        DataParallel::Share share = dp.share(v, batch, task_.tokens(batch), state.step + 1);
        v = share.loss;
        if (dp.active() && loss.defined()) loss = mul(loss, share.weight);
        if (!std::isfinite(v))
          fail("training diverged: the loss is ", v, " at step ", state.step + 1,
               "; lower --lr or raise --warmup");
        if (o.accumulate > 1 && loss.defined())  // [distributed] (undefined: an empty share)
          loss = mul(loss, 1.0 / static_cast<double>(o.accumulate));
        if (loss.defined()) loss.backward();
        loss_value += v;
        ++got;
        examples += share.examples;  // [distributed] global counts
        tokens += share.tokens;
      }
      if (got == 0) {
        epoch_done = true;
        break;
      }
      std::vector<Tensor> params = model.parameters();
      if (got < o.accumulate) scale_grads(params, static_cast<double>(o.accumulate) / got);
      dp.all_reduce_gradients(params);  // [distributed] summed over ranks, before clipping
      double lr = schedule->lr_at(state.step + 1);
      optimizer->set_lr(lr);
      if (o.clip > 0) clip_grad_norm(params, o.clip);
      optimizer->step();
      optimizer->zero_grad();
      ++state.step;
      ++epoch_step;
      loss_value /= got;
      result.last_train_loss = loss_value;
      running += loss_value;
      ++running_n;
      if (log && (state.step % std::max<int64_t>(1, o.log_every) == 0))
        log->log("train", state.step, epoch, {{"loss", running / running_n}, {"lr", lr}});
      double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() -
                    eval_seconds;
      if (!quiet)
        bar.update(epoch_step, {{"loss", fmt(running / running_n, "%.4f")},
                                {"lr", fmt(lr, "%.2e")},
                                {"ex/s", fmt(examples / std::max(secs, 1e-9), "%.0f")},
                                {"tok/s", fmt(tokens / std::max(secs, 1e-9), "%.0f")}});
      if (o.max_steps > 0 && state.step >= o.max_steps) stop = true;
      if (dp.interrupted()) {  // [distributed] any rank signalled: all stop at this step
        result.interrupted = true;
        stop = true;
        if (!quiet) std::cerr << "\ninterrupted: saving " << last_checkpoint(o.out_dir) << "\n";
      }
      if (!stop && o.eval_every > 0 && state.step % o.eval_every == 0) {
        evaluate(epoch, loader.position());
        model.train();
      }
    }
    if (!quiet) bar.finish({{"loss", fmt(running_n ? running / running_n : 0, "%.4f")}});
    if (result.interrupted) {
      save(last_checkpoint(o.out_dir), epoch, loader.position());
      break;
    }
    // End of an epoch (or of the step budget): evaluate and keep the last checkpoint.
    if (epoch_done) {
      evaluate(epoch + 1, 0);
      save(last_checkpoint(o.out_dir), epoch + 1, 0);
      if (files && o.keep_epochs > 0) {
        // The epoch's checkpoint is last.safetensors as just written: copy its bytes rather
        // than serialise (and checksum) the model and optimizer a second time.
        const std::string last = last_checkpoint(o.out_dir);
        write_file_atomically(epoch_checkpoint(o.out_dir, epoch + 1), [&](std::ostream& out) {
          std::ifstream in(last, std::ios::binary);
          check(in.good(), "trainer: cannot read back ", last);
          out << in.rdbuf();
        });
        std::filesystem::remove(epoch_checkpoint(o.out_dir, epoch + 1 - o.keep_epochs));
      }
    } else {
      evaluate(epoch, loader.position());
      save(last_checkpoint(o.out_dir), epoch, loader.position());
    }
    model.train();
  }
  uninstall_interrupt_handler();
  if (!quiet) dp.report(std::cerr);  // [distributed] communication time per step
  result.steps = state.step;
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  double train_seconds = std::max(result.seconds - eval_seconds, 1e-9);
  result.examples_per_second = examples / train_seconds;
  result.tokens_per_second = tokens / train_seconds;
  if (files && log) {
    log.reset();
    try {
      plot_training_curves(o.out_dir + "/metrics.csv", o.out_dir + "/curves.png");
    } catch (const Error& e) {
      std::cerr << "warning: could not plot the curves: " << e.what() << "\n";
    }
  }
  return result;
}

}  // namespace mixlab
