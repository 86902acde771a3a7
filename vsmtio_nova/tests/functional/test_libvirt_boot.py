"""A real boot through the vsmtio libvirt driver: every nova seam at once.

nova's own libvirt functional harness (``ServersTestBase``: the real API,
conductor, scheduler, placement, compute manager, resource tracker and
``LibvirtDriver``, on nova's fakelibvirt, because no libvirt daemon with
KVM can run here) with ``compute_driver = vsmtio.VsmtioLibvirtDriver`` and
the compute started the way ``vsmtio-nova-compute`` starts it. One boot of
a flavor asking for context retention and one hard reboot show, through
nova's own code paths, each seam of ``doc/source/nova_seams.rst``:

* nova loads the driver by its ``nova.virt`` name (``virt.register``);
* placement offers the host because its provider config gives it the
  retention trait (the supported seam);
* the domain XML nova hands libvirt, at spawn and at hard reboot, carries
  what ``_get_guest_xml`` adds (``<qemu:commandline>`` and the dedicated
  hint), unchanged on its way;
* the node's stats count the instance's class (``compute_stats``).

fakelibvirt keeps only a parsed summary of a domain, so the XML is read
where nova hands it over: a recorder around fakelibvirt's ``defineXML``
that keeps each document and defines it as before.
"""

import os

import fixtures
from lxml import etree

from nova.compute import resource_tracker
import nova.conf
from nova import context as nova_context
from nova import objects
from nova.tests.fixtures import libvirt as fakelibvirt
from nova.tests.functional.libvirt import base

from vsmtio_contract import kernel_abi
from vsmtio_contract import workload
from vsmtio_nova import capability
from vsmtio_nova.compute import stats as mix_stats
from vsmtio_nova import extra_specs
from vsmtio_nova import provider_config
from vsmtio_nova.tests.functional import test_workload_mix
from vsmtio_nova import virt
from vsmtio_nova.virt.libvirt import retention

QEMU = '{%s}' % retention.QEMU_NS


class LibvirtBootTest(base.ServersTestBase):

    ADMIN_API = True
    microversion = 'latest'

    def setUp(self):
        self.flags(api_paste_config=test_workload_mix.api_paste_ini(),
                   group='wsgi')
        super().setUp()
        self.defined = []
        define = fakelibvirt.Connection.defineXML

        def recording_define(conn, xml):
            self.defined.append(xml)
            return define(conn, xml)

        self.useFixture(fixtures.MonkeyPatch(
            'nova.tests.fixtures.libvirt.Connection.defineXML',
            recording_define))
        # What vsmtio-nova-compute does before nova-compute starts.
        self.useFixture(fixtures.MonkeyPatch(
            'nova.compute.resource_tracker.compute_stats',
            resource_tracker.compute_stats))
        virt.register()
        mix_stats.install()

    def _setup_compute_service(self):
        super()._setup_compute_service()
        # A KVM host with the vsmtio kernel (ABI 1), its provider config
        # written by vsmtio-nova-conf provider-config.
        sysfs = self.useFixture(fixtures.TempDir()).path
        os.makedirs(os.path.join(sysfs, 'kernel', 'vsmtio'))
        with open(os.path.join(sysfs, kernel_abi.ABI_VERSION), 'w') as f:
            f.write('1\n')
        self.flags(virt_type='kvm', group='libvirt')
        # Four host CPUs for dedicated guests (a retaining flavor must
        # dedicate its CPUs), the rest shared.
        self.flags(cpu_dedicated_set='4-7', cpu_shared_set='0-3',
                   group='compute')
        self.flags(sysfs_root=sysfs, group='vsmtio')
        self.flags(provider_config_location=self.useFixture(
            fixtures.TempDir()).path, group='compute')
        self.flags(compute_driver=provider_config.COMPUTE_DRIVER)
        provider_config.write(nova.conf.CONF)

    def domain(self, index=-1):
        return etree.fromstring(self.defined[index])

    def test_retention_boot_and_hard_reboot(self):
        self.start_compute('compute1')
        drvr = self.computes['compute1'].driver
        self.assertEqual('VsmtioLibvirtDriver', type(drvr).__name__,
                         'nova did not load the driver by its nova.virt '
                         'name (seam: compute_driver resolved as '
                         'nova.virt.<value>)')
        self.assertIn(capability.TRAIT, self._get_provider_traits(
            self.compute_rp_uuids['compute1']))

        flavor = self._create_flavor(
            vcpu=2, extra_spec={
                extra_specs.EXTRA_SPEC_CONTEXT_RETENTION: 'true',
                capability.CPU_POLICY_SPEC: capability.DEDICATED,
                capability.TRAIT_SPEC: 'required',
                workload.EXTRA_SPEC_WORKLOAD: 'io'})
        server = self._create_server(flavor_id=flavor, networks='none')
        self.assertEqual(1, len(self.defined))
        for when in ('spawn', 'hard reboot'):
            root = self.domain()
            self.assertEqual(
                ['-overcommit', 'cpu-pm=on'],
                [a.get('value') for a in root.iterfind(
                    QEMU + 'commandline/' + QEMU + 'arg')],
                'at %s, the XML nova gave libvirt lacks what '
                '_get_guest_xml adds (seam: LibvirtDriver._get_guest_xml)'
                % when)
            self.assertEqual(['on'], [h.get('state') for h in root.iterfind(
                'features/kvm/hint-dedicated')])
            self.assertEqual(server['id'], root.findtext('uuid'))
            # on the dedicated CPUs: each vCPU pinned to one of 4-7
            self.assertEqual(2, len(root.findall('cputune/vcpupin')))
            self.assertLessEqual(
                {p.get('cpuset') for p in root.iterfind('cputune/vcpupin')},
                {'4', '5', '6', '7'})
            if when == 'spawn':
                self._reboot_server(server, hard=True)
                self.assertEqual(2, len(self.defined))

        ctxt = nova_context.get_admin_context()
        node = objects.ComputeNode.get_by_host_and_nodename(
            ctxt, 'compute1', drvr._host.get_hostname())
        self.assertEqual('2', str(node.stats.get(mix_stats.IO_VCPUS)),
                         'the node\'s stats do not count the instance '
                         '(seam: resource_tracker.compute_stats)')

    def plain(self, root):
        self.assertEqual([], root.findall(QEMU + 'commandline'))
        self.assertEqual([], root.findall('features/kvm/hint-dedicated'))

    def test_image_property_alone_never_enables_retention(self):
        # Before: the image property alone gave the guest cpu-pm=on and
        # hint-dedicated on shared CPUs, and the driver only warned.
        self.start_compute('compute1')
        image = self._create_image(
            {retention.IMAGE_PROPERTY: 'true', 'hw_cpu_policy': 'shared'})
        plain = self._create_flavor(vcpu=2)
        server = self._create_server(
            flavor_id=plain, image_uuid=image['id'], networks='none')
        self.assertEqual('ACTIVE', server['status'])
        self.plain(self.domain())
        self.assertNotIn('cpu-pm', self.defined[-1])
        self.assertIn('only a flavor with %s=true enables it'
                      % retention.EXTRA_SPEC, self.stdlog.logger.output)

    def test_image_property_declines_what_the_flavor_allows(self):
        self.start_compute('compute1')
        image = self._create_image({retention.IMAGE_PROPERTY: 'false'})
        flavor = self._create_flavor(vcpu=2, extra_spec={
            extra_specs.EXTRA_SPEC_CONTEXT_RETENTION: 'true',
            capability.CPU_POLICY_SPEC: capability.DEDICATED,
            capability.TRAIT_SPEC: 'required'})
        self._create_server(flavor_id=flavor, image_uuid=image['id'],
                            networks='none')
        self.plain(self.domain())

    def test_shared_cpu_flavor_past_the_filter_is_refused_at_spawn(self):
        # Where the ContextRetentionFilter is not enabled, the driver
        # refuses: the build aborts (no reschedule, no host can honour it)
        # and the instance's fault says why.
        self.start_compute('compute1')
        flavor = self._create_flavor(vcpu=2, extra_spec={
            extra_specs.EXTRA_SPEC_CONTEXT_RETENTION: 'true',
            capability.TRAIT_SPEC: 'required'})
        server = self._create_server(flavor_id=flavor, networks='none',
                                     expected_state='ERROR')
        self.assertIn('context retention refused', server['fault']['message'])
        self.assertIn('hw:cpu_policy=dedicated', server['fault']['message'])
        self.assertEqual([], self.defined)

    def test_a_host_that_cannot_retain_says_so_in_the_action(self):
        # The host advertises the trait (its provider config) but its
        # driver finds, once started, that it cannot retain (the kernel's
        # module went away, a race with a reboot): it refuses the guest,
        # nova reschedules, and with no other host the fault reads
        # nova's own "Exhausted all hosts". The refusal's reason is the
        # create action's failed vsmtio_context_retention event.
        self.start_compute('compute1')
        drvr = self.computes['compute1'].driver
        drvr._retention = (False, 'the vsmtio kernel ABI is gone')
        flavor = self._create_flavor(vcpu=2, extra_spec={
            extra_specs.EXTRA_SPEC_CONTEXT_RETENTION: 'true',
            capability.CPU_POLICY_SPEC: capability.DEDICATED,
            capability.TRAIT_SPEC: 'required'})
        server = self._create_server(flavor_id=flavor, networks='none',
                                     expected_state='ERROR')
        self.assertEqual([], self.defined)
        action = self.api.get_instance_actions(server['id'])[0]
        events = {e['event']: e for e in self.api.api_get(
            '/servers/%s/os-instance-actions/%s' % (
                server['id'], action['request_id'])).body[
            'instanceAction']['events']}
        event = events['vsmtio_context_retention']
        self.assertEqual('Error', event['result'])
        self.assertEqual('compute1', event['host'])
        self.assertIn('vsmtio: context retention asked for, but host '
                      'compute1 cannot give it (the vsmtio kernel ABI is '
                      'gone)', event['details'])
