// One exception type for every user-facing failure: wrong shapes, dtypes or devices, bad data
// lines, corrupt checkpoints. Messages name the op (or file and line) and every shape involved.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>

namespace mixlab {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace detail {
inline void append_all(std::ostringstream&) {}
template <typename T, typename... Rest>
void append_all(std::ostringstream& out, const T& first, const Rest&... rest) {
  out << first;
  append_all(out, rest...);
}
}  // namespace detail

// Builds a message from its pieces: fail("matmul: ", a, " x ", b, ": inner dimensions differ").
template <typename... Parts>
[[noreturn]] void fail(const Parts&... parts) {
  std::ostringstream out;
  detail::append_all(out, parts...);
  throw Error(out.str());
}

// check(cond, parts...) throws Error(parts...) when cond is false.
template <typename... Parts>
void check(bool condition, const Parts&... parts) {
  if (!condition) fail(parts...);
}

}  // namespace mixlab
