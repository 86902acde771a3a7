"""The search guard: candidates, anytime-valid bounds, elimination, holdout."""

import dataclasses
import math
import random

import fixtures
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
from oslo_config import cfg
import testtools

from vsmtio_agent import conf as conf_mod
from vsmtio_agent import model
from vsmtio_agent.policy import bounds
from vsmtio_agent.policy import engine
from vsmtio_agent.policy import search
from vsmtio_agent.policy import vocabulary
from vsmtio_agent.tests.unit.policy import helpers

US = 1000
RUNGS = (25 * US, 50 * US, 100 * US, 200 * US, 400 * US)
P = search.Params(pairs=8, max_pairs=32, rungs=RUNGS, start_ns=50 * US,
                  settle_periods=1, holdout_every=20, max_candidates=12)
KINDS = (('c1', search.COMPUTING), ('s1', search.SERVING))


def ref(vm, i=0):
    return model.VcpuRef(vm, i)


class Host(object):
    """VMs whose throughputs depend on the configuration in force.

    ``effect(config)`` gives ``{vm: factor}`` (absent: 1.0). Computing
    VMs ``c*`` report instructions; serving VMs ``s*`` idle 500 times a
    second at half their period (light) and report what they serve.
    Each period adds relative Gaussian ``noise``; ``kinds`` (settable)
    turns a VM's class.
    """

    def __init__(self, effect, vms=('c1', 's1'), noise=0.02, seed=1):
        self.effect = effect
        self.vms = vms
        self.noise = noise
        self.rng = random.Random(seed)
        self.serving = {vm for vm in vms if vm.startswith('s')}

    def period(self, config):
        factors = self.effect(config)
        stats, served = {}, {}
        for vm in self.vms:
            f = factors.get(vm, 1.0) * math.exp(self.rng.gauss(0, self.noise))
            if vm in self.serving:
                stats[ref(vm)] = helpers.stats(
                    halt_rate=500.0, instruction_rate=1e8, utilisation=0.3)
                served[vm] = 1000.0 * f
            else:
                stats[ref(vm)] = helpers.stats(
                    instruction_rate=1e9 * f, halt_rate=0.0,
                    utilisation=1.0)
        return stats, served


def arl(shift, drift, threshold):
    """Siegmund's mean observations to a one-sided CUSUM alarm.

    On a step of ``shift`` standard deviations; at 0, to a false alarm
    (halved for two sides, a close lower bound for them).
    """
    d = shift - drift
    b = threshold + 1.166
    if abs(d) < 1e-9:
        return b * b
    return (math.exp(-2 * d * b) + 2 * d * b - 1) / (2 * d * d)


def run(host, periods, params=P, state=None, every=None):
    state = state or search.State()
    for _ in range(periods):
        stats, served = host.period(state.in_force)
        state = search.step(state, params, stats, served)
        if every is not None:
            every(state)
    return state


def weighted(gain, cost, cliff=None):
    """An effect of the serving VMs' weight: a gain, and a cost past ``cliff``.

    s1 serves ``gain(f)`` at factor f; c1 computes ``cost(f)``.
    """
    def effect(config):
        f = config.value(vocabulary.WEIGHT, 's1') or 1.0
        return {'s1': gain(f), 'c1': cost(f)}
    return effect


class TestBounds(testtools.TestCase):

    def test_the_sequence_narrows_as_pairs_come(self):
        widths = [bounds.radius(n, 0.01, 0.05) for n in (2, 8, 32, 128)]
        self.assertEqual(sorted(widths, reverse=True), widths)
        self.assertEqual(float('inf'), bounds.radius(1, 0.01, 0.05))

    def test_covers_the_mean_at_every_look_under_the_null(self):
        # A/A: 2000 runs of 64 pairs of pure noise, the interval read at
        # every pair; it must miss the true mean (0) at any look in at
        # most alpha of the runs (the plug-in variance included)
        alpha = 0.1
        rng = random.Random(7)
        missed = 0
        for _ in range(2000):
            run = bounds.Running()
            for _pair in range(64):
                run = run.add(rng.gauss(0.0, 0.03))
                lo, hi = bounds.interval(run, alpha)
                if run.n >= P.pairs and (lo > 0.0 or hi < 0.0):
                    missed += 1
                    break
        self.assertLessEqual(missed / 2000.0, alpha)

    def test_levels_of_an_open_set_sum_to_alpha(self):
        total = math.fsum(bounds.spent(i, 0.1) for i in range(1, 10 ** 5))
        self.assertLessEqual(total, 0.1)
        self.assertGreater(total, 0.0999)


class TestElimination(testtools.TestCase):
    """On fabricated per-VM ratios, pair by pair."""

    def _fed(self, ratios, pairs, noise=0.01, seed=2, index=1):
        rng = random.Random(seed)
        c = search.Candidate(BARE_PLUS, index)
        for _ in range(pairs):
            logs = {vm: math.log(ratios[vm]) + rng.gauss(0, noise)
                    for vm, _k in KINDS}
            c = search.add_pair(c, KINDS, P, logs, logs['s1'])
            if c.status == search.OUT:
                break
        return c

    def test_a_vm_below_its_floor_eliminates_at_once(self):
        c = self._fed({'c1': 0.85, 's1': 1.3}, 32)
        self.assertEqual(search.OUT, c.status)
        self.assertTrue(c.lost)
        self.assertIn('c1', c.reason)
        self.assertLess(c.n, P.pairs)

    def test_every_floor_cleared_and_a_gain_is_safe(self):
        c = self._fed({'c1': 0.995, 's1': 1.1}, 16)
        self.assertEqual(search.SAFE, c.status)
        self.assertTrue(c.safe)

    def test_a_cost_within_the_noise_is_not_yet_safe(self):
        # c1 at the floor itself: its lower bound cannot clear it
        c = self._fed({'c1': 0.97, 's1': 1.1}, 32)
        self.assertFalse(c.safe)

    def test_a_ladder_step_holds_its_floors_to_the_first_steps_level(self):
        # the same pairs: held to the 1st candidate's level (a step up a
        # ladder shown so far), the 20th clears its floors sooner; its
        # gain is held to its own index's level either way
        rng = random.Random(5)
        own = search.Candidate(BARE_PLUS, 20)
        step = search.Candidate(BARE_PLUS, 20, spends=1)
        cleared = {}
        for pair in range(1, P.max_pairs + 1):
            logs = {'c1': math.log(0.985) + rng.gauss(0, 0.01),
                    's1': math.log(1.1) + rng.gauss(0, 0.01)}
            own, step = (search.add_pair(c, KINDS, P, logs, logs['s1'])
                         for c in (own, step))
            for name, c in (('own', own), ('step', step)):
                if c.cleared:
                    cleared.setdefault(name, pair)
        self.assertLess(cleared['step'], cleared.get('own', P.max_pairs + 1))
        self.assertEqual(own.gain_bounds(P, None), step.gain_bounds(P, None))

    def test_a_candidate_is_never_held_to_a_later_ones_level(self):
        # 50 us opened first; 25 us, opened later below it, clears its
        # floors: 50 us, one step up from it, keeps its own first level
        move = (vocabulary.RETENTION, ('s1',))
        first = search.Candidate(vocabulary.Config(timeouts=(
            ('s1', 50 * US),)), 1, move, 50 * US, logs=(
                ('c1', bounds.Running()), ('s1', bounds.Running())))
        below = search.Candidate(vocabulary.Config(timeouts=(
            ('s1', 25 * US),)), 2, move, 25 * US, cleared=True)
        state = search.State(
            phase=search.PROBE, kinds=KINDS, groups=(('s1',),),
            light=frozenset({'s1'}), candidates=(first, below), current=0,
            target=8, in_force=first.config)
        self.assertEqual(2, search._ladder(state, P)[first.config])
        host = Host(lambda c: {})
        for _ in range(3):
            stats, served = host.period(state.in_force)
            state = search._search_step(state, P, stats, served)
        self.assertEqual(1, state.candidates[0].n)
        self.assertEqual(1, state.candidates[0].spends)

    def test_a_gain_below_the_best_safe_one_is_eliminated(self):
        best = self._fed({'c1': 1.0, 's1': 1.2}, 16)
        worse = self._fed({'c1': 1.0, 's1': 1.02}, 16, seed=3, index=2)
        state = search.State(kinds=KINDS, candidates=(best, worse),
                             current=1)
        after = search._after_visit(state, P)
        self.assertEqual(search.OUT, after.candidates[1].status)
        self.assertFalse(after.candidates[1].lost)
        self.assertIn('below the', after.candidates[1].reason)
        self.assertIs(best, search._best(after.candidates, P))


BARE_PLUS = vocabulary.Config(weights=(('s1', 2.0),))


class TestCandidates(testtools.TestCase):

    def _levers(self, params, stats_kw=None):
        host = Host(lambda c: {})
        stats, _served = host.period(vocabulary.BARE)
        kinds = search.vm_kinds(stats, params)
        state = search._begin(search.State(), params, stats, kinds)
        return {c.move[0] for c in state.candidates}, state

    def test_grow_only_from_what_the_host_offers(self):
        levers, _s = self._levers(P)
        self.assertEqual({vocabulary.RETENTION, vocabulary.WEIGHT,
                          vocabulary.SPLIT}, levers)
        levers, _s = self._levers(dataclasses.replace(
            P, smt=False, retention=False))
        self.assertEqual({vocabulary.WEIGHT}, levers)
        levers, _s = self._levers(dataclasses.replace(P, weights=()))
        self.assertEqual({vocabulary.RETENTION, vocabulary.SPLIT}, levers)

    def test_what_is_not_offered_is_untried_with_its_reason(self):
        _l, state = self._levers(P)
        self.assertEqual({}, search.untried(state, P))
        params = dataclasses.replace(P, smt=False, weights=())
        _l, state = self._levers(params)
        why = search.untried(state, params)
        self.assertEqual(
            {vocabulary.WEIGHT, vocabulary.SPLIT, vocabulary.BORROW},
            set(why))
        self.assertIn('SMT', why[vocabulary.SPLIT])
        self.assertIn('no VM CPU weights', why[vocabulary.WEIGHT])

    def test_a_host_wide_timeout_is_one_key(self):
        _l, state = self._levers(dataclasses.replace(P, per_vm=False))
        timeouts = [c.config.timeouts for c in state.candidates
                    if c.move[0] == vocabulary.RETENTION]
        self.assertEqual([((vocabulary.ALL_VMS, 50 * US),)], timeouts)

    def test_the_weight_grid_steps_by_a_quarter(self):
        self.assertEqual(1.25, P.weights[0])
        self.assertEqual(4.0, P.weights[-1])
        self.assertEqual(12, len(P.weights))

    def test_vms_of_one_workload_move_together(self):
        stats = {ref('s1'): helpers.stats(halt_rate=500.0),
                 ref('s2'): helpers.stats(halt_rate=600.0),
                 ref('s3'): helpers.stats(halt_rate=5000.0)}
        kinds = search.vm_kinds(stats, P)
        self.assertEqual((('s1', 's2'), ('s3',)),
                         search.groups(stats, kinds))

    def test_no_step_past_a_cliff(self):
        move = (vocabulary.WEIGHT, ('s1',))
        lost = search.Candidate(vocabulary.BARE, 1, move, 2.0,
                                status=search.OUT, lost=True)
        state = search.State(candidates=(lost,))
        nxt = search._open(state, P, [
            (vocabulary.Config(weights=(('s1', 2.25),)), move, 2.25),
            (vocabulary.Config(weights=(('s1', 1.75),)), move, 1.75)])
        self.assertEqual([1.75], [c.value for c in nxt.candidates[1:]])

    def test_a_step_up_from_a_cleared_candidate_is_held_to_its_level(self):
        # fixed-sequence testing: x1.75 over x1.5, whose floors were shown,
        # is held to x1.5's level (or the level x1.5 itself was held to),
        # and the cap on candidates does not stop it; a candidate not yet
        # shown, or another lever's step, gets its own index's
        move = (vocabulary.WEIGHT, ('s1',))
        w = vocabulary.Config(weights=(('s1', 1.5),))
        up = w.with_value(vocabulary.WEIGHT, 's1', 1.75)
        others = tuple(search.Candidate(vocabulary.Config(
            timeouts=(('s1', i * US),)), i) for i in (1, 2))
        capped = dataclasses.replace(P, max_candidates=3)
        for cleared, spends, want in ((True, 0, 3), (True, 1, 1),
                                      (False, 0, None)):
            parent = search.Candidate(w, 3, move, 1.5, cleared=cleared,
                                      spends=spends)
            state = search.State(groups=(('s1',),), light=frozenset({'s1'}),
                                 candidates=others + (parent,))
            ladder = search._ladder(state, P)
            self.assertEqual({} if want is None else {up: want}, ladder)
            nxt = search._open(state, capped, search._moves(state, capped, w))
            self.assertEqual([up] if want else [],
                             [c.config for c in nxt.candidates[3:]])


class TestSearch(testtools.TestCase):

    def test_finds_a_weight_past_its_cliff_but_short_of_the_floor(self):
        # s1 gains only from 1.5 up; c1 loses 4% per quarter past 2.0
        host = Host(weighted(lambda f: 1.15 if f >= 1.5 else 1.0,
                             lambda f: 1.0 if f <= 2.0
                             else 1.0 - 0.16 * (f - 2.0)), noise=0.01)
        params = dataclasses.replace(P, rungs=(), retention=False,
                                     smt=False)
        state = run(host, 3000, params)
        self.assertEqual(search.HOLD, state.phase)
        w = state.kept.value(vocabulary.WEIGHT, 's1')
        self.assertIsNotNone(w)
        self.assertTrue(1.5 <= w <= 2.0, w)
        v = [x for x in state.verdicts if x.mechanism == vocabulary.WEIGHT][0]
        self.assertTrue(v.kept)
        # no candidate two steps past the cliff was ever opened
        self.assertFalse([c for c in state.candidates if c.value
                          and c.value > 2.5])

    def test_a_timeout_that_costs_a_floor_is_tried_shorter(self):
        # s1 gains from any retention; c1 pays 1% at 25 us, 4% at 50 us
        # (the start, below c1's floor), 16% at 100 us
        def effect(config):
            ns = config.value(vocabulary.RETENTION, 's1')
            if ns is None:
                return {}
            return {'s1': 1.3, 'c1': 1.0 - 0.01 * (ns / (25 * US)) ** 2}
        params = dataclasses.replace(P, weights=(), smt=False)
        state = run(Host(effect, noise=0.01), 3000, params)
        self.assertEqual(search.HOLD, state.phase)
        self.assertEqual(25 * US,
                         state.kept.value(vocabulary.RETENTION, 's1'))
        lost = [c for c in state.candidates if c.lost]
        self.assertEqual([50 * US], [c.value for c in lost])

    def test_a_long_ladder_reaches_its_far_safe_rung(self):
        # s1 gains 4% a quarter; c1 pays 1% up to x3, then 15%; timeouts
        # and the split do nothing here but fill the cap on candidates.
        # Each step up from one whose floors were shown is held to the
        # first's level and passes the cap, so x3 is kept, the 9th step
        host = Host(weighted(lambda f: 1.0 + 0.16 * (f - 1.0),
                             lambda f: 0.99 if f <= 3.0 else 0.85),
                    noise=0.02, seed=2)
        state = run(host, 4000)
        self.assertEqual(search.HOLD, state.phase)
        self.assertEqual(3.0, state.kept.value(vocabulary.WEIGHT, 's1'))
        self.assertGreater(len(state.candidates), P.max_candidates)
        ladder = [c for c in state.candidates if c.config.weights
                  and not c.config.timeouts and not c.config.mechanisms]
        self.assertEqual([1.25 + 0.25 * i for i in range(9)],
                         [c.value for c in ladder][:9])
        self.assertLess(min(c.spends for c in ladder if c.value > 1.5
                            and c.value <= 3.0), ladder[2].index)

    def test_keeps_nothing_where_every_candidate_costs(self):
        host = Host(lambda c: {} if c == vocabulary.BARE
                    else {'c1': 0.8, 's1': 1.3})
        state = run(host, 2000)
        self.assertEqual((1, search.HOLD), (state.searches, state.phase))
        self.assertEqual(vocabulary.BARE, state.kept)
        self.assertFalse(any(v.kept for v in state.verdicts
                             if v.mechanism != 'holdout'))
        self.assertIn('c1', [v for v in state.verdicts
                             if v.mechanism == vocabulary.RETENTION][0].reason)

    def test_nothing_kept_probes_nothing_on_an_unchanged_host(self):
        # the same search again would cost c1 the same probes for the
        # same answer: with nothing kept, only a change searches again
        host = Host(lambda c: {} if c == vocabulary.BARE
                    else {'c1': 0.8, 's1': 1.3}, seed=3)
        state = run(host, 2000)
        self.assertEqual(vocabulary.BARE, state.kept)
        searches = state.searches
        self.assertIn('until the bare host changes', [
            v for v in state.verdicts if v.mechanism == 'search'][0].reason)
        probed = []
        state = run(host, 5000, P, state, every=lambda s: probed.append(
            s.in_force != vocabulary.BARE))
        self.assertFalse(any(probed))
        self.assertEqual(searches, state.searches)
        # it watched all along: each VM's level from many bare periods
        self.assertGreater(min(r.n for _vm, r in state.reference), 200)

    def test_a_bare_host_that_changes_is_searched_again(self):
        load = {'s1': 1.0}
        host = Host(lambda c: dict(load) if c == vocabulary.BARE
                    else {'c1': 0.8, 's1': 1.3}, seed=3)
        state = run(host, 2000)
        self.assertEqual(vocabulary.BARE, state.kept)
        load['s1'] = 0.9            # s1's clients ask for less
        seen = []

        def watched(s):
            if s.finished is not None:
                seen.append(s.finished)
        state = run(host, 100, P, state, every=watched)
        self.assertEqual('watch', seen[0].mechanism)
        # (one period's level, 0.9 with its 2% noise)
        self.assertRegex(seen[0].reason, r's1 at 0\.(8[5-9]|9[0-5])\d of')
        # the alarm within the CUSUM's stated delay for a step of five
        # standard deviations (10% at 2% noise a period)
        self.assertLess(arl(5.0, P.cusum_drift, P.cusum_threshold), 5)

    def test_a_vm_arriving_restarts_the_search(self):
        host = Host(weighted(lambda f: 1.2, lambda f: 1.0))
        params = dataclasses.replace(P, rungs=(), retention=False,
                                     smt=False, max_candidates=3)
        state = run(host, 1500, params)
        searches = state.searches
        host.vms = ('c1', 'c2', 's1')
        state = run(host, 10, params, state)
        self.assertEqual(search.PROBE, state.phase)
        self.assertIn('c2', dict(state.kinds))
        self.assertEqual(searches, state.searches)


class Turning(Host):
    """A host where ``s2`` turns class every ``every`` periods (0: never)."""

    def __init__(self, effect, every, **kw):
        super(Turning, self).__init__(effect, vms=('c1', 's1', 's2'), **kw)
        self.every, self.n = every, 0

    def period(self, config):
        self.n += 1
        if self.every and self.n % self.every == 0:
            self.serving ^= {'s2'}
        return super(Turning, self).period(config)


class TestTurning(testtools.TestCase):
    """A tenant whose class turns faster than a search ends."""

    effect = staticmethod(weighted(lambda f: 1.2, lambda f: 1.0))
    params = dataclasses.replace(P, rungs=(), retention=False, smt=False,
                                 max_candidates=3)

    def test_a_class_that_turns_every_period_is_no_change(self):
        # settling periods count: else every other period is skipped and
        # a turn in step with the probes would look confirmed
        state = run(Turning(self.effect, 1), 1500, self.params)
        self.assertEqual((1, 0), (state.searches, state.interrupted))

    def test_a_search_cut_short_waits_bare_while_the_class_turns(self):
        host = Turning(self.effect, 7)
        seen = []
        state = run(host, 600, self.params, every=lambda s: seen.append(
            (s.in_force != vocabulary.BARE, s.wait, s.interrupted)))
        self.assertEqual(0, state.searches)
        # cut short once (seven periods in), then bare from there on:
        # a turn every seven periods never lets the classes hold for 20
        probed = [i for i, (p, _w, _n) in enumerate(seen) if p]
        self.assertLess(max(probed), 7 + self.params.confirm_periods)
        self.assertEqual(1, state.interrupted)
        self.assertIn('s2 changed before the search ended',
                      state.verdicts[0].reason)
        # once it holds a class, a search begins after the wait and ends
        host.every = 0
        state = run(host, 1500, self.params)
        self.assertEqual((1, 0, 0), (state.searches, state.interrupted,
                                     state.wait))

    def test_each_search_cut_short_in_a_row_doubles_the_wait(self):
        host = Turning(self.effect, 0)
        state, waits = search.State(), []
        for _ in range(3):
            while state.phase != search.PROBE:
                state = run(host, 1, self.params, state)
            host.serving ^= {'s2'}
            while not state.wait:
                state = run(host, 1, self.params, state)
            waits.append(state.wait)
        self.assertEqual([20, 40, 80], waits)
        # however many in a row, the wait is bounded
        state = search._wait(dataclasses.replace(state, interrupted=30),
                             self.params, state.kinds)
        self.assertEqual(20 * 2 ** search.MAX_DOUBLINGS, state.wait)
        # a search that ends starts the count again
        state = run(host, 3000, self.params, state)
        self.assertEqual((1, 0), (state.searches, state.interrupted))


class TestAA(testtools.TestCase):
    """Pure noise: no candidate does anything."""

    def test_false_keep_rate_at_most_alpha(self):
        # 200 whole searches on a host where nothing has an effect; the
        # stated level is alpha = 0.1 over every candidate a search opens
        params = dataclasses.replace(P, max_candidates=6, max_pairs=16)
        kept = 0
        for seed in range(200):
            host = Host(lambda c: {}, noise=0.03, seed=seed)
            state = search.State()
            for _ in range(4000):
                stats, served = host.period(state.in_force)
                state = search.step(state, params, stats, served)
                if state.searches:
                    break
            self.assertTrue(state.searches, seed)
            kept += state.kept != vocabulary.BARE
        self.assertLessEqual(kept / 200.0, params.alpha)


class TestLadderNull(testtools.TestCase):
    """A ladder whose steps hold up until they cost just past a floor."""

    def test_a_step_past_the_floor_is_kept_at_most_at_alpha(self):
        # x1.25 to x1.75 cost c1 nothing, x2 and up 3.5% (0.965, under its
        # 0.97 floor): each shown step passes its level up the ladder, so
        # the steps past the floor are tried at the first one's level; over
        # 200 seeded searches they are kept at most alpha of the time
        params = dataclasses.replace(P, rungs=(), retention=False,
                                     smt=False, max_pairs=16)
        past = first = 0
        for seed in range(200):
            host = Host(weighted(lambda f: 1.1 if f > 1.0 else 1.0,
                                 lambda f: 1.0 if f < 2.0 else 0.965),
                        noise=0.02, seed=seed)
            state = search.State()
            while not state.searches:
                stats, served = host.period(state.in_force)
                state = search.step(state, params, stats, served)
            past += (state.kept.value(vocabulary.WEIGHT, 's1') or 1) >= 2
            first += any(c.value == 2.0 and c.spends == 1
                         for c in state.candidates)
        self.assertLessEqual(past / 200.0, params.alpha)
        # (the ladder was shown up to x2 in most searches)
        self.assertGreater(first, 100)


class TestNull(testtools.TestCase):
    """A/A streams, no true effect: a keep is a false keep."""

    def _false_keeps(self, runs, index, prior=False, noise=0.03, seed=11):
        # one candidate at its opening ``index``, fed pure noise pair by
        # pair as a visit would, up to its whole budget; a prior variance,
        # as the search pools it, from a sibling candidate's pairs
        rng = random.Random(seed)
        kept = 0
        for _ in range(runs):
            sibling = bounds.Running()
            for _pair in range(P.max_pairs):
                sibling = sibling.add(rng.gauss(0.0, noise))
            pooled = sibling.m2 / (sibling.n - 1)
            c = search.Candidate(BARE_PLUS, index)
            for _pair in range(P.max_pairs):
                logs = {vm: rng.gauss(0.0, noise) for vm, _k in KINDS}
                c = search.add_pair(c, KINDS, P, logs, logs['s1'], prior=(
                    {vm: pooled for vm in (None, 'c1', 's1')}
                    if prior else None))
                if c.safe or c.status == search.OUT:
                    break
            kept += c.safe
        return kept

    def test_a_candidate_is_kept_at_most_at_its_level(self):
        # the first candidate's level is alpha / 2: over 4000 seeded A/A
        # streams, read after every pair, the keeps stay below it (the
        # plug-in variance and the pooled prior alike)
        level = bounds.spent(1, P.alpha)
        for prior in (False, True):
            self.assertLessEqual(self._false_keeps(2000, 1, prior) / 2000.0,
                                 level, prior)

    def test_later_candidates_are_held_to_less(self):
        self.assertLessEqual(self._false_keeps(1000, 4, seed=12) / 1000.0,
                             bounds.spent(4, P.alpha))


class TestProperties(testtools.TestCase):
    """What holds for every draw, not only for the chosen ones."""

    @settings(max_examples=200, deadline=None)
    @given(st.floats(0.5, 0.9), st.floats(0.0, 0.02),
           st.integers(0, 2 ** 32 - 1), st.integers(1, 24))
    def test_a_vm_well_below_its_floor_is_eliminated_never_kept(
            self, ratio, noise, seed, index):
        rng = random.Random(seed)
        c = search.Candidate(BARE_PLUS, index)
        for _ in range(P.max_pairs):
            logs = {'c1': math.log(ratio) + rng.gauss(0, noise),
                    's1': math.log(1.3) + rng.gauss(0, noise)}
            c = search.add_pair(c, KINDS, P, logs, logs['s1'])
            self.assertFalse(c.safe)
            if c.status == search.OUT:
                break
        self.assertEqual((search.OUT, True), (c.status, c.lost))
        self.assertIn('c1 at most', c.reason)

    @settings(max_examples=200, deadline=None)
    @given(st.lists(st.floats(-1.0, 1.0), min_size=2, max_size=64),
           st.sampled_from([0.001, 0.01, 0.1]),
           st.one_of(st.none(), st.floats(1e-6, 1.0)))
    def test_the_interval_holds_the_mean_and_narrows_with_confidence(
            self, xs, alpha, prior):
        run = bounds.Running()
        for x in xs:
            run = run.add(x)
        lo, hi = bounds.interval(run, alpha, prior)
        self.assertTrue(lo < run.mean < hi)
        self.assertAlmostEqual(run.mean, (lo + hi) / 2.0)
        wider = bounds.interval(run, alpha / 10.0, prior)
        self.assertTrue(wider[0] < lo and hi < wider[1])

    @settings(max_examples=100, deadline=None)
    @given(st.sampled_from([0.01, 0.1, 0.4]), st.integers(1, 5000))
    def test_levels_never_spend_more_than_alpha(self, alpha, n):
        self.assertLessEqual(
            math.fsum(bounds.spent(i, alpha) for i in range(1, n + 1)),
            alpha)

    @settings(max_examples=200, deadline=None)
    @given(st.lists(st.floats(-0.5, 0.5), max_size=200),
           st.floats(0.0, 20.0))
    def test_the_detector_is_still_within_its_drift_and_alarms_past_it(
            self, zs, step):
        cusum = bounds.Cusum()
        for z in zs:
            cusum, alarm = cusum.step(z, P.cusum_drift, P.cusum_threshold)
            self.assertFalse(alarm)
        self.assertEqual(bounds.Cusum(), cusum)
        # a step of the threshold beyond the drift, either way, at once
        shift = P.cusum_threshold + P.cusum_drift + step
        for z in (shift, -shift):
            self.assertTrue(cusum.step(z, P.cusum_drift,
                                       P.cusum_threshold)[1])


class TestHoldout(testtools.TestCase):

    def _kept(self, seed=1):
        gain = {'on': 1.2}
        host = Host(
            lambda c: {'s1': gain['on']} if c != vocabulary.BARE else {},
            noise=0.02, seed=seed)
        params = dataclasses.replace(P, max_candidates=3, rungs=(),
                                     retention=False, smt=False)
        state = run(host, 1500, params)
        self.assertNotEqual(vocabulary.BARE, state.kept)
        return host, params, state, gain

    def test_a_step_change_is_found_within_a_few_holdouts(self):
        host, params, state, gain = self._kept()
        n0 = state.holdout_gain.n
        gain['on'] = 1.0            # the kept weight stops paying
        found = []

        def alarm(s):
            if s.finished is not None and s.finished.mechanism == 'holdout':
                found.append(s.holdout_gain.n)
        run(host, 40 * params.holdout_every, params, state, every=alarm)
        self.assertTrue(found, 'no alarm')
        # a step of about six pair sds (1.2 to 1.0 at 2% noise a period):
        # CUSUM's ARL1 is two holdouts; stated: within five
        self.assertLessEqual(found[0] - n0, 5)
        self.assertLessEqual(arl(6.0, P.cusum_drift, P.cusum_threshold),
                             3.0)

    def test_no_alarm_on_stationary_noise(self):
        # the detector's stated false-alarm rate: an ARL0 of thousands of
        # holdouts per VM; 150 holdouts on each of 5 hosts raise none
        self.assertGreater(arl(0.0, P.cusum_drift, P.cusum_threshold) / 2,
                           4000)
        for seed in (1, 2, 3, 4, 5):
            host, params, state, _gain = self._kept(seed)
            searches = state.searches
            state = run(host, 150 * (params.holdout_every + 1), params,
                        state)
            self.assertEqual(searches, state.searches)
            self.assertGreaterEqual(state.holdout_gain.n, 100)

    def test_the_holdout_states_its_cost(self):
        _h, _p, state, _g = self._kept()
        state = run(_h, 200, _p, state)
        v = [x for x in state.verdicts if x.mechanism == 'holdout'][0]
        self.assertIn('one period in 20', v.reason)
        self.assertIn('costs', v.reason)


class TestSeam(testtools.TestCase):
    """The engine runs the search; a configuration asking for rules fails."""

    def _conf(self, text=''):
        path = self.useFixture(fixtures.TempDir()).join('agent.conf')
        with open(path, 'w') as f:
            f.write('[vsmtio_agent]\n' + text)
        conf = cfg.ConfigOpts()
        conf_mod.register_opts(conf)
        conf([], project='vsmtio', default_config_files=[path])
        return conf

    def test_the_rules_are_refused_by_name(self):
        # at start: the agent's engine reads the option
        conf = self._conf('guard_procedure = rules\n')
        self.assertRaises(cfg.ConfigFileValueError,
                          engine.Params.from_conf, conf, True, True)
        self.assertEqual('search', self._conf(
            'guard_procedure = search\n').vsmtio_agent.guard_procedure)

    def test_search_runs_through_the_engine(self):
        eng = engine.PolicyEngine(model.Topology.uniform(2),
                                  engine.Params.from_conf(self._conf(),
                                                          True, True))
        self.assertIsInstance(eng.params.guard, search.Params)
        host = Host(lambda c: {})
        for _ in range(5):
            stats, served = host.period(eng.guard.in_force)
            decision = eng.step(stats, served=served)
        self.assertEqual(search.PROBE, eng.guard.phase)
        self.assertEqual({}, eng.untried)
        self.assertTrue(decision.trial)
        self.assertIsNotNone(decision.timeouts)
