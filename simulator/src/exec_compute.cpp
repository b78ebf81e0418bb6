#include "machine.h"

namespace knit::sim {

using namespace knit::ir;

void exec(Machine& m, const Activation&) { m.fail("unsupported", "not implemented yet"); }
void exec(Machine& m, const ActivationReduce&) { m.fail("unsupported", "not implemented yet"); }
void exec(Machine& m, const TensorTensor&) { m.fail("unsupported", "not implemented yet"); }
void exec(Machine& m, const TensorScalar&) { m.fail("unsupported", "not implemented yet"); }
void exec(Machine& m, const ScalarTensorTensor&) { m.fail("unsupported", "not implemented yet"); }
void exec(Machine& m, const Reciprocal&) { m.fail("unsupported", "not implemented yet"); }
void exec(Machine& m, const TensorTensorScan&) { m.fail("unsupported", "not implemented yet"); }
void exec(Machine& m, const TensorReduce&) { m.fail("unsupported", "not implemented yet"); }
void exec(Machine& m, const TensorScalarReduce&) { m.fail("unsupported", "not implemented yet"); }

}  // namespace knit::sim
