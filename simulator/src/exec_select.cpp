#include "machine.h"

namespace knit::sim {

using namespace knit::ir;

void exec(Machine& m, const SelectReduce&) { m.fail("unsupported", "not implemented yet"); }
void exec(Machine& m, const RangeSelect&) { m.fail("unsupported", "not implemented yet"); }
void exec(Machine& m, const BnStats&) { m.fail("unsupported", "not implemented yet"); }
void exec(Machine& m, const BnAggr&) { m.fail("unsupported", "not implemented yet"); }
void exec(Machine& m, const Max8&) { m.fail("unsupported", "not implemented yet"); }
void exec(Machine& m, const NcFindIndex8&) { m.fail("unsupported", "not implemented yet"); }
void exec(Machine& m, const Iota&) { m.fail("unsupported", "not implemented yet"); }
void exec(Machine& m, const AffineSelect&) { m.fail("unsupported", "not implemented yet"); }
void exec(Machine& m, const TensorPartitionReduce&) { m.fail("unsupported", "not implemented yet"); }
void exec(Machine& m, const LocalGather&) { m.fail("unsupported", "not implemented yet"); }
void exec(Machine& m, const NcNGather&) { m.fail("unsupported", "not implemented yet"); }

}  // namespace knit::sim
