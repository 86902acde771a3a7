"""The pure arithmetic of a host's mix."""

import testtools

from vsmtio_contract import workload
from vsmtio_nova import mix
from vsmtio_nova.tests.unit import base

IO = workload.WorkloadClass.IO
CPU = workload.WorkloadClass.CPU
AUTO = workload.WorkloadClass.AUTO


class MixTest(testtools.TestCase):

    def test_share_counts_vcpus_not_instances(self):
        # One 8-vCPU I/O guest against eight 1-vCPU CPU guests: balanced.
        m = mix.Mix().plus(IO, 8)
        for _ in range(8):
            m = m.plus(CPU, 1)
        self.assertEqual(mix.Mix(8, 8), m)
        self.assertEqual(0.5, m.share())

    def test_empty_host_has_no_share(self):
        self.assertIsNone(mix.Mix().share())
        self.assertEqual(0, mix.Mix().classified)

    def test_auto_adds_nothing(self):
        self.assertEqual(mix.Mix(1, 2), mix.Mix(1, 2).plus(AUTO, 4))

    def test_classify_flavor(self):
        self.assertEqual((IO, 4), mix.classify_flavor(base.flavor('io', 4)))
        self.assertEqual((CPU, 1), mix.classify_flavor(base.flavor('cpu', 1)))
        self.assertEqual((AUTO, 2), mix.classify_flavor(base.flavor(None)))

    def test_classify_flavor_with_invalid_class_is_auto(self):
        # Flavors from before microversion 2.86 may hold anything.
        self.assertEqual((AUTO, 2), mix.classify_flavor(base.flavor('gpu')))


class BandTest(testtools.TestCase):
    """The band a host is held to, from its aggregates and the options."""

    def test_no_aggregate_value_gives_the_options(self):
        self.assertEqual(mix.Band(0.1, 0.9), mix.band(set(), set(), 0.1, 0.9))

    def test_the_strictest_of_several_aggregates(self):
        self.assertEqual(mix.Band(0.3, 0.7),
                         mix.band({'0.2', '0.3'}, {'0.7', ' 0.8'}, 0.1, 0.9))

    def test_a_value_not_a_fraction_gives_its_option(self):
        for bad in ('x', 'nan', '1.5', '-0.1'):
            found = mix.band({bad}, {'0.8'}, 0.1, 0.9)
            self.assertEqual(mix.Band(0.1, 0.8, (mix.AGG_MIN,)), found, bad)
        self.assertEqual((0.5, False),
                         mix.aggregate_fraction({'0.2', 'x'}, 0.5, min))

    def test_a_crossed_band_gives_both_options(self):
        self.assertEqual(mix.Band(0.1, 0.9, (), (0.9, 0.1)),
                         mix.band({'0.9'}, {'0.1'}, 0.1, 0.9))

    def test_free_vcpus(self):
        self.assertEqual(31.0, mix.free_vcpus(8, 4.0, 0, 1))
        self.assertEqual(-1.0, mix.free_vcpus(2, None, 2, 1))
        self.assertEqual(-3.0, mix.free_vcpus(None, None, None, 3))


class WeighTest(testtools.TestCase):

    def test_complementing_host_wins(self):
        io_heavy, cpu_heavy = mix.Mix(6, 2), mix.Mix(2, 6)
        self.assertGreater(mix.weigh(cpu_heavy, IO, 2, 0.5),
                           mix.weigh(io_heavy, IO, 2, 0.5))
        self.assertGreater(mix.weigh(io_heavy, CPU, 2, 0.5),
                           mix.weigh(cpu_heavy, CPU, 2, 0.5))

    def test_weight_is_the_decrease_of_the_squared_imbalance(self):
        # Mix(2, 4) is 1 I/O vCPU short of 0.5; 2 more I/O vCPUs land on
        # target: its term falls from 1 / (6 + prior) to 0.
        prior = mix.PRIOR_VCPUS
        self.assertEqual(-1.0, mix.imbalance(mix.Mix(2, 4), 0.5))
        self.assertAlmostEqual(1 / (6 + prior),
                               mix.weigh(mix.Mix(2, 4), IO, 2, 0.5))
        self.assertAlmostEqual(-1 / (2 + prior),
                               mix.weigh(mix.Mix(), IO, 2, 0.5))
        self.assertEqual(0.0, mix.imbalance(mix.Mix(1, 3), 0.25))

    def test_furthest_host_is_repaired_first(self):
        # Scoring where the host ends would send a CPU guest to the host it
        # balances exactly (2, 0), stranding the host an I/O burst filled;
        # scoring what the placement changes repairs the worse host first.
        self.assertGreater(mix.weigh(mix.Mix(18, 0), CPU, 2, 0.5),
                           mix.weigh(mix.Mix(2, 0), CPU, 2, 0.5))

    def test_burst_spreads_over_the_least_loaded_hosts(self):
        self.assertGreater(mix.weigh(mix.Mix(), IO, 2, 0.5),
                           mix.weigh(mix.Mix(2, 0), IO, 2, 0.5))
        self.assertGreater(mix.weigh(mix.Mix(2, 0), IO, 2, 0.5),
                           mix.weigh(mix.Mix(4, 0), IO, 2, 0.5))

    def test_target_moves_the_preference(self):
        # At 0.5 the all-CPU host needs the I/O guest; at 0.9 the mixed
        # host, further below 0.9 in vCPUs, needs it more.
        mixed, cpu_only = mix.Mix(4, 4), mix.Mix(0, 2)
        self.assertGreater(mix.weigh(cpu_only, IO, 2, 0.5),
                           mix.weigh(mixed, IO, 2, 0.5))
        self.assertGreater(mix.weigh(mixed, IO, 2, 0.9),
                           mix.weigh(cpu_only, IO, 2, 0.9))


class ViolatesTest(testtools.TestCase):

    def test_io_above_max_violates(self):
        self.assertEqual((0.8, 0.75),
                         mix.violates(mix.Mix(6, 2), IO, 2, 0.25, 0.75, 4))

    def test_cpu_below_min_violates(self):
        self.assertEqual((0.2, 0.25),
                         mix.violates(mix.Mix(2, 6), CPU, 2, 0.25, 0.75, 4))

    def test_within_bounds_passes(self):
        self.assertIsNone(mix.violates(mix.Mix(4, 4), IO, 2, 0.25, 0.75, 4))
        self.assertIsNone(mix.violates(mix.Mix(4, 4), CPU, 2, 0.25, 0.75, 4))

    def test_exact_bound_passes(self):
        self.assertIsNone(mix.violates(mix.Mix(4, 2), IO, 2, 0.25, 0.75, 4))

    def test_small_host_is_not_judged(self):
        self.assertIsNone(mix.violates(mix.Mix(3, 0), IO, 2, 0.25, 0.75, 4))
        self.assertIsNotNone(
            mix.violates(mix.Mix(4, 0), IO, 2, 0.25, 0.75, 4))

    def test_host_outside_band_takes_what_brings_it_back(self):
        # All-CPU host: an I/O guest raises its share, so it passes even if
        # the share stays below the band; another CPU guest does not.
        self.assertIsNone(mix.violates(mix.Mix(0, 16), IO, 2, 0.25, 0.75, 4))
        self.assertIsNotNone(
            mix.violates(mix.Mix(0, 16), CPU, 2, 0.25, 0.75, 4))

    def test_min_classified_zero_judges_empty_host(self):
        self.assertEqual((1.0, 0.75),
                         mix.violates(mix.Mix(), IO, 2, 0.25, 0.75, 0))

    def test_auto_or_zero_vcpus_never_violates(self):
        self.assertIsNone(mix.violates(mix.Mix(8, 0), AUTO, 2, 0.25, 0.75, 0))
        self.assertIsNone(mix.violates(mix.Mix(8, 0), IO, 0, 0.25, 0.75, 0))

    def test_host_with_room_may_pass_through_the_band(self):
        # 8 I/O vCPUs on a host with 40 more free: 8 of 48 could be I/O.
        self.assertIsNone(
            mix.violates(mix.Mix(6, 0), IO, 2, 0.25, 0.75, 4, free=40))
        self.assertIsNone(
            mix.violates(mix.Mix(0, 6), CPU, 2, 0.25, 0.75, 4, free=40))

    def test_host_without_room_to_come_back_violates(self):
        # 8 I/O vCPUs and 2 free: at best 8/10 > 0.75.
        self.assertEqual(
            (1.0, 0.75),
            mix.violates(mix.Mix(6, 0), IO, 2, 0.25, 0.75, 4, free=2))
        # 8 I/O vCPUs and 3 free: 8/11 <= 0.75, recoverable.
        self.assertIsNone(
            mix.violates(mix.Mix(6, 0), IO, 2, 0.25, 0.75, 4, free=3))
        self.assertEqual(
            (0.0, 0.25),
            mix.violates(mix.Mix(0, 6), CPU, 2, 0.25, 0.75, 4, free=2))


class MeasuredMemoryTest(testtools.TestCase):
    """The last verified class, kept until its own signed expiry."""

    def test_the_later_expiry_wins_and_lapses_on_time(self):
        memory = mix.MeasuredMemory()
        io = workload.Measurement(workload.WorkloadClass.IO, 600, 'h1')
        cpu = workload.Measurement(workload.WorkloadClass.CPU, 660, 'h1')
        self.assertIs(cpu, memory.remember('u', cpu))
        self.assertIs(cpu, memory.remember('u', io))   # put back: ignored
        self.assertIs(cpu, memory.recall('u', 'h1', 659))
        self.assertIsNone(memory.recall('u', 'h2', 0))  # another host's
        self.assertIsNone(memory.recall('u', 'h1', 660))
        self.assertEqual(0, len(memory))

    def test_a_move_to_another_host_replaces_the_old_host_s_class(self):
        memory = mix.MeasuredMemory()
        memory.remember('u', workload.Measurement(
            workload.WorkloadClass.CPU, 900, 'h1'))
        moved = workload.Measurement(workload.WorkloadClass.IO, 700, 'h2')
        self.assertIs(moved, memory.remember('u', moved))
        memory.prune(700)
        self.assertEqual(0, len(memory))

    def test_counted_class_declared_wins_and_unmeasured_is_unsettled(self):
        memory = mix.MeasuredMemory()
        declared = mix.counted_class(workload.WorkloadClass.CPU, 2, 'u',
                                     'io:9:h1:00', 'h1', ['k'], 0, memory)
        self.assertEqual((workload.WorkloadClass.CPU, 2, mix.DECLARED),
                         declared[:3])
        self.assertTrue(declared.settled)
        unmeasured = mix.counted_class(workload.WorkloadClass.AUTO, 2, 'u',
                                       None, 'h1', ['k'], 0, memory)
        self.assertEqual((mix.UNMEASURED, 'it is missing'),
                         unmeasured[2:])
        self.assertFalse(unmeasured.settled)
        # no keys: measured classes are not used, nothing is expected
        self.assertTrue(mix.counted_class(workload.WorkloadClass.AUTO, 2,
                                          'u', None, 'h1', [], 0,
                                          memory).settled)
