// A precompiled <knit/knit.h>, built once per version of Knit's headers (about 1.4 s) by the
// build, or else into the disk cache: parsing the header-only API is most of a kernel file's compile time, so
// with it a new or edited kernel file compiles in about 0.2 s instead of 1.1 s.
#pragma once

#include <string>
#include <vector>

namespace knit::frontend {

// The precompiled header for kernel files compiled with `base_flags` (the command line's flags
// before any of the user's): the build's (precompile_header), else the cache's, building it if
// the cache lacks it; "" when the build has none and there is no cache directory, or building
// failed (kernel files then compile without it).
std::string knit_pch(const std::vector<std::string>& base_flags);

// Drops a precompiled header Clang refused (corrupt, or from another compiler build).
void discard_pch(const std::string& path);

}  // namespace knit::frontend
