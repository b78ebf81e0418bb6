// The capacity error (SBUF or PSUM over-subscribed) with the allocation as far as it got, so
// that the Python layer can draw the memory at the failing point (knit.MemoryMap: the live
// tensors, their offsets, and the tensor that did not fit). Its own header, so that only the
// allocator and the bindings see it.
#pragma once

#include <string>
#include <vector>

#include "knit/codegen/allocate.h"
#include "knit/ir/error.h"

namespace knit::codegen {

// One on-chip tensor's placement over its live range (body indices), as a memory map shows it.
struct Placement {
  int tensor = -1;
  std::string name;
  ir::Buffer buffer = ir::Buffer::sbuf;
  Allocation at;  // offset -1: not placed (the tensor that did not fit)
  ir::LiveRange live;
  SourceLoc loc;
};

// The placements `plan` made, in tensor id order.
std::vector<Placement> placements(const ir::Kernel& k, const MemoryPlan& plan, const std::vector<ir::LiveRange>& live);

class CapacityError : public Error {
 public:
  CapacityError(const SourceLoc& loc, const std::string& message, std::vector<Placement> placed, Placement failing,
                std::vector<int> alive, int64_t capacity)
      : Error(ErrorKind::User, "capacity", message, loc),
        placed(std::move(placed)),
        failing(std::move(failing)),
        alive(std::move(alive)),
        capacity(capacity) {}

  std::vector<Placement> placed;  // every tensor placed before the failure
  Placement failing;              // the tensor that did not fit (at.offset == -1)
  std::vector<int> alive;         // ids of the tensors holding its buffer at that point
  int64_t capacity = 0;           // bytes per partition of that buffer
};

}  // namespace knit::codegen
