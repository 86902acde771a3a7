"""The simulator's input models: distributions and the SMT co-run rule."""

import random

import hypothesis
from hypothesis import strategies as st
import testtools

from vsmtio_sim import calibration
from vsmtio_sim import cpi
from vsmtio_sim import scenario
from vsmtio_sim import workloads


class TestDistributions(testtools.TestCase):

    SPECS = (
        {'dist': 'const', 'mean_us': 40},
        {'dist': 'exponential', 'mean_us': 250},
        {'dist': 'lognormal', 'mean_us': 300, 'sigma': 0.8},
        {'dist': 'uniform', 'low_us': 10, 'high_us': 30},
        {'dist': 'mixture', 'parts': [
            {'weight': 0.9, 'dist': 'exponential', 'mean_us': 60},
            {'weight': 0.1, 'dist': 'lognormal', 'mean_us': 5000,
             'sigma': 0.5}]},
    )

    def test_sample_means_match_the_declared_means(self):
        for spec in self.SPECS:
            draw = workloads.sampler(spec, random.Random(3))
            n = 20000
            mean = sum(draw() for _ in range(n)) / n
            self.assertAlmostEqual(1.0, mean / workloads.mean_ns(spec),
                                   delta=0.05, msg=spec['dist'])

    def test_same_seed_same_draws(self):
        spec = self.SPECS[4]
        a = workloads.sampler(spec, random.Random(7))
        b = workloads.sampler(spec, random.Random(7))
        self.assertEqual([a() for _ in range(50)], [b() for _ in range(50)])


class TestCorun(testtools.TestCase):

    pair = {'min': 1.0, 'max': 1.3}

    def combined(self, a, b):
        return (cpi.corun_factor(a, b, self.pair)
                + cpi.corun_factor(b, a, self.pair))

    @hypothesis.given(
        st.floats(0.01, 10), st.floats(0.0, 10), st.floats(0.01, 10),
        st.floats(0.0, 10))
    def test_every_pair_stays_inside_the_source_range(self, ba, ma, bb, mb):
        # misses contend too, no pair beats the cited gains
        speed = self.combined((ba, ma), (bb, mb))
        self.assertGreaterEqual(speed, 1.0 - 1e-9)
        self.assertLessEqual(speed, 1.3 + 1e-9)

    def test_memory_bound_pairs_contend_too(self):
        memory = (0.1, 2.0)
        issue = (0.8, 0.05)
        self.assertGreater(self.combined(memory, issue),
                           self.combined(memory, memory))
        self.assertGreater(self.combined(memory, issue),
                           self.combined(issue, issue))

    def test_the_range_ends_are_reached(self):
        self.assertAlmostEqual(1.3, self.combined((1.0, 0.0), (1e-9, 1.0)),
                               places=6)
        self.assertAlmostEqual(1.0, self.combined((1.0, 0.0), (1.0, 0.0)))

    def test_a_range_outside_one_to_two_is_refused(self):
        self.assertRaises(ValueError, cpi.corun_factor, (0.6, 0.4),
                          (0.6, 0.4), {'min': 1.2, 'max': 2.5})
        self.assertRaises(ValueError, cpi.corun_factor, (0.6, 0.4),
                          (0.6, 0.4), {'min': 1.3, 'max': 1.2})

    def test_refill_is_capped_by_the_cache_share(self):
        self.assertEqual(0.0, cpi.warmup_ns(0, 4096, 1280, 2.8))
        small = cpi.warmup_ns(256, 4096, 1280, 2.8)
        self.assertAlmostEqual(256 * 1024 / 2.8, small)
        self.assertEqual(cpi.warmup_ns(1280, 4096, 1280, 2.8),
                         cpi.warmup_ns(8192, 8192, 1280, 2.8))


class TestCalibration(testtools.TestCase):
    """The shipped I/O loops follow the paper's vanilla profile."""

    def setUp(self):
        super().setUp()
        self.library = scenario._data('workloads.yaml')
        self.pairs = calibration.pairs()
        self.every = list(self.pairs.values())

    def test_shipped_loops_match_the_derivation(self):
        self.assertEqual([], calibration.check(self.library))

    def test_an_edited_loop_is_reported(self):
        self.library['hbase'] = dict(self.library['hbase'],
                                     burst={'dist': 'const', 'mean_us': 10})
        problems = calibration.check(self.library)
        self.assertEqual(1, len(problems))
        self.assertIn('hbase: burst mean is 10.0 us', problems[0])

    def test_loop_length_follows_the_switch_rate(self):
        # HBase: 4 switches per loop (its completions land on another
        # vCPU), 48 I/O vCPUs, 23.4k switches/s: a 8.2 ms loop, 49.5% of it
        # waiting (Table 7: 901.8 of 1823.0 ms).
        burst, device = calibration.loop_us(self.pairs['hbase'], self.every)
        self.assertAlmostEqual(4 * 48 / 23.4e3 * 1e6 * 901.8 / 1823.0,
                               device, delta=0.5)
        # the burst is the run share shrunk by the co-run slowdown
        run = 4 * 48 / 23.4e3 * 1e6 * 266.2 / 1823.0
        self.assertTrue(0.5 * run < burst < run, (burst, run))

    def test_a_row_without_table7_uses_the_mean_shares(self):
        shares = calibration.shares(self.pairs['hdfs'], self.every)
        self.assertAlmostEqual(1.0, sum(shares), places=9)
        rows = [calibration.shares(sc, self.every)
                for sc in self.every if 'per_request_ms' in sc.paper]
        self.assertEqual(7, len(rows))
        for i in range(3):
            self.assertTrue(min(r[i] for r in rows) <= shares[i]
                            <= max(r[i] for r in rows))
