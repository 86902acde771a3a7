"""The policy's shortcuts against their straightforward forms.

``rass.classify`` ranks only the vCPUs that may be I/O-bound,
``adjuster.plan_swaps`` computes a core's exact deviation only where
float bounds leave the answer open
(doc/source/benchmarks/agent_tick.rst). Each must give what the straightforward
algorithm gives, not a close answer: the references below are the code
as it was before the shortcuts, run on random inputs that include what
the shortcuts leave to it (NaN and infinite rates, float weights, no
weight at all) and thresholds on the very edge of the answer.
"""

import math
import statistics

from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
import testtools

from vsmtio_agent import model
from vsmtio_agent.policy import adjuster
from vsmtio_agent.policy import rass
from vsmtio_agent.tests.unit.policy import helpers


def classify_reference(stats, min_retention_rate=0.0, threads=None,
                       held=None):
    """rass.classify before the shortcut: every vCPU ranked."""
    if held is not None and not any(
            vs.retention_rate for vs in stats.values()):
        shares = rass.fair_share(stats, threads) if threads else {}
        out = {}
        for ref, vs in stats.items():
            if shares and rass._over_share(vs, shares[ref]):
                out[ref] = model.Role.CPU
            else:
                out[ref] = held.get(ref, model.Role.CPU)
        return out
    shares = rass.fair_share(stats, threads) if threads else {}
    ranked = []
    for ref, vs in stats.items():
        rate = vs.retention_rate
        over = bool(threads) and rass._over_share(vs, shares[ref])
        ranked.append((over, rate is None, -(rate or 0.0), ref, vs))
    ranked.sort()
    refs = [item[-2] for item in ranked]
    ranked = [item[-1] for item in ranked]
    total = sum(vs.weight for vs in ranked)
    best_k, best_gap, prefix = 0, total, 0
    for k, vs in enumerate(ranked, start=1):
        rate = vs.retention_rate
        if rate is None or rate < min_retention_rate or rate <= 0:
            break
        if shares and rass._over_share(vs, shares[refs[k - 1]]):
            break
        prefix += vs.weight
        gap = abs(total - 2 * prefix)
        if gap < best_gap:
            best_k, best_gap = k, gap
    out = dict.fromkeys(refs[:best_k], model.Role.IO)
    out.update(dict.fromkeys(refs[best_k:], model.Role.CPU))
    return out


def plan_swaps_reference(assignment, rates, std_threshold, min_mean_gap,
                         max_swaps):
    """adjuster.plan_swaps before the shortcut: every core's pstdev."""
    profiles = {}
    for ref, core in assignment.items():
        if rates.get(ref) is not None:
            profiles.setdefault(core, []).append(ref)
    for core, refs in profiles.items():
        refs.sort(key=lambda r: (-rates[r], r))
        values = [rates[r] for r in refs]
        profiles[core] = (statistics.fmean(values),
                          statistics.pstdev(values), refs)
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
            break
        core_b = others[0][1]
        a = adjuster.middle(profiles[core_a][2])
        b = adjuster.middle(profiles[core_b][2])
        swaps.append(model.Swap(a=a, core_a=core_a, b=b, core_b=core_b))
        used.update((core_a, core_b))
    return tuple(swaps)


def outcome(fn, *args, **kwargs):
    """What ``fn`` returns, or the type of what it raises."""
    try:
        return fn(*args, **kwargs)
    except Exception as exc:
        return type(exc)


# a few values repeated, so ties (of rates, of shares) are common
common = st.sampled_from([0.0, 0.005, 0.01, 0.1, 0.25, 0.5, 1.0])
odd = st.sampled_from([float('nan'), float('inf'), -0.1, -0.0, 1e300])
rates = st.one_of(st.none(), common, st.floats(0.0, 1.0), odd)
usage = st.one_of(st.none(), common, st.floats(0.0, 2.0),
                  st.just(float('nan')))


@st.composite
def core(draw):
    n = draw(st.integers(0, 12))
    weight = draw(st.sampled_from(['int', 'zero', 'float']))
    out = {}
    for i in draw(st.permutations(range(n))):
        w = draw(st.sampled_from([2, 1024, 1024, 1024, 3121, 88761]))
        if weight == 'zero':
            w = 0
        elif weight == 'float' and draw(st.booleans()):
            w = draw(st.floats(0.1, 1e5))
        out[helpers.ref(i, draw(st.sampled_from(['a', 'b'])))] = (
            helpers.stats(draw(rates), weight=w,
                          utilisation=draw(usage)))
    return out


class TestClassify(testtools.TestCase):

    @settings(max_examples=500, deadline=None)
    @given(core(), st.one_of(common, st.just(float('nan'))),
           st.sampled_from([None, 0, 1, 2, 4]), st.data())
    def test_same_roles_as_the_whole_ranking(self, stats, floor, threads,
                                             data):
        held = None
        if data.draw(st.booleans()):
            held = {ref: data.draw(st.sampled_from(list(model.Role)))
                    for ref in stats if data.draw(st.booleans())}
        got = outcome(rass.classify, stats, floor, threads, held=held)
        # A core without weight has no fair share: no vCPU is over it
        # (the code before the shortcut raised KeyError there)
        want = outcome(classify_reference, stats, floor,
                       threads if sum(vs.weight for vs in stats.values())
                       else None, held=held)
        self.assertEqual(want, got)
        if isinstance(want, dict):
            self.assertEqual(set(stats), set(got))


class TestPlanSwaps(testtools.TestCase):

    @settings(max_examples=500, deadline=None)
    @given(st.dictionaries(st.integers(0, 40).map(helpers.ref),
                           st.integers(0, 7), max_size=40),
           st.data(), st.integers(0, 4),
           st.sampled_from([0.0, 0.05, 0.1]))
    def test_same_swaps_as_every_deviation(self, assignment, data, n, gap):
        r = {ref: data.draw(st.one_of(
            st.none(), common, st.floats(0.0, 1.0),
            st.floats(0.3, 0.3 + 1e-12),    # deviations near nothing
            odd if data.draw(st.integers(0, 30)) == 0 else common))
            for ref in assignment}
        # a threshold on some core's exact deviation, or a float either
        # side of it: what the bounds must never get wrong
        cores = {}
        for ref, core in assignment.items():
            if r[ref] is not None and math.isfinite(r[ref]):
                cores.setdefault(core, []).append(r[ref])
        threshold = 0.1
        if cores:
            values = data.draw(st.sampled_from(sorted(cores.values())))
            threshold = data.draw(st.sampled_from([
                (lambda x: x), (lambda x: math.nextafter(x, math.inf)),
                (lambda x: math.nextafter(x, -math.inf))]))(
                    statistics.pstdev(values))
        want = outcome(plan_swaps_reference, assignment, r, threshold, gap,
                       n)
        got = outcome(adjuster.plan_swaps, assignment, r, threshold, gap, n)
        self.assertEqual(want, got)

    def test_bounds_hold_the_exact_deviation(self):
        # values whose deviation is tiny beside their mean, and some that
        # underflow when squared: the bounds' two slack terms
        for values in ([0.3, 0.3 + 2 ** -54], [1e-170, 2e-170, 3e-170],
                       [0.7] * 5 + [0.7000000000000001],
                       [1e99, -1e99, 0.5], [0.1, 0.2, 0.3]):
            low, high = adjuster._std_bounds(values)
            exact = statistics.pstdev(values)
            self.assertLessEqual(low, exact)
            self.assertLessEqual(exact, high)
