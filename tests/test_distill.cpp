// Hard distillation (`classify train --teacher`, ClassificationTask::set_teachers): the loss is
// (1 - w) CE(y) + w CE(the teacher's class), the teachers never train, and the app applies the
// flags, records them, reuses the teacher on --resume and refuses a teacher that does not fit
// before anything is written.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "nn/models.h"
#include "tests/app_runner.h"
#include "tests/file_helpers.h"
#include "tests/model_configs.h"
#include "tests/test_data_util.h"
#include "train/loop/tasks.h"

using namespace mixlab;
namespace fs = std::filesystem;

namespace {

Batch token_batch() {
  Batch b;
  b.size = 4;
  b.src = {1, 2, 3, 4, 5, 6, 7, 8};
  b.src_len = 2;
  b.src_lengths = {2, 2, 2, 2};
  b.labels = {0, 1, 2, 0};
  return b;
}

std::vector<int32_t> argmax_rows(const Tensor& z) {
  const std::vector<float> v = z.to_float_vector();
  std::vector<int32_t> out;
  for (int64_t i = 0; i < z.size(0); ++i) {
    int32_t best = 0;
    for (int32_t c = 1; c < z.size(1); ++c)
      if (v[i * z.size(1) + c] > v[i * z.size(1) + best]) best = c;
    out.push_back(best);
  }
  return out;
}

// `mixlab ARGS` through the shell in `cwd`, its log in `dir`.
testing::Exit run_distill_app(const testing::TempDir& dir, const std::string& args,
                              const std::string& cwd = "") {
  static int calls = 0;
  return testing::run_app_shell(args, dir.file("log-" + std::to_string(calls++) + ".txt"), cwd);
}

}  // namespace

TEST_CASE("distill: the loss is (1 - w) CE(y) + w CE(teacher's class), and the teacher is fixed") {
  ModelConfig c = testing::tiny_classifier("attention");
  Classifier student(c);
  c.seed = 11;  // another initialisation: its classes differ from the labels
  Classifier teacher(c);
  teacher.train();  // set_teachers puts it in eval mode
  const Batch b = token_batch();
  ClassificationTask task(student, Device::cpu(), 0.1);
  const double label_loss = task.loss(b).item();
  const std::vector<int32_t> taught = argmax_rows(
      teacher.forward(Tensor::from_data(b.src, {b.size, b.src_len}, Device::cpu()), b.src_lengths));
  Batch relabelled = b;
  relabelled.labels = taught;
  const double teacher_loss = task.loss(relabelled).item();
  REQUIRE(taught != b.labels);

  task.set_teachers({&teacher}, 0.3);
  CHECK_FALSE(teacher.is_training());
  CHECK(task.teacher_predictions(b) == taught);
  Tensor loss = task.loss(b);
  CHECK(loss.item() == doctest::Approx(0.7 * label_loss + 0.3 * teacher_loss).epsilon(1e-6));
  // Only the student learns: the teacher's parameters get no gradient.
  loss.backward();
  for (const auto& p : teacher.parameters()) CHECK_FALSE(p.grad().defined());
  bool student_has_gradient = false;
  for (const auto& p : student.parameters()) student_has_gradient |= p.grad().defined();
  CHECK(student_has_gradient);
}

TEST_CASE("distill: several teachers predict the class of their mean probability") {
  ModelConfig c = testing::tiny_classifier("attention");
  Classifier student(c);
  std::vector<std::unique_ptr<Classifier>> teachers;
  std::vector<Classifier*> pointers;
  for (uint64_t seed : {21, 22, 23}) {
    c.seed = seed;
    teachers.push_back(std::make_unique<Classifier>(c));
    pointers.push_back(teachers.back().get());
  }
  const Batch b = token_batch();
  const Tensor ids = Tensor::from_data(b.src, {b.size, b.src_len}, Device::cpu());
  Tensor mean = softmax(teachers[0]->forward(ids, b.src_lengths), -1);
  for (size_t i = 1; i < teachers.size(); ++i)
    mean = add(mean, softmax(teachers[i]->forward(ids, b.src_lengths), -1));
  ClassificationTask task(student, Device::cpu());
  task.set_teachers(pointers, 1.0);
  CHECK(task.teacher_predictions(b) == argmax_rows(mean));
  // Weight 1: the data's labels no longer count.
  Batch relabelled = b;
  relabelled.labels = {2, 2, 1, 1};
  CHECK(task.loss(relabelled).item() == doctest::Approx(task.loss(b).item()).epsilon(1e-12));
}

TEST_CASE("distill app: --teacher is applied, recorded and reused on resume, and misfits refused") {
  testing::TempDir dir;
  testing::write_idx_image_folder(dir.root / "images", 40);
  testing::write_idx_image_folder(dir.root / "other", 40);
  const std::string train =
      "classify train --dim 16 --heads 2 --layers 1 --patch 7 --batch 8 "
      "--threads 1 --quiet --dropout 0 --data ";
  const std::string base = train + dir.file("images") + " --epochs 1 ";
  testing::Exit teacher = run_distill_app(dir, base + "--seed 3 --out " + dir.file("teacher"));
  INFO(teacher.output);
  REQUIRE(teacher.code == 0);
  REQUIRE(run_distill_app(dir, base + "--out " + dir.file("plain")).code == 0);

  // A relative path, from the folder that holds it.
  const std::string distill = "--teacher teacher/best.safetensors --distill-weight 0.4 ";
  testing::Exit taught = run_distill_app(dir, base + distill + "--out taught", dir.path());
  INFO(taught.output);
  REQUIRE(taught.code == 0);
  const std::string absolute_teacher =
      fs::absolute(dir.file("teacher/best.safetensors")).lexically_normal().string();
  // The data line says it; the checkpoint's data description stores it.
  const std::string stored = "the classifier " + absolute_teacher + " (hard, weight 0.4)";
  const std::string recorded = "distilled from " + stored;
  CHECK(testing::contains(taught.output, recorded));
  const std::string checkpoint = testing::read_file(dir.file("taught/last.safetensors"));
  CHECK(testing::contains(checkpoint, stored));
  CHECK(testing::contains(testing::read_file(dir.file("taught/config.ini")), absolute_teacher));
  // Applied: the same seed trains other weights with a teacher.
  CHECK(checkpoint != testing::read_file(dir.file("plain/last.safetensors")));
  // Deterministic: the same command gives the same bytes.
  REQUIRE(run_distill_app(dir, base + distill + "--out again", dir.path()).code == 0);
  CHECK(testing::read_file(dir.file("again/last.safetensors")) == checkpoint);

  // --resume from elsewhere finds the teacher through config.ini and keeps distilling.
  testing::Exit resumed = run_distill_app(
      dir, "classify train --resume --epochs 2 --out " + dir.file("taught"), dir.file("images"));
  INFO(resumed.output);
  REQUIRE(resumed.code == 0);
  CHECK(testing::contains(resumed.output, recorded));
  CHECK(testing::contains(testing::read_file(dir.file("taught/last.safetensors")), stored));
  // A run without a teacher stores `teacher=""`, and resumes without one.
  testing::Exit plain_resumed = run_distill_app(
      dir, "classify train --resume --epochs 2 --out " + dir.file("plain"), dir.file("images"));
  INFO(plain_resumed.output);
  CHECK(plain_resumed.code == 0);
  CHECK_FALSE(testing::contains(plain_resumed.output, "distilled"));
  testing::Exit swapped =
      run_distill_app(dir, "classify train --resume --epochs 3 --teacher " +
                               dir.file("plain/best.safetensors") + " --out " + dir.file("taught"));
  CHECK(swapped.code == 2);
  CHECK(testing::contains(swapped.output, "--teacher"));

  // Refused before anything is written: a teacher of other data, of token inputs, a missing
  // file, and a weight without a teacher.
  REQUIRE(run_distill_app(
              dir, train + dir.file("other") + " --epochs 1 --out " + dir.file("other-teacher"))
              .code == 0);
  testing::Exit other =
      run_distill_app(dir, base + "--teacher " + dir.file("other-teacher/best.safetensors") +
                               " --out " + dir.file("no1"));
  CHECK(other.code == 2);
  CHECK(testing::contains(
      other.output,
      "was trained on IDX images " + fs::absolute(dir.file("other")).lexically_normal().string()));
  CHECK(testing::contains(other.output, "the same training and held-out examples"));
  CHECK_FALSE(fs::exists(dir.file("no1")));

  testing::write_file(dir.file("text.tsv"),
                      "a\tx y\nb\ty z\na\tx x\nb\tz z\na\tx\nb\tz\n"
                      "a\tx y x\nb\tz y z\na\ty x\nb\ty z\nb\tz\n");
  REQUIRE(run_distill_app(dir, "classify train --data " + dir.file("text.tsv") +
                                   " --dim 16 --heads 2 --layers 1 --steps 1 --threads 1 "
                                   "--quiet --out " +
                                   dir.file("text"))
              .code == 0);
  testing::Exit tokens = run_distill_app(
      dir, base + "--teacher " + dir.file("text/best.safetensors") + " --out " + dir.file("no2"));
  CHECK(tokens.code == 2);
  CHECK(testing::contains(tokens.output, "reads other inputs than the model this run trains"));
  CHECK_FALSE(fs::exists(dir.file("no2")));

  testing::Exit missing = run_distill_app(
      dir, base + "--teacher " + dir.file("nothing.safetensors") + " --out " + dir.file("no3"));
  CHECK(missing.code != 0);
  CHECK(testing::contains(missing.output, "nothing.safetensors"));
  CHECK_FALSE(fs::exists(dir.file("no3")));

  testing::Exit lone = run_distill_app(dir, base + "--distill-weight 0.3 --out " + dir.file("no4"));
  CHECK(lone.code == 2);
  CHECK(testing::contains(lone.output, "--distill-weight"));
  CHECK_FALSE(fs::exists(dir.file("no4")));
}
