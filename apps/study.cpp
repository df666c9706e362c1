// `mixlab study`: the flags of a study, handed to the lab (lab/study.h), which trains the grid
// and writes the report.
#include <memory>
#include <sstream>

#include "apps/commands.h"
#include "apps/common.h"
#include "lab/study.h"

namespace mixlab::app {

namespace {

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string w; std::getline(ss, w, ',');)
    if (!w.empty()) out.push_back(w);
  return out;
}

}  // namespace

void add_study_command(CLI::App& root) {
  auto o = std::make_shared<lab::StudyOptions>();
  auto tasks = std::make_shared<std::string>("listops,scan,fashion-mnist");
  auto mixers = std::make_shared<std::string>("all");
  CLI::App* cmd = root.add_subcommand(
      "study", "train a grid of tasks x mixers x seeds and write a report comparing the mixers");
  cmd->add_option("--tasks", *tasks,
                  "comma-separated: listops, fashion-mnist, scan, scan-length, scan-jump, g2p, "
                  "classify:FILE, translate:FILE")
      ->capture_default_str();
  cmd->add_option("--mixers", *mixers, "all, or comma-separated mixer names")
      ->capture_default_str();
  cmd->add_option("--budget", o->budget, "tiny, small or full")
      ->check(CLI::IsMember({"tiny", "small", "full"}))
      ->capture_default_str();
  cmd->add_option("--seeds", o->seeds,
                  "seeds per (task, mixer); 0: the budget's (tiny 1, small and full 3)")
      ->check(CLI::Range(0, 100))
      ->capture_default_str();
  cmd->add_option("--steps", o->steps, "cap every cell at N optimizer steps (0: the budget's)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--threads", o->threads, "CPU threads of each training process")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  cmd->add_option("--jobs", o->jobs, "cells trained at the same time (each with --threads)")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  cmd->add_option("--out", o->out, "the study folder (cells, gallery, report)")->required();
  cmd->callback([o, tasks, mixers] {
    o->tasks = split_list(*tasks);
    o->mixers = *mixers == "all" ? lab::all_study_mixers() : split_list(*mixers);
    lab::run_study(*o);
  });
}

}  // namespace mixlab::app
