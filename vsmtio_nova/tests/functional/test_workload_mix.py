"""The filter and weigher inside nova: API, conductor, scheduler, computes.

Runs on nova's own functional harness: the fake virt driver on several
compute services, the placement fixture, the real API with the real policy.
Each test asserts where every server went and the resulting per-host mix as
the API reports it (the flavor's extra specs of each server).
"""

import collections
from importlib import metadata

import fixtures
from oslo_utils import timeutils

from nova.compute import resource_tracker
from nova.scheduler import weights as nova_weights
from nova.tests.functional.api import client
from nova.tests.functional import integrated_helpers

from vsmtio_contract import workload
from vsmtio_nova.compute import stats as mix_stats
from vsmtio_nova import conf  # noqa: F401 (registers [vsmtio] for flags)

HOSTS = ('host1', 'host2', 'host3')
FILTER = 'vsmtio_nova.scheduler.filters.WorkloadMixFilter'
WEIGHER = 'vsmtio_nova.scheduler.weights.WorkloadMixWeigher'


def api_paste_ini():
    """The api-paste.ini the nova wheel installs under its prefix."""
    for f in metadata.distribution('nova').files:
        if str(f).endswith('etc/nova/api-paste.ini'):
            return str(f.locate())
    raise RuntimeError('nova is installed without etc/nova/api-paste.ini')


class HostNameTieBreakWeigher(nova_weights.BaseHostWeigher):
    """Prefer host1 over host2 over host3, only to break exact ties.

    nova breaks ties by set order, which varies between runs; the tests
    need each placement to follow from the mix alone.
    """

    def weight_multiplier(self, host_state):
        return 0.001

    def _weigh_object(self, host_state, weight_properties):
        return -HOSTS.index(host_state.host)


class WorkloadMixTest(integrated_helpers._IntegratedTestBase):

    ADMIN_API = True
    microversion = 'latest'

    def setUp(self):
        # The nova.conf lines doc/source/scheduler.rst tells operators to
        # add; nova's other weighers are left out so that placements follow
        # from the mix (and the tie-break) alone.
        self.flags(api_paste_config=api_paste_ini(), group='wsgi')
        self.flags(compute_driver='fake.MediumFakeDriver')
        self.flags(cores=100, instances=100, group='quota')
        self.flags(available_filters=[
            'nova.scheduler.filters.all_filters', FILTER],
            group='filter_scheduler')
        self.flags(enabled_filters=['ComputeFilter', 'WorkloadMixFilter'],
                   group='filter_scheduler')
        self.flags(weight_classes=[
            WEIGHER, __name__ + '.HostNameTieBreakWeigher'],
            group='filter_scheduler')
        # The computes keep their mix in their stats, as vsmtio-nova-compute
        # makes them do.
        self.useFixture(fixtures.MonkeyPatch(
            'nova.compute.resource_tracker.compute_stats',
            resource_tracker.compute_stats))
        mix_stats.install()
        super().setUp()
        self.flavors = {
            cls: self._create_flavor(
                name=cls, vcpu=2, memory_mb=512, disk=1, ephemeral=0,
                extra_spec=({workload.EXTRA_SPEC_WORKLOAD: cls}
                            if cls != 'unset' else None))
            for cls in ('io', 'cpu', 'auto', 'unset')}
        for cls in ('io', 'cpu'):
            self.flavors[cls + '4'] = self._create_flavor(
                name=cls + '4', vcpu=4, memory_mb=512, disk=1, ephemeral=0,
                extra_spec={workload.EXTRA_SPEC_WORKLOAD: cls})
        self.flavors['io6'] = self._create_flavor(
            name='io6', vcpu=6, memory_mb=512, disk=1, ephemeral=0,
            extra_spec={workload.EXTRA_SPEC_WORKLOAD: 'io'})

    def _setup_compute_service(self):
        # 10 vCPUs per host, not overcommitted: hosts fill up. (Set here:
        # nova's base setUp resets it before it starts the computes.)
        self.flags(cpu_allocation_ratio=1.0, initial_cpu_allocation_ratio=1.0)
        for host in HOSTS:
            self._start_compute(host)
        return self.computes[HOSTS[0]]

    # helpers

    def boot(self, cls, host=None, expected_state='ACTIVE'):
        """Boot one server of a class.

        ``host`` pins it (microversion 2.74) without bypassing the
        scheduler's filters.
        """
        server = self._create_server(
            flavor_id=self.flavors[cls], networks='none', host=host,
            expected_state=expected_state)
        return server

    def boot_many(self, cls, count):
        """One multi-create request for ``count`` servers of a class."""
        body = self._build_server(flavor_id=self.flavors[cls],
                                  networks='none')
        body.update(min_count=count, max_count=count,
                    return_reservation_id=True)
        rid = self.api.post_server({'server': body})['reservation_id']
        servers = self.api.get_servers(
            search_opts={'reservation_id': rid})
        self.assertEqual(count, len(servers))
        return [self._wait_for_state_change(s, 'ACTIVE') for s in servers]

    def host_of(self, server):
        return server['OS-EXT-SRV-ATTR:host']

    def mixes(self):
        """``{host: (io vCPUs, cpu vCPUs)}`` of every active server."""
        mix = collections.defaultdict(lambda: [0, 0])
        for server in self.api.get_servers():
            if server['status'] != 'ACTIVE':
                continue
            flavor = server['flavor']
            cls = flavor['extra_specs'].get(workload.EXTRA_SPEC_WORKLOAD)
            counts = mix[self.host_of(server)]
            if cls == 'io':
                counts[0] += flavor['vcpus']
            elif cls == 'cpu':
                counts[1] += flavor['vcpus']
        return {host: tuple(c) for host, c in mix.items()}

    def set_aggregate(self, name, hosts, **metadata):
        agg = self._create_aggregate(name)
        for host in hosts:
            self.admin_api.add_host_to_aggregate(agg, host)
        self.admin_api.post_aggregate_action(
            agg, {'set_metadata': {'metadata': metadata}})

    # tests

    def test_boot_sequence_mixes_every_host(self):
        placed = [self.host_of(self.boot(cls))
                  for cls in ('io', 'io', 'io', 'cpu', 'cpu', 'cpu')]
        # Each I/O guest takes an empty host (an empty host is nearer the
        # target than an all-I/O one), each CPU guest joins one I/O guest.
        self.assertEqual(list(HOSTS) * 2, placed)
        self.assertEqual({h: (2, 2) for h in HOSTS}, self.mixes())

    def test_complements_homogeneous_hosts(self):
        for cls, host in (('io', 'host1'), ('io', 'host1'),
                          ('cpu', 'host2'), ('cpu', 'host2')):
            self.assertEqual(host, self.host_of(self.boot(cls, host=host)))
        self.assertEqual('host1', self.host_of(self.boot('cpu')))
        self.assertEqual('host2', self.host_of(self.boot('io')))
        self.assertEqual({'host1': (4, 2), 'host2': (2, 4)}, self.mixes())

    def test_auto_and_unset_flavors_are_not_counted(self):
        # Unknown guests on host1 and host2 weigh nothing: the I/O guest
        # goes by the tie-break to host1 and the CPU guest joins it.
        self.boot('auto', host='host1')
        self.boot('unset', host='host2')
        self.assertEqual('host1', self.host_of(self.boot('io')))
        self.assertEqual('host1', self.host_of(self.boot('cpu')))
        self.assertEqual({'host1': (2, 2), 'host2': (0, 0)}, self.mixes())

    def test_multi_create_knows_its_earlier_instances(self):
        # Blind to its own earlier placements the request would see three
        # empty hosts for every instance and stack them all on host1.
        servers = self.boot_many('io', 3)
        self.assertEqual(sorted(HOSTS),
                         sorted(self.host_of(s) for s in servers))
        servers = self.boot_many('cpu', 3)
        self.assertEqual(sorted(HOSTS),
                         sorted(self.host_of(s) for s in servers))
        self.assertEqual({h: (2, 2) for h in HOSTS}, self.mixes())

    def test_filter_refuses_what_a_host_could_not_come_back_from(self):
        for host in HOSTS:
            self.boot('io', host=host)
            self.boot('io6', host=host)
        self.flags(min_io_fraction=0.25, max_io_fraction=0.75,
                   filter_min_classified_vcpus=4, group='vsmtio')
        # Every host holds 8 I/O vCPUs of 10: another I/O guest would leave
        # 10 of 10 I/O with no room for a CPU guest to bring it back.
        server = self.boot('io', expected_state='ERROR')
        self.assertIn('No valid host', server['fault']['message'])
        # A CPU guest brings a host back towards the band; an unknown
        # ('auto') guest is never refused.
        self.assertEqual('host1', self.host_of(self.boot('cpu')))
        self.boot('auto')
        mixes = self.mixes()
        self.assertEqual((8, 2), mixes['host1'])
        self.assertEqual({(8, 0)}, {mixes['host2'], mixes['host3']})

    def test_filter_keeps_a_host_able_to_come_back(self):
        # With the weigher off, nothing but the filter and the tie-break
        # decide: host1 takes I/O guests while a CPU guest could still
        # bring it within the bound, then host2 does.
        self.flags(weight_multiplier=0.0, max_io_fraction=0.75,
                   filter_min_classified_vcpus=4, group='vsmtio')
        self.boot('cpu', host='host1')
        self.boot('cpu', host='host2')
        placed = [self.host_of(self.boot('io')) for _ in range(6)]
        # host1: 2 CPU vCPUs of 10; I/O 6 leaves 2 free, 6/10 at worst; I/O
        # 8 would leave none: 8/10 > 0.75, refused.
        self.assertEqual(['host1'] * 3 + ['host2'] * 3, placed)
        self.assertEqual({'host1': (6, 2), 'host2': (6, 2)}, self.mixes())

    def assert_within(self, low, high):
        for host, (io, cpu) in self.mixes().items():
            self.assertTrue(low <= io / (io + cpu) <= high,
                            '%s ends at io=%d cpu=%d' % (host, io, cpu))

    def test_io_burst_then_cpu_burst_mixes_every_host(self):
        # The adversarial order: a tenant's I/O servers, largest first,
        # then its CPU servers. Each request sees the placements before it
        # (the hosts' stats, or the scheduler's own count until the host
        # has claimed).
        self.flags(min_io_fraction=0.25, max_io_fraction=0.75,
                   filter_min_classified_vcpus=4, group='vsmtio')
        for cls in ('io4', 'io4', 'io4', 'io', 'io', 'io',
                    'cpu4', 'cpu4', 'cpu4'):
            self.boot(cls)
        self.assertEqual({h: (6, 4) for h in HOSTS}, self.mixes())
        self.assert_within(0.25, 0.75)

    def test_multi_create_bursts_mix_every_host(self):
        self.flags(min_io_fraction=0.25, max_io_fraction=0.75,
                   filter_min_classified_vcpus=4, group='vsmtio')
        self.boot_many('io', 6)
        self.boot_many('cpu', 6)
        self.assertEqual({h: (4, 4) for h in HOSTS}, self.mixes())

    def test_auto_instance_counts_with_its_measured_class(self):
        # The agent on host2 measured the 'auto' guest as I/O-bound and
        # published it, signed, in its metadata; the compute recounts
        # its mix in its periodic task. The CPU guest then complements
        # host2 (the tie-break alone would pick host1).
        self.flags(measured_class_secret='agents-only', group='vsmtio')
        server = self.boot('auto', host='host2')
        self.admin_api.post_server_metadata(server['id'], {
            workload.MEASURED_CLASS_KEY: workload.sign_measured(
                workload.derive_host_key('agents-only', 'host2'),
                server['id'], 'io', 'host2', timeutils.utcnow_ts() + 600)})
        self._run_periodics()
        self.assertEqual('host2', self.host_of(self.boot('cpu')))

    def test_measurement_written_by_the_owner_is_ignored(self):
        self.flags(measured_class_secret='agents-only', group='vsmtio')
        server = self.boot('auto', host='host2')
        self.api.post_server_metadata(
            server['id'], {workload.MEASURED_CLASS_KEY: 'io'})
        self._run_periodics()
        self.assertEqual('host1', self.host_of(self.boot('cpu')))

    def test_aggregate_overrides_target(self):
        # host1 is an I/O farm: target share 1.0 there, 0.5 elsewhere.
        self.set_aggregate('io-farm', ['host1'],
                           **{'vsmtio:target_io_fraction': '1.0'})
        placed = [self.host_of(self.boot('io')) for _ in range(3)]
        self.assertEqual(['host1'] * 3, placed)
        self.assertEqual({'host1': (6, 0)}, self.mixes())

    def test_aggregate_overrides_multiplier(self):
        # host1 and host3 hold an I/O guest each and would tie for a CPU
        # guest (host1 by the tie-break); a zero multiplier on host1 leaves
        # host3 the only host scored for its mix.
        self.boot('io', host='host1')
        self.boot('io', host='host3')
        self.set_aggregate('no-mix', ['host1'],
                           **{'vsmtio:weight_multiplier': '0'})
        self.assertEqual('host3', self.host_of(self.boot('cpu')))
        self.assertEqual({'host1': (2, 0), 'host3': (2, 2)}, self.mixes())


class WorkloadMixWithNovaWeighersTest(WorkloadMixTest):
    """The weight_classes line of the operator guide: nova's weighers too."""

    def setUp(self):
        super().setUp()
        self.flags(weight_classes=[
            'nova.scheduler.weights.all_weighers', WEIGHER,
            __name__ + '.HostNameTieBreakWeigher'],
            group='filter_scheduler')
        # The scheduler loaded its weighers at start: restart it.
        self.scheduler.stop()
        self.scheduler = self._setup_scheduler_service()

    def test_mix_decides_between_equally_loaded_hosts(self):
        # Each host runs two servers of the same size, so RAM, CPU and
        # instance-count weighers see three equal hosts; the mix does not.
        for cls, host in (('io', 'host1'), ('io', 'host1'),
                          ('cpu', 'host2'), ('cpu', 'host2'),
                          ('io', 'host3'), ('io', 'host3')):
            self.boot(cls, host=host)
        self.assertEqual('host2', self.host_of(self.boot('io')))
        self.assertEqual({'host1': (4, 0), 'host2': (2, 4),
                          'host3': (4, 0)}, self.mixes())

    # The scenarios of the base class assume no other weigher.
    test_boot_sequence_mixes_every_host = None
    test_complements_homogeneous_hosts = None
    test_auto_and_unset_flavors_are_not_counted = None
    test_multi_create_knows_its_earlier_instances = None
    test_filter_refuses_what_a_host_could_not_come_back_from = None
    test_filter_keeps_a_host_able_to_come_back = None
    test_auto_instance_counts_with_its_measured_class = None
    test_measurement_written_by_the_owner_is_ignored = None
    test_aggregate_overrides_target = None
    test_aggregate_overrides_multiplier = None


class ExtraSpecApiTest(integrated_helpers._IntegratedTestBase):
    """nova-api refuses bad ``vsmtio:`` extra specs from microversion 2.86.

    Needs the package installed (its ``nova.api.extra_spec_validators``
    entry point); tox installs it.
    """

    ADMIN_API = True

    def setUp(self):
        self.flags(api_paste_config=api_paste_ini(), group='wsgi')
        super().setUp()
        self.flavor = self._create_flavor(name='plain')

    def put(self, specs, microversion='2.86'):
        self.api.microversion = microversion
        return self.api.post_extra_spec(
            self.flavor, {'extra_specs': specs}).body

    def assert_refused(self, specs, needle):
        e = self.assertRaises(client.OpenStackApiException, self.put, specs)
        self.assertEqual(400, e.response.status_code)
        self.assertIn(needle, e.response.text)

    def test_good_values_accepted(self):
        for cls in workload.VALUES:
            self.assertEqual(
                {workload.EXTRA_SPEC_WORKLOAD: cls},
                self.put({workload.EXTRA_SPEC_WORKLOAD: cls})['extra_specs'])
        self.assertEqual(
            {'vsmtio:context_retention': 'true'},
            self.put({'vsmtio:context_retention': 'true'})['extra_specs'])

    def test_bad_value_refused(self):
        # The message is the contract parser's, the same function every
        # run-time reader calls (vsmtio_contract.specs).
        self.assert_refused({workload.EXTRA_SPEC_WORKLOAD: 'gpu'},
                            "vsmtio:workload must be one of io, cpu, auto, "
                            "not 'gpu'")
        self.assert_refused({workload.EXTRA_SPEC_WORKLOAD: 'IO'},
                            "not 'IO'")
        self.assert_refused({'vsmtio:context_retention': 'sometimes'},
                            "vsmtio:context_retention must be a boolean "
                            "(true or false), not 'sometimes'")

    def test_unknown_key_refused(self):
        self.assert_refused({'vsmtio:target_io_fraction': '0.5'},
                            'does not appear to be a valid extra spec')

    def test_not_validated_before_2_86(self):
        self.assertEqual(
            {workload.EXTRA_SPEC_WORKLOAD: 'gpu'},
            self.put({workload.EXTRA_SPEC_WORKLOAD: 'gpu'},
                     microversion='2.85')['extra_specs'])
