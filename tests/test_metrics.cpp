// Evaluation metrics (train/loop/metrics.h) against values computed by hand.
#include <doctest/doctest.h>

#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "train/loop/metrics.h"

using namespace mixlab;

namespace {

WordSeq word_seq(const std::string& text) {
  std::istringstream in(text);
  WordSeq out;
  for (std::string word; in >> word;) out.push_back(word);
  return out;
}

TokenSeq chars(const std::string& text) { return TokenSeq(text.begin(), text.end()); }

}  // namespace

TEST_CASE("metrics: accuracy and exact match") {
  CHECK(accuracy({1, 2, 3, 4}, {1, 0, 3, 0}) == 0.5);
  CHECK(exact_match({{1, 2}, {3}, {4, 5}}, {{1, 2}, {3}, {4, 5, 6}}) == doctest::Approx(2.0 / 3));
  CHECK(exact_match({{}}, {{}}) == 1.0);
  CHECK_THROWS_WITH_AS(accuracy({1}, {1, 2}), "accuracy: 1 hypotheses but 2 references", Error);
  CHECK_THROWS_WITH_AS(accuracy({}, {}), doctest::Contains("nothing to score"), Error);
  CHECK_THROWS_AS(exact_match({}, {}), Error);
}

TEST_CASE("metrics: token accuracy counts non-padding reference positions one by one") {
  // Reference 1 has 3 real tokens (5 7 right, 6 wrong); reference 2 has 2, and the short
  // hypothesis gets only the first. Padding (0) and extra hypothesis tokens do not count: 3/5.
  CHECK(token_accuracy({{5, 9, 7, 8, 8}, {4}}, {{5, 6, 7, 0, 0}, {4, 4}}, 0) ==
        doctest::Approx(0.6));
  CHECK(token_accuracy({{1, 2, 3, 4}}, {{1, 2}}, 0) == 1.0);
  CHECK_THROWS_AS(token_accuracy({{1}}, {{0, 0}}, 0), Error);  // no real reference tokens
}

TEST_CASE("metrics: Levenshtein edit distance") {
  CHECK(edit_distance(chars("kitten"), chars("sitting")) == 3);  // k->s, e->i, +g
  CHECK(edit_distance(chars("flaw"), chars("lawn")) == 2);       // -f, +n
  CHECK(edit_distance(chars(""), chars("abc")) == 3);
  CHECK(edit_distance(chars("abc"), chars("")) == 3);
  CHECK(edit_distance(chars("same"), chars("same")) == 0);
  CHECK(edit_distance(word_seq("the cat sat"), word_seq("the cat sat down")) == 1);
  // +b, a=a, b->d, c=c, -d: 3 (there is no transposition operation).
  CHECK(edit_distance(word_seq("a b c d"), word_seq("b a d c")) == 3);
}

TEST_CASE("metrics: corpus BLEU on sacreBLEU's README example first reference only") {
  // sacreBLEU's README scores these three system sentences against two reference sets as
  // "BLEU = 48.53 82.4/50.0/45.5/37.5 (BP = 0.943 ratio = 0.944 hyp_len = 17 ref_len = 18)",
  // i.e. precisions 14/17, 7/14, 5/11, 3/8 and BP exp(1 - 18/17). With its 13a tokenization
  // the final period splits off and "wasn't" stays one token. Against the FIRST reference set
  // only (we take one reference per candidate), by hand:
  //   1: "The dog bit the man ."        vs "The dog bit the man ."     1-4 grams: 6/6 5/5 4/4 3/3
  //   2: "It wasn't surprising ."       vs "It was not unexpected ."   It, . : 2/4 0/3 0/2 0/1
  //   3: "The man had just bitten him ." vs "The man bit him first ."  The man him . : 4/7;
  //      "The man": 1/6; 0/5; 0/4
  // p1 = 12/17, p2 = 6/14, p3 = 4/11, p4 = 3/8; c = 17 = r = 6 + 5 + 6, so BP = 1;
  // BLEU = 100 * (12*6*4*3 / (17*14*11*8))^(1/4) = 100 * (864/20944)^(1/4) = 45.0675...
  const std::vector<WordSeq> system = {word_seq("The dog bit the man ."),
                                       word_seq("It wasn't surprising ."),
                                       word_seq("The man had just bitten him .")};
  const std::vector<WordSeq> reference = {word_seq("The dog bit the man ."),
                                          word_seq("It was not unexpected ."),
                                          word_seq("The man bit him first .")};
  BleuStats stats;
  for (size_t i = 0; i < system.size(); ++i) stats.add(system[i], reference[i]);
  CHECK(stats.matches == std::array<int64_t, 4>{12, 6, 4, 3});
  CHECK(stats.totals == std::array<int64_t, 4>{17, 14, 11, 8});
  CHECK(stats.candidate_length == 17);
  CHECK(stats.reference_length == 17);
  CHECK(stats.brevity_penalty() == 1.0);
  CHECK(corpus_bleu(system, reference) == doctest::Approx(45.0675063).epsilon(1e-9));
  // The same through token ids.
  const std::vector<TokenSeq> ids = {{1, 2, 3, 4}, {1, 2, 3, 4, 5}};
  CHECK(corpus_bleu(ids, ids) == doctest::Approx(100.0));
}

TEST_CASE("metrics: BLEU brevity penalty clipping and zero precision") {
  // "the cat sat on the mat" (c = 6) vs "the cat sat on the red mat today" (r = 8):
  // 1-grams 6/6 (the x2 is within the reference's 2), 2-grams 4/5 (not "the mat"),
  // 3-grams 3/4 (not "on the mat"), 4-grams 2/3 ("the cat sat on", "cat sat on the").
  // BLEU = 100 * (1 * 0.8 * 0.75 * 2/3)^(1/4) * exp(1 - 8/6) = 56.98363775...
  CHECK(corpus_bleu({word_seq("the cat sat on the mat")},
                    {word_seq("the cat sat on the red mat today")}) ==
        doctest::Approx(56.9836378).epsilon(1e-9));
  // Papineni et al. 2002: the candidate "the" x7 against "the cat is on the mat" earns only the
  // reference's 2 "the": clipped unigram precision 2/7.
  BleuStats clipped;
  clipped.add(word_seq("the the the the the the the"), word_seq("the cat is on the mat"));
  CHECK(clipped.precision(1) == doctest::Approx(2.0 / 7));
  CHECK(clipped.score() == 0.0);  // no bigram matches: BLEU 0 without smoothing
  // Shorter than 4 tokens: no 4-grams, precision 0, BLEU 0 (sacreBLEU with smoothing "none").
  CHECK(corpus_bleu({word_seq("a b c")}, {word_seq("a b c")}) == 0.0);
  CHECK(corpus_bleu(std::vector<WordSeq>{}, std::vector<WordSeq>{}) == 0.0);
  CHECK_THROWS_AS(corpus_bleu({word_seq("a")}, std::vector<WordSeq>{}), Error);
}

TEST_CASE("metrics: G2P WER and PER with several references per word") {
  // word 1: equals its first reference: right, distance 0 to [1 2 3] (length 3).
  // word 2: [1 2] vs [1 3 2 4] (distance 2) and [1 4] (distance 1): closest [1 4], 1 of 2.
  // word 3: [5 6] vs [5 6 7] and [5], both distance 1: the tie goes to the shorter [5].
  // WER = 2/3; PER = (0 + 1 + 1) / (3 + 2 + 1) = 1/3 (choosing the longer on ties: 2/8).
  const G2pScores scores = g2p_scores(
      {{1, 2, 3}, {1, 2}, {5, 6}}, {{{1, 2, 3}, {1, 2}}, {{1, 3, 2, 4}, {1, 4}}, {{5, 6, 7}, {5}}});
  CHECK(scores.words == 3);
  CHECK(scores.word_errors == 2);
  CHECK(scores.phoneme_errors == 2);
  CHECK(scores.reference_phonemes == 6);
  CHECK(scores.wer() == doctest::Approx(2.0 / 3));
  CHECK(scores.per() == doctest::Approx(1.0 / 3));
  // A later reference can make the word right; strings work the same.
  const G2pScores named =
      g2p_scores({word_seq("K AE T")}, {{word_seq("K AA T"), word_seq("K AE T")}});
  CHECK(named.wer() == 0.0);
  CHECK(named.per() == 0.0);
  CHECK_THROWS_WITH_AS(
      g2p_scores(std::vector<TokenSeq>{{1}}, std::vector<std::vector<TokenSeq>>{{}}),
      doctest::Contains("word 0 has no reference"), Error);
  CHECK_THROWS_AS(g2p_scores({{1}}, std::vector<std::vector<TokenSeq>>{}), Error);
}
