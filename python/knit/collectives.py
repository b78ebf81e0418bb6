"""knit.collectives (``import nki.collectives as cc`` under knit.compat): NKI 0.6's collectives
between ranks. A kernel that calls them runs on several ranks with
``knit.simulate(kernel, ranks=N)(*args)`` (docs/collectives.md); each call is a rendezvous of the
ranks of its replica group. Lists of several tensors (coalesced calls) become one collective per
(src, dst) pair, in list order, on every rank alike."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from . import _trace
from ._register import RegExpr, VirtualRegister, int_operand, new_register
from ._schedule import NkiInstruction
from ._source import user_location
from ._tensor import NkiTensor
from .errors import user_error
from .isa import _emit_at, _op_name

__all__ = ["ReplicaGroup", "all_reduce", "all_gather", "all_gather_v", "reduce_scatter", "all_to_all",
           "all_to_all_v", "collective_permute", "collective_permute_implicit",
           "collective_permute_implicit_reduce", "collective_permute_implicit_current_processing_rank_id",
           "rank_id"]


class ReplicaGroup:
    """Disjoint lists of ranks, e.g. ``ReplicaGroup([[0, 1, 2, 3]])`` or ``ReplicaGroup([[0, 1], [2, 3]])``:
    each rank takes part with the ranks of its own list, and its position in that list orders
    gathered data. Knit needs the lists to be of equal length."""

    def __init__(self, replica_groups: Sequence[Sequence[int]]):
        self.replica_groups = [[int(r) for r in group] for group in replica_groups]

    def __repr__(self) -> str:
        return f"ReplicaGroup({self.replica_groups})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ReplicaGroup) and other.replica_groups == self.replica_groups

    __hash__ = None  # type: ignore[assignment]


def _group_fields(replica_group: Any, loc: Any) -> dict:
    if isinstance(replica_group, ReplicaGroup):
        groups = replica_group.replica_groups
    elif isinstance(replica_group, Sequence) and all(isinstance(g, Sequence) for g in replica_group):
        groups = ReplicaGroup(replica_group).replica_groups
    else:
        raise user_error("replica-group", f"replica_group must be a ReplicaGroup([[0, 1, ...], ...]); got "
                         f"{type(replica_group).__name__}", loc)
    return {"groups": [r for g in groups for r in g], "group_sizes": [len(g) for g in groups]}


def _tensors(value: Any, what: str, loc: Any) -> list[NkiTensor]:
    items = [value] if isinstance(value, NkiTensor) else value
    if not isinstance(items, (list, tuple)) or not items or not all(isinstance(t, NkiTensor) for t in items):
        raise user_error("operand", f"{what} must be a non-empty list of tensors; got {type(value).__name__}", loc)
    return list(items)


def _pairs(srcs: Any, dsts: Any, loc: Any, single: bool = False) -> list[tuple[NkiTensor, NkiTensor]]:
    """(src, dst) pairs of a call: equal-length lists; several tensors only in HBM (NKI's rule),
    exactly one where the function takes one."""
    srcs, dsts = _tensors(srcs, "srcs", loc), _tensors(dsts, "dsts", loc)
    if len(srcs) != len(dsts):
        raise user_error("collective", f"srcs has {len(srcs)} tensors but dsts {len(dsts)}; pass one dst per src", loc)
    if single and len(srcs) != 1:
        raise user_error("collective", f"takes exactly one src and one dst; got {len(srcs)}", loc)
    if len(srcs) > 1 and any(t.buffer.on_chip for t in srcs + dsts):
        raise user_error("buffer", "a coalesced collective (several tensors) takes HBM tensors only", loc)
    return list(zip(srcs, dsts))


def _emit_each(loc: Any, name: str | None, pairs: list[tuple[NkiTensor, NkiTensor]], kind: str,
               **fields: Any) -> NkiInstruction:
    handles = [_emit_at(loc, "collective", name, dst=dst, src=src, kind=kind, **fields) for src, dst in pairs]
    return handles[-1]


def _reduce_op(op: Any, loc: Any) -> str:
    name = _op_name(op, "alu", "op", loc)
    if name not in ("add", "minimum", "maximum"):
        raise user_error("alu-op", f"a collective reduces with nl.add, nl.minimum or nl.maximum; got {op!r}", loc)
    return name


def _dim(collective_dim: Any, loc: Any) -> int:
    if isinstance(collective_dim, bool) or not isinstance(collective_dim, int):
        raise user_error("collective-dim", f"collective_dim must be an int; got {collective_dim!r}", loc)
    return int(collective_dim)


def all_reduce(srcs: Any, dsts: Any, replica_group: Any, op: Any, priority: int | None = None,
               name: str | None = None) -> NkiInstruction:
    """Every rank of a list receives in dsts[k] the op-reduction (nl.add, nl.minimum,
    nl.maximum) of srcs[k] over the list's ranks, combined in rank-position order."""
    loc = user_location()
    return _emit_each(loc, name, _pairs(srcs, dsts, loc), "all_reduce", op=_reduce_op(op, loc),
                      **_group_fields(replica_group, loc))


def all_gather(srcs: Any, dsts: Any, replica_group: Any, collective_dim: int, priority: int | None = None,
               name: str | None = None) -> NkiInstruction:
    """dsts[k] = the list's srcs[k] concatenated along collective_dim, in rank-position order."""
    loc = user_location()
    return _emit_each(loc, name, _pairs(srcs, dsts, loc), "all_gather", dim=_dim(collective_dim, loc),
                      **_group_fields(replica_group, loc))


def reduce_scatter(srcs: Any, dsts: Any, replica_group: Any, collective_dim: int, op: Any,
                   priority: int | None = None, name: str | None = None) -> NkiInstruction:
    """srcs[k] splits along collective_dim (0) into one chunk per rank; the rank at position i
    receives the op-reduction of chunk i over the list's ranks."""
    loc = user_location()
    return _emit_each(loc, name, _pairs(srcs, dsts, loc), "reduce_scatter", dim=_dim(collective_dim, loc),
                      op=_reduce_op(op, loc), **_group_fields(replica_group, loc))


def all_to_all(srcs: Any, dsts: Any, replica_group: Any, collective_dim: int, priority: int | None = None,
               name: str | None = None) -> NkiInstruction:
    """Each src splits along dim 0 into one chunk per rank; chunk j goes to position j, and each
    dst is the chunks received, in sender-position order (a distributed transpose). HBM only."""
    loc = user_location()
    return _emit_each(loc, name, _pairs(srcs, dsts, loc), "all_to_all", dim=_dim(collective_dim, loc),
                      **_group_fields(replica_group, loc))


def _variable(kind: str, srcs: Any, dsts: Any, replica_group: Any, metadata_tensor: Any, recv_counts_known: bool,
              has_rdispls: bool, name: str | None) -> NkiInstruction:
    loc = user_location()
    if has_rdispls:
        raise user_error("collective", f"{kind}(has_rdispls=True) is not supported (NKI supports it only on "
                         "NeuronSwitch instances); place chunks by slot with has_rdispls=False", loc)
    if not isinstance(metadata_tensor, NkiTensor):
        raise user_error("metadata", "metadata_tensor must be a uint32 tensor", loc)
    return _emit_each(loc, name, _pairs(srcs, dsts, loc, single=True), kind, metadata=metadata_tensor,
                      recv_counts_known=bool(recv_counts_known), **_group_fields(replica_group, loc))


def all_gather_v(srcs: Any, dsts: Any, replica_group: Any, metadata_tensor: NkiTensor,
                 recv_counts_known: bool = False, has_rdispls: bool = False, priority: int | None = None,
                 name: str | None = None) -> NkiInstruction:
    """Each rank sends src[send_displ : send_displ + send_count] (metadata rows 1 and 0, column 0)
    to every rank of its 4-rank list; sender position s's chunk lands at dst[s * slot], slot =
    dst elements / 4. Row 2 receives the counts unless recv_counts_known."""
    return _variable("all_gather_v", srcs, dsts, replica_group, metadata_tensor, recv_counts_known, has_rdispls,
                     name)


def all_to_all_v(srcs: Any, dsts: Any, replica_group: Any, metadata_tensor: NkiTensor,
                 recv_counts_known: bool = False, has_rdispls: bool = False, priority: int | None = None,
                 name: str | None = None) -> NkiInstruction:
    """Sends src[send_displs[r] : + send_counts[r]] (metadata rows 1 and 0, column r) to the rank
    at position r, landing at dst[s * slot] of the receiver (s: the sender's position, slot = dst
    elements / ranks). Row 2 receives the counts unless recv_counts_known."""
    return _variable("all_to_all_v", srcs, dsts, replica_group, metadata_tensor, recv_counts_known, has_rdispls,
                     name)


def collective_permute(srcs: Any, dsts: Any, source_target_pairs: Sequence[Sequence[int]],
                       priority: int | None = None, name: str | None = None) -> NkiInstruction:
    """Each (source, target) pair sends the source rank's src to the target rank's dst; a rank no
    pair targets keeps its dst. Each rank is a source at most once and a target at most once."""
    loc = user_location()
    try:
        flat = [int(r) for pair in source_target_pairs for r in pair]
        ok = all(len(pair) == 2 for pair in source_target_pairs)
    except TypeError:
        ok = False
    if not ok:
        raise user_error("source-target-pairs", "source_target_pairs must be a list of (source, target) rank pairs",
                         loc)
    return _emit_each(loc, name, _pairs(srcs, dsts, loc, single=True), "permute", groups=flat, group_sizes=[])


def _channels(channel_ids: Sequence[int], by_channel: list, replica_group: Any, loc: Any) -> list[int]:
    ids = [int(c) for c in channel_ids]
    if ids != list(range(len(ids))) or not ids:
        raise user_error("channel", f"channel_ids must be consecutive from 0 (e.g. [0, 1]); got {ids}", loc)
    trace = _trace.current()
    sizes = _group_fields(replica_group, loc)["group_sizes"]
    limit = 4 if sizes and sizes[0] == trace.num_ranks else 2
    if len(ids) > limit:
        raise user_error("channel", f"{len(ids)} channels: at most {limit} when the replica group "
                         f"{'spans' if limit == 4 else 'does not span'} every rank", loc)
    if len(by_channel) != len(ids):
        raise user_error("channel", f"{len(by_channel)} channel lists for channel_ids {ids}; pass one per channel",
                         loc)
    return ids


def collective_permute_implicit(srcs_by_channel: Sequence[Any], dsts_by_channel: Sequence[Any], replica_group: Any,
                                channel_ids: Sequence[int] = (0,), priority: int | None = None,
                                name: str | None = None) -> NkiInstruction:
    """One ring step per channel: every rank sends srcs_by_channel[c] to its successor in the
    rank list (position + 1, wrapping) and receives its predecessor's into dsts_by_channel[c]."""
    loc = user_location()
    handles = [_emit_each(loc, name, _pairs(srcs_by_channel[c], dsts_by_channel[c], loc, single=True),
                          "permute_implicit", channel=c, **_group_fields(replica_group, loc))
               for c in _channels(channel_ids, list(srcs_by_channel), replica_group, loc)]
    return handles[-1]


def collective_permute_implicit_reduce(srcs0_by_channel: Sequence[Any], srcs1_by_channel: Sequence[Any],
                                       dsts_by_channel: Sequence[Any], replica_group: Any, op: Any,
                                       channel_ids: Sequence[int] = (0,), priority: int | None = None,
                                       name: str | None = None) -> NkiInstruction:
    """Per channel, each rank sends op(srcs0[c], srcs1[c]) (rounded to the dtype) to its ring
    successor and receives its predecessor's into dsts[c]."""
    loc = user_location()
    handles = []
    op_name = _reduce_op(op, loc)
    for c in _channels(channel_ids, list(srcs0_by_channel), replica_group, loc):
        (src0, dst), = _pairs(srcs0_by_channel[c], dsts_by_channel[c], loc, single=True)
        (src1, _), = _pairs(srcs1_by_channel[c], dsts_by_channel[c], loc, single=True)
        handles.append(_emit_at(loc, "collective", name, dst=dst, src=src0, src1=src1, kind="permute_implicit_reduce",
                                op=op_name, channel=c, **_group_fields(replica_group, loc)))
    return handles[-1]


def _register_of(value: int | RegExpr, loc: Any) -> VirtualRegister:
    if isinstance(value, VirtualRegister):
        return value
    reg = VirtualRegister(new_register())
    _emit_at(loc, "register_move", None, dst=("reg", reg.id), src=int_operand(value, "value", loc))
    return reg


def rank_id(name: str | None = None) -> VirtualRegister:
    """A register holding this rank's id (its world rank: 0 .. ranks - 1)."""
    return _register_of(_trace.current().rank, user_location())


def collective_permute_implicit_current_processing_rank_id(iteration_id: int | RegExpr, replica_group: Any,
                                                           channel_id: int = 0,
                                                           name: str | None = None) -> VirtualRegister:
    """The rank whose data a ring algorithm holds at step iteration_id: ring[(pos - k) mod N],
    where pos is this rank's position in its list (the calling rank at step 0, then its
    predecessors')."""
    loc = user_location()
    fields = _group_fields(replica_group, loc)
    rank = _trace.current().rank
    ring = _ring_of(fields, rank, loc)
    pos = ring.index(rank)
    if not isinstance(iteration_id, RegExpr):
        return _register_of(ring[(pos - int(iteration_id)) % len(ring)], loc)
    index = (pos + len(ring) * (1 << 20) - iteration_id) % len(ring)  # kept non-negative for any step
    step = ring[1] - ring[0] if len(ring) > 1 else 0
    if all(ring[j] == ring[0] + j * step for j in range(len(ring))):
        return _register_of(index * step + ring[0] if step else RegExpr.of(ring[0]), loc)
    total: RegExpr = RegExpr.of(0)
    for j, r in enumerate(ring):
        total = total + index._alu("equal", j) * r
    return _register_of(total, loc)


def _ring_of(fields: dict, rank: int, loc: Any) -> list[int]:
    groups, sizes = fields["groups"], fields["group_sizes"]
    begin = 0
    for n in sizes:
        if rank in groups[begin:begin + n]:
            return groups[begin:begin + n]
        begin += n
    raise user_error("replica-group", f"rank {rank} is in no rank list of {groups}", loc)
