#include <doctest/doctest.h>

#include "core/error.h"
#include "train/data/vocab.h"

using namespace mixlab;
using Tokens = std::vector<std::string>;

TEST_CASE("vocab: specials come first and build sorts by byte order") {
  const Vocab empty;
  CHECK(empty.size() == 4);
  CHECK(empty.token(Vocab::kPad) == "<pad>");
  CHECK(empty.token(Vocab::kBos) == "<bos>");
  CHECK(empty.token(Vocab::kEos) == "<eos>");
  CHECK(empty.token(Vocab::kUnk) == "<unk>");

  const Vocab vocab = Vocab::build({{"b", "a", "c"}, {"a", "<unk>", "B"}});
  CHECK(vocab.tokens() == Tokens{"<pad>", "<bos>", "<eos>", "<unk>", "B", "a", "b", "c"});
  // The order depends only on the token set, not on the order of the data.
  CHECK(Vocab::build({{"c", "B"}, {"a", "b"}}) == vocab);
  CHECK(vocab.id("a") == 5);
  CHECK(vocab.id("zzz") == Vocab::kUnk);
  CHECK_THROWS_AS(vocab.token(8), Error);
  CHECK_THROWS_AS(vocab.token(-1), Error);

  const Vocab frequent = Vocab::build({{"x", "y", "x"}, {"z", "x", "y"}}, 2);
  CHECK(frequent.tokens() == Tokens{"<pad>", "<bos>", "<eos>", "<unk>", "x", "y"});
  CHECK_THROWS_AS(Vocab::build({{"x"}}, 0), Error);
}

TEST_CASE("vocab: encode and decode") {
  const Vocab vocab = Vocab::build({{"the", "cat", "sat"}});
  const std::vector<int32_t> ids = vocab.encode({"the", "dog", "sat"}, true, true);
  CHECK(ids == std::vector<int32_t>{Vocab::kBos, vocab.id("the"), Vocab::kUnk, vocab.id("sat"),
                                    Vocab::kEos});
  CHECK(vocab.decode(ids) == Tokens{"the", "<unk>", "sat"});
  CHECK(vocab.decode(ids, false) == Tokens{"<bos>", "the", "<unk>", "sat", "<eos>"});
  // Decoding stops at the first <eos>; padding is dropped.
  const std::vector<int32_t> padded = {vocab.id("cat"), Vocab::kPad, Vocab::kEos, vocab.id("sat")};
  CHECK(vocab.decode(padded) == Tokens{"cat"});
  CHECK(vocab.decode(padded, false) == Tokens{"cat", "<pad>", "<eos>"});
  CHECK_THROWS_AS(vocab.decode({99}), Error);
  CHECK(vocab.encode({}).empty());
}

TEST_CASE("vocab: to_string / from_string round trip and validation") {
  Vocab vocab = Vocab::build({{"z", "y", " ", "é"}});
  vocab.add("appended");
  const std::string text = vocab.to_string();
  CHECK(text == "<pad>\n<bos>\n<eos>\n<unk>\n \ny\nz\né\nappended\n");
  const Vocab back = Vocab::from_string(text);
  CHECK(back == vocab);
  CHECK(back.id("appended") == vocab.id("appended"));
  CHECK(Vocab::from_string("<pad>\n<bos>\n<eos>\n<unk>") == Vocab());

  CHECK_THROWS_AS(Vocab::from_string("<bos>\n<pad>\n<eos>\n<unk>\n"), Error);
  CHECK_THROWS_AS(Vocab::from_string("<pad>\n<bos>\n"), Error);
  CHECK_THROWS_AS(Vocab::from_string("<pad>\n<bos>\n<eos>\n<unk>\na\na\n"), Error);
  CHECK_THROWS_AS(Vocab::from_string("<pad>\n<bos>\n<eos>\n<unk>\na\n\nb\n"), Error);
  try {
    Vocab::from_string("<pad>\n<bos>\n<eos>\n<unk>\na\nb\na\n");
    FAIL("expected an error");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("line 7") != std::string::npos);
  }
  CHECK_THROWS_AS(vocab.add(""), Error);
  CHECK_THROWS_AS(vocab.add("a\nb"), Error);
}

TEST_CASE("vocab: character and word tokenizers") {
  CHECK(tokenize_chars("ab c") == Tokens{"a", "b", " ", "c"});
  CHECK(tokenize_chars("") == Tokens{});
  // UTF-8 characters stay whole; a stray continuation byte is one token.
  CHECK(tokenize_chars("é€x") == Tokens{"é", "€", "x"});
  CHECK(tokenize_chars(std::string("\x80y")) == Tokens{"\x80", "y"});
  CHECK(tokenize_chars(std::string("a\xC3")) == Tokens{"a", "\xC3"});
  CHECK(tokenize_words("  the\tcat  sat \n") == Tokens{"the", "cat", "sat"});
  CHECK(tokenize_words("   ").empty());
}
