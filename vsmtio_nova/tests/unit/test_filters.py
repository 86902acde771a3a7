"""WorkloadMixFilter through nova's real filter handler and HostStates."""

import logging

import fixtures
from oslo_utils import uuidutils

from nova.scheduler import filters as nova_filters
from nova import test

from vsmtio_nova.scheduler import filters
from vsmtio_nova.tests.unit import base


class WorkloadMixFilterTest(test.NoDBTestCase):

    def setUp(self):
        super().setUp()
        # Debug logs are part of the contract: capture ours.
        self.log = self.useFixture(fixtures.FakeLogger(
            name='vsmtio_nova', level=logging.DEBUG,
            format='%(levelname)s %(message)s'))
        self.flags(min_io_fraction=0.25, max_io_fraction=0.75,
                   filter_min_classified_vcpus=4, group='vsmtio')
        self.handler = nova_filters.HostFilterHandler()
        classes = self.handler.get_matching_classes(
            ['vsmtio_nova.scheduler.filters.WorkloadMixFilter'])
        self.filters = [cls() for cls in classes]

    def passing(self, hosts, spec, index=0):
        return sorted(h.host for h in self.handler.get_filtered_objects(
            self.filters, hosts, spec, index))

    def test_loaded_by_class_path(self):
        self.assertIsInstance(self.filters[0], filters.WorkloadMixFilter)
        self.assertFalse(filters.WorkloadMixFilter.RUN_ON_REBUILD)

    def test_rejects_io_above_max_and_cpu_below_min(self):
        hosts = [base.loaded('io_heavy', io=3, cpu=1),   # io -> 8/10
                 base.loaded('balanced', io=2, cpu=2),   # io -> 6/10
                 base.loaded('cpu_heavy', io=1, cpu=3)]  # cpu -> 2/10
        self.assertEqual(['balanced', 'cpu_heavy'],
                         self.passing(hosts, base.spec('io')))
        self.assertEqual(['balanced', 'io_heavy'],
                         self.passing(hosts, base.spec('cpu')))

    def test_host_passes_alone_judges_the_same(self):
        # nova calls filter_all; host_passes stays usable on its own.
        filt = self.filters[0]
        self.assertFalse(filt.host_passes(base.loaded('io_heavy', io=3, cpu=1),
                                          base.spec('io')))
        self.assertTrue(filt.host_passes(base.loaded('balanced', io=2, cpu=2),
                                         base.spec('io')))

    def test_rejection_is_logged_with_numbers(self):
        self.passing([base.loaded('io_heavy', io=3, cpu=1)], base.spec('io'))
        out = self.log.output
        self.assertIn('fails WorkloadMixFilter: 2 io vCPUs would move its '
                      'I/O share from 0.750 (io=6 cpu=2 vCPUs) to 0.800, '
                      'beyond 0.750 of [0.250, 0.750]', out)

    def test_refusals_are_one_info_line_per_request(self):
        # The operator's default log level shows which hosts were turned
        # away and with what numbers: once per request, not per host.
        uuid = uuidutils.generate_uuid()
        hosts = [base.loaded('io_heavy', io=3, cpu=1),
                 base.loaded('balanced', io=2, cpu=2),
                 base.loaded('io_full', io=4, cpu=0)]
        self.assertEqual(['balanced'], self.passing(
            hosts, base.spec('io', instance_uuid=uuid)))
        info = [line for line in self.log.output.splitlines()
                if line.startswith('INFO ')]
        self.assertEqual(1, len(info), self.log.output)
        self.assertIn('WorkloadMixFilter refused 2 of 3 hosts for instance '
                      '%s (2 io vCPUs)' % uuid, info[0])
        for host in ('io_heavy io:cpu 6:2 vCPUs, I/O share 0.750 -> 0.800 '
                     'outside [0.250, 0.750]',
                     'io_full io:cpu 8:0 vCPUs, I/O share 1.000 -> 1.000 '
                     'outside [0.250, 0.750]'):
            self.assertIn(host, info[0])
        self.assertNotIn('balanced', info[0])
        # the per-host reasoning stays at debug
        self.assertEqual(2, len([line for line in self.log.output.splitlines()
                                 if line.startswith('DEBUG ')
                                 and 'fails WorkloadMixFilter' in line]))

    def test_no_info_line_when_every_host_passes(self):
        self.passing([base.loaded('balanced', io=2, cpu=2)],
                     base.spec('io'))
        self.assertNotIn('INFO ', self.log.output)

    def test_small_host_is_not_judged(self):
        # 2 classified vCPUs < filter_min_classified_vcpus = 4.
        self.assertEqual(['small'], self.passing(
            [base.loaded('small', io=1)], base.spec('io')))
        self.flags(filter_min_classified_vcpus=2, group='vsmtio')
        self.assertEqual([], self.passing(
            [base.loaded('small', io=1)], base.spec('io')))

    def test_host_outside_band_takes_a_guest_that_brings_it_back(self):
        cpu_only = base.loaded('cpu_only', cpu=8)
        self.assertEqual(['cpu_only'], self.passing([cpu_only],
                                                    base.spec('io')))
        self.assertEqual([], self.passing([cpu_only], base.spec('cpu')))

    def test_host_with_room_to_come_back_passes(self):
        # 6 I/O vCPUs and 2 CPU vCPUs (3 / 1 instances of 2 vCPUs): another
        # I/O guest takes the share to 0.8, beyond 0.75. With 12 vCPUs in
        # all, 2 stay free: at best 8 / 12 = 0.67, so the host can come
        # back; with 10, none stay free and it cannot.
        roomy = base.loaded('roomy', io=3, cpu=1, vcpus_total=12,
                            vcpus_used=8, cpu_allocation_ratio=1.0)
        full = base.loaded('full', io=3, cpu=1, vcpus_total=10,
                           vcpus_used=8, cpu_allocation_ratio=1.0)
        self.assertEqual(['roomy'], self.passing([roomy, full],
                                                 base.spec('io')))
        # The allocation ratio counts: 10 vCPUs at 2.0 leave room.
        full.cpu_allocation_ratio = 2.0
        self.assertEqual(['full', 'roomy'], self.passing([roomy, full],
                                                         base.spec('io')))

    def test_auto_request_passes_everywhere(self):
        hosts = [base.loaded('io_only', io=8), base.loaded('cpu_only', cpu=8)]
        self.assertEqual(['cpu_only', 'io_only'],
                         self.passing(hosts, base.spec(None)))

    def test_unknown_host_fails_open_with_reason(self):
        unknown = base.host('unknown', [base.instance(with_flavor=False)] * 8)
        self.assertEqual(['unknown'], self.passing([unknown],
                                                   base.spec('io')))
        self.assertIn('passes WorkloadMixFilter unjudged (fail open): its '
                      'mix is unknown: the host state has no cell',
                      self.log.output)

    def test_not_run_on_rebuild(self):
        io_only = base.loaded('io_only', io=8)
        spec = base.spec('io', scheduler_hints={
            '_nova_check_type': ['rebuild']})
        self.assertEqual(['io_only'], self.passing([io_only], spec))
        self.assertEqual([], self.passing([io_only], base.spec('io')))

    def test_aggregate_bounds_override(self):
        host = base.loaded('h', io=3, cpu=1)     # io -> 8/10
        self.assertEqual([], self.passing([host], base.spec('io')))
        host.aggregates = [base.aggregate(**{
            'vsmtio:min_io_fraction': '0.5', 'vsmtio:max_io_fraction': '0.9'})]
        self.assertEqual(['h'], self.passing([host], base.spec('io')))
        # ... and the raised minimum refuses a big CPU guest: 6/14 < 0.5.
        self.assertEqual(['h'], self.passing([host], base.spec('cpu')))
        self.assertEqual([], self.passing([host], base.spec('cpu', 6)))

    def test_conflicting_aggregates_give_the_strictest_band(self):
        host = base.loaded('h', io=3, cpu=1)     # io -> 8/10
        host.aggregates = [
            base.aggregate(**{'vsmtio:max_io_fraction': '0.9'}),
            base.aggregate(**{'vsmtio:max_io_fraction': '0.7'})]
        self.assertEqual([], self.passing([host], base.spec('io')))

    def test_inverted_aggregate_band_falls_back_to_options(self):
        host = base.loaded('h', io=3, cpu=1)
        host.aggregates = [base.aggregate(**{
            'vsmtio:min_io_fraction': '0.9', 'vsmtio:max_io_fraction': '0.1'})]
        self.assertEqual([], self.passing([host], base.spec('io')))
        self.assertIn('min above max', self.log.output)

    def test_inverted_options_refuse_to_load(self):
        self.flags(min_io_fraction=0.8, max_io_fraction=0.2, group='vsmtio')
        e = self.assertRaises(ValueError, filters.WorkloadMixFilter)
        self.assertIn('min_io_fraction (0.8) exceeds max_io_fraction (0.2)',
                      str(e))

    def test_multi_create_counts_earlier_instances_of_the_request(self):
        # The host takes 6 I/O vCPUs (10/14 <= 0.75) but not 6 more (16/20).
        host = base.loaded('h', io=2, cpu=2)
        spec = base.spec('io', 6, num_instances=2)
        self.assertEqual(['h'], self.passing([host], spec, 0))
        host.consume_from_request(spec)
        spec.instance_uuid = uuidutils.generate_uuid()
        self.assertEqual([], self.passing([host], spec, 1))

    def test_server_group_stub_of_the_request_is_its_own(self):
        # With a server group nova also adds a flavor-less stub of each
        # placed instance to `instances`. It is the request's own: counted
        # once (through num_instances) and not an unknown instance that
        # would make the filter fail open.
        host = base.loaded('h', io=1, cpu=3)     # 2 I/O, 6 CPU vCPUs
        spec = base.spec('io', 6, num_instances=3)
        # 8/14, 14/20 pass; 20/26 > 0.75 fails.
        for index, expected in enumerate([['h'], ['h'], []]):
            self.assertEqual(expected, self.passing([host], spec, index))
            host.consume_from_request(spec)
            host.instances[spec.instance_uuid] = base.instance(
                uuid=spec.instance_uuid, with_flavor=False)
            spec.instance_uuid = uuidutils.generate_uuid()
