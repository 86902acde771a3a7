"""The cost of waking a halted vCPU: the host's idle governor and C-states,
and halt polling's shrink as 5.3 and as current kernels have it."""

import copy

import testtools

from vsmtio_agent.sim import cpuidle
from vsmtio_agent.sim import engine
from vsmtio_agent.sim import kernels
from vsmtio_agent.tests.unit.sim import helpers as h

US = 1e3
# short and long waits, as DBT1's random HDD reads give
BIMODAL = [x * US for x in (40, 1500, 45, 1400, 50, 1600, 42, 1550)]
SKX = {'governor': 'menu', 'per_core': True, 'states': [
    {'name': 'C1', 'exit_latency_us': 2, 'target_residency_us': 2},
    {'name': 'C1E', 'exit_latency_us': 10, 'target_residency_us': 20},
    {'name': 'C6', 'exit_latency_us': 133, 'target_residency_us': 600}]}


def governor(**over):
    spec = dict(SKX, **over)
    return cpuidle.IdleGovernor(spec, next_timer_ns=4000 * US)


class TestMenuGovernor(testtools.TestCase):

    def test_a_regular_pattern_is_predicted_by_its_mean(self):
        self.assertAlmostEqual(
            100 * US, cpuidle.typical_interval([100 * US] * 8))

    def test_an_outlier_is_dropped(self):
        hist = [50 * US] * 7 + [5000 * US]
        self.assertAlmostEqual(50 * US, cpuidle.typical_interval(hist))

    def test_no_pattern_in_a_wide_spread(self):
        self.assertIsNone(cpuidle.typical_interval(BIMODAL))

    def test_short_idles_pick_a_shallow_state(self):
        g = governor()
        self.assertEqual('C1', g.names[g.select([5 * US] * 8)])
        self.assertEqual('C1E', g.names[g.select([100 * US] * 8)])

    def test_long_idles_or_no_history_pick_the_deepest(self):
        # without a pattern the next timer (the guest's 4 ms tick) bounds
        # the prediction, and C6's 600 us residency fits
        g = governor()
        self.assertEqual('C6', g.names[g.select([2000 * US] * 8)])
        self.assertEqual('C6', g.names[g.select([])])
        self.assertEqual('C6', g.names[g.select(BIMODAL)])

    def test_shallowest_governor_always_takes_the_first(self):
        g = governor(governor='shallowest')
        self.assertEqual(0, g.select([2000 * US] * 8))

    def test_a_busy_sibling_keeps_the_core_awake(self):
        g = governor()
        c6 = g.names.index('C6')
        self.assertEqual(133 * US, g.exit_latency(c6, sibling_idle=True))
        self.assertEqual(2 * US, g.exit_latency(c6, sibling_idle=False))
        g = governor(per_core=False)
        self.assertEqual(133 * US, g.exit_latency(c6, sibling_idle=False))

    def test_an_unknown_governor_is_refused(self):
        self.assertRaises(ValueError, governor, governor='teo')


class TestWakeCost(testtools.TestCase):
    """One I/O vCPU alone on a core: its every wake leaves a C-state."""

    WAIT_US = 2000

    def loop(self, kernel, idle=None):
        sc = h.tiny([('io', 'io', [0])], workloads={
            'io': h.io_wl(burst_us=20, wait_us=self.WAIT_US)},
            duration=2.0, warmup=0.5)
        sc.costs = copy.deepcopy(sc.costs)
        sc.costs['host_idle'] = idle or SKX
        sim = h.run(sc, kernel, until_s=0.5)
        a = sim.totals()
        sim.advance_to(2.0e9)
        b = sim.totals()
        (v,) = b['vcpus'].values()
        (w,) = a['vcpus'].values()
        return 1.5e9 / (v.requests - w.requests)     # ns per request

    def test_a_long_wait_pays_the_deepest_exit(self):
        deep = self.loop('vanilla')
        shallow = self.loop('vanilla', dict(SKX, governor='shallowest'))
        self.assertAlmostEqual(131 * US, deep - shallow, delta=3 * US)

    def test_polling_pays_no_exit(self):
        vanilla = self.loop('vanilla')
        polling = self.loop('polling')
        self.assertLess(polling, vanilla - 130 * US)
        # the burst and the wait, nothing else
        self.assertAlmostEqual((20 + self.WAIT_US) * US, polling,
                               delta=2 * US)

    def test_the_waking_state_is_idle_to_the_sibling(self):
        # leaving a C-state uses no core resources: a computing sibling
        # runs at solo speed meanwhile
        sc = h.tiny([('io', 'io', [0]), ('cpu', 'cpu', [1])],
                    duration=0.5)
        sim = engine.Simulation(sc, 'vanilla', 1)
        cpu = h.vcpu(sim, 'cpu')
        self.assertEqual(cpu.rate_by[engine.IDLE],
                         cpu.rate_by[engine.WAKING])


class TestHaltPollShrink(testtools.TestCase):

    def window(self, cur, block_ns, shrink):
        return kernels.next_halt_poll_ns(cur, block_ns, 200000, 2, 10000,
                                         shrink)

    def test_linux_5_3_resets_the_window(self):
        self.assertEqual(0, self.window(160000, 300000, shrink=0))

    def test_current_kernels_halve_it(self):
        self.assertEqual(80000, self.window(160000, 300000, shrink=2))

    def test_the_paper_kernel_is_shipped(self):
        sc = h.tiny([('io', 'io', [0])])
        self.assertEqual(0, sc.haltpoll['shrink'])
