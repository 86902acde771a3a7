"""Retention Aware Symbiotic Scheduling (paper §4.3).

*Unbalanced scheduling* (§4.3.1): each period the vCPUs of a core are
ranked by context retention rate; the highest form the I/O-bound class,
cut where the two classes' CFS weights are as equal as possible. I/O-bound
vCPUs get the core's I/O hyperthread; CPU-bound vCPUs get the other one and
may borrow the I/O sibling, at lower priority, only while it has no
I/O-bound vCPU to run.

*Symbiosis from cycle accounting* (§4.3.2): when a CPU-bound vCPU is to
borrow the I/O sibling, the one chosen is the one predicted to co-run best
with the vCPU on the CPU sibling. Each vCPU is characterised alone by its
CPI stack (base, miss, waiting), so choosing is O(n) in the candidates.
"""

from vsmtio_agent import model


def _rank_key(item):
    ref, st = item
    rate = st.retention_rate
    # Unmeasured retention ranks below every measured one: a vCPU is never
    # given the I/O sibling on a guess.
    return (rate is None, -(rate or 0.0), ref)


def classify(stats, min_retention_rate=0.0):
    """Split one core's vCPUs into I/O-bound and CPU-bound (§4.3.1).

    Returns ``{ref: Role}``. The I/O class is the prefix of the ranking
    whose total weight is closest to half of the core's, so the classes'
    weights differ by at most the heaviest vCPU's weight. Ties prefer the
    smaller I/O class, which leaves CPU-bound vCPUs both siblings.

    Only a vCPU that retains for at least ``min_retention_rate`` of the
    period can be I/O-bound: ranking alone would call half of an all-CPU
    core "I/O-bound" and keep it off the other sibling, where §4.3.2 wants
    CPU-bound vCPUs on both siblings, paired by symbiosis. When too few
    vCPUs retain to balance the weights, all of them are I/O-bound.
    """
    ranked = sorted(stats.items(), key=_rank_key)
    total = sum(st.weight for _, st in ranked)
    best_k, best_gap, prefix = 0, total, 0
    for k, (_, st) in enumerate(ranked, start=1):
        rate = st.retention_rate
        if rate is None or rate < min_retention_rate or rate <= 0:
            break
        prefix += st.weight
        gap = abs(total - 2 * prefix)
        if gap < best_gap:
            best_k, best_gap = k, gap
    return {ref: (model.Role.IO if i < best_k else model.Role.CPU)
            for i, (ref, _) in enumerate(ranked)}


def placement(core, role):
    """Where a vCPU of ``role`` may run on ``core`` (§4.3.1)."""
    if len(core.threads) < 2:
        return model.Placement(core.core_id, role, core.threads[0],
                               core.threads)
    if role is model.Role.IO:
        return model.Placement(core.core_id, role, core.io_thread,
                               (core.io_thread,))
    return model.Placement(core.core_id, role, core.cpu_thread,
                           (core.cpu_thread, core.io_thread))


def _dispatch_share(stack):
    """Fraction of cycles a thread occupies the shared dispatch resources."""
    return stack.base / stack.cpi if stack.cpi > 0 else 0.0


def corun_speed(own, other):
    """Predicted progress of ``own`` beside ``other``, relative to alone.

    Cycle accounting: alone, a thread needs ``cpi`` cycles per
    instruction; beside a sibling it additionally waits for the shared
    resources in proportion to its own base cycles and to how much of the
    time the sibling holds them. Miss cycles overlap with the sibling's
    work, which is why memory-bound threads co-run well.
    """
    alone = own.cpi
    if alone <= 0:
        return 1.0
    return alone / (alone + own.base * _dispatch_share(other))


def symbiosis(a, b):
    """Combined speed of two CPU-bound vCPUs co-run on one core (§4.3.2).

    The sum of each one's progress relative to running alone: 2.0 would be
    perfect sharing, 1.0 no gain over time-slicing one hyperthread.
    """
    return corun_speed(a, b) + corun_speed(b, a)


def pick_symbiotic(running, candidates):
    """The CPU-bound vCPU to run on an idle I/O sibling (§4.3.2).

    ``running`` is the CPI stack of the vCPU on the CPU sibling (None if
    unknown or idle); ``candidates`` is ``[(key, stack or None), ...]`` in
    the scheduler's own order (CFS picks a few, RASS chooses among them,
    §5). Candidates with a known stack are scored by :func:`symbiosis`;
    unknown ones come after every known one; ties keep CFS's order.
    Returns the chosen key, or None when there are no candidates.
    """
    best_key, best_score = None, None
    for position, (key, stack) in enumerate(candidates):
        if running is None or stack is None:
            score = (stack is not None, float('-inf'), -position)
        else:
            score = (True, symbiosis(running, stack), -position)
        if best_score is None or score > best_score:
            best_key, best_score = key, score
    return best_key
