"""The simulator's input models: distributions and the SMT co-run rule."""

import random

import testtools

from vsmtio_agent.sim import cpi
from vsmtio_agent.sim import workloads


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

    def test_reference_pair_gives_the_input_speedup(self):
        k = cpi.contention(1.25, 0.6, 0.4)
        f = cpi.corun_factor((0.6, 0.4), (0.6, 0.4), k)
        self.assertAlmostEqual(1.25, 2 * f, places=9)

    def test_memory_bound_pairs_corun_better_than_issue_bound(self):
        k = cpi.contention(1.25, 0.6, 0.4)
        memory = (0.6, 1.4)
        issue = (0.55, 0.25)
        self.assertGreater(cpi.corun_factor(memory, memory, k),
                           cpi.corun_factor(issue, issue, k))
        for pair in ((memory, issue), (issue, memory)):
            f = cpi.corun_factor(*pair, k)
            self.assertTrue(0.5 < f < 1.0, f)

    def test_speedup_outside_one_to_two_is_refused(self):
        self.assertRaises(ValueError, cpi.contention, 2.5, 0.6, 0.4)
