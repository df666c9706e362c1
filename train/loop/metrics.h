// Evaluation metrics, defined as in docs/datasets.md.
//
// Scale: accuracy, exact match, token accuracy, WER and PER are fractions in [0, 1]; BLEU is
// reported x100 (0 to 100) as sacreBLEU and the papers report it. Inputs of mismatched sizes
// throw Error; rates over nothing (no examples, no reference tokens) throw Error too, since a
// silent 0 or NaN would end up in a results table. (BLEU of an empty corpus is 0, as in
// sacreBLEU.)
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace mixlab {

using TokenSeq = std::vector<int32_t>;
using WordSeq = std::vector<std::string>;

// Fraction of predictions equal to their label.
double accuracy(const std::vector<int32_t>& predictions, const std::vector<int32_t>& labels);

// Fraction of hypotheses equal to their reference as whole sequences.
double exact_match(const std::vector<TokenSeq>& hypotheses,
                   const std::vector<TokenSeq>& references);

// Position-by-position accuracy over the reference positions that are not `pad_id`: position t
// of a reference is right when the hypothesis has the same token at t (a hypothesis that is too
// short is wrong there; extra hypothesis tokens are ignored). References may be padded or not.
double token_accuracy(const std::vector<TokenSeq>& hypotheses,
                      const std::vector<TokenSeq>& references, int32_t pad_id);

// Levenshtein distance: the fewest insertions, deletions and substitutions (each costs 1).
int64_t edit_distance(const TokenSeq& a, const TokenSeq& b);
int64_t edit_distance(const WordSeq& a, const WordSeq& b);

// Corpus BLEU with one reference per candidate: n-grams 1..4 with clipped counts summed over
// the corpus, geometric mean of the 4 precisions, brevity penalty exp(1 - r/c) when the total
// candidate length c is below the total reference length r; no smoothing, so any precision of
// 0 (or an empty corpus) gives 0. Equals sacreBLEU's corpus_score with smooth_method="none" and
// tokenize="none" on already tokenized text.
struct BleuStats {
  std::array<int64_t, 4> matches{};  // clipped n-gram matches, n = 1..4
  std::array<int64_t, 4> totals{};   // candidate n-grams, n = 1..4
  int64_t candidate_length = 0;
  int64_t reference_length = 0;

  void add(const TokenSeq& candidate, const TokenSeq& reference);
  void add(const WordSeq& candidate, const WordSeq& reference);
  double precision(int n) const;  // n in 1..4, as a fraction; 0 when there are no n-grams
  double brevity_penalty() const;
  double score() const;  // x100
};

double corpus_bleu(const std::vector<TokenSeq>& candidates,
                   const std::vector<TokenSeq>& references);
double corpus_bleu(const std::vector<WordSeq>& candidates, const std::vector<WordSeq>& references);

// Grapheme-to-phoneme scoring with several reference pronunciations per word.
// WER: a word is wrong unless its hypothesis equals one of its references; over words.
// PER: each word's distance to its closest reference, summed, over the summed lengths of those
// chosen references. When several references are equally close, the SHORTEST one is chosen:
// this never flatters the model (it gives the larger per-word rate) and does not depend on the
// order references are listed in.
struct G2pScores {
  int64_t words = 0;
  int64_t word_errors = 0;
  int64_t phoneme_errors = 0;      // sum of edit distances to the chosen references
  int64_t reference_phonemes = 0;  // sum of the chosen references' lengths
  double wer() const;
  double per() const;
};

G2pScores g2p_scores(const std::vector<TokenSeq>& hypotheses,
                     const std::vector<std::vector<TokenSeq>>& references);
G2pScores g2p_scores(const std::vector<WordSeq>& hypotheses,
                     const std::vector<std::vector<WordSeq>>& references);

}  // namespace mixlab
