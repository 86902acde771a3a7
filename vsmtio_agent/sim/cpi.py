"""How fast a vCPU computes next to its sibling: the SMT co-run model.

Two computing siblings share a core: issue-bound threads collide on the
issue slots, miss-bound threads on the memory system, and a pair of one of
each overlaps best. The model is RASS's own
(:func:`vsmtio_agent.policy.rass.pair_slowdown`): every pair's combined
speed lies inside ``smt_pair_speedup`` (``data/costs.yaml``), the range of
Hyper-Threading gains its source gives, and where in that range follows
from the two CPI stacks alone.
"""

from vsmtio_agent.policy import rass


def corun_factor(a, b, speedup):
    """Speed of stack ``a`` next to computing stack ``b``, solo = 1.

    ``a`` and ``b`` are ``(base, miss)`` pairs; ``speedup`` is the
    ``{min, max}`` mapping of ``smt_pair_speedup``.
    """
    return 1.0 / rass.pair_slowdown(a, b, speedup['min'], speedup['max'])


def warmup_ns(working_set_kib, evicted_kib, cap_kib, refill_gbps):
    """Time a vCPU switched in loses refilling what was evicted.

    The part of its working set the previous occupant could have evicted
    (the smaller of the two working sets, at most the hyperthread's share
    of the cache) is refilled at ``refill_gbps``.
    """
    kib = min(working_set_kib, evicted_kib, cap_kib)
    return kib * 1024.0 / refill_gbps
