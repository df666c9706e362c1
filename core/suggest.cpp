#include "core/suggest.h"

#include <algorithm>

namespace mixlab {

size_t edit_distance(const std::string& a, const std::string& b) {
  // Optimal string alignment: Levenshtein plus adjacent transpositions ("gmpl" -> "gmlp" is 1).
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

std::optional<std::string> closest_match(const std::string& word,
                                         const std::vector<std::string>& candidates) {
  constexpr size_t kMaxEdits = 2;
  std::optional<std::string> best;
  size_t best_distance = kMaxEdits + 1;
  for (const std::string& candidate : candidates) {
    const size_t distance = edit_distance(word, candidate);
    if (distance < best_distance && distance < word.size()) {
      best = candidate;
      best_distance = distance;
    }
  }
  return best;
}

std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates) {
  const auto match = closest_match(word, candidates);
  return match ? "; did you mean '" + *match + "'?" : "";
}

}  // namespace mixlab
