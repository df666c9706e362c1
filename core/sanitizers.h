// Which sanitizer this translation unit is built with, for the few places that must behave
// differently under one (the caching allocator hands blocks back to ASan; timing tests cannot
// bound a rate through checked loads). g++ defines __SANITIZE_ADDRESS__ and
// __SANITIZE_THREAD__; clang (CI's fuzzing build) answers __has_feature instead.
#pragma once

#if defined(__SANITIZE_ADDRESS__)
#define MIXLAB_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MIXLAB_ASAN 1
#endif
#endif
#ifndef MIXLAB_ASAN
#define MIXLAB_ASAN 0
#endif

#if defined(__SANITIZE_THREAD__)
#define MIXLAB_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define MIXLAB_TSAN 1
#endif
#endif
#ifndef MIXLAB_TSAN
#define MIXLAB_TSAN 0
#endif
