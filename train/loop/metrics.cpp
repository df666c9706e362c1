#include "train/loop/metrics.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "core/error.h"

namespace mixlab {

namespace {

void check_same_size(const char* op, size_t hypotheses, size_t references) {
  check(hypotheses == references, op, ": ", hypotheses, " hypotheses but ", references,
        " references");
}

double ratio(const char* op, int64_t hits, int64_t total) {
  check(total > 0, op, ": nothing to score (no examples or no reference tokens)");
  return static_cast<double>(hits) / static_cast<double>(total);
}

// Two-row dynamic programme: O(|a|*|b|) time, O(|b|) memory.
template <typename Seq>
int64_t levenshtein(const Seq& a, const Seq& b) {
  std::vector<int64_t> previous(b.size() + 1), current(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) previous[j] = static_cast<int64_t>(j);
  for (size_t i = 1; i <= a.size(); ++i) {
    current[0] = static_cast<int64_t>(i);
    for (size_t j = 1; j <= b.size(); ++j) {
      const int64_t substitute = previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      current[j] = std::min({substitute, previous[j] + 1, current[j - 1] + 1});
    }
    std::swap(previous, current);
  }
  return previous[b.size()];
}

// n-gram counts of a sequence, keyed by the n-gram itself.
template <typename Seq>
std::map<Seq, int64_t> ngram_counts(const Seq& tokens, size_t n) {
  std::map<Seq, int64_t> counts;
  for (size_t i = 0; i + n <= tokens.size(); ++i) {
    ++counts[Seq(tokens.begin() + static_cast<std::ptrdiff_t>(i),
                 tokens.begin() + static_cast<std::ptrdiff_t>(i + n))];
  }
  return counts;
}

template <typename Seq>
void add_bleu(BleuStats& stats, const Seq& candidate, const Seq& reference) {
  stats.candidate_length += static_cast<int64_t>(candidate.size());
  stats.reference_length += static_cast<int64_t>(reference.size());
  for (size_t n = 1; n <= 4; ++n) {
    if (candidate.size() < n) break;
    stats.totals[n - 1] += static_cast<int64_t>(candidate.size() - n + 1);
    const auto reference_counts = ngram_counts(reference, n);
    for (const auto& [gram, count] : ngram_counts(candidate, n)) {
      // Clipping: an n-gram earns at most as many matches as the reference holds it.
      const auto found = reference_counts.find(gram);
      if (found != reference_counts.end()) stats.matches[n - 1] += std::min(count, found->second);
    }
  }
}

template <typename Seq>
double bleu_of(const std::vector<Seq>& candidates, const std::vector<Seq>& references) {
  check_same_size("corpus_bleu", candidates.size(), references.size());
  BleuStats stats;
  for (size_t i = 0; i < candidates.size(); ++i) stats.add(candidates[i], references[i]);
  return stats.score();
}

template <typename Seq>
G2pScores g2p_of(const std::vector<Seq>& hypotheses, const std::vector<std::vector<Seq>>& refs) {
  check_same_size("g2p_scores", hypotheses.size(), refs.size());
  G2pScores scores;
  for (size_t w = 0; w < hypotheses.size(); ++w) {
    check(!refs[w].empty(), "g2p_scores: word ", w, " has no reference pronunciation");
    bool correct = false;
    int64_t best_distance = -1;
    int64_t best_length = 0;
    for (const Seq& reference : refs[w]) {
      if (reference == hypotheses[w]) correct = true;
      const int64_t distance = levenshtein(hypotheses[w], reference);
      const int64_t length = static_cast<int64_t>(reference.size());
      // Closest reference; among equally close ones the shortest (see metrics.h).
      if (best_distance < 0 || distance < best_distance ||
          (distance == best_distance && length < best_length)) {
        best_distance = distance;
        best_length = length;
      }
    }
    ++scores.words;
    if (!correct) ++scores.word_errors;
    scores.phoneme_errors += best_distance;
    scores.reference_phonemes += best_length;
  }
  return scores;
}

}  // namespace

double accuracy(const std::vector<int32_t>& predictions, const std::vector<int32_t>& labels) {
  check_same_size("accuracy", predictions.size(), labels.size());
  int64_t hits = 0;
  for (size_t i = 0; i < labels.size(); ++i) hits += predictions[i] == labels[i];
  return ratio("accuracy", hits, static_cast<int64_t>(labels.size()));
}

double exact_match(const std::vector<TokenSeq>& hypotheses,
                   const std::vector<TokenSeq>& references) {
  check_same_size("exact_match", hypotheses.size(), references.size());
  int64_t hits = 0;
  for (size_t i = 0; i < references.size(); ++i) hits += hypotheses[i] == references[i];
  return ratio("exact_match", hits, static_cast<int64_t>(references.size()));
}

double token_accuracy(const std::vector<TokenSeq>& hypotheses,
                      const std::vector<TokenSeq>& references, int32_t pad_id) {
  check_same_size("token_accuracy", hypotheses.size(), references.size());
  int64_t hits = 0, total = 0;
  for (size_t i = 0; i < references.size(); ++i) {
    const TokenSeq& reference = references[i];
    const TokenSeq& hypothesis = hypotheses[i];
    for (size_t t = 0; t < reference.size(); ++t) {
      if (reference[t] == pad_id) continue;
      ++total;
      hits += t < hypothesis.size() && hypothesis[t] == reference[t];
    }
  }
  return ratio("token_accuracy", hits, total);
}

int64_t edit_distance(const TokenSeq& a, const TokenSeq& b) { return levenshtein(a, b); }
int64_t edit_distance(const WordSeq& a, const WordSeq& b) { return levenshtein(a, b); }

void BleuStats::add(const TokenSeq& candidate, const TokenSeq& reference) {
  add_bleu(*this, candidate, reference);
}

void BleuStats::add(const WordSeq& candidate, const WordSeq& reference) {
  add_bleu(*this, candidate, reference);
}

double BleuStats::precision(int n) const {
  check(n >= 1 && n <= 4, "BleuStats::precision: n must be 1..4, got ", n);
  const size_t i = static_cast<size_t>(n - 1);
  if (totals[i] == 0) return 0.0;
  return static_cast<double>(matches[i]) / static_cast<double>(totals[i]);
}

double BleuStats::brevity_penalty() const {
  if (candidate_length == 0) return 0.0;
  if (candidate_length >= reference_length) return 1.0;
  return std::exp(1.0 -
                  static_cast<double>(reference_length) / static_cast<double>(candidate_length));
}

double BleuStats::score() const {
  double log_sum = 0.0;
  for (int n = 1; n <= 4; ++n) {
    const double p = precision(n);
    if (p == 0.0) return 0.0;  // no smoothing: the geometric mean is 0
    log_sum += std::log(p);
  }
  return 100.0 * brevity_penalty() * std::exp(log_sum / 4.0);
}

double corpus_bleu(const std::vector<TokenSeq>& candidates,
                   const std::vector<TokenSeq>& references) {
  return bleu_of(candidates, references);
}

double corpus_bleu(const std::vector<WordSeq>& candidates, const std::vector<WordSeq>& references) {
  return bleu_of(candidates, references);
}

double G2pScores::wer() const { return ratio("G2pScores::wer", word_errors, words); }

double G2pScores::per() const {
  return ratio("G2pScores::per", phoneme_errors, reference_phonemes);
}

G2pScores g2p_scores(const std::vector<TokenSeq>& hypotheses,
                     const std::vector<std::vector<TokenSeq>>& references) {
  return g2p_of(hypotheses, references);
}

G2pScores g2p_scores(const std::vector<WordSeq>& hypotheses,
                     const std::vector<std::vector<WordSeq>>& references) {
  return g2p_of(hypotheses, references);
}

}  // namespace mixlab
