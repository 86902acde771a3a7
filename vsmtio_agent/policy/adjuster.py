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

import statistics

from vsmtio_agent import model


def core_profiles(assignment, rates):
    """``{core: (mean, std, [refs by rate desc])}`` of measured vCPUs."""
    members = {}
    for ref, core in assignment.items():
        if rates.get(ref) is not None:
            members.setdefault(core, []).append(ref)
    profiles = {}
    for core, refs in members.items():
        refs.sort(key=lambda r: (-rates[r], r))
        values = [rates[r] for r in refs]
        profiles[core] = (statistics.fmean(values),
                          statistics.pstdev(values), refs)
    return profiles


def middle(refs):
    """The vCPU ranked in the middle of a core's ranking."""
    return refs[len(refs) // 2]


def plan_swaps(assignment, rates, std_threshold, min_mean_gap, max_swaps):
    """Swaps that restore heterogeneity, at most ``max_swaps`` of them.

    ``assignment`` maps each vCPU to its core and ``rates`` each vCPU to
    its retention rate (None when unmeasured; such vCPUs never move). A
    core takes part in at most one swap per period. Returns a tuple of
    :class:`~vsmtio_agent.model.Swap`, each between two distinct cores.
    """
    profiles = core_profiles(assignment, rates)
    swaps = []
    used = set()
    while len(swaps) < max_swaps:
        homogeneous = sorted(
            (std, core) for core, (_, std, refs) in profiles.items()
            if core not in used and len(refs) >= 2 and std < std_threshold)
        if not homogeneous:
            break
        core_a = homogeneous[0][1]
        mean_a = profiles[core_a][0]
        others = sorted(
            (-abs(mean - mean_a), core)
            for core, (mean, _, _) in profiles.items()
            if core != core_a and core not in used)
        if not others or -others[0][0] < min_mean_gap:
            # The most homogeneous core has no partner different enough;
            # look no further this period.
            break
        core_b = others[0][1]
        a = middle(profiles[core_a][2])
        b = middle(profiles[core_b][2])
        swaps.append(model.Swap(a=a, core_a=core_a, b=b, core_b=core_b))
        used.update((core_a, core_b))
    return tuple(swaps)


def apply_swaps(assignment, swaps):
    """A new assignment with ``swaps`` carried out."""
    result = dict(assignment)
    for swap in swaps:
        result[swap.a] = swap.core_b
        result[swap.b] = swap.core_a
    return result
