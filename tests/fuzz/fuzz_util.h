// What every fuzz target holds bad input to (docs/reliability.md, "Fuzz targets"): a Knit user or
// runtime error (the clear error that names the rule) or success. An internal error (a Knit bug
// reached from outside bytes), any other exception, a crash, a leak or a sanitizer report is a
// finding: the target aborts so that libFuzzer keeps the input.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "knit/ir/error.h"

namespace knit::fuzz {

inline std::string_view text_of(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

[[noreturn]] inline void finding(const char* what, const char* detail) {
  std::fprintf(stderr, "knit fuzz finding: %s\n%s\n", what, detail);
  std::abort();
}

// Runs `body`; a Knit user or runtime error is the expected answer to bad input.
template <class Body>
void accept_knit_errors(Body&& body) {
  try {
    body();
  } catch (const knit::Error& e) {
    if (e.kind() == knit::ErrorKind::Internal) finding("an internal error from outside input", e.what());
  }
}

// Runs `body`, which must not throw at all (a property of input that was already accepted).
template <class Body>
void must_succeed(const char* what, Body&& body) {
  try {
    body();
  } catch (const std::exception& e) {
    finding(what, e.what());
  }
}

}  // namespace knit::fuzz
