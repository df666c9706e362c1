// Greedy and beam search over any source of next-token log-probabilities: one translator, or an
// ensemble of them. The searches only see rows of partial outputs; the scorer keeps whatever
// state (caches of keys and values) makes the next step cheap.
#pragma once
#include <cstdint>
#include <vector>

namespace mixlab {

struct DecodeOptions {
  int64_t max_len = 64;       // generated tokens at most (beyond <bos>)
  int64_t beam = 1;           // 1 = greedy
  double length_penalty = 1;  // GNMT's ((5 + len) / 6)^α on beam scores; 0 disables
  int32_t bos = 1, eos = 2;
};

class NextTokenScorer {
 public:
  virtual ~NextTokenScorer() = default;
  // Log-probabilities [rows × vocab], row-major, of the token that follows each row's newest
  // token (`tokens` has one entry per row; <bos> first).
  virtual std::vector<float> next_log_probs(const std::vector<int32_t>& tokens) = 0;
  // Row i <- row index[i] for all later steps (beam search keeps, drops and copies rows).
  virtual void reorder(const std::vector<int32_t>& index) = 0;
};

// Both return each of the `batch` outputs without <bos> and <eos>.
std::vector<std::vector<int32_t>> greedy_search(NextTokenScorer& scorer, int64_t batch,
                                                const DecodeOptions& options);
// Beam j of item i lives at row i·beam + j; the scorer starts with `batch` rows.
std::vector<std::vector<int32_t>> beam_search(NextTokenScorer& scorer, int64_t batch,
                                              const DecodeOptions& options);

}  // namespace mixlab
