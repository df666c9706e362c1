// The rule for a run resumed with another length (train/optim/schedule.h, docs/runs.md): the
// schedule up to the resumed step is kept, a cosine then falls from the rate it had reached to
// min_lr at the new end, and the history that says so reads back from its text.
#include <doctest/doctest.h>

#include <cmath>

#include "core/error.h"
#include "train/optim/schedule.h"

namespace {

mixlab::ScheduleOptions cosine_of(int64_t total, int64_t warmup) {
  mixlab::ScheduleOptions o;
  o.kind = mixlab::ScheduleKind::Cosine;
  o.lr = 0.01;
  o.total_steps = total;
  o.warmup_steps = warmup;
  return o;
}

}  // namespace

TEST_CASE("schedule extension: the earlier schedule up to S, then a fall from its rate, no jump") {
  using namespace mixlab;
  const auto before = make_schedule(cosine_of(200, 20));
  ScheduleOptions o = cosine_of(300, 20);
  o.earlier = {ScheduleSegment{120, 200, 20}};
  const auto after = make_schedule(o);
  for (int64_t t = 0; t <= 120; ++t) CHECK(after->lr_at(t) == before->lr_at(t));
  const double at_s = before->lr_at(120);
  CHECK(after->lr_at(121) <= at_s);
  CHECK(after->lr_at(121) > 0.999 * at_s);  // the cosine's first step moves it barely
  for (int64_t t = 122; t <= 300; ++t) CHECK(after->lr_at(t) <= after->lr_at(t - 1));
  CHECK(after->lr_at(210) == doctest::Approx(at_s / 2));  // halfway from S to the new end
  CHECK(after->lr_at(300) == 0.0);
  // The fresh schedule of the new length would have jumped up at S: the rule is not it.
  CHECK(make_schedule(cosine_of(300, 20))->lr_at(121) > 1.2 * at_s);
}

TEST_CASE("schedule extension: inside the warm-up, twice, and kinds that ignore the length") {
  using namespace mixlab;
  // Resumed at step 5 of a 20-step warm-up: the warm-up goes on, the cosine runs to 300.
  ScheduleOptions o = cosine_of(300, 50);
  o.earlier = {ScheduleSegment{5, 200, 20}};
  const auto s = make_schedule(o);
  const auto fresh = make_schedule(cosine_of(300, 20));
  for (int64_t t = 0; t <= 300; ++t) CHECK(s->lr_at(t) == fresh->lr_at(t));

  // Extended twice: each segment as it was up to its step.
  ScheduleOptions twice = cosine_of(400, 20);
  twice.earlier = {ScheduleSegment{120, 200, 20}, ScheduleSegment{250, 300, 20}};
  ScheduleOptions once = cosine_of(300, 20);
  once.earlier = {ScheduleSegment{120, 200, 20}};
  const auto a = make_schedule(twice), b = make_schedule(once);
  for (int64_t t = 0; t <= 250; ++t) CHECK(a->lr_at(t) == b->lr_at(t));
  for (int64_t t = 251; t <= 400; ++t) CHECK(a->lr_at(t) <= a->lr_at(t - 1));

  // inverse_sqrt keeps the first warm-up.
  ScheduleOptions inv;
  inv.kind = ScheduleKind::InverseSqrt;
  inv.lr = 0.01;
  inv.warmup_steps = 30;
  inv.earlier = {ScheduleSegment{100, 200, 20}};
  CHECK(make_schedule(inv)->lr_at(20) == 0.01);
}

TEST_CASE("schedule extension: STEP:TOTAL:WARMUP reads back, bad text is an error naming it") {
  using namespace mixlab;
  const ScheduleSegment s{120, 200, 20};
  CHECK(to_string(s) == "120:200:20");
  CHECK(parse_schedule_segment("120:200:20") == s);
  for (const char* bad : {"", "1:2", "1:2:3:4", "a:2:1", "1:-2:1", "5:10:10", "1::1"})
    CHECK_THROWS_WITH_AS(parse_schedule_segment(bad), doctest::Contains("schedule history"), Error);
  const ScheduleLength by_epochs = schedule_length(0, 3, 7, 100);
  CHECK(by_epochs.total_steps == 22);  // the warm-up (capped at 21) stays below the total
  CHECK(by_epochs.warmup_steps == 21);
  CHECK(schedule_length(50, 3, 7, 10).total_steps == 50);
}
