#include "apps/eval_command.h"

namespace mixlab::app {

uint64_t eval_seed(const CLI::App& cmd, const CommonFlags& common, const DataDescription& stored) {
  return cmd.get_option("--seed")->count() ? common.seed : stored.seed;
}

void print_eval_data(std::ostream& out, const DataDescription& scored,
                     const DataDescription& stored) {
  out << "data: " << scored.summary() << (scored == stored ? ", the checkpoint's" : "") << "\n";
}

void print_metrics(std::ostream& out, const std::string& set,
                   const std::map<std::string, double>& metrics) {
  for (const auto& [k, v] : metrics) out << set << " " << k << " " << v << "\n";
}

}  // namespace mixlab::app
