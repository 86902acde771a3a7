"""How fast a vCPU computes next to its sibling: the SMT co-run model.

Hardware physics, the simulator's own (it imports no policy): two
computing siblings share one core's issue slots and its memory system
(fill buffers, bandwidth). Threads that want the same resource collide; a
thread that mostly issues beside one that mostly waits on misses uses what
the other leaves, the contention Snavely and Tullsen measured and
scheduled around ("Symbiotic jobscheduling for a simultaneous
multithreading processor", ASPLOS 2000). How much two threads want the
same resource follows from their CPI stacks (base: issuing; miss: waiting
on memory); the pair's combined speed then lies inside
``smt_pair_speedup`` (``data/costs.yaml``), the range of Hyper-Threading
gains its source gives: the best-matched pair (one only issues, the other
only misses) at its top, a pair that wants one resource at its bottom.
"""


def _issue_share(base, miss):
    """Fraction of a thread's solo cycles spent issuing instructions."""
    total = base + miss
    return base / total if total > 0 else 0.0


def contention(a, b):
    """How much two ``(base, miss)`` CPI stacks want one resource, 0..1."""
    ua = _issue_share(*a)
    ub = _issue_share(*b)
    return ua * ub + (1.0 - ua) * (1.0 - ub)


def corun_factor(a, b, speedup):
    """Speed of stack ``a`` next to computing stack ``b``, solo = 1.

    ``a`` and ``b`` are ``(base, miss)`` pairs; ``speedup`` is the
    ``{min, max}`` mapping of ``smt_pair_speedup``. Each sibling's CPI
    grows by the same factor ``c0 + k * contention``, with ``c0`` and
    ``k`` set so the pair's combined speed ``2 / factor`` spans exactly
    the range: no pair leaves it, whatever the stacks.
    """
    lo, hi = speedup['min'], speedup['max']
    if not 1.0 <= lo <= hi <= 2.0:
        raise ValueError('SMT pair speed-ups must satisfy 1 <= min <= max '
                         '<= 2, got min=%r max=%r' % (lo, hi))
    c0 = 2.0 / hi
    k = 2.0 / lo - c0
    return 1.0 / (c0 + k * contention(a, b))


def warmup_ns(working_set_kib, evicted_kib, cap_kib, refill_gbps):
    """Time a vCPU switched in loses refilling what was evicted.

    The part of its working set the previous occupant could have evicted
    (the smaller of the two working sets, at most the hyperthread's share
    of the cache) is refilled at ``refill_gbps``.
    """
    kib = min(working_set_kib, evicted_kib, cap_kib)
    return kib * 1024.0 / refill_gbps
