# Sanitizer builds: -DMIXLAB_SANITIZE=address,undefined (AddressSanitizer with LeakSanitizer, and
# UndefinedBehaviorSanitizer) or -DMIXLAB_SANITIZE=thread (ThreadSanitizer; it cannot be combined
# with address). Works with g++ and clang++. Every target of the project gets the flags; UBSan
# reports are made fatal so that a test with undefined behaviour fails instead of printing a line
# nobody reads. scripts/ci-extra.sh runs the suite this way (docs/testing.md, "Sanitizers,
# fuzzing and fault tests", says how).
set(MIXLAB_SANITIZE "" CACHE STRING
  "Sanitizers to build with: a comma-separated list of address, undefined, thread (empty: none)")

if(MIXLAB_SANITIZE)
  string(REPLACE "," ";" _mixlab_sanitizers "${MIXLAB_SANITIZE}")
  foreach(_s IN LISTS _mixlab_sanitizers)
    if(NOT _s MATCHES "^(address|undefined|thread)$")
      message(FATAL_ERROR "MIXLAB_SANITIZE: unknown sanitizer '${_s}' (address, undefined, thread)")
    endif()
  endforeach()
  if("thread" IN_LIST _mixlab_sanitizers AND "address" IN_LIST _mixlab_sanitizers)
    message(FATAL_ERROR "MIXLAB_SANITIZE: thread cannot be combined with address")
  endif()
  # Reports need line numbers: debug info, unless the build type already chooses its own (CI's
  # RelWithDebInfo asks for line tables only, which compile about 10% faster).
  set(_mixlab_sanitize_flags -fsanitize=${MIXLAB_SANITIZE} -fno-omit-frame-pointer
    $<$<NOT:$<CONFIG:Debug,RelWithDebInfo>>:-g>)
  if("undefined" IN_LIST _mixlab_sanitizers)
    # Stop at the first report (the default only prints and carries on). g++ leaves the
    # float-to-integer overflow check (NaN or out-of-range to int) out of "undefined"; ask for it.
    list(APPEND _mixlab_sanitize_flags -fsanitize=float-cast-overflow -fno-sanitize-recover=all)
  endif()
  add_compile_options("$<$<COMPILE_LANGUAGE:C,CXX>:${_mixlab_sanitize_flags}>")
  add_link_options(-fsanitize=${MIXLAB_SANITIZE})
  message(STATUS "mixlab: sanitizers ${MIXLAB_SANITIZE}")
endif()
