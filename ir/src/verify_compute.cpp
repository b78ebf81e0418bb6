#include "verify_rules.h"

namespace knit::ir {

void check(Checker& c, const Activation&) { c.fail("unsupported", "not implemented yet"); }
void check(Checker& c, const ActivationReduce&) { c.fail("unsupported", "not implemented yet"); }
void check(Checker& c, const TensorTensor&) { c.fail("unsupported", "not implemented yet"); }
void check(Checker& c, const TensorScalar&) { c.fail("unsupported", "not implemented yet"); }
void check(Checker& c, const ScalarTensorTensor&) { c.fail("unsupported", "not implemented yet"); }
void check(Checker& c, const Reciprocal&) { c.fail("unsupported", "not implemented yet"); }
void check(Checker& c, const TensorTensorScan&) { c.fail("unsupported", "not implemented yet"); }
void check(Checker& c, const TensorReduce&) { c.fail("unsupported", "not implemented yet"); }
void check(Checker& c, const TensorScalarReduce&) { c.fail("unsupported", "not implemented yet"); }

}  // namespace knit::ir
