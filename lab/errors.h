// The lab's two ways to stop that are not failures of the machine: a usage error (bad task or
// mixer lists, an input the model cannot take; the command exits 2) and an interruption
// (SIGINT/SIGTERM; the command exits 128 + the signal). apps/main.cpp maps both to exit codes;
// the commands of apps/ throw the same two (apps/common.h).
#pragma once
#include <exception>

#include "core/error.h"

namespace mixlab::lab {

class UsageError : public Error {
 public:
  using Error::Error;
};

class Interrupted : public std::exception {
 public:
  const char* what() const noexcept override { return "interrupted"; }
};

}  // namespace mixlab::lab
