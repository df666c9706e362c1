// Learning-rate schedules (train/optim/schedule.h): values at chosen steps against the formulas.
#include <doctest/doctest.h>

#include <cmath>
#include <numbers>

#include "core/error.h"
#include "train/optim/schedule.h"

using namespace mixlab;

TEST_CASE("schedule: constant") {
  ConstantSchedule s(3e-4);
  for (int64_t t : {0, 1, 10, 1000000}) CHECK(s.lr_at(t) == 3e-4);
  CHECK_THROWS_AS(s.lr_at(-1), Error);
}

TEST_CASE("schedule: warm-up then cosine to the floor") {
  const double base = 1e-3, floor = 1e-5;
  WarmupCosineSchedule s(base, 100, 1100, floor);
  CHECK(s.lr_at(0) == 0.0);
  CHECK(s.lr_at(1) == doctest::Approx(base / 100));
  CHECK(s.lr_at(50) == doctest::Approx(base / 2));
  CHECK(s.lr_at(100) == doctest::Approx(base));
  // Halfway through the decay cos(π/2) = 0: exactly between base and floor.
  CHECK(s.lr_at(600) == doctest::Approx((base + floor) / 2));
  for (int64_t t : {101, 350, 850, 1099}) {
    double progress = (t - 100) / 1000.0;
    double expected = floor + (base - floor) * 0.5 * (1 + std::cos(std::numbers::pi * progress));
    CHECK(s.lr_at(t) == doctest::Approx(expected).epsilon(1e-12));
  }
  CHECK(s.lr_at(1100) == floor);
  CHECK(s.lr_at(5000) == floor);
  // Monotone: up during warm-up, down after.
  for (int64_t t = 1; t < 100; ++t) CHECK(s.lr_at(t) < s.lr_at(t + 1));
  for (int64_t t = 100; t < 1100; ++t) CHECK(s.lr_at(t) > s.lr_at(t + 1));
}

TEST_CASE("schedule: cosine without warm-up starts at the base rate") {
  WarmupCosineSchedule s(0.1, 0, 10);
  CHECK(s.lr_at(0) == doctest::Approx(0.1));
  CHECK(s.lr_at(5) == doctest::Approx(0.05));
  CHECK(s.lr_at(10) == 0.0);
  CHECK_THROWS_AS(WarmupCosineSchedule(0.1, 10, 10), Error);      // no decay phase
  CHECK_THROWS_AS(WarmupCosineSchedule(0.1, 0, 10, 0.2), Error);  // floor above base
}

TEST_CASE("schedule: inverse square root with warm-up") {
  InverseSqrtSchedule s(2e-3, 400);
  CHECK(s.lr_at(0) == 0.0);
  CHECK(s.lr_at(1) == doctest::Approx(2e-3 / 400));
  CHECK(s.lr_at(200) == doctest::Approx(1e-3));
  CHECK(s.lr_at(400) == doctest::Approx(2e-3));
  CHECK(s.lr_at(1600) == doctest::Approx(1e-3));  // sqrt(400 / 1600) = 1/2
  CHECK(s.lr_at(40000) == doctest::Approx(2e-4));
  CHECK_THROWS_AS(InverseSqrtSchedule(1e-3, 0), Error);
}

TEST_CASE("schedule: noam form equals the paper's formula") {
  const int64_t d = 512, w = 4000;
  InverseSqrtSchedule s = InverseSqrtSchedule::noam(d, w, 2.0);
  for (int64_t t : {1, 10, 1000, 3999, 4000, 4001, 10000, 100000}) {
    double paper = 2.0 * std::pow(d, -0.5) *
                   std::min(std::pow(t, -0.5), t * std::pow(static_cast<double>(w), -1.5));
    CHECK(s.lr_at(t) == doctest::Approx(paper).epsilon(1e-12));
  }
}

TEST_CASE("schedule: step decay multiplies by gamma every k updates") {
  StepDecaySchedule s(0.1, 30, 0.5);
  CHECK(s.lr_at(0) == 0.1);
  CHECK(s.lr_at(1) == 0.1);
  CHECK(s.lr_at(30) == 0.1);
  CHECK(s.lr_at(31) == doctest::Approx(0.05));
  CHECK(s.lr_at(60) == doctest::Approx(0.05));
  CHECK(s.lr_at(61) == doctest::Approx(0.025));
  CHECK(s.lr_at(301) == doctest::Approx(0.1 * std::pow(0.5, 10)));
  CHECK_THROWS_AS(StepDecaySchedule(0.1, 0, 0.5), Error);
}

TEST_CASE("schedule: make_schedule builds each kind by name") {
  ScheduleOptions o;
  o.lr = 0.01;
  o.warmup_steps = 10;
  o.total_steps = 110;
  o.min_lr = 0.001;
  o.step_size = 5;
  o.gamma = 0.1;
  o.kind = ScheduleKind::Constant;
  CHECK(make_schedule(o)->lr_at(7) == 0.01);
  o.kind = ScheduleKind::Cosine;
  CHECK(make_schedule(o)->lr_at(60) == doctest::Approx(0.0055));
  o.kind = ScheduleKind::InverseSqrt;
  CHECK(make_schedule(o)->lr_at(40) == doctest::Approx(0.005));
  o.kind = ScheduleKind::Step;
  CHECK(make_schedule(o)->lr_at(6) == doctest::Approx(0.001));
  CHECK(make_schedule(o)->describe().find("step") == 0);
}

TEST_CASE("schedule: names read back to their kinds and an unknown name lists the valid ones") {
  for (ScheduleKind k : {ScheduleKind::Constant, ScheduleKind::Cosine, ScheduleKind::InverseSqrt,
                         ScheduleKind::Step})
    CHECK(parse_schedule_kind(to_string(k)) == k);
  CHECK(to_string(ScheduleKind::InverseSqrt) == "inverse_sqrt");  // the name config.ini keeps
  CHECK_THROWS_WITH_AS(parse_schedule_kind("linear"),
                       "schedule 'linear' is not one of: constant, cosine, inverse_sqrt, step",
                       Error);
}
