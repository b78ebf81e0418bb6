// Text form of the tile IR (docs/ir.md). print() and parse() are inverses: print(parse(s)) == s
// for printed text s, and parse(print(k)) == k for every kernel k (compared field by field, so a
// NaN immediate, which is never == itself, compares unequal while printing identically).
#pragma once

#include <string>
#include <string_view>

#include "knit/ir/ir.h"

namespace knit::ir {

std::string print(const Kernel& kernel);
std::string print(const Kernel& kernel, const Instruction& inst);
std::string print(const Kernel& kernel, const View& view);

// Parses IR text. Malformed text is a user error (rule "ir-parse") at `source_name`:line:col.
Kernel parse(std::string_view text, const std::string& source_name = "<ir>");

}  // namespace knit::ir
