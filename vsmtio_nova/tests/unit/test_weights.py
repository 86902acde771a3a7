"""WorkloadMixWeigher through nova's real weigh handler and HostStates."""

from oslo_utils import uuidutils

from nova.scheduler import weights as nova_weights
from nova import test

from vsmtio_nova.scheduler import weights
from vsmtio_nova.tests.unit import base


class WorkloadMixWeigherTest(test.NoDBTestCase):

    def setUp(self):
        super().setUp()
        self.handler = nova_weights.HostWeightHandler()
        self.weighers = [cls() for cls in self.handler.get_matching_classes(
            ['vsmtio_nova.scheduler.weights.WorkloadMixWeigher'])]

    def weighed(self, hosts, spec):
        """``{host name: final weight}`` from nova's handler."""
        return {w.obj.host: w.weight for w in
                self.handler.get_weighed_objects(self.weighers, hosts, spec)}

    def best(self, hosts, spec):
        return self.handler.get_weighed_objects(
            self.weighers, hosts, spec)[0].obj.host

    def test_loaded_by_class_path(self):
        self.assertIsInstance(self.weighers[0], weights.WorkloadMixWeigher)

    def test_io_goes_to_cpu_heavy_host_and_cpu_to_io_heavy(self):
        # One more guest of the other class balances either heavy host.
        hosts = [base.loaded('io_heavy', io=3, cpu=2),
                 base.loaded('balanced', io=2, cpu=2),
                 base.loaded('cpu_heavy', io=2, cpu=3)]
        self.assertEqual('cpu_heavy', self.best(hosts, base.spec('io')))
        self.assertEqual('io_heavy', self.best(hosts, base.spec('cpu')))

    def test_weights_are_ordered_by_what_the_placement_repairs(self):
        # Imbalance (I/O vCPUs above half the classified): a -3 -> -2,
        # b -2 -> -1, c +2 -> +3. The host furthest below the target
        # gains most.
        hosts = [base.loaded('a', io=0, cpu=3),
                 base.loaded('b', io=1, cpu=3),
                 base.loaded('c', io=2, cpu=0)]
        w = self.weighed(hosts, base.spec('io', 2))
        self.assertEqual(1.0, w['a'])
        self.assertEqual(0.0, w['c'])
        self.assertTrue(0.0 < w['b'] < 1.0)

    def test_counts_vcpus_not_instances(self):
        # 'few' has one 8-vCPU CPU guest, 'many' four 1-vCPU CPU guests: an
        # 8-vCPU I/O guest balances 'few' exactly.
        few = base.host('few', [base.instance('cpu', 8)])
        many = base.host('many', [base.instance('cpu', 1) for _ in range(4)])
        self.assertEqual('few', self.best([many, few], base.spec('io', 8)))

    def test_auto_request_is_neutral(self):
        hosts = [base.loaded('a', io=3), base.loaded('b', cpu=3)]
        self.assertEqual({'a': 0.0, 'b': 0.0},
                         self.weighed(hosts, base.spec(None)))
        self.assertEqual([0.0, 0.0], self.weighers[0].weigh_objects(
            [nova_weights.WeighedHost(h, 0.0) for h in hosts],
            base.spec('auto')))

    def test_auto_instances_on_host_are_not_counted(self):
        # 'auto' guests are unknown: 'b' is, for the scheduler, all-CPU.
        a = base.loaded('a', io=1, cpu=1)
        b = base.host('b', [base.instance('cpu', 2),
                            base.instance(None, 2), base.instance(None, 2)])
        self.assertEqual('b', self.best([a, b], base.spec('io', 2)))

    def test_empty_host_beats_homogeneous_host(self):
        hosts = [base.loaded('same', io=2), base.host('empty')]
        self.assertEqual('empty', self.best(hosts, base.spec('io')))

    @staticmethod
    def small_and_large():
        # At target 0.5 an I/O guest belongs on the all-CPU 'b'; at 0.9 on
        # the mixed 'a', further below 0.9 in vCPUs.
        return [base.loaded('a', io=4, cpu=4, vcpus=1),
                base.loaded('b', cpu=2, vcpus=1)]

    def test_aggregate_target_override(self):
        hosts = self.small_and_large()
        self.assertEqual('b', self.best(hosts, base.spec('io')))
        for h in hosts:
            h.aggregates = [base.aggregate(
                **{'vsmtio:target_io_fraction': '0.9'})]
        self.assertEqual('a', self.best(hosts, base.spec('io')))

    def test_config_target(self):
        hosts = self.small_and_large()
        self.flags(target_io_fraction=0.9, group='vsmtio')
        self.assertEqual('a', self.best(hosts, base.spec('io')))

    def test_bad_aggregate_target_falls_back_to_config(self):
        hosts = self.small_and_large()
        for h in hosts:
            h.aggregates = [base.aggregate(
                **{'vsmtio:target_io_fraction': '1.5'})]
        self.assertEqual('b', self.best(hosts, base.spec('io')))
        self.assertIn('is not a fraction in [0, 1]', self.stdlog.logger.output)

    def test_multiplier_from_config_and_aggregate(self):
        h = base.host('h')
        weigher = self.weighers[0]
        self.assertEqual(1.0, weigher.weight_multiplier(h))
        self.flags(weight_multiplier=3.0, group='vsmtio')
        self.assertEqual(3.0, weigher.weight_multiplier(h))
        h.aggregates = [base.aggregate(**{'vsmtio:weight_multiplier': '0.5'})]
        self.assertEqual(0.5, weigher.weight_multiplier(h))
        w = self.weighed([h, base.loaded('other', io=4)], base.spec('io'))
        self.assertEqual(0.5, w['h'])

    def test_aggregate_multiplier_not_a_finite_bounded_number(self):
        h = base.host('h')
        self.flags(weight_multiplier=2.0, group='vsmtio')
        for value in ('nan', 'inf', '-1', '1e7'):
            h.aggregates = [base.aggregate(
                **{'vsmtio:weight_multiplier': value})]
            self.assertEqual(2.0, self.weighers[0].weight_multiplier(h))
        self.assertIn('vsmtio:weight_multiplier=nan of host h is not a '
                      'number in [0, 1000000.0]', self.stdlog.logger.output)
        w = self.weighed([h, base.loaded('other', io=4)], base.spec('io'))
        self.assertEqual(2.0, w['h'])

    def test_multi_create_counts_earlier_instances_of_the_request(self):
        # nova calls consume_from_request on the chosen host between the
        # instances of a multi-create; `instances` is left alone.
        # Each host holds one 2-vCPU CPU guest: the first 2-vCPU I/O guest
        # balances either, the second must go to the other one.
        hosts = [base.loaded('a', cpu=1), base.loaded('b', cpu=1)]
        spec = base.spec('io', 2, num_instances=2)
        first = self.best(hosts, spec)
        chosen = next(h for h in hosts if h.host == first)
        chosen.consume_from_request(spec)
        spec.instance_uuid = uuidutils.generate_uuid()
        self.assertNotEqual(first, self.best(hosts, spec))
        # Unaware of the first placement, both hosts would look alike and
        # the weights would tie.
        w = self.weighed(hosts, spec)
        self.assertEqual(0.0, w[first])
        self.assertEqual(1.0, w[({'a', 'b'} - {first}).pop()])

    def test_host_with_unknown_instances_is_weighed_as_empty(self):
        # A stub without a flavor on a host state without a cell: nothing
        # can load it, so the host counts as holding nothing.
        unknown = base.host('unknown', [base.instance(with_flavor=False)] * 3)
        empty = base.host('empty')
        io_heavy = base.loaded('io_heavy', io=3)
        w = self.weighed([unknown, empty, io_heavy], base.spec('io'))
        self.assertEqual(w['empty'], w['unknown'])
        self.assertGreater(w['unknown'], w['io_heavy'])
