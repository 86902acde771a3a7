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

import itertools
import operator

from vsmtio_agent import model

_retention_rate = operator.attrgetter('retention_rate')
_weight = operator.attrgetter('weight')
_utilisation = operator.attrgetter('utilisation')


def fair_share(stats, threads):
    """Each vCPU's CFS share of its core's ``threads``, by weight."""
    total = sum(map(_weight, stats.values()))
    if not total:
        return {}
    return {ref: threads * st.weight / total for ref, st in stats.items()}


def _over_share(st, share):
    """Whether ``st`` computed beyond its fair share of the core."""
    used = st.compute_share
    return used is not None and used > share


def classify(stats, min_retention_rate=0.0, threads=None, held=None,
             min_idle_rate=None):
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

    With ``threads`` (the core's hyperthread count), the fairness
    invariant holds: a vCPU that computed more than its CFS share of the
    core (``threads * weight / core weight``) is CPU-bound whatever it
    retains. The I/O sibling's strict priority exists to repay the time
    retention charges an I/O-bound vCPU, not to give a vCPU that shapes
    its waits (long computations between short waits) more CPU than its
    weight: as CPU-bound it competes by weight like everyone else. A core
    whose vCPUs weigh nothing has no shares, so none is over its own.

    A core where no vCPU retained at all (a host that does not retain,
    or a period run without it) has rates that say nothing of a class.
    With ``min_idle_rate`` it is classed by :func:`by_idle_entries`
    instead, where its vCPUs' idle entries are counted. ``held`` (the
    roles planned before) is for a core whose idle entries are not
    counted either: each vCPU keeps its role (a new one is CPU-bound).
    The fairness invariant holds in both, for compute shares do not
    depend on retention. (Where the host still retained on its own, halt
    polling say, the rates are evidence and rank as usual.)
    """
    # This runs for every vCPU every period, so it is written for speed
    # (doc/source/benchmarks/agent_tick.rst): _over_share and compute_share are
    # inlined in _over, which the held roles and the ranking share, and
    # only the vCPUs that may be I/O-bound are ranked.
    refs = list(stats)
    sts = list(stats.values())
    rates = list(map(_retention_rate, sts))
    weights = list(map(_weight, sts))
    total = sum(weights)
    over = _over(sts, rates, weights, total, threads)
    if not any(rates):
        roles = _unretained(stats, refs, over, held, min_idle_rate)
        if roles is not None:
            return roles
    candidates = _candidates(refs, rates, weights, over, min_retention_rate)
    if type(total) is not int or any(
            rate != rate for rate, _r, _w in candidates):
        # a NaN rate has no rank, and float weights sum differently in
        # another order: the whole ranking, as it is written
        return _classify_ranked(stats, min_retention_rate, threads)
    candidates.sort()
    return _balanced_cut(refs, candidates, total)


def _unretained(stats, refs, over, held, min_idle_rate):
    """The roles of a core where no vCPU retained, or None.

    Its rates say nothing of a class: with ``min_idle_rate``, and idle
    entries counted, :func:`by_idle_entries` classes it; else the
    ``held`` roles do, each vCPU keeping its own (a new one CPU-bound).
    ``over`` marks the vCPUs over their fair share, CPU-bound in both
    (the fairness invariant). None where neither is known: the rates
    then rank as usual.
    """
    if min_idle_rate is not None and any(
            st.halt_rate is not None for st in stats.values()):
        return by_idle_entries(stats, min_idle_rate, over)
    if held is None:
        return None
    cpu_role = model.Role.CPU
    out = dict(zip(refs, map(held.get, refs, itertools.repeat(cpu_role))))
    if any(over):
        out.update(dict.fromkeys(itertools.compress(refs, over), cpu_role))
    return out


def _candidates(refs, rates, weights, over, min_retention_rate):
    """``[(-rate, ref, weight)]`` of the vCPUs that may be I/O-bound.

    The rank (see _rank): over its share last, unmeasured retention
    below every measured one, then retention descending, then the ref.
    The I/O class is a prefix of the vCPUs that may be I/O-bound: not
    over their share, retaining for at least ``min_retention_rate`` and
    for more than nothing. Those rank first (each retains more than any
    other measured vCPU), so they are all :func:`classify` has to sort.
    """
    return [
        (-rate, ref, weight)
        for ref, rate, weight, over_share in zip(refs, rates, weights, over)
        if not over_share and rate is not None
        and not (rate < min_retention_rate or rate <= 0)]


def _balanced_cut(refs, candidates, total):
    """``{ref: Role}`` with the classes' weights as equal as they can be.

    The I/O class is the prefix of ``candidates`` (ranked) whose weight
    is closest to half of ``total``, the shortest such on a tie, which
    leaves CPU-bound vCPUs both siblings; every other vCPU of ``refs`` is
    CPU-bound.
    """
    best_k, best_gap, prefix = 0, total, 0
    for k, (_rate, _r, weight) in enumerate(candidates, start=1):
        prefix += weight
        gap = abs(total - 2 * prefix)
        if gap < best_gap:
            best_k, best_gap = k, gap
    out = dict.fromkeys(refs, model.Role.CPU)
    for _rate, ref, _w in candidates[:best_k]:
        out[ref] = model.Role.IO
    return out


def by_idle_entries(stats, min_idle_rate, over=None):
    """A core's roles where nothing retains: by how often each vCPU idles.

    A vCPU that enters idle at least ``min_idle_rate`` times a second
    (its halt exits, which a retention would replace) waits on I/O; the
    most frequent idlers are I/O-bound, as many as the I/O sibling can
    run: while their compute shares sum to at most one hyperthread (an
    unmeasured share counts as a whole one). Retention's cut balances
    the classes' weights because a retaining vCPU holds its hyperthread
    while it waits; a vCPU that halts gives it up, so its weight
    overstates what it asks of the sibling, and what it computes is the
    measure. ``over`` (per vCPU, in order) marks those computing beyond
    their fair share, CPU-bound whatever they idle (the fairness
    invariant).
    """
    cpu_role = model.Role.CPU
    out = dict.fromkeys(stats, cpu_role)
    over = over or [False] * len(stats)
    ranked = sorted(
        (-st.halt_rate, ref, st) for (ref, st), over_share
        in zip(stats.items(), over)
        if not over_share and st.halt_rate is not None
        and st.halt_rate >= min_idle_rate)
    load = 0.0
    for _rate, ref, st in ranked:
        share = st.compute_share
        load += 1.0 if share is None or not share == share else share
        if load > 1.0:
            break
        out[ref] = model.Role.IO
    return out


def _over(sts, rates, weights, total, threads):
    """Per vCPU (in order): computed beyond its fair share of ``threads``.

    :func:`_over_share` with :func:`fair_share`'s shares (``total`` is
    the sum of ``weights``), all False without ``threads`` or weight.
    """
    if not threads or not total:
        return [False] * len(sts)
    # (``d if (d := x) > 0.0 else 0.0`` is ``max(0.0, x)``, once per vCPU)
    return [used is not None
            and (d if (d := used - (rate or 0.0)) > 0.0 else 0.0)
            > threads * weight / total
            for used, rate, weight in zip(map(_utilisation, sts), rates,
                                          weights)]


def _rank(st, ref, share):
    """The sort key of ``st`` in :func:`classify`'s ranking."""
    rate = st.retention_rate
    return (share is not None and _over_share(st, share), rate is None,
            -(rate or 0.0), ref)


def _classify_ranked(stats, min_retention_rate, threads):
    """:func:`classify` by the whole ranking, every vCPU sorted.

    The straightforward statement of the cut: :func:`classify` is its
    shortcut where no rate is NaN and the weights are ints.
    """
    shares = fair_share(stats, threads) if threads else {}
    ranked = sorted(stats, key=lambda ref: _rank(
        stats[ref], ref, shares[ref] if shares else None))
    total = sum(stats[ref].weight for ref in ranked)
    best_k, best_gap, prefix = 0, total, 0
    for k, ref in enumerate(ranked, start=1):
        st = stats[ref]
        rate = st.retention_rate
        if rate is None or rate < min_retention_rate or rate <= 0:
            break
        if shares and _over_share(st, shares[ref]):
            break
        prefix += st.weight
        gap = abs(total - 2 * prefix)
        if gap < best_gap:
            best_k, best_gap = k, gap
    out = dict.fromkeys(ranked[:best_k], model.Role.IO)
    out.update(dict.fromkeys(ranked[best_k:], model.Role.CPU))
    return out


def split_order(by_core, roles, split):
    """The cores to split, most in need first; ``split`` stays in front.

    A split of part of the host gives the I/O sibling's priority where
    I/O-bound vCPUs wait longest for a hyperthread (the sum of their
    run-queue delay ratios), the cores where it can buy the most service
    for the CPU-bound time it costs. Cores already split keep their place
    (in ``split``'s order), so raising or lowering the share moves only
    the cores at its edge and never reshuffles every pin. ``by_core``
    maps a core id to its vCPUs' stats, ``roles`` a vCPU to its class.
    """
    io, role_of = model.Role.IO, roles.get

    def need(core_id):
        waits = sum([st.runqueue_delay_ratio or 0.0
                     for ref, st in by_core[core_id].items()
                     if role_of(ref) is io])
        return (-waits, core_id)
    kept = [c for c in split if c in by_core]
    rest = sorted((c for c in by_core if c not in kept), key=need)
    return kept + rest


def split_count(n_cores, share):
    """How many of ``n_cores`` a split of ``share`` (0..1) covers."""
    if share <= 0.0 or not n_cores:
        return 0
    return max(1, min(n_cores, int(round(n_cores * share))))


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


# The SMT co-run model, the one CPI-stack computation in vsmtio: the
# simulated host times co-running siblings with it (vsmtio_sim/cpi.py) and
# RASS ranks borrowers with it. Its two constants come from the range of
# combined speed-ups a pair of busy siblings shows
# (vsmtio_sim/data/costs.yaml):
# the best pair (one thread only issues, the other only misses) reaches
# the top of the range, the worst (both want the same resource) the bottom.
PAIR_SPEEDUP_MIN = 1.0
PAIR_SPEEDUP_MAX = 1.3


def issue_share(base, miss):
    """Fraction of a thread's solo cycles spent issuing instructions."""
    total = base + miss
    return base / total if total > 0 else 0.0


def overlap(a, b):
    """How much two threads want the same resource, 0..1.

    ``a`` and ``b`` are ``(base, miss)`` CPI components. Issue-bound
    threads collide on the issue slots, miss-bound ones on the memory
    system (fill buffers, bandwidth); an issue-bound thread beside a
    miss-bound one uses what the other leaves.
    """
    ua = issue_share(*a)
    ub = issue_share(*b)
    return ua * ub + (1.0 - ua) * (1.0 - ub)


def pair_slowdown(a, b, speedup_min=PAIR_SPEEDUP_MIN,
                  speedup_max=PAIR_SPEEDUP_MAX):
    """Each sibling's CPI next to the other, over its CPI alone.

    ``c0 + k * overlap(a, b)``, with ``c0`` and ``k`` solved so the pair's
    combined speed ``2 / slowdown`` spans exactly
    ``[speedup_min, speedup_max]``: no pair ever leaves the range the
    source gives, whatever the CPI stacks.
    """
    if not 1.0 <= speedup_min <= speedup_max <= 2.0:
        raise ValueError('SMT pair speed-ups must satisfy 1 <= min <= max '
                         '<= 2, got min=%r max=%r'
                         % (speedup_min, speedup_max))
    c0 = 2.0 / speedup_max
    k = 2.0 / speedup_min - c0
    return c0 + k * overlap(a, b)


def _parts(stack):
    return (stack.base, stack.miss)


def corun_speed(own, other):
    """Predicted progress of ``own`` beside ``other``, relative to alone."""
    return 1.0 / pair_slowdown(_parts(own), _parts(other))


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
