"""Context-retention flavors go only to hosts that can retain.

nova's functional harness with the placement fixture and two computes, one
seeing a sysfs with the vsmtio kernel ABI, one a stock kernel. Each host's
trait reaches placement the supported way: nova's provider config, written
by the code ``vsmtio-nova-conf provider-config`` runs and merged by nova's
own resource tracker. The computes run nova's fake driver with the vsmtio
driver's retention probe mixed in (the libvirt driver needs a real libvirt
host; the mixin is the same code the vsmtio libvirt driver inherits), which
takes away a trait its host lost. Placement, the scheduler (with the vsmtio
filters as ``vsmtio-nova-conf`` enables them) and the API are nova's own.
"""

import os

import fixtures

import nova.conf
from nova import objects
from nova.tests.functional import integrated_helpers
from nova.virt import fake

from vsmtio_contract import kernel_abi
from vsmtio_nova import capability
from vsmtio_nova.deploy import nova_conf
from vsmtio_nova import extra_specs
from vsmtio_nova import provider_config
from vsmtio_nova.tests.functional import test_workload_mix
from vsmtio_nova.virt import traits


class RetentionFakeDriver(traits.RetentionTraitMixin,
                          fake.MediumFakeDriver):
    """nova's fake driver (10 vCPUs) with the vsmtio retention probe.

    Its ten CPUs are offered as shared (VCPU) and as dedicated (PCPU), on
    one NUMA cell, since a retaining flavor must dedicate its CPUs
    (``hw:cpu_policy=dedicated``): nova's fake driver alone has no PCPU.
    The two inventories are independent here, as they never are on a real
    host; the tests fill a host with one kind only.
    """

    def update_provider_tree(self, provider_tree, nodename,
                             allocations=None):
        super().update_provider_tree(provider_tree, nodename, allocations)
        inventory = dict(provider_tree.data(nodename).inventory)
        inventory['PCPU'] = dict(inventory['VCPU'], allocation_ratio=1.0)
        provider_tree.update_inventory(nodename, inventory)

    def get_available_resource(self, nodename):
        resources = super().get_available_resource(nodename)
        cpus = set(range(self.vcpus))
        resources['numa_topology'] = objects.NUMATopology(cells=[
            objects.NUMACell(
                id=0, socket=0, cpuset=cpus, pcpuset=cpus,
                memory=self.memory_mb, cpu_usage=0, pinned_cpus=set(),
                memory_usage=0, siblings=[{c} for c in cpus],
                mempages=[objects.NUMAPagesTopology(
                    size_kb=4, total=self.memory_mb * 256, used=0)],
                network_metadata=objects.NetworkMetadata(
                    physnets=set(), tunneled=False))])._to_json()
        return resources


class RetentionRoutingTest(integrated_helpers._IntegratedTestBase):

    ADMIN_API = True
    microversion = 'latest'

    def setUp(self):
        self.flags(api_paste_config=test_workload_mix.api_paste_ini(),
                   group='wsgi')
        self.useFixture(fixtures.MonkeyPatch(
            'nova.virt.fake.RetentionFakeDriver', RetentionFakeDriver))
        self.flags(compute_driver='fake.RetentionFakeDriver')
        self.flags(available_filters=[
            'nova.scheduler.filters.all_filters', *nova_conf.FILTERS],
            group='filter_scheduler')
        self.flags(enabled_filters=[
            'ComputeFilter', nova_conf.RETENTION_FILTER_CLASS],
            group='filter_scheduler')
        # Dedicated CPUs are PCPU only: no fallback to VCPU for hosts of
        # releases before PCPU (all nova 34 computes report PCPU).
        self.flags(disable_fallback_pcpu_query=True, group='workarounds')
        self.sysfs = {'patched': self._sysfs('1\n'), 'plain': self._sysfs()}
        super().setUp()
        self.retaining = self._create_flavor(
            name='retaining', vcpu=5, memory_mb=512, disk=1,
            extra_spec={extra_specs.EXTRA_SPEC_CONTEXT_RETENTION: 'true',
                        capability.CPU_POLICY_SPEC: capability.DEDICATED,
                        capability.TRAIT_SPEC: 'required'})
        self.plain = self._create_flavor(name='plain', vcpu=5,
                                         memory_mb=512, disk=1)

    def _sysfs(self, abi_version=None):
        root = self.useFixture(fixtures.TempDir()).path
        if abi_version is not None:
            os.makedirs(os.path.join(root, 'kernel', 'vsmtio'))
            with open(os.path.join(root, kernel_abi.ABI_VERSION), 'w') as f:
                f.write(abi_version)
        return root

    def _setup_compute_service(self):
        # 10 vCPUs per host, not overcommitted: two 5-vCPU servers fill one.
        # (Set here: nova's base setUp resets it before the computes start.)
        self.flags(cpu_allocation_ratio=1.0, initial_cpu_allocation_ratio=1.0)
        # Each compute reads its kernel once, at init_host, and its
        # provider config once, when it starts.
        self.locations = {}
        for host in ('retainer', 'plain'):
            self.host_is(host, 'patched' if host == 'retainer' else 'plain')
            self._start_compute(host)
        return self.computes['retainer']

    def host_is(self, host, kernel, write=True):
        """Present ``host`` with this kernel and run provider-config."""
        if host not in self.locations:
            self.locations[host] = self.useFixture(fixtures.TempDir()).path
        self.flags(provider_config_location=self.locations[host],
                   group='compute')
        self.flags(sysfs_root=self.sysfs[kernel], group='vsmtio')
        if write:
            # As on a host running the vsmtio driver, which the fake
            # driver stands in for once the file is written.
            self.flags(compute_driver=provider_config.COMPUTE_DRIVER)
            provider_config.write(nova.conf.CONF)
            self.flags(compute_driver='fake.RetentionFakeDriver')

    def traits(self, host):
        return self._get_provider_traits(
            self._get_provider_uuid_by_host(host))

    def boot(self, flavor, expected_state='ACTIVE'):
        return self._create_server(flavor_id=flavor, networks='none',
                                   expected_state=expected_state)

    def failed_event(self, server, name):
        """The details of the server's failed ``name`` event (2.84+)."""
        for action in self.api.get_instance_actions(server['id']):
            events = self.api.api_get(
                '/servers/%s/os-instance-actions/%s' % (
                    server['id'], action['request_id'])).body[
                'instanceAction']['events']
            for event in events:
                if event['event'] == name:
                    self.assertEqual('Error', event['result'])
                    return event['details']
        self.fail('no %s event on server %s' % (name, server['id']))

    def assert_says_why(self, server, why):
        """The fault and the create action's event carry the reason."""
        self.assertIn('No valid host was found. vsmtio: ',
                      server['fault']['message'])
        self.assertIn(why, server['fault']['message'])
        self.assertIn(why, self.failed_event(
            server, 'conductor_schedule_and_build_instances'))

    def test_only_the_patched_host_has_the_trait(self):
        self.assertIn(capability.TRAIT, self.traits('retainer'))
        self.assertNotIn(capability.TRAIT, self.traits('plain'))
        # nova's own traits are still there, and stay through updates.
        self.assertIn('COMPUTE_NODE', self.traits('retainer'))
        self._run_periodics()
        self.assertIn(capability.TRAIT, self.traits('retainer'))
        self.assertNotIn(capability.TRAIT, self.traits('plain'))

    def test_a_host_that_lost_its_kernel_loses_the_trait(self):
        # Rebooted into a stock kernel; provider-config rerun before the
        # restart: nova never removes a trait it added from a file, the
        # driver's probe does.
        self.host_is('retainer', 'plain')
        self.computes['retainer'] = self.restart_compute_service(
            self.computes['retainer'])
        self.assertNotIn(capability.TRAIT, self.traits('retainer'))
        self.assertIn('COMPUTE_NODE', self.traits('retainer'))
        # and back
        self.host_is('retainer', 'patched')
        self.computes['retainer'] = self.restart_compute_service(
            self.computes['retainer'])
        self.assertIn(capability.TRAIT, self.traits('retainer'))

    def test_a_stale_provider_config_is_logged(self):
        # The same reboot without rerunning provider-config: nova adds the
        # trait from the stale file again, the driver says so.
        self.host_is('retainer', 'plain', write=False)
        log = self.stdlog.logger.output
        self.computes['retainer'] = self.restart_compute_service(
            self.computes['retainer'])
        self.assertIn('The provider config gives this host %s but it cannot '
                      'retain' % capability.TRAIT,
                      self.stdlog.logger.output[len(log):])

    def test_retention_lands_only_on_the_trait_then_no_valid_host(self):
        # The retainer has room for two; both land there, never on plain.
        for _ in range(2):
            server = self.boot(self.retaining)
            self.assertEqual('retainer', server['OS-EXT-SRV-ATTR:host'])
        # Full: the third fails although the plain host is empty.
        server = self.boot(self.retaining, expected_state='ERROR')
        self.assertIn('No valid host', server['fault']['message'])
        self.assertEqual(
            'plain', self.boot(self.plain)['OS-EXT-SRV-ATTR:host'])

    def test_retainer_down_means_no_valid_host(self):
        self.computes['retainer'].stop()
        service = self.api.get_services(binary='nova-compute',
                                        host='retainer')[0]
        self.api.put_service_force_down(service['id'], True)
        server = self.boot(self.retaining, expected_state='ERROR')
        self.assertIn('No valid host', server['fault']['message'])
        self.assertEqual(
            'plain', self.boot(self.plain)['OS-EXT-SRV-ATTR:host'])

    def test_retention_without_the_trait_is_refused_everywhere(self):
        flavor = self._create_flavor(
            name='sloppy', vcpu=2, memory_mb=512, disk=1,
            extra_spec={extra_specs.EXTRA_SPEC_CONTEXT_RETENTION: 'true',
                        capability.CPU_POLICY_SPEC: capability.DEDICATED})
        log = self.stdlog.logger.output
        server = self.boot(flavor, expected_state='ERROR')
        # what is missing first, so nova's 255-character fault keeps it
        self.assert_says_why(server, 'context retention refused: missing '
                             'extra spec trait:%s=required' % capability.TRAIT)
        self.assertIn('missing extra spec trait:%s=required'
                      % capability.TRAIT, self.stdlog.logger.output[
                          len(log):])
        # Asking for no retention needs no trait.
        self.assertNotIn('hw:cpu_policy', self.stdlog.logger.output[
            len(log):])
        quiet = self._create_flavor(
            name='quiet', vcpu=2, memory_mb=512, disk=1,
            extra_spec={extra_specs.EXTRA_SPEC_CONTEXT_RETENTION: 'false'})
        self.boot(quiet)

    def test_retention_on_shared_cpus_is_refused_with_the_reason(self):
        # Before: booted on the retainer with cpu-pm=on and hint-dedicated
        # on shared CPUs, its vCPUs holding host CPUs while idle.
        shared = self._create_flavor(
            name='shared-retainer', vcpu=2, memory_mb=512, disk=1,
            extra_spec={extra_specs.EXTRA_SPEC_CONTEXT_RETENTION: 'true',
                        capability.TRAIT_SPEC: 'required'})
        log = self.stdlog.logger.output
        server = self.boot(shared, expected_state='ERROR')
        self.assert_says_why(server, 'context retention refused: missing '
                             'extra spec hw:cpu_policy=dedicated')
        self.assert_says_why(server, '(flavor shared-retainer)')
        self.assertIn('vsmtio: context retention refused: missing extra spec '
                      'hw:cpu_policy=dedicated',
                      self.stdlog.logger.output[len(log):])
        # The same flavor with dedicated CPUs lands on the retainer.
        self.assertEqual(
            'retainer', self.boot(self.retaining)['OS-EXT-SRV-ATTR:host'])
