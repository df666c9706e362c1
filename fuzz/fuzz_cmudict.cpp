// The CMUdict and g014b2b readers (train/data/cmudict.h): the first byte chooses the format
// (cmudict, g2p train, g2p ref) and gzip; the rest is the file. Read or refused with Error.
#include "core/error.h"
#include "fuzz/fuzz_input.h"
#include "train/data/cmudict.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace mixlab;
  if (size == 0) return 0;
  static const std::string path = fuzz::scratch_path("dict");
  const uint8_t mode = data[0];
  fuzz::write_input(path, data + 1, size - 1, (mode & 4) != 0);
  try {
    switch (mode % 3) {
      case 0:
        count_pronunciations(read_cmudict(path));
        break;
      case 1:
        g2p_pairs(read_g2p_train(path));
        break;
      default:
        read_g2p_ref(path);
    }
  } catch (const Error&) {
  }
  return 0;
}
