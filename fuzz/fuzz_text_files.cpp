// The TSV readers (train/data/text_files.h): the first byte chooses source<TAB>target or
// label<TAB>text, words or characters, plain or gzip; the rest is the file. Every input is read
// or refused with Error, and what is read has non-empty fields.
#include <cstdlib>

#include "core/error.h"
#include "fuzz/fuzz_input.h"
#include "train/data/text_files.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace mixlab;
  if (size == 0) return 0;
  static const std::string path = fuzz::scratch_path("tsv");
  const uint8_t mode = data[0];
  fuzz::write_input(path, data + 1, size - 1, (mode & 4) != 0);
  const Tokenization tokens = (mode & 2) != 0 ? Tokenization::kChars : Tokenization::kWords;
  try {
    if ((mode & 1) != 0) {
      for (const auto& pair : read_parallel_tsv(path, tokens))
        if (pair.src.empty() || pair.tgt.empty()) std::abort();
    } else {
      const auto texts = read_labelled_text(path, tokens);
      for (const auto& t : texts)
        if (t.label.empty() || t.tokens.empty()) std::abort();
      number_labels(texts, label_names(texts));
    }
  } catch (const Error&) {
  }
  return 0;
}
