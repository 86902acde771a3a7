"""Figures over seeds (sim/intervals.py)."""

import random

import testtools

from vsmtio_sim import intervals


class TestInterval(testtools.TestCase):

    def test_mean_and_t_interval(self):
        m, low, high = intervals.interval([1.0, 2.0, 3.0])
        self.assertEqual(2.0, m)
        # t(0.975, 2) = 4.303; sd 1; sqrt(3)
        self.assertAlmostEqual(4.3027 / 3 ** 0.5, high - m, places=3)
        self.assertAlmostEqual(m - low, high - m)

    def test_one_value_has_no_interval_none_no_mean(self):
        self.assertEqual((1.5, None, None), intervals.interval([1.5, None]))
        self.assertEqual((None, None, None), intervals.interval([]))

    def test_coverage_under_a_known_mean(self):
        # about 95% of intervals over five draws hold the true mean
        rng = random.Random(7)
        held = 0
        for _ in range(2000):
            _m, low, high = intervals.interval(
                [rng.gauss(1.0, 0.05) for _ in range(5)])
            held += low <= 1.0 <= high
        self.assertGreater(held / 2000, 0.93)
        self.assertLess(held / 2000, 0.97)

    def test_paired_difference_over_common_seeds_only(self):
        a = {1: 1.10, 2: 1.20, 3: 1.00, 4: None, 9: 5.0}
        b = {1: 1.00, 2: 1.10, 3: 0.90, 4: 1.0}
        m, low, high, n = intervals.paired(a, b)
        self.assertEqual(3, n)
        self.assertAlmostEqual(0.1, m)
        # the same shift in every seed: the interval is that shift
        self.assertAlmostEqual(0.1, low)
        self.assertAlmostEqual(0.1, high)

    def test_text(self):
        self.assertEqual('1.000 [0.900, 1.100]',
                         intervals.text(1.0, 0.9, 1.1))
        self.assertEqual('1.000', intervals.text(1.0, None, None))
        self.assertEqual('-', intervals.text(None, None, None))
