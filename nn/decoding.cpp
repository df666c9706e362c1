#include "nn/decoding.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace mixlab {

std::vector<std::vector<int32_t>> greedy_search(NextTokenScorer& scorer, int64_t b,
                                                const DecodeOptions& o) {
  std::vector<std::vector<int32_t>> out(b);
  std::vector<bool> done(b, false);
  std::vector<int32_t> tokens(b, o.bos);
  for (int64_t t = 0; t < o.max_len; ++t) {
    std::vector<float> lp = scorer.next_log_probs(tokens);
    int64_t vocab = static_cast<int64_t>(lp.size()) / b;
    bool all_done = true;
    for (int64_t i = 0; i < b; ++i) {
      const float* row = lp.data() + i * vocab;
      tokens[i] = done[i] ? o.eos : static_cast<int32_t>(std::max_element(row, row + vocab) - row);
      if (!done[i] && tokens[i] == o.eos) done[i] = true;
      if (!done[i]) out[i].push_back(tokens[i]);
      all_done = all_done && done[i];
    }
    if (all_done) break;
  }
  return out;
}

std::vector<std::vector<int32_t>> beam_search(NextTokenScorer& scorer, int64_t b,
                                              const DecodeOptions& o) {
  const int64_t k = o.beam;
  const double kDead = -std::numeric_limits<double>::infinity();
  struct Hyp {
    std::vector<int32_t> tokens;
    double score = 0;  // sum of log-probabilities
    bool done = false;
  };
  auto penalised = [&](const Hyp& h) {
    if (o.length_penalty == 0) return h.score;
    double len = static_cast<double>(h.tokens.size() + (h.done ? 1 : 0));
    return h.score / std::pow((5.0 + len) / 6.0, o.length_penalty);
  };
  // Initially only beam 0 of each item is alive, so the first step has no duplicates.
  std::vector<int32_t> expand_rows;
  for (int64_t i = 0; i < b; ++i)
    for (int64_t j = 0; j < k; ++j) expand_rows.push_back(static_cast<int32_t>(i));
  scorer.reorder(expand_rows);
  std::vector<std::vector<Hyp>> beams(b, std::vector<Hyp>(k));
  for (int64_t i = 0; i < b; ++i)
    for (int64_t j = 1; j < k; ++j) beams[i][j].score = kDead;
  std::vector<int32_t> tokens(b * k, o.bos);
  for (int64_t t = 0; t < o.max_len; ++t) {
    std::vector<float> lp = scorer.next_log_probs(tokens);
    int64_t vocab = static_cast<int64_t>(lp.size()) / (b * k);
    std::vector<int32_t> parents(b * k);
    bool all_done = true;
    for (int64_t i = 0; i < b; ++i) {
      struct Cand {
        double key;
        int64_t parent;
        int32_t token;
        Hyp hyp;
      };
      std::vector<Cand> cands;
      for (int64_t j = 0; j < k; ++j) {
        const Hyp& h = beams[i][j];
        if (h.score == kDead) continue;
        if (h.done) {
          cands.push_back({penalised(h), j, o.eos, h});
          continue;
        }
        // The k best continuations of this beam suffice for the k best overall.
        const float* row = lp.data() + (i * k + j) * vocab;
        std::vector<int32_t> ids(vocab);
        for (int64_t v = 0; v < vocab; ++v) ids[v] = static_cast<int32_t>(v);
        int64_t top = std::min<int64_t>(k, vocab);
        std::partial_sort(ids.begin(), ids.begin() + top, ids.end(),
                          [&](int32_t a, int32_t c) { return row[a] > row[c]; });
        for (int64_t r = 0; r < top; ++r) {
          Hyp n = h;
          n.score += row[ids[r]];
          if (ids[r] == o.eos)
            n.done = true;
          else
            n.tokens.push_back(ids[r]);
          cands.push_back({penalised(n), j, ids[r], n});
        }
      }
      std::stable_sort(cands.begin(), cands.end(),
                       [](const Cand& a, const Cand& c) { return a.key > c.key; });
      for (int64_t j = 0; j < k; ++j) {
        if (j < static_cast<int64_t>(cands.size())) {
          beams[i][j] = cands[j].hyp;
          parents[i * k + j] = static_cast<int32_t>(i * k + cands[j].parent);
          tokens[i * k + j] = cands[j].token;
        } else {
          beams[i][j] = Hyp{{}, kDead, true};
          parents[i * k + j] = static_cast<int32_t>(i * k);
          tokens[i * k + j] = o.eos;
        }
        all_done = all_done && beams[i][j].done;
      }
    }
    if (all_done) break;
    scorer.reorder(parents);
  }
  std::vector<std::vector<int32_t>> out(b);
  for (int64_t i = 0; i < b; ++i) {
    const Hyp* best = nullptr;
    for (const Hyp& h : beams[i])
      if (h.score != kDead && (!best || penalised(h) > penalised(*best))) best = &h;
    if (best) out[i] = best->tokens;
  }
  return out;
}

}  // namespace mixlab
