#include "train/loop/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <memory>

#include "autograd/ops.h"
#include "core/enum_names.h"
#include "io/atomic_file.h"
#include "train/data/data_loader.h"
#include "train/distributed/distributed.h"
#include "train/optim/grad_utils.h"
#include "train/run/interrupt.h"
#include "train/optim/optimizer.h"
#include "train/run/progress.h"
#include "io/run_log.h"
#include "train/optim/schedule.h"
#include "train/run/summary.h"

namespace mixlab {

namespace {

constexpr EnumName<OptimizerKind> kOptimizerNames[] = {
    {OptimizerKind::AdamW, "adamw"}, {OptimizerKind::Adam, "adam"}, {OptimizerKind::Sgd, "sgd"}};

std::unique_ptr<Optimizer> make_optimizer(const TrainerOptions& o, const Module& model) {
  auto groups = param_groups(model, o.weight_decay);
  if (o.optimizer == OptimizerKind::Sgd) {
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
  if (o.optimizer == OptimizerKind::Adam) return std::make_unique<Adam>(std::move(groups), a);
  return std::make_unique<AdamW>(std::move(groups), a);
}

std::string fmt(double v, const char* f = "%.4g") {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

// The keys under which every checkpoint's metadata records best.safetensors: the metric value
// (in full precision, so that a resumed run compares ties exactly), its name, the validation
// loss that breaks ties, and the step.
constexpr const char* kBestMetric = "best_metric";
constexpr const char* kBestMetricName = "best_metric_name";
constexpr const char* kBestValidLoss = "best_valid_loss";
constexpr const char* kBestStep = "best_step";

// One pass over the weights (each copied to the host once): the first parameter holding a NaN
// or an infinity ("" when all are finite) and sqrt(mean of θ²) over every element.
struct WeightCheck {
  std::string non_finite;
  double rms = 0;
};
WeightCheck check_weights(const Module& model) {
  WeightCheck c;
  double sum = 0;
  int64_t n = 0;
  for (const auto& [name, p] : model.named_parameters())
    for (float v : p.to_float_vector()) {
      if (!std::isfinite(v) && c.non_finite.empty()) c.non_finite = name;
      sum += static_cast<double>(v) * v, ++n;
    }
  c.rms = n > 0 ? std::sqrt(sum / static_cast<double>(n)) : 0.0;
  return c;
}

// Weights that grew this many times over in root mean square since the run started have
// exploded even when the loss looks fine (a step at --lr 1e6 can leave logits so large that the
// validation loss is 0 and every answer certain); ordinary training stays far below it.
constexpr double kMaxWeightGrowth = 1000;

}  // namespace

std::string to_string(OptimizerKind kind) { return enum_to_string(kOptimizerNames, kind); }
OptimizerKind parse_optimizer_kind(std::string_view name) {
  return enum_parse(kOptimizerNames, "optimizer", name);
}

namespace {

// The curves (TrainerOptions::draw_curves), best checkpoint marked by the task's own criterion;
// a failure to plot is a warning, never the end of a run.
void plot_run_curves(const TrainerOptions& o, const TrainTask& task) {
  if (!o.draw_curves) return;
  const auto names = task.metric_names();
  const bool has_primary =
      std::find(names.begin(), names.end(), task.primary_metric()) != names.end();
  try {
    o.draw_curves(o.out_dir, has_primary ? task.primary_metric() : "");
  } catch (const Error& e) {
    std::cerr << "warning: could not plot the curves: " << e.what() << "\n";
  }
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

Trainer::~Trainer() = default;

TrainResult Trainer::run() {
  // [distributed] one process, or one rank of mpirun -np N; destroyed last (its destructor is the
  // end-of-training barrier, or arms the job's abort when an error left this rank alone).
  DataParallel dp(task_.model());
  dp_ = &dp;
  // start() takes Ctrl-C over and finish() gives it back; an Error on the way (a diverged run)
  // must give it back too, or a caller that goes on would find Ctrl-C ignored.
  struct HandlerBack {
    ~HandlerBack() { uninstall_interrupt_handler(); }
  } handler_back;
  start();
  for (int64_t epoch = start_epoch_; epoch < options_.epochs && !stop_; ++epoch) {
    begin_epoch(epoch);
    while (!stop_ && step(epoch)) {
      report_progress();
      if (!stop_ && options_.eval_every > 0 && state_.step % options_.eval_every == 0) {
        evaluate_and_save(epoch, loader_->position());
        task_.model().train();
      }
    }
    end_epoch(epoch);
  }
  TrainResult result = finish();
  dp_ = nullptr;
  return result;
}

void Trainer::start() {
  const TrainerOptions& o = options_;
  Module& model = task_.model();
  // Ctrl-C is taken over before the run writes its first file: a signal that arrives once the
  // run folder has a metrics log stops the run after its next step, which then saves.
  install_interrupt_handler();
  DataLoaderOptions lo;
  lo.batch_size = o.batch_size * dp_->size();  // [distributed] global batch, sliced per rank
  lo.shard_index = dp_->rank();                // [distributed]
  lo.shard_count = dp_->size();                // [distributed]
  lo.shuffle = true;
  lo.seed = o.seed;
  lo.bucket_by_length = o.bucket_by_length;
  lo.prefetch = o.prefetch;
  lo.augment = o.augment;
  loader_ = std::make_unique<DataLoader>(train_, lo);
  steps_per_epoch_ = (loader_->batches_per_epoch() + o.accumulate - 1) / o.accumulate;
  const ScheduleLength length = schedule_length(o.max_steps, o.epochs, steps_per_epoch_, o.warmup);

  optimizer_ = make_optimizer(o, model);
  ScheduleOptions so;
  so.kind = o.schedule;
  so.lr = o.lr;
  so.warmup_steps = length.warmup_steps;
  so.total_steps = length.total_steps;
  so.min_lr = o.min_lr;
  so.step_size = std::max<int64_t>(1, steps_per_epoch_);
  so.earlier = o.schedule_history;
  schedule_ = make_schedule(so);

  files_ = !o.out_dir.empty() && dp_->is_root();  // [distributed] rank 0 alone writes
  quiet_ = o.quiet || !dp_->is_root();            // [distributed] and prints
  state_ = metadata_;
  // What a resume with another length needs to extend the schedule (schedule.h's rule).
  state_.extra["steps_per_epoch"] = std::to_string(steps_per_epoch_);
  state_.extra["schedule_total"] = std::to_string(length.total_steps);
  state_.extra["schedule_warmup"] = std::to_string(length.warmup_steps);
  result_ = TrainResult();
  start_epoch_ = 0;
  skip_ = 0;
  if (files_) std::filesystem::create_directories(o.out_dir);
  if (o.resume) {
    check(!o.out_dir.empty(), "--resume needs an output directory");
    std::string path = last_checkpoint(o.out_dir);
    check(std::filesystem::exists(path), "--resume: no checkpoint at ", path);
    TrainingState saved = load_checkpoint(path, model, *optimizer_);
    dp_->check_resume(saved, path);  // [distributed] same number of ranks only
    restore_rng(saved);
    state_.step = saved.step;
    for (const char* key : {kBestMetric, kBestMetricName, kBestValidLoss, kBestStep})
      if (saved.extra.count(key)) state_.extra[key] = saved.extra[key];
    start_epoch_ = saved.epoch;
    skip_ = saved.loader_position;
    if (!quiet_)
      std::cerr << "resumed from " << path << " at step " << saved.step << ", epoch "
                << saved.epoch + 1 << "\n";
    // Rows logged after that checkpoint (a run killed later) would be logged again.
    if (files_) {
      drop_metrics_after(metrics_csv(o.out_dir), saved.step);
      drop_metrics_after(metrics_jsonl(o.out_dir), saved.step);
    }
  }
  dp_->start(model, state_);  // [distributed] rank 0's parameters everywhere; per-rank dropout
  if (files_) log_ = open_metrics_log();
  auto stored = [&](const char* key, double otherwise) {
    return state_.extra.count(key) ? std::stod(state_.extra[key]) : otherwise;
  };
  best_ = stored(kBestMetric, -1e300);
  // A checkpoint from before the tie-breaker was recorded: any tie goes to the later model.
  best_loss_ = stored(kBestValidLoss, std::numeric_limits<double>::infinity());
  best_step_ = static_cast<int64_t>(stored(kBestStep, -1));
  window_loss_ = 0;
  window_n_ = 0;
  eval_seconds_ = 0;
  first_loss_ = 0;
  first_weight_rms_ = check_weights(model).rms;
  check(o.loss_read_every >= 0, "trainer: loss_read_every must be >= 0, got ", o.loss_read_every);
  // Each read of the loss waits for a GPU; on the CPU it costs nothing. Distributed runs agree
  // on every micro-batch's loss, so they read at once.
  const std::vector<Tensor> params = model.parameters();
  const bool on_cpu = params.empty() || params.front().device().is_host();
  read_every_ = dp_->active()           ? 1
                : o.loss_read_every > 0 ? o.loss_read_every
                : on_cpu                ? 1
                                        : std::max<int64_t>(1, o.log_every);
  unread_.clear();
  examples_ = tokens_ = 0;
  t0_ = std::chrono::steady_clock::now();
  stop_ = o.max_steps > 0 && state_.step >= o.max_steps;
  total_steps_ = o.max_steps > 0 ? std::min(o.max_steps, steps_per_epoch_ * o.epochs)
                                 : steps_per_epoch_ * o.epochs;
  start_step_ = state_.step;
  if (!quiet_) task_.set_progress(&std::cerr);  // validation and decoding show progress too
  model.train();
}

void Trainer::begin_epoch(int64_t epoch) {
  epoch_ = epoch;
  loader_->start_epoch(epoch, skip_);
  skip_ = 0;
  bar_ = std::make_unique<ProgressBar>(
      "epoch " + std::to_string(epoch + 1) + "/" + std::to_string(options_.epochs),
      steps_per_epoch_, std::cerr);
  epoch_step_ = loader_->position() / options_.accumulate;
  running_loss_ = 0;
  running_n_ = 0;
  epoch_done_ = false;
}

bool Trainer::step(int64_t /*epoch: epoch_*/) {
  const TrainerOptions& o = options_;
  Module& model = task_.model();
  // Forward and backward over `accumulate` micro-batches, gradients summed.
  Batch batch;
  int64_t got = 0;
  double loss_value = 0;
  std::vector<Tensor> unread;  // this step's losses when they are read back later
  const bool read_now = read_every_ == 1;
  for (int64_t k = 0; k < o.accumulate; ++k) {
    if (!loader_->next(batch)) break;
    // [distributed] a rank's slice of a global batch smaller than the world is empty.
    Tensor loss = batch.size > 0 ? task_.loss(batch) : Tensor();
    double v = read_now && loss.defined() ? loss.item() : 0.0;
    // [distributed] the global loss and this rank's weight in it; every rank sees the same v, so
    // the checks below stop all ranks together (rank 0 reports).
    DataParallel::Share share = dp_->share(v, batch, task_.tokens(batch), state_.step + 1);
    v = share.loss;
    if (dp_->active() && loss.defined()) loss = mul(loss, share.weight);
    if (read_now)
      check_loss(v, state_.step + 1, 0);
    else if (loss.defined())
      unread.push_back(loss.detach());       // read with the next settle_losses(), no wait now
    if (o.accumulate > 1 && loss.defined())  // [distributed] (undefined: an empty share)
      loss = mul(loss, 1.0 / static_cast<double>(o.accumulate));
    if (loss.defined()) loss.backward();
    loss_value += v;
    ++got;
    examples_ += share.examples;  // [distributed] global counts
    tokens_ += share.tokens;
  }
  if (got == 0) {
    epoch_done_ = true;
    return false;
  }
  // The update: a short last group is scaled as if full, then clip, step, clear.
  std::vector<Tensor> params = model.parameters();
  if (got < o.accumulate) scale_grads(params, static_cast<double>(o.accumulate) / got);
  dp_->all_reduce_gradients(params);  // [distributed] summed over ranks, before clipping
  last_lr_ = schedule_->lr_at(state_.step + 1);
  optimizer_->set_lr(last_lr_);
  if (o.clip > 0) clip_grad_norm_tensor(params, o.clip);  // no read back: a GPU keeps going
  optimizer_->step();
  optimizer_->zero_grad();
  ++state_.step;
  ++epoch_step_;
  if (read_now) {
    record_step_loss(loss_value / got);
  } else {
    unread_.push_back({state_.step, std::move(unread), got});
    if (static_cast<int64_t>(unread_.size()) >= read_every_) settle_losses();
  }
  if (state_.step % std::max<int64_t>(1, o.log_every) == 0) {
    settle_losses();
    log_train_window();
  }
  // Why the run stops here, if it does: the step budget or Ctrl-C.
  if (o.max_steps > 0 && state_.step >= o.max_steps) stop_ = true;
  if (dp_->interrupted()) {  // [distributed] any rank signalled: all stop at this step
    result_.interrupted = true;
    stop_ = true;
    if (!quiet_) std::cerr << "\ninterrupted: saving " << last_checkpoint(o.out_dir) << "\n";
  }
  return true;
}

namespace {

// What a diverged run leaves of its best checkpoint, as it is: kept from an earlier step, or
// none written (a run that --overwrite began removed the previous one).
std::string best_note(const std::string& out_dir) {
  if (out_dir.empty()) return "";
  const std::string best = Trainer::best_checkpoint(out_dir);
  return std::filesystem::exists(best) ? " (" + best + " is kept as it was)"
                                       : " (no best checkpoint was written)";
}

}  // namespace

void Trainer::check_loss(double v, int64_t step, int64_t read_at) {
  const TrainerOptions& o = options_;
  // Read back after the step's update (a GPU run; read_at > 0): the updates up to read_at were
  // taken, but no checkpoint was written after the bad step (every save reads the losses first).
  const bool late = read_at > 0;
  const std::string since = "no checkpoint written after step " + std::to_string(step);
  if (!std::isfinite(v))
    fail("training diverged: the loss is ", v, " at step ", step,
         late ? " (read back at step " + std::to_string(read_at) + ", with " + since + ")" : "",
         "; lower --lr or raise --warmup");
  if (first_loss_ == 0) first_loss_ = v;
  if (o.max_loss_growth > 0 && first_loss_ > 0 && v > o.max_loss_growth * first_loss_)
    fail("training diverged: the loss is ", v, " at step ", step, ", ",
         fmt(v / first_loss_, "%.3g"), " times its first value ", fmt(first_loss_),
         late ? "; stopped when it was read back at step " + std::to_string(read_at) + ", with " +
                    since
              : std::string("; stopped before the update"),
         best_note(o.out_dir), "; lower --lr or raise --warmup");
}

void Trainer::record_step_loss(double value) {
  running_loss_ += value;
  ++running_n_;
  window_loss_ += value;
  ++window_n_;
}

void Trainer::log_train_window() {
  if (window_n_ == 0) return;
  const double mean = window_loss_ / static_cast<double>(window_n_);
  result_.last_train_loss = mean;
  window_loss_ = 0;
  window_n_ = 0;
  if (!log_) return;
  const double seconds = seconds_since_start();
  log_->log("train", state_.step, epoch_ + 1,
            {{kTrainLossColumn, mean},
             {"lr", last_lr_},
             {"time_s", seconds},
             {"examples/s", examples_ / std::max(seconds - eval_seconds_, 1e-9)}});
}

void Trainer::check_validation(double valid_loss) {
  const std::string advice = "; lower --lr or raise --warmup";
  const std::string kept = best_step_ >= 0
                               ? " (" + best_checkpoint(options_.out_dir) + " from step " +
                                     std::to_string(best_step_) + " is kept as it was)"
                               : " (no best checkpoint was written)";
  if (!std::isfinite(valid_loss))
    fail("training diverged: the validation loss is ", valid_loss, " at step ", state_.step, kept,
         advice);
  const double limit = options_.max_loss_growth * first_loss_;
  if (options_.max_loss_growth > 0 && first_loss_ > 0 && valid_loss > limit)
    fail("training diverged: the validation loss is ", valid_loss, " at step ", state_.step, ", ",
         fmt(valid_loss / first_loss_, "%.3g"), " times the first training loss ", fmt(first_loss_),
         kept, advice);
  const WeightCheck weights = check_weights(task_.model());
  if (!weights.non_finite.empty())
    fail("training diverged: parameter '", weights.non_finite,
         "' holds a NaN or an infinity at step ", state_.step, kept, advice);
  const double rms = weights.rms;
  if (first_weight_rms_ > 0 && rms > kMaxWeightGrowth * first_weight_rms_)
    fail("training diverged: the weights' root mean square grew from ", fmt(first_weight_rms_),
         " to ", fmt(rms), " (", fmt(rms / first_weight_rms_, "%.3g"), " times) by step ",
         state_.step, kept, advice);
}

void Trainer::settle_losses() {
  std::vector<UnreadStep> unread;
  unread.swap(unread_);
  for (const UnreadStep& s : unread) {
    double sum = 0;
    for (const Tensor& loss : s.losses) {
      const double v = loss.item();  // the first read waits for the GPU; the others do not
      check_loss(v, s.step, state_.step);
      sum += v;
    }
    record_step_loss(sum / static_cast<double>(s.micro_batches));
  }
}

void Trainer::report_progress() {
  if (quiet_) return;
  double secs = seconds_since_start() - eval_seconds_;
  // The whole run's remaining time at this run's training pace (evaluations not included).
  const int64_t done = state_.step - start_step_;
  const double run_eta =
      done > 0 ? secs / done * static_cast<double>(std::max<int64_t>(0, total_steps_ - state_.step))
               : -1.0;
  // Fields are dropped from the end when the line is too wide: most useful first. On a GPU
  // the loss is the mean of the steps read back so far (loss_read_every).
  bar_->update(epoch_step_, {{"loss", running_n_ ? fmt(running_loss_ / running_n_, "%.4f") : "-"},
                             {"run ETA", format_duration(run_eta)},
                             {"lr", fmt(last_lr_, "%.2e")},
                             {"ex/s", fmt(examples_ / std::max(secs, 1e-9), "%.0f")},
                             {"tok/s", fmt(tokens_ / std::max(secs, 1e-9), "%.0f")}});
}

void Trainer::evaluate_and_save(int64_t epoch, int64_t position) {
  settle_losses();  // a diverged run stops before it is evaluated or saved
  if (!valid_ || valid_->size() == 0 || !dp_->is_root()) return;  // [distributed] rank 0 only
  auto e0 = std::chrono::steady_clock::now();
  auto metrics = task_.evaluate(*valid_);
  eval_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - e0).count();
  result_.last_valid = metrics;
  if (log_) {
    // Logged under the epoch in progress, as the train rows are (1-based): the validation at the
    // end of epoch 3 is a row of epoch 3 whatever the checkpoint's resume point says.
    std::map<std::string, double> row = metrics;
    row["time_s"] = seconds_since_start();
    log_->log("valid", state_.step, epoch_ + 1, row);
  }
  if (!quiet_) {
    std::cerr << "  valid @ step " << state_.step << ":";
    for (auto& [k, v] : metrics) std::cerr << " " << k << " " << fmt(v);
    std::cerr << "\n";
  }
  const double loss = metrics.count("loss") ? metrics["loss"] : 0.0;
  check_validation(loss);  // a diverged model is never saved, as best or otherwise
  // The task's metric (higher is better), else the validation loss (lower is). A tie goes to
  // the lower validation loss, then to the later step.
  const bool has_primary = metrics.count(task_.primary_metric()) > 0;
  const std::string metric = has_primary ? task_.primary_metric() : "loss";
  const double primary = has_primary ? metrics[metric] : -loss;
  if (primary > best_ || (primary == best_ && loss <= best_loss_)) {
    const std::string why = primary != best_ ? ""
                            : loss < best_loss_
                                ? " (a tie, broken by the lower valid loss " + fmt(loss) + ")"
                                : " (a tie in metric and loss: the later step)";
    best_ = primary;
    best_loss_ = loss;
    best_step_ = state_.step;
    result_.best_valid = metrics;
    state_.extra[kBestMetricName] = metric;
    state_.extra[kBestStep] = std::to_string(state_.step);
    save(best_checkpoint(options_.out_dir), epoch, position);
    if (!quiet_)
      std::cerr << "  best: step " << state_.step << ", chosen by valid " << metric << " "
                << fmt(metrics[metric]) << why
                << (files_ ? " -> " + best_checkpoint(options_.out_dir) : std::string()) << "\n";
  }
}

void Trainer::end_epoch(int64_t epoch) {
  const TrainerOptions& o = options_;
  settle_losses();  // the epoch's mean loss is complete, and a diverged run saves nothing
  if (!quiet_) bar_->finish({{"loss", fmt(running_n_ ? running_loss_ / running_n_ : 0, "%.4f")}});
  if (result_.interrupted) {
    save(last_checkpoint(o.out_dir), epoch, loader_->position());
    return;
  }
  if (epoch_done_) {
    // The whole epoch: the checkpoint resumes at the start of the next one.
    evaluate_and_save(epoch + 1, 0);
    save(last_checkpoint(o.out_dir), epoch + 1, 0);
    if (files_ && o.keep_epochs > 0) {
      // The epoch's checkpoint is last.safetensors as just written: copy its bytes rather
      // than serialise (and checksum) the model and optimizer a second time.
      const std::string last = last_checkpoint(o.out_dir);
      write_file_atomically(epoch_checkpoint(o.out_dir, epoch + 1), [&](std::ostream& out) {
        std::ifstream in(last, std::ios::binary);
        check(in.good(), "trainer: cannot read back ", last);
        out << in.rdbuf();
      });
      // Exactly the last keep_epochs remain, also after a resume that lowered the number.
      for (int64_t e = epoch + 1 - o.keep_epochs; e >= 1; --e)
        std::filesystem::remove(epoch_checkpoint(o.out_dir, e));
    }
  } else {
    // Stopped mid-epoch by the step budget: resume from this batch.
    evaluate_and_save(epoch, loader_->position());
    save(last_checkpoint(o.out_dir), epoch, loader_->position());
  }
  task_.model().train();
}

TrainResult Trainer::finish() {
  settle_losses();
  log_train_window();  // the steps since the last train row: the run's last window
  uninstall_interrupt_handler();
  if (!quiet_) dp_->report(std::cerr);  // [distributed] communication time per step
  bar_.reset();
  result_.steps = state_.step;
  result_.best_step = best_step_;
  if (state_.extra.count(kBestMetricName)) result_.best_metric = state_.extra[kBestMetricName];
  result_.seconds = seconds_since_start();
  double train_seconds = std::max(result_.seconds - eval_seconds_, 1e-9);
  result_.examples_per_second = examples_ / train_seconds;
  result_.tokens_per_second = tokens_ / train_seconds;
  if (files_ && log_) {
    log_.reset();
    plot_run_curves(options_, task_);
  }
  loader_.reset();
  return result_;
}

void Trainer::log_test(const std::map<std::string, double>& metrics, int64_t model_step) {
  if (!files_) return;
  {
    std::unique_ptr<MetricsLog> log = open_metrics_log();
    log->log("test", model_step, epoch_ + 1, metrics);
  }
  plot_run_curves(options_, task_);
}

std::unique_ptr<MetricsLog> Trainer::open_metrics_log() const {
  std::vector<std::string> columns = task_.metric_names();
  for (const char* extra : {kTrainLossColumn, "lr", "time_s", "examples/s"})
    if (std::find(columns.begin(), columns.end(), extra) == columns.end()) columns.push_back(extra);
  return std::make_unique<MetricsLog>(metrics_csv(options_.out_dir), columns,
                                      metrics_jsonl(options_.out_dir));
}

void Trainer::save(const std::string& path, int64_t epoch, int64_t position) {
  settle_losses();  // no checkpoint of a step after one whose loss diverged
  if (!files_) return;
  state_.epoch = epoch;
  state_.loader_position = position;
  if (best_ > -1e300) {
    state_.extra[kBestMetric] = fmt(best_, "%.17g");
    state_.extra[kBestValidLoss] = fmt(best_loss_, "%.17g");
  }
  capture_rng(state_);
  save_checkpoint(path, task_.model(), *optimizer_, state_);
}

double Trainer::seconds_since_start() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
}

}  // namespace mixlab
