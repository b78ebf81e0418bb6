# Sanitizer and fuzzer instrumentation for every Knit target (docs/reliability.md).
#
# KNIT_SANITIZE=<list> compiles and links every target, the pybind11 modules too, with
# -fsanitize=<list>. -fsanitize=function is always off: its check reads the 8 bytes before each
# function called through a pointer, and the JIT's generated functions (executable pages of
# their own) have no such prefix, so the check faults there. Errors abort (no recovery), so a
# report fails the test that caused it.
#
# KNIT_FUZZ instruments the library code for libFuzzer's coverage (-fsanitize=fuzzer-no-link)
# under ASan and UBSan; the fuzz targets themselves (tests/fuzz) link the fuzzer's main.
#
# Only C++ is instrumented: the hand-written assembly (the embedded native bitcode) has nothing
# to check, and the native bodies' bitcode is compiled by its own command (simulator/), as the
# JIT compiles it: generated code is never instrumented.
set(knit_sanitize_list "${KNIT_SANITIZE}")
if(KNIT_FUZZ)
  set(knit_sanitize_list "fuzzer-no-link,address,undefined")
endif()
if(knit_sanitize_list)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "KNIT_SANITIZE / KNIT_FUZZ need Clang (configure with -DCMAKE_CXX_COMPILER=clang++-19)")
  endif()
  set(knit_sanitize_flags -fsanitize=${knit_sanitize_list} -fno-sanitize=function -fno-sanitize-recover=all
                          -fno-omit-frame-pointer)
  add_compile_options("$<$<COMPILE_LANGUAGE:CXX>:${knit_sanitize_flags}>")
  add_link_options(${knit_sanitize_flags})
  # pybind11 would link its modules with -flto, which leaves ASan's module constructors in
  # discarded sections (a link error with GNU ld); an instrumented build does without LTO.
  set(CMAKE_INTERPROCEDURAL_OPTIMIZATION OFF)
  message(STATUS "Knit: instrumented with -fsanitize=${knit_sanitize_list}")
endif()

# A Python that imports a module built with ASan needs the ASan runtime loaded first; build steps
# that run Python (the precompiled header) run it with this environment. CPython's own leaks
# (interned objects kept until exit) are not Knit's: leak detection is off there.
set(KNIT_PYTHON_RUN_ENV "")
if(knit_sanitize_list MATCHES "address")
  execute_process(COMMAND ${CMAKE_CXX_COMPILER} -print-file-name=libclang_rt.asan-x86_64.so
                  OUTPUT_VARIABLE knit_asan_runtime OUTPUT_STRIP_TRAILING_WHITESPACE)
  set(KNIT_PYTHON_RUN_ENV LD_PRELOAD=${knit_asan_runtime} ASAN_OPTIONS=detect_leaks=0)
endif()
