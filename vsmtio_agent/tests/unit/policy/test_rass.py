from hypothesis import given
from hypothesis import strategies as st
import testtools

from vsmtio_agent import model
from vsmtio_agent.policy import rass
from vsmtio_agent.tests.unit.policy import helpers

IO, CPU = model.Role.IO, model.Role.CPU


class TestClassify(testtools.TestCase):

    def test_highest_retention_rates_are_io_bound(self):
        st = {helpers.ref(i): helpers.stats(rate)
              for i, rate in enumerate([0.05, 0.6, 0.0, 0.4])}
        roles = rass.classify(st)
        self.assertEqual({helpers.ref(1): IO, helpers.ref(3): IO,
                          helpers.ref(0): CPU, helpers.ref(2): CPU}, roles)

    def test_weights_are_balanced_not_counts(self):
        # One heavy I/O vCPU weighs as much as three light CPU ones.
        st = {helpers.ref(0): helpers.stats(0.7, weight=3072)}
        st.update({helpers.ref(i): helpers.stats(0.1 * i, weight=1024)
                   for i in (1, 2, 3)})
        roles = rass.classify(st)
        self.assertEqual([helpers.ref(0)],
                         [r for r, role in roles.items() if role is IO])

    def test_unmeasured_vcpu_is_never_io_bound_on_a_guess(self):
        st = {helpers.ref(0): helpers.stats(None),
              helpers.ref(1): helpers.stats(0.3)}
        self.assertEqual(CPU, rass.classify(st)[helpers.ref(0)])
        self.assertEqual(IO, rass.classify(st)[helpers.ref(1)])

    def test_vcpus_that_do_not_retain_are_cpu_bound(self):
        # An all-CPU core: ranking alone would make half of it I/O-bound.
        st = {helpers.ref(i): helpers.stats(rate)
              for i, rate in enumerate([0.0, 0.001, 0.0, 0.004])}
        roles = rass.classify(st, min_retention_rate=0.02)
        self.assertEqual({CPU}, set(roles.values()))

    def test_too_few_retaining_vcpus_are_all_io_bound(self):
        st = {helpers.ref(0): helpers.stats(0.5),
              helpers.ref(1): helpers.stats(0.01),
              helpers.ref(2): helpers.stats(0.0),
              helpers.ref(3): helpers.stats(0.0)}
        roles = rass.classify(st, min_retention_rate=0.02)
        self.assertEqual([helpers.ref(0)],
                         [r for r, role in roles.items() if role is IO])

    def test_a_core_that_retains_nothing_ranks_by_idle_entries(self):
        # a host where no retention is kept: the halt exits a second say
        # which vCPUs wait on I/O, and what they compute fits the sibling
        def core(*vcpus):
            return {helpers.ref(i): helpers.stats(
                0.0, halt_rate=rate, utilisation=used)
                for i, (rate, used) in enumerate(vcpus)}
        roles = rass.classify(core((900.0, 0.3), (2.0, 1.0), (600.0, 0.3),
                                   (300.0, 0.3)), 0.005, min_idle_rate=20.0)
        self.assertEqual({helpers.ref(0): IO, helpers.ref(1): CPU,
                          helpers.ref(2): IO, helpers.ref(3): IO}, roles)
        # as many of the most frequent idlers as one hyperthread can run
        # (an unmeasured share counts as a whole one)
        roles = rass.classify(core((900.0, 0.4), (600.0, 0.4), (300.0, 0.4),
                                   (100.0, None)), 0.005, min_idle_rate=20.0)
        self.assertEqual([IO, IO, CPU, CPU],
                         [roles[helpers.ref(i)] for i in range(4)])
        # one that idles less often than the floor is never I/O-bound
        self.assertEqual({CPU}, set(rass.classify(
            core((10.0, 0.1), (1.0, 1.0)), 0.005,
            min_idle_rate=20.0).values()))
        # a vCPU that retained at all makes the rates the evidence
        st = {helpers.ref(0): helpers.stats(0.0, halt_rate=900.0),
              helpers.ref(1): helpers.stats(0.1, halt_rate=0.0)}
        self.assertEqual(
            {helpers.ref(0): CPU, helpers.ref(1): IO},
            rass.classify(st, 0.005, min_idle_rate=20.0))

    def test_idle_entries_keep_the_fairness_invariant(self):
        # idling often is no licence to compute past its share
        st = {helpers.ref(0): helpers.stats(0.0, halt_rate=900.0,
                                            utilisation=0.9),
              helpers.ref(1): helpers.stats(0.0, halt_rate=1.0,
                                            utilisation=1.0),
              helpers.ref(2): helpers.stats(0.0, halt_rate=1.0,
                                            utilisation=1.0)}
        roles = rass.classify(st, 0.005, threads=2, min_idle_rate=20.0)
        self.assertEqual(CPU, roles[helpers.ref(0)])

    def test_uncounted_idle_entries_hold_the_roles(self):
        st = {helpers.ref(0): helpers.stats(0.0),
              helpers.ref(1): helpers.stats(0.0)}
        roles = rass.classify(st, 0.005, held={helpers.ref(0): IO},
                              min_idle_rate=20.0)
        self.assertEqual({helpers.ref(0): IO, helpers.ref(1): CPU}, roles)

    def test_single_vcpu_keeps_both_siblings(self):
        roles = rass.classify({helpers.ref(0): helpers.stats(0.9)})
        self.assertEqual({helpers.ref(0): CPU}, roles)


class TestPlacement(testtools.TestCase):

    core = model.Core(2, (2, 26))

    def test_io_bound_vcpus_own_the_io_sibling(self):
        p = rass.placement(self.core, IO)
        self.assertEqual((26, (26,)), (p.home, p.threads))

    def test_cpu_bound_vcpus_may_borrow_the_io_sibling(self):
        p = rass.placement(self.core, CPU)
        self.assertEqual((2, (2, 26)), (p.home, p.threads))

    def test_core_without_smt(self):
        p = rass.placement(model.Core(0, (0,)), IO)
        self.assertEqual((0, (0,)), (p.home, p.threads))


class TestSymbiosis(testtools.TestCase):

    compute = model.CpiStack(base=0.8, miss=0.1, waiting=0.1)
    memory = model.CpiStack(base=0.2, miss=2.5, waiting=0.3)

    def test_memory_bound_partner_co_runs_better(self):
        self.assertGreater(rass.symbiosis(self.compute, self.memory),
                           rass.symbiosis(self.compute, self.compute))

    def test_co_running_beats_time_slicing_but_not_two_cores(self):
        for a, b in ((self.compute, self.compute),
                     (self.compute, self.memory)):
            self.assertGreater(rass.symbiosis(a, b), 1.0)
            self.assertLess(rass.symbiosis(a, b), 2.0)

    def test_symmetric(self):
        self.assertAlmostEqual(rass.symbiosis(self.compute, self.memory),
                               rass.symbiosis(self.memory, self.compute))

    def test_pick_the_best_partner(self):
        got = rass.pick_symbiotic(
            self.compute, [('a', self.compute), ('b', self.memory),
                           ('c', None)])
        self.assertEqual('b', got)

    def test_unknown_stacks_keep_the_scheduler_order(self):
        self.assertEqual('x', rass.pick_symbiotic(
            None, [('x', self.compute), ('y', self.memory)]))
        self.assertEqual('k', rass.pick_symbiotic(
            self.compute, [('u', None), ('k', self.compute)]))
        self.assertIsNone(rass.pick_symbiotic(self.compute, []))


class TestFairness(testtools.TestCase):
    """No vCPU gets the I/O sibling by shaping its waits."""

    def test_a_vcpu_computing_beyond_its_share_is_cpu_bound(self):
        # four vCPUs on a two-thread core: a fair share is half a thread.
        # The gamer computes 80% of the time between short retained waits.
        st = {
            helpers.ref(0): helpers.stats(0.15, utilisation=0.95),  # gamer
            helpers.ref(1): helpers.stats(0.30, utilisation=0.40),  # I/O
            helpers.ref(2): helpers.stats(0.0, utilisation=1.0),
            helpers.ref(3): helpers.stats(0.0, utilisation=1.0)}
        self.assertEqual(IO, rass.classify(st)[helpers.ref(0)])
        fair = rass.classify(st, threads=2)
        self.assertEqual(CPU, fair[helpers.ref(0)])
        self.assertEqual(IO, fair[helpers.ref(1)])

    def test_shares_follow_weights(self):
        st = {helpers.ref(0): helpers.stats(0.2, weight=2048,
                                            utilisation=0.9),
              helpers.ref(1): helpers.stats(0.0, weight=1024),
              helpers.ref(2): helpers.stats(0.0, weight=1024)}
        shares = rass.fair_share(st, 2)
        self.assertEqual(1.0, shares[helpers.ref(0)])
        # 0.9 - 0.2 = 0.7 of a thread computed: within a share of 1.0
        self.assertEqual(IO, rass.classify(st, threads=2)[helpers.ref(0)])

    @given(st.lists(st.tuples(st.floats(0.0, 1.0), st.floats(0.0, 1.0),
                              st.integers(2, 88761)), min_size=1,
                    max_size=8))
    def test_invariant(self, vcpus):
        stats = {helpers.ref(i): helpers.stats(r, weight=w,
                                               utilisation=min(1.0, r + c))
                 for i, (r, c, w) in enumerate(vcpus)}
        shares = rass.fair_share(stats, 2)
        for ref, role in rass.classify(stats, threads=2).items():
            if role is IO:
                self.assertLessEqual(stats[ref].compute_share,
                                     shares[ref] + 1e-12)
