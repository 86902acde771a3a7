import testtools

from vsmtio_agent import model
from vsmtio_agent.policy import adjuster
from vsmtio_agent.tests.unit.policy import helpers

R = helpers.ref


class TestPlanSwaps(testtools.TestCase):

    def test_swaps_middle_vcpus_of_homogeneous_and_most_different_cores(self):
        # Core 0: CPU-bound; core 1: I/O-bound; core 2: mildly I/O.
        assignment = {R(0): 0, R(1): 0, R(2): 0,
                      R(3): 1, R(4): 1, R(5): 1,
                      R(6): 2, R(7): 2}
        rates = {R(0): 0.0, R(1): 0.01, R(2): 0.02,
                 R(3): 0.7, R(4): 0.6, R(5): 0.5,
                 R(6): 0.3, R(7): 0.0}
        swaps = adjuster.plan_swaps(assignment, rates, std_threshold=0.1,
                                    min_mean_gap=0.1, max_swaps=1)
        # Core 1 (std 0.08) and core 0 (std 0.008) are homogeneous; core 0
        # is the most; core 1's mean differs most from it. Middle-ranked:
        # R(1) on core 0 and R(4) on core 1.
        self.assertEqual((model.Swap(a=R(1), core_a=0, b=R(4), core_b=1),),
                         swaps)
        after = adjuster.apply_swaps(assignment, swaps)
        self.assertEqual(1, after[R(1)])
        self.assertEqual(0, after[R(4)])

    def test_mixed_cores_are_left_alone(self):
        assignment = {R(0): 0, R(1): 0, R(2): 1, R(3): 1}
        rates = {R(0): 0.0, R(1): 0.6, R(2): 0.5, R(3): 0.01}
        self.assertEqual((), adjuster.plan_swaps(assignment, rates, 0.1,
                                                 0.1, 4))

    def test_all_alike_host_is_left_alone(self):
        # The paper's 0:96 control: every core CPU-bound. Swapping would
        # only churn, so the mean gap guard stops it.
        assignment = {R(i): i // 2 for i in range(8)}
        rates = {R(i): 0.001 * i for i in range(8)}
        self.assertEqual((), adjuster.plan_swaps(assignment, rates, 0.1,
                                                 0.1, 4))

    def test_unmeasured_vcpus_never_move(self):
        assignment = {R(0): 0, R(1): 0, R(2): 1, R(3): 1}
        rates = {R(0): 0.0, R(1): 0.0, R(2): None, R(3): 0.8}
        swaps = adjuster.plan_swaps(assignment, rates, 0.1, 0.1, 1)
        self.assertEqual(1, len(swaps))
        self.assertNotIn(R(2), (swaps[0].a, swaps[0].b))

    def test_each_core_swaps_once_per_period(self):
        assignment = {R(i): i // 2 for i in range(8)}
        rates = {R(0): 0, R(1): 0, R(2): 0, R(3): 0,
                 R(4): .8, R(5): .8, R(6): .8, R(7): .8}
        swaps = adjuster.plan_swaps(assignment, rates, 0.1, 0.1, 4)
        self.assertEqual(2, len(swaps))
        cores = [c for s in swaps for c in (s.core_a, s.core_b)]
        self.assertEqual(len(cores), len(set(cores)))

    def test_disabled_with_zero_swaps(self):
        assignment = {R(0): 0, R(1): 0, R(2): 1, R(3): 1}
        rates = {R(0): 0, R(1): 0, R(2): .9, R(3): .9}
        self.assertEqual((), adjuster.plan_swaps(assignment, rates, 0.1,
                                                 0.1, 0))

    def test_rates_beyond_the_float_bounds_are_judged_exactly(self):
        # squares of 1e300 overflow a float deviation: core 0 is still
        # found homogeneous (exact deviation 0) and mixed with core 1
        assignment = {R(0): 0, R(1): 0, R(2): 1, R(3): 1}
        rates = {R(0): 1e300, R(1): 1e300, R(2): 0.0, R(3): 0.5}
        self.assertEqual(
            (model.Swap(a=R(1), core_a=0, b=R(2), core_b=1),),
            adjuster.plan_swaps(assignment, rates, 0.1, 0.1, 2))
