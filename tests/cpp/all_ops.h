// A kernel with at least one instruction of every opcode in KNIT_OPS, each field different from its
// default (so every field prints). Not verified: the text and op-table tests need only its shape.
#pragma once

#include <knit/knit.h>

namespace knit::testing_support {
ir::Kernel all_ops_kernel();
}
