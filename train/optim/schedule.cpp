#include "train/optim/schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <sstream>

#include "core/enum_names.h"
#include "core/error.h"

namespace mixlab {

namespace {
constexpr EnumName<ScheduleKind> kScheduleNames[] = {{ScheduleKind::Constant, "constant"},
                                                     {ScheduleKind::Cosine, "cosine"},
                                                     {ScheduleKind::InverseSqrt, "inverse_sqrt"},
                                                     {ScheduleKind::Step, "step"}};

void check_step(int64_t step) { check(step >= 0, "lr schedule: step ", step, " is negative"); }

template <typename... Parts>
std::string describe_as(const Parts&... parts) {
  std::ostringstream out;
  (out << ... << parts);
  return out.str();
}
}  // namespace

ConstantSchedule::ConstantSchedule(double base) : base_(base) {
  check(base >= 0, "constant schedule: lr ", base, " < 0");
}
double ConstantSchedule::lr_at(int64_t step) const {
  check_step(step);
  return base_;
}
std::string ConstantSchedule::describe() const { return describe_as("constant(lr=", base_, ")"); }

WarmupCosineSchedule::WarmupCosineSchedule(double base, int64_t warmup, int64_t total,
                                           double min_lr)
    : base_(base), min_lr_(min_lr), warmup_(warmup), total_(total) {
  check(base >= 0 && min_lr >= 0 && min_lr <= base, "cosine schedule: need 0 <= min_lr (", min_lr,
        ") <= lr (", base, ")");
  check(warmup >= 0 && total > warmup, "cosine schedule: need 0 <= warmup (", warmup,
        ") < total steps (", total, ")");
}
double WarmupCosineSchedule::lr_at(int64_t step) const {
  check_step(step);
  if (warmup_ > 0 && step <= warmup_)
    return base_ * static_cast<double>(step) / static_cast<double>(warmup_);
  if (step >= total_) return min_lr_;
  double progress = static_cast<double>(step - warmup_) / static_cast<double>(total_ - warmup_);
  return min_lr_ + (base_ - min_lr_) * 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
}
std::string WarmupCosineSchedule::describe() const {
  return describe_as("cosine(lr=", base_, ", warmup=", warmup_, ", total=", total_,
                     ", min_lr=", min_lr_, ")");
}

InverseSqrtSchedule::InverseSqrtSchedule(double base, int64_t warmup)
    : base_(base), warmup_(warmup) {
  check(base >= 0, "inverse_sqrt schedule: lr ", base, " < 0");
  check(warmup >= 1, "inverse_sqrt schedule: warmup must be >= 1, got ", warmup);
}
InverseSqrtSchedule InverseSqrtSchedule::noam(int64_t d_model, int64_t warmup, double factor) {
  check(d_model >= 1 && warmup >= 1, "noam schedule: d_model (", d_model, ") and warmup (", warmup,
        ") must be >= 1");
  // At t = W both branches equal W^-0.5, so the peak is factor · d^-0.5 · W^-0.5.
  return InverseSqrtSchedule(factor / std::sqrt(static_cast<double>(d_model) * warmup), warmup);
}
double InverseSqrtSchedule::lr_at(int64_t step) const {
  check_step(step);
  if (step == 0) return 0.0;
  double t = static_cast<double>(step), w = static_cast<double>(warmup_);
  return base_ * std::min(t / w, std::sqrt(w / t));
}
std::string InverseSqrtSchedule::describe() const {
  return describe_as("inverse_sqrt(lr=", base_, ", warmup=", warmup_, ")");
}

StepDecaySchedule::StepDecaySchedule(double base, int64_t step_size, double gamma)
    : base_(base), gamma_(gamma), step_size_(step_size) {
  check(base >= 0 && gamma >= 0, "step schedule: lr (", base, ") and gamma (", gamma,
        ") must be >= 0");
  check(step_size >= 1, "step schedule: step_size must be >= 1, got ", step_size);
}
double StepDecaySchedule::lr_at(int64_t step) const {
  check_step(step);
  int64_t decays = step == 0 ? 0 : (step - 1) / step_size_;
  return base_ * std::pow(gamma_, static_cast<double>(decays));
}
std::string StepDecaySchedule::describe() const {
  return describe_as("step(lr=", base_, ", step_size=", step_size_, ", gamma=", gamma_, ")");
}

std::string to_string(ScheduleKind kind) { return enum_to_string(kScheduleNames, kind); }
ScheduleKind parse_schedule_kind(std::string_view name) {
  return enum_parse(kScheduleNames, "schedule", name);
}

std::unique_ptr<LrSchedule> make_schedule(const ScheduleOptions& o) {
  switch (o.kind) {
    case ScheduleKind::Constant:
      return std::make_unique<ConstantSchedule>(o.lr);
    case ScheduleKind::Cosine:
      return std::make_unique<WarmupCosineSchedule>(o.lr, o.warmup_steps, o.total_steps, o.min_lr);
    case ScheduleKind::InverseSqrt:
      return std::make_unique<InverseSqrtSchedule>(o.lr, o.warmup_steps);
    case ScheduleKind::Step:
      return std::make_unique<StepDecaySchedule>(o.lr, o.step_size, o.gamma);
  }
  fail("make_schedule: invalid schedule kind ", static_cast<int>(o.kind));
}

}  // namespace mixlab
