"""Busy vCPUs on distinct cores, as RASS pairs them (paper §4.3-§4.4).

RASS gains by putting an I/O-bound vCPU and a CPU-bound one on the two
hyperthreads of one core, so that one computes while the other retains;
the Workload Adjuster swaps vCPUs between cores to keep every core so
mixed. Two vCPUs that both compute, on one core's two siblings while
another core runs none, is exactly what the pairing exists to avoid:
each gets a hyperthread's share of a core that two full cores would give
them (one to 1.3 cores between the two, against two).

Neither mechanism prevents it on its own. The engine adopts a new vCPU on
the core the host ran it on at the sample, which is only where it was at
that instant; RASS then classes both computing vCPUs CPU-bound and plans
them onto that core's siblings; and the adjuster, which looks only at
retention rates, leaves alone a host whose cores all retain alike (its
minimum gap: the light vCPUs elsewhere may retain nothing either). Two
busy guests the host happened to run on one core at the sample would be
pinned to its siblings for good. This module moves them apart, whatever
the guard keeps in force (the assignment is planned every period, split
or not), and checks the adjuster's swaps so that none stacks them
again.

A vCPU is *busy* when it wanted at least :data:`BUSY_SHARE` of a
hyperthread in the period: the time it computed (its run time less its
retention, which a sibling can use) plus the time it waited runnable
(its run-queue delay, which is what a contended busy vCPU loses). A vCPU
whose run time is not measured is not known to be busy and never moves.

Trust domains (:mod:`~vsmtio_agent.policy.trust`) bound every move: a
busy vCPU moves to a core only where no vCPU of another domain would
then sit beside it, and one it is exchanged for only where the same
holds on the core it comes to. Pure: no I/O.
"""

import collections

# Half a hyperthread: a vCPU that computes, or waits to, for half the
# period or more is one RASS classes CPU-bound and would pin to a core's
# siblings; a light vCPU (one that serves requests, or idles) asks far
# less, and spreading it would only churn pins.
BUSY_SHARE = 0.5


def busy(stats):
    """The busy vCPUs of ``stats`` (``{ref: VcpuStats}``), a frozenset.

    Busy: what it computed (run time less retention, never below
    nothing) plus what it waited runnable (the run-queue delay ratio)
    is at least :data:`BUSY_SHARE`; never where its run time is not
    measured. (Every period, for every vCPU: one comprehension, as
    RASS's loops are written, ``doc/source/benchmarks/agent_tick.rst``.)
    """
    share = BUSY_SHARE
    return frozenset([
        ref for ref, st in stats.items()
        if (used := st.utilisation) is not None
        and ((d if (d := used - (st.retention_rate or 0.0)) > 0.0 else 0.0)
             + (st.runqueue_delay_ratio or 0.0)) >= share])


def stacked(assignment, busy_refs, cores):
    """Whether a core holds two busy vCPUs while one of ``cores`` holds none.

    The state :func:`spread` undoes where trust domains let it.
    """
    count = collections.Counter(assignment[r] for r in busy_refs)
    return (any(n > 1 for n in count.values())
            and not all(count[c] for c in cores))


def _fits(trust, core_refs, leaving, key):
    """Whether every vCPU of ``core_refs`` but ``leaving`` has ``key``."""
    return all(trust[r] == key for r in core_refs if r != leaving)


def _rate(rates, ref):
    """``ref``'s retention rate, -1 where unmeasured (None or NaN)."""
    rate = rates.get(ref)
    return rate if rate is not None and rate == rate else -1.0


def _move(members, x, a, b, trust, rates):
    """How busy ``x`` leaves core ``a`` for core ``b`` (holding none).

    ``(x, None)`` to move alone, ``(x, y)`` to be exchanged for ``y`` of
    ``b``; None where the trust domains allow neither. Exchanged when
    ``b`` holds as many vCPUs as ``a`` or more (a move alone would leave
    ``b`` two vCPUs or more above ``a``), for the vCPU of ``b`` that
    retains most
    (the I/O-bound one RASS pairs with what stays on ``a``), then by ref.
    """
    on_a, on_b = members[a], members[b]
    alone = trust is None or _fits(trust, on_b, None, trust[x])
    if len(on_b) < len(on_a) and alone:
        return x, None
    partners = sorted(on_b, key=lambda r: (-_rate(rates, r), r))
    for y in partners:
        if trust is None or (_fits(trust, on_b, y, trust[x])
                             and _fits(trust, on_a, x, trust[y])):
            return x, y
    return (x, None) if alone else None


def spread(assignment, busy_refs, cores, trust=None, rates=None,
           previous=None):
    """``assignment`` with busy vCPUs on distinct cores where they can be.

    While a core holds two busy vCPUs or more and another of ``cores``
    (the topology's core ids, in order) holds none, one of them moves to
    such a core, alone or exchanged for one of its vCPUs (:func:`_move`),
    where the trust domains (``trust``, ``{ref: key}``, or None) allow.
    The core with the most busy vCPUs gives first (ties: ``cores``'
    order); of its busy vCPUs, one that was not on it in ``previous``
    (last period's assignment: a newcomer) moves before one the engine
    placed there, then by ref, so pins already made stay; it goes to the
    free core holding fewest vCPUs (ties: ``cores``' order). ``rates``
    (``{ref: retention rate}``) choose whom to exchange. Each move fills
    one free core, so there are fewer moves than cores. Returns
    ``assignment`` itself when nothing moves.
    """
    if len(busy_refs) < 2 or not stacked(assignment, busy_refs, cores):
        return assignment
    members = collections.defaultdict(list)
    for ref, core in assignment.items():
        members[core].append(ref)
    count = collections.Counter(assignment[r] for r in busy_refs)
    order = {core: n for n, core in enumerate(cores)}
    result = dict(assignment)
    moved = False
    while True:
        found = _next_move(members, count, busy_refs, order, trust,
                           rates or {}, previous or {})
        if found is None:
            return result if moved else assignment
        moved = True
        a, b, x, y = found
        members[a].remove(x)
        members[b].append(x)
        result[x] = b
        count[a] -= 1
        count[b] += 1
        if y is not None:
            members[b].remove(y)
            members[a].append(y)
            result[y] = a


def _next_move(members, count, busy_refs, order, trust, rates, previous):
    """:func:`spread`'s next move, ``(from, to, busy vCPU, exchanged)``.

    None when no core holds two busy vCPUs while another holds none, or
    the trust domains allow no such move.
    """
    free = sorted((c for c in order if not count[c]),
                  key=lambda c: (len(members[c]), order[c]))
    if not free:
        return None
    rank = len(order)
    givers = sorted((c for c, n in count.items() if n > 1),
                    key=lambda c: (-count[c], order.get(c, rank), c))
    for a in givers:
        movers = sorted((r for r in members[a] if r in busy_refs),
                        key=lambda r: (previous.get(r) == a, r))
        for x in movers:
            for b in free:
                found = _move(members, x, a, b, trust, rates)
                if found is not None:
                    return (a, b) + found
    return None


def swap_checker(assignment, busy_refs):
    """A check on the adjuster's swaps: none stacks busy vCPUs.

    A swap is refused when it leaves more busy vCPUs beyond the first on
    its two cores than before (a busy vCPU exchanged for a light one onto
    a core that already holds a busy one, while the core it leaves keeps
    none or one). So an assignment :func:`spread` left with no core
    holding two busy vCPUs while another holds none keeps that after any
    allowed swap. None (every swap) without two busy vCPUs.
    """
    if len(busy_refs) < 2:
        return None
    counted = []        # the busy vCPUs per core, once a swap needs them

    def allowed(swap):
        change = (swap.b in busy_refs) - (swap.a in busy_refs)
        if not change:
            return True
        if not counted:
            counted.append(collections.Counter(
                assignment[r] for r in busy_refs))
        count = counted[0]
        na, nb = count[swap.core_a], count[swap.core_b]
        return (max(na + change - 1, 0) + max(nb - change - 1, 0)
                <= max(na - 1, 0) + max(nb - 1, 0))
    return allowed


def both(first, second):
    """The check that allows what both allow (None: every swap)."""
    if first is None:
        return second
    if second is None:
        return first
    return lambda swap: first(swap) and second(swap)
