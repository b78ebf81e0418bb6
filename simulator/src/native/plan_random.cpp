// Planners of the random-number instructions: none has a body. Each draw advances its lane's
// generator state (random.h), so NativeExecutor::run hands them to the reference executors
// (exec_random.cpp) on every backend before planning, and counts them as interpreted; these
// planners only tell static_requests there is nothing to compile.
#include "plan.h"

namespace knit::sim {

using namespace knit::ir;

namespace {
constexpr const char* kSequentialState = "it draws from the per-lane random-number generators (reference executors)";
}  // namespace

const char* plan_op(Planner&, const Rng&) { return kSequentialState; }
const char* plan_op(Planner&, const SetRngSeed&) { return kSequentialState; }
const char* plan_op(Planner&, const RandSetState&) { return kSequentialState; }
const char* plan_op(Planner&, const RandGetState&) { return kSequentialState; }
const char* plan_op(Planner&, const Rand2&) { return kSequentialState; }
const char* plan_op(Planner&, const Dropout&) { return kSequentialState; }

}  // namespace knit::sim
