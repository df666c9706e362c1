// Learning-rate schedules: lr_at(step) is a pure function of the step, so a resumed run needs
// nothing but the step count to continue the schedule exactly.
//
// Step convention: `step` counts optimizer updates from 1, and lr_at(t) is the rate used BY the
// t-th update (the trainer calls optimizer.set_lr(schedule.lr_at(completed + 1)) before each
// step). So warm-up never wastes an update at lr 0: the first update uses base/warmup, and the
// warmup-th update the full base rate. lr_at(0) is defined (0 during warm-up, else the formula's
// value) so that a "before training" value can be shown; negative steps are an Error.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace mixlab {

class LrSchedule {
 public:
  virtual ~LrSchedule() = default;
  virtual double lr_at(int64_t step) const = 0;
  virtual std::string describe() const = 0;  // e.g. "cosine(base=0.001, warmup=100, ...)"
};

class ConstantSchedule : public LrSchedule {
 public:
  explicit ConstantSchedule(double base);
  double lr_at(int64_t step) const override;
  std::string describe() const override;

 private:
  double base_;
};

// Linear warm-up to `base` over `warmup` updates, then half a cosine from base down to `min_lr`
// at `total`, and min_lr after that:
//   t <= W:       base · t / W
//   W < t < T:    min_lr + (base - min_lr) · (1 + cos(π (t - W) / (T - W))) / 2
//   t >= T:       min_lr
class WarmupCosineSchedule : public LrSchedule {
 public:
  WarmupCosineSchedule(double base, int64_t warmup, int64_t total, double min_lr = 0.0);
  double lr_at(int64_t step) const override;
  std::string describe() const override;

 private:
  double base_, min_lr_;
  int64_t warmup_, total_;
};

// The original Transformer's schedule (Vaswani et al. 2017, eq. 3), written with its peak:
//   lr(t) = base · min(t / W, sqrt(W / t))
// linear warm-up to `base` at t = W, then decay as 1/sqrt(t). The paper's form
// d^-0.5 · min(t^-0.5, t · W^-1.5) is the same curve with base = d^-0.5 · W^-0.5; noam() builds
// it from (d_model, W, factor) for those who think in that form.
class InverseSqrtSchedule : public LrSchedule {
 public:
  InverseSqrtSchedule(double base, int64_t warmup);
  // factor · d_model^-0.5 · min(t^-0.5, t · warmup^-1.5) (factor 1 = the paper).
  static InverseSqrtSchedule noam(int64_t d_model, int64_t warmup, double factor = 1.0);
  double lr_at(int64_t step) const override;
  std::string describe() const override;

 private:
  double base_;
  int64_t warmup_;
};

// torch.optim.lr_scheduler.StepLR with our 1-based steps: base · gamma^floor((t - 1) / k), so
// updates 1..k use base, k+1..2k base·gamma, and so on (lr_at(0) = base).
class StepDecaySchedule : public LrSchedule {
 public:
  StepDecaySchedule(double base, int64_t step_size, double gamma);
  double lr_at(int64_t step) const override;
  std::string describe() const override;

 private:
  double base_, gamma_;
  int64_t step_size_;
};

// A run whose length changed when it was resumed (a larger or smaller --steps or --epochs):
// `earlier` up to step S, then from its rate at S a half cosine down to min_lr at the new total T,
//   t <= S:      earlier(t)
//   S < t < T:   min_lr + (earlier(S) - min_lr) · (1 + cos(π (t - S) / (T - S))) / 2
//   t >= T:      min_lr
// so the rate never jumps (up or down) at S and still reaches min_lr at the new end.
class ExtendedCosineSchedule : public LrSchedule {
 public:
  ExtendedCosineSchedule(std::unique_ptr<LrSchedule> earlier, int64_t from, int64_t total,
                         double min_lr);
  double lr_at(int64_t step) const override;
  std::string describe() const override;

 private:
  std::unique_ptr<LrSchedule> earlier_;
  int64_t from_, total_;
  double min_lr_, start_lr_;
};

// One length a run had before it was resumed with another: the schedule of `total_steps` with
// `warmup_steps` was followed up to update `until_step`. Written as "STEP:TOTAL:WARMUP" (in
// config.ini's schedule-history, so that --config replays a resumed and extended run).
struct ScheduleSegment {
  int64_t until_step = 0, total_steps = 0, warmup_steps = 0;
  bool operator==(const ScheduleSegment&) const = default;
};
std::string to_string(const ScheduleSegment& segment);
ScheduleSegment parse_schedule_segment(std::string_view text);  // Error naming the text

// The length and warm-up a run's schedule gets: total = max_steps, or steps_per_epoch · epochs
// without a step budget; the warm-up at least 1 and at most the total; the total beyond it.
struct ScheduleLength {
  int64_t total_steps = 0, warmup_steps = 0;
};
ScheduleLength schedule_length(int64_t max_steps, int64_t epochs, int64_t steps_per_epoch,
                               int64_t warmup);

// The schedules by kind; on command lines and in config.ini by the names to_string gives.
enum class ScheduleKind { Constant, Cosine, InverseSqrt, Step };
std::string to_string(ScheduleKind kind);  // constant | cosine | inverse_sqrt | step
ScheduleKind parse_schedule_kind(std::string_view name);

struct ScheduleOptions {
  ScheduleKind kind = ScheduleKind::Constant;
  double lr = 1e-3;          // the base (peak) rate
  int64_t warmup_steps = 0;  // cosine, inverse_sqrt (>= 1 there)
  int64_t total_steps = 0;   // cosine
  double min_lr = 0.0;       // cosine
  int64_t step_size = 1;     // step
  double gamma = 0.1;        // step
  // The run's earlier lengths, oldest first (empty: a run never resumed with another length).
  // The rule for a changed length: the warm-up stays the first segment's (inverse_sqrt and a
  // cosine resumed inside its warm-up); a cosine resumed after its warm-up continues as
  // ExtendedCosineSchedule from its rate at the resumed step to min_lr at the new total;
  // constant and step do not depend on the length.
  std::vector<ScheduleSegment> earlier;
};
std::unique_ptr<LrSchedule> make_schedule(const ScheduleOptions& options);

}  // namespace mixlab
