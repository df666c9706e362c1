// IDX files (train/data/idx.h), plain and gzip: the first byte chooses, the rest is the file.
// Every input is read or refused with Error; what is read holds exactly product(dims) bytes.
#include <cstdlib>

#include "core/error.h"
#include "fuzz/fuzz_input.h"
#include "train/data/idx.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace mixlab;
  if (size == 0) return 0;
  static const std::string path = fuzz::scratch_path("idx");
  fuzz::write_input(path, data + 1, size - 1, (data[0] & 1) != 0);
  try {
    const IdxArray a = read_idx(path);
    size_t n = 1;
    for (int64_t d : a.dims) n *= static_cast<size_t>(d);
    if (n != a.data.size()) std::abort();
  } catch (const Error&) {
  }
  return 0;
}
