// The Chrome / Perfetto trace of a timed run (open in ui.perfetto.dev or chrome://tracing): the
// one writer behind Python's Profile.save_trace and knit/testing.h's save_trace.
//
// One complete ("X") event per executed instruction on its queue's track (pid = core, tid =
// queue), times in microseconds, with the instruction's source line, its stall and the queue it
// waited on; then a thread_name and a process_name metadata event per used track.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "knit/ir/ir.h"
#include "knit/sim/timing.h"

namespace knit::sim {

// `text` as a JSON string literal, quotes included: quotes, backslashes and every control
// character escaped (\n, \t, ... or \u00XX), other bytes copied as they are.
std::string json_quote(std::string_view text);

// The trace of `timeline` (a TimingReport's, kept with keep_timeline) of a run of `kernel` (the
// program's kernel: instruction names and source lines come from its body).
std::string chrome_trace_json(const ir::Kernel& kernel, const std::vector<TimedInstruction>& timeline);

}  // namespace knit::sim
