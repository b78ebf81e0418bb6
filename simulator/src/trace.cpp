// The Chrome / Perfetto trace writer (knit/sim/trace.h).
#include "knit/sim/trace.h"

#include <algorithm>
#include <charconv>
#include <set>
#include <utility>

#include "knit/codegen/engine_program.h"

namespace knit::sim {

std::string json_quote(std::string_view text) {
  static const char* hex = "0123456789abcdef";
  std::string out = "\"";
  out.reserve(text.size() + 2);
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (u < 0x20 || u == 0x7f) {
          out += "\\u00";
          out += hex[u >> 4];
          out += hex[u & 15];
        } else {
          out += c;
        }
    }
  }
  return out += '"';
}

namespace {

// The shortest text that reads back as the same double (what Python's json module writes).
std::string number(double v) {
  char buf[32];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return ec == std::errc() ? std::string(buf, end) : "0";
}

const char* engine_label(int queue) {
  switch (static_cast<codegen::Queue>(queue)) {
    case codegen::Queue::pe: return "Tensor";
    case codegen::Queue::act: return "Scalar";
    case codegen::Queue::dve: return "Vector";
    case codegen::Queue::pool: return "GpSimd";
    default: return codegen::queue_name(static_cast<codegen::Queue>(queue));
  }
}

}  // namespace

std::string chrome_trace_json(const ir::Kernel& kernel, const std::vector<TimedInstruction>& timeline) {
  std::string out = "{\"displayTimeUnit\": \"ns\", \"traceEvents\": [";
  std::set<std::pair<int, int>> tracks;
  const char* sep = "";
  for (const TimedInstruction& t : timeline) {
    const ir::Instruction& inst = kernel.body.at(t.ir);
    const int q = static_cast<int>(t.queue);
    tracks.insert({t.core, q});
    out += sep;
    out += "{\"name\": " + json_quote(inst.opcode_name()) + ", \"cat\": \"" + codegen::queue_name(t.queue) +
           "\", \"ph\": \"X\", \"pid\": " + std::to_string(t.core) + ", \"tid\": " + std::to_string(q) +
           ", \"ts\": " + number(t.start_ns / 1e3) +
           ", \"dur\": " + number(std::max(t.end_ns - t.start_ns, 1e-3) / 1e3) +
           ", \"args\": {\"source\": " + json_quote(inst.loc.file + ":" + std::to_string(inst.loc.line)) +
           ", \"stall_ns\": " + number(t.stall_ns) + ", \"waited_on\": " +
           (t.stalled_on >= 0
                ? "\"" + std::string(codegen::queue_name(static_cast<codegen::Queue>(t.stalled_on))) + "\""
                : std::string("null")) +
           "}}";
    sep = ", ";
  }
  const std::string process = kernel.name + " core ";
  for (const auto& [core, q] : tracks) {
    const std::string track = ", \"pid\": " + std::to_string(core) + ", \"tid\": " + std::to_string(q);
    out += sep;
    out += "{\"name\": \"thread_name\", \"ph\": \"M\"" + track + ", \"args\": {\"name\": \"" + engine_label(q) +
           "\"}}, {\"name\": \"process_name\", \"ph\": \"M\"" + track + ", \"args\": {\"name\": " +
           json_quote(process + std::to_string(core) + " (" + std::string(ir::to_string(kernel.target)) + ")") + "}}";
  }
  return out += "]}\n";
}

}  // namespace knit::sim
