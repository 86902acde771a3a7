"""The Workload Adjuster (paper §4.4): keep every core heterogeneous.

RASS gains only where a core holds both I/O-bound and CPU-bound vCPUs.
Each period the adjuster computes every core's mean and standard deviation
of retention rates. When some core's deviation drops below a threshold,
the most homogeneous core is paired with the core whose mean differs from
its own the most, and the middle-ranked vCPUs of the two are swapped.

One addition to the paper: the pair's means must differ by at least a
minimum gap, so a host where every core is alike (all CPU-bound, the
paper's 0:96 control) is left alone instead of churning vCPUs.
"""

import functools
import math
import statistics

from vsmtio_agent import model


def _members(assignment, rates):
    """``{core: [refs]}`` of the measured vCPUs, in assignment order."""
    members = {}
    for ref, core in assignment.items():
        if rates.get(ref) is not None:
            members.setdefault(core, []).append(ref)
    return members


def _ranked(refs, rates):
    """``refs`` by rate descending (ties by ref)."""
    return sorted(refs, key=lambda r: (-rates[r], r))


def core_profiles(assignment, rates):
    """``{core: (mean, std, [refs by rate desc])}`` of measured vCPUs."""
    profiles = {}
    for core, refs in _members(assignment, rates).items():
        refs = _ranked(refs, rates)
        values = [rates[r] for r in refs]
        profiles[core] = (statistics.fmean(values),
                          statistics.pstdev(values), refs)
    return profiles


# The largest rate plan_swaps bounds a deviation for (a rate is a share
# of a period): beyond it, or NaN, every core's is computed exactly (as
# statistics.pstdev raises on what is not finite, so does plan_swaps).
_TAME = 1e100


def _std_bounds(values):
    """``(low, high)`` around ``statistics.pstdev(values)``, in floats.

    pstdev is exact (in fractions), too slow for a loop over every core:
    the adjuster needs only the cores below its threshold and, of those,
    the lowest, which bounds computed in floats tell apart. The
    two-pass deviation ``s`` of finite values (the mean ``m`` by fsum,
    rounded; then each square, their fsum, the division and the root)
    is within 7 units of roundoff ``u`` of the exact one, less
    ``2u * |m|`` for the mean's own rounding, and pstdev rounds the
    exact one (within ``2u``); the slack here is some thousand times
    that, and its absolute term covers squares that underflow.
    """
    n = len(values)
    mean = math.fsum(values) / n
    std = math.sqrt(math.fsum([d * d for d in [x - mean for x in values]])
                    / n)
    return (std * (1.0 - 1e-12) - 1e-15 * abs(mean) - 1e-150,
            std * (1.0 + 1e-12) + 1e-150)


def middle(refs):
    """The vCPU ranked in the middle of a core's ranking."""
    return refs[len(refs) // 2]


def _pick(members, rates, core_a, core_b, allowed):
    """The swap between ``core_a`` and ``core_b``: the middle vCPUs.

    Where ``allowed`` (a predicate on a :class:`~vsmtio_agent.model.Swap`,
    the trust domains') refuses the middle pair, the allowed pair nearest
    the middles of both rankings; None if it allows none.
    """
    ranked_a = _ranked(members[core_a], rates)
    ranked_b = _ranked(members[core_b], rates)
    mid_a, mid_b = len(ranked_a) // 2, len(ranked_b) // 2
    if allowed is None:
        return model.Swap(a=ranked_a[mid_a], core_a=core_a,
                          b=ranked_b[mid_b], core_b=core_b)
    pairs = sorted(
        (abs(i - mid_a) + abs(j - mid_b), i, j)
        for i in range(len(ranked_a)) for j in range(len(ranked_b)))
    for _distance, i, j in pairs:
        swap = model.Swap(a=ranked_a[i], core_a=core_a, b=ranked_b[j],
                          core_b=core_b)
        if allowed(swap):
            return swap
    return None


def plan_swaps(assignment, rates, std_threshold, min_mean_gap, max_swaps,
               allowed=None):
    """Swaps that restore heterogeneity, at most ``max_swaps`` of them.

    ``assignment`` maps each vCPU to its core and ``rates`` each vCPU to
    its retention rate (None when unmeasured; such vCPUs never move). A
    core takes part in at most one swap per period. Returns a tuple of
    :class:`~vsmtio_agent.model.Swap`, each between two distinct cores.
    ``allowed`` (a predicate on a swap, None: every swap) is the trust
    domains' check (:func:`vsmtio_agent.policy.trust.swap_allowed`): a
    pair it refuses is never planned, and a core with no allowed partner
    gives way to the next most homogeneous one.

    Each period, so written for speed: a core's exact deviation
    (:func:`core_profiles`) is computed only where its bounds
    (:func:`_std_bounds`) do not settle the question, and its ranking
    only for a core that swaps.
    """
    members = _members(assignment, rates)
    values = {core: [rates[r] for r in refs]
              for core, refs in members.items()}
    bounds = _deviation_bounds(assignment, rates, values)
    means = {core: statistics.fmean(vs) for core, vs in values.items()}
    std = functools.cache(lambda core: statistics.pstdev(values[core]))
    swaps = []
    used = set()
    while len(swaps) < max_swaps:
        found = _most_homogeneous(bounds, used, std_threshold, std)
        if found is None:
            break
        core_a = found[1]
        partners = _partners(means, core_a, used, min_mean_gap)
        if not partners:
            # The most homogeneous core has no partner different enough;
            # look no further this period.
            break
        swap = _first_allowed(members, rates, core_a, partners, allowed)
        if swap is None:
            # no pair the trust domains allow: the next homogeneous core
            used.add(core_a)
            continue
        swaps.append(swap)
        used.update((core_a, swap.core_b))
    return tuple(swaps)


def _deviation_bounds(assignment, rates, values):
    """``{core: (low, high)}`` around the deviation of each core of two.

    ``values`` holds each core's measured rates. A core with fewer than
    two has no spread to judge, so it has no bounds and is never the
    homogeneous one. Where some rate is beyond what :func:`_std_bounds`
    bounds (huge, infinite or NaN) the bounds are unbounded, so that
    every deviation is computed exactly, and whatever
    :func:`statistics.pstdev` raises on such rates is raised here first.
    """
    if all(-_TAME < v < _TAME for vs in values.values() for v in vs):
        return {core: _std_bounds(vs) for core, vs in values.items()
                if len(vs) >= 2}
    core_profiles(assignment, rates)    # raises where pstdev raises
    return {core: (-math.inf, math.inf) for core, vs in values.items()
            if len(vs) >= 2}


def _most_homogeneous(bounds, used, std_threshold, std):
    """``(deviation, core)`` of the next core to mix, or None.

    Of the cores not in ``used`` whose deviation is below
    ``std_threshold``, the lowest deviation, then the lowest core id.
    ``std`` gives a core's exact deviation; it is asked only of the cores
    whose ``bounds`` let them be both below the threshold and the lowest,
    for an exact deviation is what costs.
    """
    pool = [(low, high, core) for core, (low, high) in bounds.items()
            if core not in used and low < std_threshold]
    if not pool:
        return None
    best_high = min(high for _low, high, _core in pool)
    found = min((std(core), core) for low, _high, core in pool
                if low <= best_high)
    return found if found[0] < std_threshold else None


def _partners(means, core_a, used, min_mean_gap):
    """The cores ``core_a`` may swap with, the most different first.

    The cores not in ``used`` whose mean rate differs from ``core_a``'s
    by at least ``min_mean_gap``, by that difference descending (ties:
    core id): a swap between two alike cores would only churn vCPUs.
    """
    mean_a = means[core_a]
    others = sorted(
        (-abs(mean - mean_a), core)
        for core, mean in means.items()
        if core != core_a and core not in used)
    partners = []
    for neg_gap, core in others:
        if -neg_gap < min_mean_gap:
            break
        partners.append(core)
    return partners


def _first_allowed(members, rates, core_a, partners, allowed):
    """The swap of ``core_a`` with the first partner that ``allowed`` lets.

    ``partners`` come the most different first, so the trust domains
    give up as little heterogeneity as they must; None if none allows a
    swap (see :func:`_pick`).
    """
    for core_b in partners:
        swap = _pick(members, rates, core_a, core_b, allowed)
        if swap is not None:
            return swap
    return None


def apply_swaps(assignment, swaps):
    """A new assignment with ``swaps`` carried out."""
    result = dict(assignment)
    for swap in swaps:
        result[swap.a] = swap.core_b
        result[swap.b] = swap.core_a
    return result
