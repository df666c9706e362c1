// A test that needs an optional package (python3, its safetensors) reports itself skipped when
// the package is missing, never passed: it prints this marker and returns, and CTest, told by
// CMakeLists.txt (SKIP_REGULAR_EXPRESSION), records the test as skipped. Tests that need a GPU use
// doctest::skip(!device_available(DeviceType::CUDA)) instead (decided once, at start-up).
#pragma once
#include <cstdio>

#define MIXLAB_SKIP_TEST(why)                      \
  do {                                             \
    std::printf("MIXLAB_TEST_SKIPPED: %s\n", why); \
    std::fflush(stdout);                           \
    return;                                        \
  } while (0)
