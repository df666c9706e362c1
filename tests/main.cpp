// The test runner's entry point: doctest's own main. Each TEST_CASE is also registered with
// CTest (doctest_discover_tests), so `ctest` reports one line per case.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
