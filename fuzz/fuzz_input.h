// Shared by the fuzz targets: the readers take paths, so an input is written to a file private to
// this process first (in /dev/shm when it exists, to stay off the disk).
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include <unistd.h>
#include <zlib.h>

namespace mixlab::fuzz {

inline std::string scratch_path(const char* name) {
  const char* dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
  return std::string(dir) + "/mixlab-fuzz-" + std::to_string(getpid()) + "-" + name;
}

// Writes `size` bytes to `path`, gzip-compressed when `gzip`; returns `path`.
inline const std::string& write_input(const std::string& path, const uint8_t* data, size_t size,
                                      bool gzip = false) {
  if (gzip) {
    gzFile f = gzopen(path.c_str(), "wb1");
    if (size > 0) gzwrite(f, data, static_cast<unsigned>(size));
    gzclose(f);
  } else {
    FILE* f = std::fopen(path.c_str(), "wb");
    if (size > 0) std::fwrite(data, 1, size, f);
    std::fclose(f);
  }
  return path;
}

}  // namespace mixlab::fuzz
