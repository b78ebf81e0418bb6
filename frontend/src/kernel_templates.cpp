// The explicit instantiations knit.h declares `extern template`: the vectors of Knit's types every
// kernel uses, compiled once here instead of in every C++ kernel file (docs/cpp.md).
#include "knit/knit.h"

#define KNIT_X(type) template class std::vector<type>;
KNIT_KERNEL_VECTORS(KNIT_X)
#undef KNIT_X
