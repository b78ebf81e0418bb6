#include "verify_rules.h"

namespace knit::ir {

void check(Checker& c, const SelectReduce&) { c.fail("unsupported", "not implemented yet"); }
void check(Checker& c, const RangeSelect&) { c.fail("unsupported", "not implemented yet"); }
void check(Checker& c, const BnStats&) { c.fail("unsupported", "not implemented yet"); }
void check(Checker& c, const BnAggr&) { c.fail("unsupported", "not implemented yet"); }
void check(Checker& c, const Max8&) { c.fail("unsupported", "not implemented yet"); }
void check(Checker& c, const NcFindIndex8&) { c.fail("unsupported", "not implemented yet"); }
void check(Checker& c, const Iota&) { c.fail("unsupported", "not implemented yet"); }
void check(Checker& c, const AffineSelect&) { c.fail("unsupported", "not implemented yet"); }
void check(Checker& c, const TensorPartitionReduce&) { c.fail("unsupported", "not implemented yet"); }
void check(Checker& c, const LocalGather&) { c.fail("unsupported", "not implemented yet"); }
void check(Checker& c, const NcNGather&) { c.fail("unsupported", "not implemented yet"); }

}  // namespace knit::ir
