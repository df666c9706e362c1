// Whole-file reads for the data readers. Every reader goes through here so that gzip and plain
// files are accepted alike (zlib's gzread passes plain files through unchanged) and so that a
// truncated or corrupt file always becomes a mixlab::Error naming it.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace mixlab {

// The whole (decompressed) content of `path`. Throws Error naming the path when it cannot be
// opened or when the gzip stream is corrupt or cut short.
std::string read_file_maybe_gz(const std::string& path);

// read_file_maybe_gz for the text formats (TSV files, CMUdict): the content must also be valid
// UTF-8, else Error "PATH:LINE: invalid UTF-8 ..." names the first bad line and column. Checked
// at read time, because a bad byte would otherwise travel into the vocabulary and only fail when
// the first checkpoint stores it, an epoch later.
std::string read_text_file(const std::string& path);

// The byte offset of the first byte of `text` that does not belong to a valid UTF-8 sequence
// (strict: no overlong forms, no surrogates, nothing above U+10FFFF), or npos.
size_t find_invalid_utf8(std::string_view text);

// `path` itself when it exists, else `path + ".gz"` when that exists, else "" — so that a data
// set can be shipped either compressed or not.
std::string find_plain_or_gz(const std::string& path);

// Splits text into lines on '\n', dropping one trailing '\r' per line (files written on Windows)
// and the empty piece after a final newline. Line i of the result is line i + 1 of the file.
std::vector<std::string_view> split_lines(std::string_view text);

// Splits on runs of ASCII whitespace; no empty pieces.
std::vector<std::string_view> split_whitespace(std::string_view text);

// Removes leading and trailing ASCII whitespace.
std::string_view trim(std::string_view text);

}  // namespace mixlab
