import testtools

from vsmtio_agent import model
from vsmtio_agent.policy import ltcr
from vsmtio_agent.tests.unit.policy import helpers

US = 1000
CPU, IO = model.Role.CPU, model.Role.IO


def perf(cpu_ipc, io_freq):
    return {helpers.ref(0): (CPU, cpu_ipc), helpers.ref(1): (IO, io_freq)}


class TestAlgorithm1(testtools.TestCase):

    bounds = ltcr.Bounds(initial_ns=200 * US, min_ns=10 * US,
                         max_ns=5000 * US, reschedule_cost_ns=50 * US)

    def run_periods(self, state, *perfs):
        seen = []
        for p in perfs:
            state = ltcr.step(state, self.bounds, p)
            seen.append((state.phase, state.desired_ns, state.effective_ns))
        return state, seen

    def test_follows_algorithm_1(self):
        state = ltcr.start(self.bounds)
        self.assertEqual((ltcr.Phase.BASE_UP, 200 * US, 200 * US),
                         (state.phase, state.desired_ns, state.effective_ns))
        _, seen = self.run_periods(
            state,
            perf(1.0, 100),   # baseline at T_d: next try T_d * 1.1
            perf(1.1, 110),   # both faster: keep 220 us, start over
            perf(1.1, 110),   # baseline at 220: try 242
            perf(1.2, 100),   # I/O slower: keep 220, measure again
            perf(1.0, 100),   # baseline at 220: try 198
            perf(1.01, 101),  # both faster: keep 198
        )
        self.assertEqual([
            (ltcr.Phase.TRY_UP, 200 * US, 220 * US),
            (ltcr.Phase.BASE_UP, 220 * US, 220 * US),
            (ltcr.Phase.TRY_UP, 220 * US, 242 * US),
            (ltcr.Phase.BASE_DOWN, 220 * US, 220 * US),
            (ltcr.Phase.TRY_DOWN, 220 * US, 198 * US),
            (ltcr.Phase.BASE_UP, 198 * US, 198 * US),
        ], seen)

    def test_equal_performance_is_not_a_speed_up(self):
        state, seen = self.run_periods(ltcr.start(self.bounds),
                                       perf(1.0, 100), perf(1.0, 100))
        self.assertEqual((ltcr.Phase.BASE_DOWN, 200 * US, 200 * US),
                         seen[-1])

    def test_a_class_without_measurements_vetoes(self):
        # No PMU: CPU-bound vCPUs have no IPC, so the timeout never moves
        # on the I/O side's evidence alone; and no trial starts either (a
        # trial would move the host's knob for nothing)
        state, seen = self.run_periods(ltcr.start(self.bounds),
                                       perf(None, 100), perf(None, 200))
        self.assertEqual(200 * US, state.desired_ns)
        self.assertEqual(ltcr.Phase.BASE_UP, state.phase)
        self.assertEqual([200 * US, 200 * US], [s[2] for s in seen])

    def test_initial_timeout_is_at_least_a_reschedule(self):
        b = ltcr.Bounds(initial_ns=20 * US, min_ns=10 * US,
                        max_ns=5000 * US, reschedule_cost_ns=80 * US)
        self.assertEqual(80 * US, ltcr.start(b).effective_ns)

    def test_bounds_hold_at_the_top(self):
        b = ltcr.Bounds(initial_ns=4900 * US, min_ns=10 * US,
                        max_ns=5000 * US, reschedule_cost_ns=1 * US)
        state = ltcr.start(b)
        state = ltcr.step(state, b, perf(1.0, 100))
        self.assertEqual(5000 * US, state.effective_ns)
        state = ltcr.step(state, b, perf(2.0, 200))
        self.assertEqual(5000 * US, state.desired_ns)

    def test_keeps_growing_while_both_classes_speed_up(self):
        state, _ = self.run_periods(ltcr.start(self.bounds),
                                    *[perf(1.0, 100), perf(1.1, 110)] * 10)
        self.assertGreater(state.desired_ns, 500 * US)

    def test_bad_bounds_are_refused(self):
        self.assertRaises(ValueError, ltcr.Bounds, 100, 50, 40, 1)
        self.assertRaises(ValueError, ltcr.Bounds, 100, 0, 40, 1)

    def test_speedups_compare_like_with_like(self):
        base = {helpers.ref(0): (CPU, 1.0), helpers.ref(1): (IO, 0)}
        trial = {helpers.ref(0): (IO, 2.0), helpers.ref(1): (IO, 50)}
        # vCPU 0 changed role, vCPU 1 had a zero baseline: nothing to
        # compare on either side.
        self.assertEqual({CPU: None, IO: None},
                         ltcr.mean_speedups(base, trial))


class TestThroughputMeasure(testtools.TestCase):
    """The product's LTCR judges classes by the work they get done."""

    bounds = ltcr.Bounds(initial_ns=200 * US, min_ns=10 * US,
                         max_ns=5000 * US, reschedule_cost_ns=50 * US)

    def stats(self, ipc, instr, retentions, halts):
        return {helpers.ref(0): helpers.stats(ipc=ipc,
                                              instruction_rate=instr),
                helpers.ref(1): helpers.stats(retention_frequency=retentions,
                                              halt_rate=halts)}

    roles = {helpers.ref(0): CPU, helpers.ref(1): IO}

    def trial(self, measure, base, trial):
        state = ltcr.start(self.bounds)
        state = ltcr.step(state, self.bounds,
                          ltcr.performance(base, self.roles, measure),
                          measure)
        return ltcr.step(state, self.bounds,
                         ltcr.performance(trial, self.roles, measure),
                         measure)

    def test_ipc_up_while_instructions_fall_is_refused(self):
        # a longer retention leaves the CPU-bound vCPU a resting sibling
        # (IPC up) but less time (fewer instructions)
        base = self.stats(ipc=1.0, instr=1e9, retentions=100, halts=100)
        trial = self.stats(ipc=1.1, instr=0.9e9, retentions=120, halts=101)
        self.assertEqual(220 * US, self.trial(ltcr.PAPER, base,
                                              trial).desired_ns)
        self.assertEqual(200 * US, self.trial(ltcr.THROUGHPUT, base,
                                              trial).desired_ns)

    def test_more_work_on_both_sides_is_kept(self):
        base = self.stats(ipc=1.0, instr=1e9, retentions=100, halts=100)
        trial = self.stats(ipc=1.0, instr=1.01e9, retentions=100, halts=102)
        self.assertEqual(220 * US, self.trial(ltcr.THROUGHPUT, base,
                                              trial).desired_ns)

    def test_class_totals_not_vcpu_means(self):
        # one idle-ish vCPU doubling does not outvote the class's total
        a, b = helpers.ref(0), helpers.ref(2)
        base = {a: (CPU, 1e9), b: (CPU, 1e6)}
        trial = {a: (CPU, 0.9e9), b: (CPU, 2e6)}
        self.assertAlmostEqual((0.9e9 + 2e6) / (1e9 + 1e6),
                               ltcr.total_speedups(base, trial)[CPU])
        self.assertGreater(ltcr.mean_speedups(base, trial)[CPU], 1.0)

    def test_unknown_measure_is_refused(self):
        self.assertRaises(ValueError, ltcr.performance, {}, {}, 'ipc')


class TestNoUnjudgeableTrials(testtools.TestCase):
    """A host without IPC/instructions never moves its knob."""

    bounds = ltcr.Bounds(initial_ns=200 * US, min_ns=10 * US,
                         max_ns=5000 * US, reschedule_cost_ns=50 * US)

    def test_no_trial_without_both_classes(self):
        state = ltcr.start(self.bounds)
        for _ in range(10):
            state = ltcr.step(state, self.bounds, perf(None, 100))
            self.assertEqual(200 * US, state.effective_ns)
        state = ltcr.step(state, self.bounds, perf(1.0, 100))
        self.assertEqual(220 * US, state.effective_ns)
