"""Domain XML of the vsmtio libvirt driver, on nova's own test fixtures.

The driver under test is the real ``LibvirtDriver`` subclass; libvirt is
nova's ``LibvirtFixture`` (fakelibvirt), as in nova's own LibvirtDriver unit
tests, because no libvirt daemon with KVM can run here.  Instances, flavors
and the image system metadata are real nova objects built the way nova
builds them (``nova.utils.get_system_metadata_from_image``).
"""

import fcntl
import itertools
import os
import re

from eventlet import patcher
import fixtures
from lxml import etree
import os_vif
from oslo_utils.fixture import uuidsentinel as uuids

from nova.api.validation.extra_specs import validators
from nova import context
from nova import exception
from nova import objects
from nova import test
from nova.tests import fixtures as nova_fixtures
from nova.tests.unit import fake_network
from nova import utils
from nova.virt import fake
from nova.virt.libvirt import blockinfo
from nova.virt.libvirt import driver as libvirt_driver

from vsmtio_agent.tests import system_user
from vsmtio_contract import kernel_abi
from vsmtio_contract import specs
from vsmtio_nova.virt.libvirt import driver
from vsmtio_nova.virt.libvirt import retention

QEMU = '{%s}' % retention.QEMU_NS


#: What a retaining flavor carries: only dedicated CPUs may retain.
DEDICATED = {'hw:cpu_policy': 'dedicated'}
RETAINING = dict(DEDICATED, **{'vsmtio:context_retention': 'true'})


def _pinned():
    """The NUMA topology nova gives a dedicated 2-vCPU instance."""
    return objects.InstanceNUMATopology(cells=[objects.InstanceNUMACell(
        id=0, cpuset=set(), pcpuset={0, 1}, memory=2048,
        cpu_policy='dedicated', cpu_pinning={0: 0, 1: 1},
        cpuset_reserved=None)])


def _instance(extra_specs=None, image_props=None):
    """A real Instance as compute holds it at spawn (nova's test shape)."""
    extra_specs = dict(extra_specs or {})
    image_meta = {'id': uuids.image, 'disk_format': 'raw',
                  'properties': dict(image_props or {})}
    sysmeta = utils.get_system_metadata_from_image(image_meta)
    sysmeta['image_base_image_ref'] = uuids.image
    flavor = objects.Flavor(
        id=2, name='m1.small', flavorid='1', memory_mb=2048, vcpus=2,
        root_gb=10, ephemeral_gb=0, swap=0, vcpu_weight=None,
        rxtx_factor=1.0, extra_specs=dict(extra_specs or {}))
    inst = objects.Instance(
        id=1, uuid=uuids.instance, display_name='retainer',
        project_id='fake', user_id='fake', image_ref=uuids.image,
        root_gb=10, ephemeral_gb=0, memory_mb=2048, vcpus=2,
        instance_type_id=flavor.id, flavor=flavor, old_flavor=None,
        new_flavor=None, system_metadata=sysmeta,
        pci_devices=objects.PciDeviceList(),
        numa_topology=(_pinned() if extra_specs.get('hw:cpu_policy') ==
                       'dedicated' else None),
        config_drive=None, vm_mode=None, kernel_id=None, ramdisk_id=None,
        os_type='linux', ephemeral_key_uuid=None, vcpu_model=None,
        host='fake-host', node='fake-node', task_state=None,
        vm_state=None, trusted_certs=None, resources=None,
        migration_context=None, device_metadata=None)
    return inst, objects.ImageMeta.from_dict(image_meta)


class DomainXMLTestCase(test.NoDBTestCase):
    """Set up like nova's LibvirtConnTestCase."""

    REQUIRES_LOCKING = True

    def setUp(self):
        super().setUp()
        self.context = context.get_admin_context()
        # What was said once is said again in each test.
        specs.WARNED.clear()
        retention._SAID.clear()
        tmp = self.useFixture(fixtures.TempDir()).path
        self.flags(instances_path=tmp)
        self.flags(snapshots_directory=tmp, group='libvirt')
        os_vif.initialize()
        self.useFixture(nova_fixtures.LibvirtFixture())
        self.useFixture(nova_fixtures.CGroupsFixture())
        self.stub_out('nova.objects.InstanceList.get_by_host',
                      lambda *a, **k: objects.InstanceList(objects=[]))
        # A host with the vsmtio kernel (ABI version 1): one sysfs file.
        self.flags(sysfs_root=self.sysfs(abi_version='1\n'), group='vsmtio')

    def sysfs(self, abi_version=None):
        root = self.useFixture(fixtures.TempDir()).path
        if abi_version is not None:
            os.makedirs(os.path.join(root, 'kernel', 'vsmtio'))
            with open(os.path.join(root, kernel_abi.ABI_VERSION), 'w') as f:
                f.write(abi_version)
        return root

    def xml(self, extra_specs=None, image_props=None,
            cls=driver.VsmtioLibvirtDriver):
        drvr = cls(fake.FakeVirtAPI(), True)
        inst, image_meta = _instance(extra_specs, image_props)
        disk_info = blockinfo.get_disk_info('kvm', inst, image_meta)
        return drvr._get_guest_xml(
            self.context, inst, fake_network.fake_get_instance_nw_info(self),
            disk_info, image_meta)

    def assertRetains(self, xml):
        root = etree.fromstring(xml)
        self.assertEqual(retention.QEMU_NS, root.nsmap.get('qemu'))
        cmdlines = root.findall(QEMU + 'commandline')
        self.assertEqual(1, len(cmdlines))
        self.assertEqual(['-overcommit', 'cpu-pm=on'],
                         [a.get('value') for a in cmdlines[0]])
        kvms = root.findall('features/kvm')
        self.assertEqual(1, len(kvms))
        self.assertEqual(['on'], [h.get('state') for h in
                                  kvms[0].findall('hint-dedicated')])
        return root

    def assertPlain(self, xml):
        root = etree.fromstring(xml)
        self.assertNotIn('qemu', root.nsmap)
        self.assertEqual([], root.findall(QEMU + 'commandline'))
        self.assertEqual([], root.findall('features/kvm/hint-dedicated'))
        self.assertNotIn('cpu-pm', xml)


class TestDomainXML(DomainXMLTestCase):

    def test_other_instances_get_nova_s_xml_unchanged(self):
        def stable(xml):  # creation time is the only moving part
            return re.sub(r'<nova:creationTime>[^<]*<', '<', xml)

        ours = self.xml()
        self.assertPlain(ours)
        nova_s = self.xml(cls=libvirt_driver.LibvirtDriver)
        self.assertEqual(stable(nova_s), stable(ours))

    def test_flavor_true_lets_the_guest_mwait(self):
        for value in ('true', 'True', '1', 'yes'):
            self.assertRetains(self.xml(
                dict(DEDICATED, **{'vsmtio:context_retention': value})))

    def test_flavor_false_changes_nothing(self):
        self.assertPlain(self.xml({'vsmtio:context_retention': 'false'}))

    def test_image_property_alone_never_enables(self):
        # Before: the image property alone gave the guest cpu-pm=on, on
        # shared CPUs, with a warning. Only the flavor enables it now.
        for extra in ({}, DEDICATED, {'vsmtio:context_retention': 'false'}):
            self.assertPlain(self.xml(
                extra, image_props={'vsmtio_context_retention': 'true'}))
        self.assertIn('only a flavor with vsmtio:context_retention=true '
                      'enables it', self.stdlog.logger.output)

    def test_image_false_declines_what_the_flavor_allows(self):
        self.assertPlain(
            self.xml(RETAINING, {'vsmtio_context_retention': 'no'}))
        self.assertPlain(
            self.xml(image_props={'vsmtio_context_retention': 'no'}))

    def test_flavor_and_image_agreeing(self):
        self.assertRetains(self.xml(
            RETAINING, {'vsmtio_context_retention': 'true'}))

    def test_shared_cpus_refused_not_degraded(self):
        # Before: started with cpu-pm=on on shared CPUs, a warning logged.
        # InvalidInput: nova aborts the build, the reason is the fault.
        e = self.assertRaises(exception.InvalidInput, self.xml,
                              {'vsmtio:context_retention': 'true'})
        self.assertIn('needs dedicated CPUs (hw:cpu_policy=dedicated',
                      str(e))

    def test_the_result_still_parses_as_nova_s_guest_config(self):
        root = self.assertRetains(self.xml(RETAINING))
        self.assertEqual('kvm', root.get('type'))
        self.assertIsNotNone(root.find('features/acpi'))
        self.assertIsNotNone(root.find('devices/disk'))

    def test_kvm_hidden_and_hint_share_one_kvm_element(self):
        root = self.assertRetains(self.xml(
            dict(RETAINING, **{'hw:hide_hypervisor_id': 'true'})))
        kvm = root.find('features/kvm')
        self.assertEqual(['hidden', 'hint-dedicated'],
                         [child.tag for child in kvm])

    def test_not_kvm_refuses_rather_than_start_without(self):
        # ComputeResourcesUnavailable: nova-compute reschedules the build.
        self.flags(virt_type='qemu', group='libvirt')
        e = self.assertRaises(exception.ComputeResourcesUnavailable,
                              self.xml, RETAINING)
        self.assertIn('virt_type is qemu', str(e))

    def test_stock_kernel_refuses_rather_than_start_without(self):
        for abi in (None, '7\n'):
            self.flags(sysfs_root=self.sysfs(abi), group='vsmtio')
            e = self.assertRaises(
                exception.ComputeResourcesUnavailable, self.xml, RETAINING)
            self.assertIn('vsmtio: context retention asked for, but host '
                          'fake-mini cannot give it', str(e))

    def test_stock_kernel_still_starts_plain_guests(self):
        self.flags(sysfs_root=self.sysfs(None), group='vsmtio')
        self.assertPlain(self.xml({'vsmtio:context_retention': 'false'}))


class TestBadValues(DomainXMLTestCase):

    """A value nova-api refuses is ignored with one warning, never read.

    Flavors made before the validator was installed, or through
    microversions older than 2.86, can still hold one; nova does not
    validate image properties at all.
    """

    def test_bad_image_value_ignored(self):
        self.assertRetains(self.xml(
            RETAINING, {'vsmtio_context_retention': 'maybe'}))
        self.assertIn("Ignoring vsmtio_context_retention of instance",
                      self.stdlog.logger.output)

    def test_bad_flavor_value_ignored(self):
        self.assertPlain(self.xml(
            dict(DEDICATED, **{'vsmtio:context_retention': 'sometimes'})))
        self.assertIn('Ignoring vsmtio:context_retention of flavor m1.small',
                      self.stdlog.logger.output)

    def test_nova_api_validator_refuses_bad_flavor_value(self):
        validators.validate('vsmtio:context_retention', 'true')
        self.assertRaises(exception.ValidationError, validators.validate,
                          'vsmtio:context_retention', 'maybe')


class TestAddToDomain(test.NoDBTestCase):

    DOMAIN = ("<domain type='kvm'><name>d</name><os><type>hvm</type></os>"
              "<devices/></domain>")

    def test_adds_features_after_os_when_missing(self):
        root = etree.fromstring(retention.add_to_domain(self.DOMAIN))
        self.assertEqual(['name', 'os', 'features', 'devices',
                          QEMU + 'commandline'],
                         [child.tag for child in root])

    def test_idempotent(self):
        once = retention.add_to_domain(self.DOMAIN)
        self.assertEqual(once, retention.add_to_domain(once))


_EMBED = {}


def embed_root():
    """This process's own ``qemu:///embed`` root, for its whole life.

    The embedded QEMU driver locks its root's ``run/qemu/driver.pid`` on
    the first open and keeps it until the process exits, even once its
    last connection is closed, so two processes (stestr's workers, two
    test runs on one host) cannot share a root: the second fails with
    "Failed to acquire pid file". Each process takes the first root
    whose lock file no live process holds, and holds it to the end.
    A root keeps its QEMU capabilities cache between runs (a new one
    probes QEMU first, about 20 s).
    """
    if 'root' not in _EMBED:
        cache = os.environ.get('VSMTIO_GUEST_CACHE', '/var/tmp/vsmtio-guest')
        os.makedirs(cache, exist_ok=True)
        for slot in itertools.count():
            root = os.path.join(cache, 'libvirt-embed' +
                                ('-%d' % slot if slot else ''))
            lock = open(root + '.lock', 'w')
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                lock.close()
                continue
            os.makedirs(root, exist_ok=True)
            _EMBED.update(root=root, lock=lock)
            break
    return _EMBED['root']


class TestRealLibvirt(DomainXMLTestCase):
    """libvirt's own QEMU driver parses and keeps what we add.

    Runs libvirt 9's QEMU driver in process (``qemu:///embed``, no daemon)
    and defines, without starting, the domain our driver built, with
    libvirt's schema validation.  Defining is all this host allows: no
    guest can start under KVM here.  The embedded driver probes QEMU once
    per root (about 20 s) and caches it under $VSMTIO_GUEST_CACHE
    (:func:`embed_root`).
    """

    QEMU_DRIVER = ('/usr/lib/x86_64-linux-gnu/libvirt/connection-driver/'
                   'libvirt_driver_qemu.so')

    def setUp(self):
        super().setUp()
        # LibvirtFixture replaced the libvirt module for nova; we need the
        # real one, imported here and nowhere else.
        try:
            import libvirt as real_libvirt
        except ImportError:
            self.skipTest('libvirt-python is not installed')
        if not os.path.exists(self.QEMU_DRIVER):
            self.skipTest('libvirt-daemon-driver-qemu is not installed')
        why = system_user.ensure()
        if why:
            self.skipTest(why)
        self.real = real_libvirt

    def _define(self, xml):
        lv = self.real
        if not getattr(TestRealLibvirt, '_loop', None):
            lv.virEventRegisterDefaultImpl()
            # A real OS thread: nova's tests run under eventlet, whose
            # green threads would block in libvirt's C event loop.
            threading = patcher.original('threading')
            TestRealLibvirt._loop = threading.Thread(
                target=lambda: [lv.virEventRunDefaultImpl()
                                for _ in iter(int, 1)], daemon=True)
            TestRealLibvirt._loop.start()
        conn = lv.open('qemu:///embed?root=' + embed_root())
        try:
            caps = conn.getCapabilities()
            if "<domain type='kvm'" not in caps:
                xml = xml.replace('type="kvm"', 'type="qemu"', 1)
            dom = conn.defineXMLFlags(xml, lv.VIR_DOMAIN_DEFINE_VALIDATE)
            try:
                return dom.XMLDesc(0)
            finally:
                dom.undefine()
        finally:
            conn.close()

    def test_libvirt_keeps_both_elements(self):
        kept = self._define(self.xml(RETAINING))
        root = etree.fromstring(kept)
        self.assertEqual(['-overcommit', 'cpu-pm=on'],
                         [a.get('value') for a in
                          root.findall(QEMU + 'commandline/' + QEMU + 'arg')])
        self.assertEqual(['on'], [h.get('state') for h in
                                  root.findall('features/kvm/hint-dedicated')])
