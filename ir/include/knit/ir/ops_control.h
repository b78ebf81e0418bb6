// Register and control-flow instructions (NKI's VirtualRegister / NkiScalar, dynamic_range,
// fori_loop, while_loop, if_else). Registers are 32-bit signed integers, numbered r0, r1, ...
// per kernel; a kernel's register count is the highest id it names plus one.
//
// Blocks are structured: `loop`, `while` and `if` open a block, `else` splits an `if`, `end`
// closes the innermost open block. The verifier checks the nesting; executors jump between the
// matching instructions. Included from ops.h.
#pragma once

namespace knit::ir {

// dst = src (an immediate or another register). register_alloc(x) is a register_move of x.
struct RegisterMove {
  Reg dst;
  IntValue src;
  template <class F> void fields(F&& f) {
    f("dst", dst);
    f("src", src);
  }
  bool operator==(const RegisterMove&) const = default;
};

// dst = the single element of `src` (an integer tensor view of one element), as int32.
struct RegisterLoad {
  Reg dst;
  View src;
  template <class F> void fields(F&& f) {
    f("dst", dst);
    f("src", src);
  }
  bool operator==(const RegisterLoad&) const = default;
};

// The single element of `dst` (an integer tensor view) = src.
struct RegisterStore {
  View dst;
  Reg src;
  template <class F> void fields(F&& f) {
    f("dst", dst);
    f("src", src);
  }
  bool operator==(const RegisterStore&) const = default;
};

// dst = a op b in 32-bit integer arithmetic (wrapping). Supported ops: add, subtract,
// multiply, divide (floor), mod (floor, Python's %), maximum, minimum, the comparisons
// (1 / 0), bitwise_and/or/xor, left_shift, right_shift (arithmetic), logical_and/or.
struct RegisterAlu {
  Reg dst;
  IntValue a;
  AluOp op = AluOp::add;
  IntValue b;
  template <class F> void fields(F&& f) {
    f("dst", dst);
    f("a", a);
    f("op", op);
    f("b", b);
  }
  bool operator==(const RegisterAlu&) const = default;
};

// for (iv = start; iv < stop; iv += step) { body } — bounds read once, at loop entry; step > 0.
struct Loop {
  Reg iv;
  IntValue start, stop;
  int64_t step = 1;
  template <class F> void fields(F&& f) {
    f("iv", iv);
    f("start", start);
    f("stop", stop);
    f("step", step);
  }
  bool operator==(const Loop&) const = default;
};

// while (cond != 0) { body } — cond is re-read before every iteration.
struct While {
  Reg cond;
  template <class F> void fields(F&& f) { f("cond", cond); }
  bool operator==(const While&) const = default;
};

// if (cond != 0) { then-body } [else { else-body }]
struct If {
  Reg cond;
  template <class F> void fields(F&& f) { f("cond", cond); }
  bool operator==(const If&) const = default;
};

struct Else {
  template <class F> void fields(F&&) {}
  bool operator==(const Else&) const = default;
};

struct End {
  template <class F> void fields(F&&) {}
  bool operator==(const End&) const = default;
};

// ---- multi-core (LNC2) ----------------------------------------------------------------------
// A kernel launched on a grid traces its instances one after another; `program id=k` starts the
// instructions of instance k (= its rank, nl.program_id). Instances run as separate cores: when
// a kernel synchronizes (core_barrier / sendrecv), the interpreter runs each instance's
// instructions in order and interleaves instances only at those points.
struct Program {
  int64_t id = 0;
  template <class F> void fields(F&& f) { f("id", id); }
  bool operator==(const Program&) const = default;
};

// Every core in `cores` waits here until all of them have arrived. `data` names the tensor whose
// writes the barrier orders (it is not accessed).
struct CoreBarrier {
  View data;
  IntList cores;
  Engine engine = Engine::gpsimd;
  template <class F> void fields(F&& f) {
    f("data", data);
    f("cores", cores);
    f("engine", engine);
  }
  bool operator==(const CoreBarrier&) const = default;
};

// SBUF -> SBUF exchange between cores: this core's `src` goes to core `send_to_rank` and `dst`
// receives core `recv_from_rank`'s src; both sides' sendrecv with the same pipe_id meet.
struct SendRecv {
  View dst, src;
  int64_t send_to_rank = 0, recv_from_rank = 0, pipe_id = 0;
  template <class F> void fields(F&& f) {
    f("dst", dst);
    f("src", src);
    f("send_to_rank", send_to_rank);
    f("recv_from_rank", recv_from_rank);
    f("pipe_id", pipe_id);
  }
  bool operator==(const SendRecv&) const = default;
};

// ---- collectives (nki.collectives) ---------------------------------------------------------
// A kernel run on several ranks (knit.simulate(kernel, ranks=N)) traces each rank's instance
// after a `program id=rank`, with its own HBM tensors. A collective is a rendezvous: each rank of
// a replica group waits at it until every rank of the group has reached a collective, then the
// machine moves the data of all of them at once (simulator/src/collectives.cpp has the semantics).
// `groups` lists the ranks of each replica sub-list one sub-list after another, `group_sizes`
// their lengths; for `permute` it lists (source, target) pairs. `src1` is
// permute_implicit_reduce's second operand, `metadata` the *_v variants' uint32 counts/displs
// table (row 2, the receive counts, is written unless recv_counts_known).
struct Collective {
  View dst, src;
  std::optional<View> src1, metadata;
  CollectiveKind kind = CollectiveKind::all_reduce;
  IntList groups, group_sizes;
  AluOp op = AluOp::add;
  int64_t dim = 0;
  int64_t channel = 0;
  bool recv_counts_known = false;
  template <class F> void fields(F&& f) {
    f("dst", dst);
    f("src", src);
    f("src1", src1);
    f("metadata", metadata);
    f("kind", kind);
    f("groups", groups);
    f("group_sizes", group_sizes);
    f("op", op);
    f("dim", dim);
    f("channel", channel);
    f("recv_counts_known", recv_counts_known);
  }
  bool operator==(const Collective&) const = default;
};

}  // namespace knit::ir
