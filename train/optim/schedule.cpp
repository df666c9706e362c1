#include "train/optim/schedule.h"

#include <algorithm>
#include <charconv>
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

ExtendedCosineSchedule::ExtendedCosineSchedule(std::unique_ptr<LrSchedule> earlier, int64_t from,
                                               int64_t total, double min_lr)
    : earlier_(std::move(earlier)), from_(from), total_(total), min_lr_(min_lr) {
  check(earlier_ != nullptr, "extended cosine schedule: no earlier schedule");
  check(from >= 0 && total > from, "extended cosine schedule: need 0 <= from (", from,
        ") < total steps (", total, ")");
  start_lr_ = earlier_->lr_at(from);
  check(min_lr <= start_lr_ || start_lr_ == 0, "extended cosine schedule: min_lr ", min_lr,
        " above the rate ", start_lr_, " at step ", from);
}
double ExtendedCosineSchedule::lr_at(int64_t step) const {
  check_step(step);
  if (step <= from_) return earlier_->lr_at(step);
  const double floor = std::min(min_lr_, start_lr_);
  if (step >= total_) return floor;
  const double progress = static_cast<double>(step - from_) / static_cast<double>(total_ - from_);
  return floor + (start_lr_ - floor) * 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
}
std::string ExtendedCosineSchedule::describe() const {
  return describe_as(earlier_->describe(), " then cosine(from step ", from_, " at lr=", start_lr_,
                     ", total=", total_, ", min_lr=", min_lr_, ")");
}

std::string to_string(const ScheduleSegment& s) {
  return std::to_string(s.until_step) + ":" + std::to_string(s.total_steps) + ":" +
         std::to_string(s.warmup_steps);
}

ScheduleSegment parse_schedule_segment(std::string_view text) {
  ScheduleSegment s;
  int64_t* fields[] = {&s.until_step, &s.total_steps, &s.warmup_steps};
  std::string_view rest = text;
  for (int i = 0; i < 3; ++i) {
    const size_t colon = i < 2 ? rest.find(':') : rest.size();
    check(colon != std::string_view::npos, "schedule history '", text,
          "': expected STEP:TOTAL:WARMUP");
    const std::string_view part = rest.substr(0, colon);
    auto [end, error] = std::from_chars(part.data(), part.data() + part.size(), *fields[i]);
    check(error == std::errc() && end == part.data() + part.size() && !part.empty() &&
              *fields[i] >= 0,
          "schedule history '", text, "': expected STEP:TOTAL:WARMUP, three counts");
    rest = colon < rest.size() ? rest.substr(colon + 1) : std::string_view();
  }
  check(s.total_steps > s.warmup_steps, "schedule history '", text,
        "': the total must exceed the warm-up");
  return s;
}

ScheduleLength schedule_length(int64_t max_steps, int64_t epochs, int64_t steps_per_epoch,
                               int64_t warmup) {
  const int64_t total = max_steps > 0 ? max_steps : steps_per_epoch * epochs;
  ScheduleLength l;
  l.warmup_steps = std::max<int64_t>(1, std::min(warmup, total));
  l.total_steps = std::max<int64_t>(total, l.warmup_steps + 1);
  return l;
}

std::string to_string(ScheduleKind kind) { return enum_to_string(kScheduleNames, kind); }
ScheduleKind parse_schedule_kind(std::string_view name) {
  return enum_parse(kScheduleNames, "schedule", name);
}

namespace {

// A cosine through the run's lengths (ScheduleOptions::earlier), oldest first.
std::unique_ptr<LrSchedule> extended_cosine(const ScheduleOptions& o) {
  const ScheduleSegment& first = o.earlier.front();
  std::unique_ptr<LrSchedule> s =
      std::make_unique<WarmupCosineSchedule>(o.lr, first.warmup_steps, first.total_steps, o.min_lr);
  for (size_t k = 0; k < o.earlier.size(); ++k) {
    const int64_t from = o.earlier[k].until_step;
    const int64_t total =
        std::max(k + 1 < o.earlier.size() ? o.earlier[k + 1].total_steps : o.total_steps, from + 1);
    if (from < first.warmup_steps)  // still warming up: the same warm-up, the new length
      s = std::make_unique<WarmupCosineSchedule>(o.lr, first.warmup_steps,
                                                 std::max(total, first.warmup_steps + 1), o.min_lr);
    else
      s = std::make_unique<ExtendedCosineSchedule>(std::move(s), from, total, o.min_lr);
  }
  return s;
}

}  // namespace

std::unique_ptr<LrSchedule> make_schedule(const ScheduleOptions& o) {
  switch (o.kind) {
    case ScheduleKind::Constant:
      return std::make_unique<ConstantSchedule>(o.lr);
    case ScheduleKind::Cosine:
      if (!o.earlier.empty()) return extended_cosine(o);
      return std::make_unique<WarmupCosineSchedule>(o.lr, o.warmup_steps, o.total_steps, o.min_lr);
    case ScheduleKind::InverseSqrt:
      return std::make_unique<InverseSqrtSchedule>(
          o.lr, o.earlier.empty() ? o.warmup_steps : o.earlier.front().warmup_steps);
    case ScheduleKind::Step:
      return std::make_unique<StepDecaySchedule>(o.lr, o.step_size, o.gamma);
  }
  fail("make_schedule: invalid schedule kind ", static_cast<int>(o.kind));
}

}  // namespace mixlab
