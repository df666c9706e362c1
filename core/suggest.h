// "Did you mean ...?" for names a person types: mixer names, option keys.
#pragma once
#include <optional>
#include <string>
#include <vector>

namespace mixlab {

// Edits (insert, delete, substitute, swap two neighbours) that turn a into b.
size_t edit_distance(const std::string& a, const std::string& b);

// The candidate nearest to `word`, when it is near enough to be a likely typo (at most 2 edits,
// and fewer edits than the word has characters); ties go to the earlier candidate.
std::optional<std::string> closest_match(const std::string& word,
                                         const std::vector<std::string>& candidates);

// "; did you mean 'x'?" or "" when nothing is close: ready to append to a message.
std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace mixlab
