"""The guard keeps a mechanism only where the probes show it helps."""

import random

from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
import testtools

from vsmtio_agent.policy import guard
from vsmtio_agent.tests.unit.policy import helpers

R = helpers.ref
P = guard.Params(pairs=8, retest_periods=20)


class Host(object):
    """A host whose class throughputs depend on the mechanisms in force.

    ``effects`` maps a mechanism to its (CPU, I/O) factor; the factors of
    the mechanisms in force multiply. Each period adds ``noise`` (relative,
    Gaussian) from a seeded generator.
    """

    def __init__(self, effects, noise=0.02, seed=1, io=True, pmu=True):
        self.effects = effects
        self.noise = noise
        self.rng = random.Random(seed)
        self.io = io
        self.pmu = pmu

    def stats(self, in_force):
        cpu = io = 1.0
        for m in in_force:
            c, i = self.effects.get(m, (1.0, 1.0))
            cpu *= c
            io *= i

        def jitter():
            return 1.0 + self.rng.gauss(0.0, self.noise)
        out = {R(0): helpers.stats(instruction_rate=(
            1e9 * cpu * jitter() if self.pmu else None), halt_rate=0.0)}
        if self.io:
            out[R(1)] = helpers.stats(halt_rate=500.0 * io * jitter(),
                                      instruction_rate=1e8)
        return out


def run(host, periods, params=P, state=None):
    state = state or guard.start()
    for _ in range(periods):
        state = guard.step(state, params, host.stats(state.in_force))
    return state


class TestGuard(testtools.TestCase):

    def test_keeps_what_helps_both_classes(self):
        # each wider split serves I/O better than the narrower one
        host = Host({guard.RETENTION: (1.02, 1.10),
                     guard.SPLIT: (1.0, 1.2), guard.BORROW: (1.05, 1.02),
                     guard.SPLIT_QUARTER: (1.0, 1.1),
                     guard.SPLIT_HALF: (1.0, 1.1),
                     guard.SPLIT_ALL: (1.0, 1.1)})
        state = run(host, 200)
        self.assertEqual(set(guard.MECHANISMS), set(state.kept))
        self.assertTrue(all(v.kept for v in state.verdicts))

    def test_drops_what_costs_the_cpu_side(self):
        # RASS's split: I/O x2.4 but CPU 0.82 (what the simulator measured)
        host = Host({guard.RETENTION: (1.0, 1.05),
                     guard.SPLIT: (0.82, 2.4)})
        state = run(host, 200)
        self.assertEqual({guard.RETENTION}, set(state.kept))
        v = state.verdict(guard.SPLIT)
        self.assertFalse(v.kept)
        self.assertIn('CPU', v.reason)
        self.assertAlmostEqual(0.82, v.cpu_ratio, delta=0.03)

    def test_the_objective_is_the_operators(self):
        host = Host({guard.RETENTION: (1.0, 1.05),
                     guard.SPLIT: (0.82, 2.4)})
        lenient = guard.Params(pairs=8, retest_periods=20, cpu_min=0.8)
        self.assertIn(guard.SPLIT, run(host, 200, lenient).kept)

    def test_a_loss_waits_the_longest_back_off_at_once(self):
        host = Host({guard.RETENTION: (0.8, 1.0)}, noise=0.01)
        cap = P.retest_periods * P.max_backoff
        state = guard.start()
        while state.verdict(guard.RETENTION) is None:
            state = guard.step(state, P, host.stats(state.in_force))
        self.assertTrue(state.verdict(guard.RETENTION).loses)
        self.assertEqual(((guard.RETENTION, cap, 0),), state.backoff)
        self.assertTrue(guard.retries_periodic(state, P))
        # and not retried before it
        for _ in range(cap - 1):
            state = guard.step(state, P, host.stats(state.in_force))
            self.assertNotIn(guard.RETENTION, state.in_force)

    def test_a_cpu_side_not_shown_to_keep_its_objective_is_no_loss(self):
        # CPU 0.979 for I/O x1.5, too noisy for the lower bound to clear
        # 0.97: not kept, but retried on the short back-off (a noisier
        # probe is no loss shown)
        rng = random.Random(3)
        samples = tuple((a, 1e9 * (0.979 if a else 1.0)
                         * (1 + rng.gauss(0, 0.03)),
                         500.0 * (1.5 if a else 1.0), False)
                        for a in guard.ABBA * (P.pairs // 2))
        v = guard.judge(samples, P, True)
        self.assertFalse(v.kept)
        self.assertFalse(v.loses)
        self.assertIn('a class may lose: CPU', v.reason)
        self.assertIn('not shown >= 0.97', v.reason)

    def test_a_kept_mechanism_below_the_objective_goes_at_two_strikes(self):
        # kept while it cost nothing; then its CPU side settles at 0.965:
        # inside the retest's slack (0.96), below the objective (0.97)
        host = Host({guard.RETENTION: (1.0, 1.2), guard.SPLIT: (0.8, 1.0)},
                    noise=0.002)
        state = run(host, 60)
        self.assertEqual({guard.RETENTION}, set(state.kept))
        host.effects[guard.RETENTION] = (0.965, 1.2)
        verdicts = []
        for _ in range(400):
            state = guard.step(state, P, host.stats(state.in_force))
            v = state.verdict(guard.RETENTION)
            if not verdicts or v is not verdicts[-1]:
                verdicts.append(v)
            if guard.RETENTION not in state.kept:
                break
        self.assertNotIn(guard.RETENTION, state.kept)
        first, second = verdicts[-2:]
        self.assertIn('falls short of the objective: CPU', first.reason)
        self.assertIn('kept until the next retest', first.reason)
        self.assertIn('falls short of the objective: CPU', second.reason)
        self.assertFalse(second.kept)
        self.assertFalse(second.loses)

    def test_a_block_says_what_it_tested_and_its_raw_outcome(self):
        # the engine anchors the retention timeout on these: a strike is
        # kept for one more retest, but its test failed
        host = Host({guard.RETENTION: (1.0, 1.2), guard.SPLIT: (0.8, 1.0)},
                    noise=0.002)
        state = guard.start()
        blocks = []
        while len(blocks) < 4:
            state = guard.step(state, P, host.stats(state.in_force))
            if state.finished is not None:
                blocks.append(state.finished)
            if len(blocks) == 3:
                host.effects[guard.RETENTION] = (0.965, 1.2)
        added, split, retest = blocks[:3]
        self.assertEqual((frozenset({guard.RETENTION}), frozenset(), True),
                         (added.a, added.b, added.passed))
        self.assertTrue(added.tests_retention)
        self.assertFalse(split.passed)
        self.assertTrue(split.tests_retention)     # the split's B is bare
        self.assertEqual((frozenset({guard.RETENTION}), frozenset(), True),
                         (retest.a, retest.b, retest.passed))
        strike = blocks[3]
        self.assertFalse(strike.passed)
        self.assertIn(guard.RETENTION, state.kept)      # kept once
        self.assertIn('kept until the next retest',
                      state.verdict(guard.RETENTION).reason)
        # a block is reported once, in the step that ends it
        while state.finished is None:
            state = guard.step(state, P, host.stats(state.in_force))
        state = guard.step(state, P, host.stats(state.in_force))
        self.assertIsNone(state.finished)

    def test_a_drop_has_what_stays_kept_retested_at_once(self):
        # the split costs the CPU side 5% that borrowing gives back: kept
        # together; when borrowing starts to cost I/O its retest drops it,
        # and the split, verified with borrowing, is retested against the
        # bare host right away instead of in its turn
        host = Host({guard.RETENTION: (1.0, 1.1), guard.SPLIT: (0.95, 1.3),
                     guard.BORROW: (1.05, 1.0),
                     guard.SPLIT_QUARTER: (0.8, 1.0)}, noise=0.002)
        state = run(host, 150)
        self.assertEqual({guard.RETENTION, guard.SPLIT, guard.BORROW},
                         set(state.kept))
        host.effects[guard.BORROW] = (1.05, 0.95)
        while guard.BORROW in state.kept:
            state = guard.step(state, P, host.stats(state.in_force))
        self.assertFalse(state.verdict(guard.BORROW).kept)
        self.assertTrue(state.recheck)
        state = guard.step(state, P, host.stats(state.in_force))
        self.assertEqual((guard.PROBE, guard.SPLIT, False),
                         (state.phase, state.candidate, state.adding))
        self.assertEqual(frozenset(), guard._arms(state)[1])
        while state.probing:
            state = guard.step(state, P, host.stats(state.in_force))
        self.assertEqual({guard.RETENTION}, set(state.kept))
        self.assertIn('CPU 0.95', state.verdict(guard.SPLIT).reason)

    def test_retries_become_periodic_at_the_longest_back_off(self):
        # retention shows no gain: dropped, retried after 20, 40, 80,
        # then every 160 periods (retest_periods * max_backoff)
        host = Host({guard.RETENTION: (1.0, 1.0)}, noise=0.01)
        cap = P.retest_periods * P.max_backoff
        state, seen = guard.start(), []
        for _ in range(600):
            state = guard.step(state, P, host.stats(state.in_force))
            if state.verdict(guard.RETENTION) is not None:
                # from its first drop on
                seen.append(guard.retries_periodic(state, P))
        self.assertNotIn(guard.RETENTION, state.kept)
        waits = {m: p for m, p, _ in state.backoff}
        self.assertEqual(cap, waits[guard.RETENTION])
        self.assertTrue(seen[-1])
        # not while the back-off was still growing: its first three
        # retries at least
        first = seen.index(True)
        self.assertGreater(first, 20 + 40 + 80)
        self.assertTrue(all(seen[first:]))

    def test_only_what_may_be_tried_must_wait_the_longest(self):
        # the split waits on a short back-off, but retention (which it
        # needs) is not kept, so it cannot be retried: that is periodic
        state = guard.State(backoff=((guard.RETENTION, 160, 0),
                                     (guard.SPLIT, 20, 0)))
        self.assertTrue(guard.retries_periodic(state, P))
        kept = guard.State(kept=frozenset({guard.RETENTION}),
                           backoff=((guard.SPLIT, 20, 0),))
        self.assertFalse(guard.retries_periodic(kept, P))

    def test_drops_what_helps_no_class(self):
        state = run(Host({}), 300)
        self.assertEqual(frozenset(), state.kept)
        self.assertIn('no class gains', state.verdict(guard.RETENTION)
                      .reason)

    def test_the_split_widens_while_the_cpu_objective_holds(self):
        # each step serves I/O 10% better for 1% (then 4%) of the CPU
        # side's throughput: the eighth and the quarter together keep
        # 0.98 of the bare host, the half would leave 0.94
        host = Host({guard.RETENTION: (1.0, 1.05),
                     guard.SPLIT: (0.99, 1.1), guard.BORROW: (1.0, 1.0),
                     guard.SPLIT_QUARTER: (0.99, 1.1),
                     guard.SPLIT_HALF: (0.96, 1.1),
                     guard.SPLIT_ALL: (0.9, 1.2)}, noise=0.01)
        state = run(host, 300)
        self.assertEqual(0.25, state.split_share)
        self.assertIn(guard.SPLIT_QUARTER, state.kept)
        v = state.verdict(guard.SPLIT_HALF)
        self.assertFalse(v.kept)
        self.assertIn('CPU', v.reason)
        # judged against the bare host, not the quarter: 0.99^2 * 0.96
        self.assertAlmostEqual(0.94, v.cpu_ratio, delta=0.02)

    def test_a_wider_split_must_serve_better_than_the_narrower(self):
        host = Host({guard.RETENTION: (1.0, 1.05), guard.SPLIT: (1.0, 1.3)},
                    noise=0.01)
        state = run(host, 300)
        self.assertEqual(0.125, state.split_share)
        v = state.verdict(guard.SPLIT_QUARTER)
        self.assertFalse(v.kept)
        self.assertIn('no class gains significantly over split', v.reason)

    def test_a_failed_retest_narrows_the_split_by_one_step(self):
        effects = {guard.RETENTION: (1.0, 1.05), guard.SPLIT: (1.0, 1.2),
                   guard.SPLIT_QUARTER: (1.0, 1.2),
                   guard.SPLIT_HALF: (1.0, 1.2)}
        host = Host(effects, noise=0.01)
        state = run(host, 150)
        self.assertEqual(0.5, state.split_share)
        effects[guard.SPLIT_HALF] = (0.9, 1.2)      # the load changed
        state = run(host, 120, state=state)
        self.assertNotIn(guard.SPLIT_HALF, state.kept)
        self.assertEqual(0.25, guard.split_share(state.kept))
        self.assertIn(guard.RETENTION, state.kept)

    def test_a_mechanism_waits_for_what_it_needs(self):
        # borrowing alone would help, but never without the split
        host = Host({guard.RETENTION: (1.0, 1.1), guard.SPLIT: (0.5, 1.0),
                     guard.BORROW: (1.5, 1.0)})
        state = run(host, 300)
        self.assertNotIn(guard.BORROW, state.kept)
        self.assertNotIn(guard.SPLIT, state.kept)

    def test_blind_cpu_side_keeps_nothing_and_never_probes(self):
        # no PMU: nothing shows CPU-bound vCPUs do not lose, and a probe's
        # A arms would move host knobs for a trial nothing can judge
        host = Host({guard.RETENTION: (0.5, 2.0)}, pmu=False)
        state = guard.start()
        for _ in range(200):
            state = guard.step(state, P, host.stats(state.in_force))
            self.assertEqual(frozenset(), state.in_force)
            self.assertFalse(state.probing)
        self.assertEqual(frozenset(), state.kept)
        self.assertIn('cannot be measured',
                      state.verdict(guard.RETENTION).reason)

    def test_a_kept_mechanism_is_dropped_when_it_starts_to_hurt(self):
        effects = {guard.RETENTION: (1.0, 1.1)}
        host = Host(effects)
        state = run(host, 60)
        self.assertIn(guard.RETENTION, state.kept)
        effects[guard.RETENTION] = (0.8, 1.1)   # the workload changed
        state = run(host, 200, state=state)
        self.assertNotIn(guard.RETENTION, state.kept)

    def test_probes_alternate_in_abba_order(self):
        state = guard.step(guard.start(), P, Host({}).stats(frozenset()))
        self.assertTrue(state.probing)
        seen = []
        for _ in range(8):
            seen.append(guard.RETENTION in state.in_force)
            state = guard.step(state, P, Host({}).stats(state.in_force))
        self.assertEqual([True, False, False, True] * 2, seen)

    def test_a_clear_loss_ends_the_probe_early(self):
        # the split where I/O is light: half the I/O in every A period.
        # Three pairs show it beyond doubt; the other five are not run.
        host = Host({guard.RETENTION: (1.0, 0.5)}, noise=0.01)
        state = guard.step(guard.start(), P, host.stats(frozenset()))
        periods = 0
        while state.probing:
            state = guard.step(state, P, host.stats(state.in_force))
            periods += 1
        self.assertEqual(6, periods)
        v = state.verdict(guard.RETENTION)
        self.assertFalse(v.kept)
        self.assertTrue(v.loses)
        self.assertAlmostEqual(0.5, v.io_ratio, delta=0.02)

    def test_a_gain_is_never_shown_early(self):
        host = Host({guard.RETENTION: (1.0, 1.5)}, noise=0.01)
        state = guard.step(guard.start(), P, host.stats(frozenset()))
        periods = 0
        while state.verdict(guard.RETENTION) is None:
            state = guard.step(state, P, host.stats(state.in_force))
            periods += 1
        self.assertEqual(2 * P.pairs, periods)
        self.assertIn(guard.RETENTION, state.kept)

    def test_a_retry_must_clear_the_objective_by_the_hysteresis(self):
        # one probe's samples, I/O up 0.5% with no noise: enough for a
        # first addition, not for a retry of what was dropped before
        samples = tuple((a, 1e9, 500.0 * (1.005 if a else 1.0), False)
                        for a in guard.ABBA * (P.pairs // 2))
        self.assertTrue(guard.judge(samples, P, True).kept)
        v = guard.judge(samples, P, True, retry=True)
        self.assertFalse(v.kept)
        self.assertFalse(v.loses)
        self.assertIn('a retry must clear the objective', v.reason)
        # the CPU side's margin is its lower confidence bound, as for any
        # addition: a split at CPU 0.979 for I/O x1.5 comes back
        samples = tuple((a, 1e9 * (0.979 if a else 1.0),
                         500.0 * (1.5 if a else 1.0), False)
                        for a in guard.ABBA * (P.pairs // 2))
        self.assertTrue(guard.judge(samples, P, True, retry=True).kept)

    @settings(max_examples=10, deadline=None)
    @given(st.floats(0.97, 0.985), st.integers(0, 1000))
    def test_a_small_loss_is_rarely_back_in_force(self, io, seed):
        # property: a mechanism that gains CPU but costs I/O a little (more
        # than the hysteresis band, 1%, around the objective: inside it
        # the probes cannot tell) is not flipped back in by every probe
        # that lands above the objective: in force a tenth of the time at
        # most
        host = Host({guard.RETENTION: (1.02, io)}, seed=seed)
        state = run(host, 100)
        kept = 0
        for _ in range(1000):
            state = guard.step(state, P, host.stats(state.in_force))
            kept += guard.RETENTION in state.kept
        self.assertLess(kept, 100)

    def test_bad_params_are_refused(self):
        self.assertRaises(ValueError, guard.Params, pairs=3)
        self.assertRaises(ValueError, guard.Params, confidence=1.0)

    @settings(max_examples=30, deadline=None)
    @given(st.floats(0.5, 0.95), st.floats(0.8, 3.0), st.integers(0, 1000))
    def test_never_keeps_a_cpu_loss_beyond_the_objective(
            self, cpu, io, seed):
        # property: whatever it does for I/O, a mechanism that costs the
        # CPU side more than the objective allows is not kept at the end
        host = Host({guard.RETENTION: (cpu, io)}, seed=seed)
        state = run(host, 150)
        self.assertNotIn(guard.RETENTION, state.kept)

    @settings(max_examples=30, deadline=None)
    @given(st.floats(0.5, 0.97), st.integers(0, 1000))
    def test_never_keeps_an_io_loss(self, io, seed):
        # beyond what the probes can resolve: the hysteresis (1%) and the
        # periods' noise (2% here) hide smaller losses
        host = Host({guard.RETENTION: (1.3, io)}, seed=seed)
        state = run(host, 150)
        self.assertNotIn(guard.RETENTION, state.kept)
