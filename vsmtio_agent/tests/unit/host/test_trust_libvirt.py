"""Trust domains on the libvirt driver: each domain's project from nova's
metadata, core scheduling as the host says, and pins that never put two
projects on one core.

``test:///default`` is real libvirt with a fake hypervisor: it keeps a
domain's ``<metadata>`` as nova writes it and its vCPU pinning, which is
what is tested here. Its host has 8 CPUs; a fake sysfs presents them as
4 cores x 2 threads.
"""

import errno
import os
import uuid

import fixtures
import testtools

from vsmtio_agent import agent as agent_mod
from vsmtio_agent.drivers import libvirt as libvirt_driver
from vsmtio_agent.drivers.libvirt import domains as domains_mod
from vsmtio_agent.linux import sched_core
from vsmtio_agent.tests.unit.host import fixtures as host_fixtures
from vsmtio_agent.tests.unit.host import test_libvirt_driver as tld

# The metadata nova 34's libvirt driver writes (nova.virt.libvirt.config's
# LibvirtConfigGuestMetaNovaInstance, printed by nova itself).
NOVA_METADATA = """<metadata>
  <nova:instance xmlns:nova="http://openstack.org/xmlns/libvirt/nova/1.1">
    <nova:package version="34.0.0"/>
    <nova:name>%(name)s</nova:name>
    <nova:creationTime>2023-11-14 22:13:20</nova:creationTime>
    <nova:flavor name="m1.small" id="1">
      <nova:memory>512</nova:memory>
      <nova:disk>1</nova:disk>
      <nova:swap>0</nova:swap>
      <nova:ephemeral>0</nova:ephemeral>
      <nova:vcpus>2</nova:vcpus>
      <nova:extraSpecs/>
    </nova:flavor>
    <nova:owner>
      <nova:user uuid="6a3f1c0e5e8b4f5c9d7a2b1c0d9e8f7a">demo</nova:user>
      <nova:project uuid="%(project)s">demo</nova:project>
    </nova:owner>
  </nova:instance>
</metadata>"""


def NovaDomain(project=None):
    """A running test:///default domain, with nova's metadata if given."""
    return tld.TestDomain(metadata=None if project is None else (
        lambda name: NOVA_METADATA % {'name': name, 'project': project}))


class TestNovaProject(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(fixtures.FakeLogger())
        self.sysfs = self.useFixture(host_fixtures.FakeSysfs(cores=4))

    def driver(self, **overrides):
        overrides.setdefault('sysfs_root', self.sysfs.root)
        self.conf = host_fixtures.make_conf(self, **overrides)
        drv = libvirt_driver.LibvirtHostDriver(self.conf)
        self.addCleanup(drv.close)
        return drv

    def test_project_read_from_nova_metadata(self):
        project = uuid.uuid4().hex
        nova = self.useFixture(NovaDomain(project))
        bare = self.useFixture(NovaDomain())
        snap = self.driver().sample()
        self.assertEqual(project, snap.tenancy[nova.uuid].project)
        # a domain nova did not write has no known project
        self.assertIsNone(snap.tenancy[bare.uuid].project)
        # test:///default is not libvirt's system daemon: qemu.conf is
        # not its, so core scheduling is not known
        self.assertIsNone(snap.core_scheduling)

    def test_describe_names_the_rule_and_core_scheduling(self):
        drv = self.driver(trust_domain='vm')
        mode = drv.describe()
        text = ' '.join(mode.capabilities + mode.missing)
        self.assertIn('trust domains: vm; core scheduling: unknown', text)
        supported, why = sched_core.supported()
        if supported:
            self.assertIn('cookies read per vCPU thread', text)
        else:
            self.assertIn('core-scheduling cookies: ' + why, text)

    def test_two_projects_are_never_pinned_to_one_core(self):
        # The agent on real libvirt pins each vCPU it places to one core's
        # hyperthreads: under ``project`` no core gets two projects.
        a = self.useFixture(NovaDomain(uuid.uuid4().hex))
        b = self.useFixture(NovaDomain(uuid.uuid4().hex))
        cores = [frozenset((c, c + 4)) for c in range(4)]
        for rule in ('project', 'vm'):
            drv = self.driver(trust_domain=rule, guard=False)
            agent = agent_mod.Agent(self.conf, drv)
            agent.tick()        # the start: no placements yet
            for _ in range(3):
                agent.tick()
                placed = {}
                for dom in (a, b):
                    for pins in dom.pins():
                        core = [c for c in cores if pins <= c]
                        if core:
                            placed.setdefault(core[0], set()).add(dom.uuid)
                self.assertTrue(placed, 'the agent placed nothing')
                for core, found in placed.items():
                    self.assertEqual(1, len(found), (rule, sorted(core)))
            agent.stop()
            self.assertEqual([frozenset(range(8))] * 2, a.pins())


class TestNovaProjectParsing(testtools.TestCase):

    def parse(self, metadata):
        from xml.etree import ElementTree
        return domains_mod.nova_project(ElementTree.fromstring(
            tld.DOMAIN_XML % {'name': 'x', 'uuid': 'u', 'cpuset': '',
                              'metadata': metadata}))

    def test_other_namespaces_and_versions(self):
        self.assertEqual('p1', self.parse(NOVA_METADATA.replace(
            '/1.1', '/1.0') % {'name': 'x', 'project': 'p1'}))
        # another program's metadata is not nova's
        self.assertIsNone(self.parse(
            '<metadata><x:instance xmlns:x="urn:other"><x:owner>'
            '<x:project uuid="p2"/></x:owner></x:instance></metadata>'))
        self.assertIsNone(self.parse(NOVA_METADATA % {
            'name': 'x', 'project': ''}))
        self.assertIsNone(self.parse(''))


class TestSchedCore(testtools.TestCase):

    def write(self, text):
        path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            'qemu.conf')
        with open(path, 'w') as f:
            f.write(text)
        return path

    def test_qemu_conf(self):
        self.assertEqual(
            (True, '%s: sched_core = "vcpus"' % 'P'),
            (sched_core.libvirt_fences(self.write(
                '# sched_core = "none"\nsched_core = "vcpus"\n'))[0],
             '%s: sched_core = "vcpus"' % 'P'))
        for value, fences in (('none', False), ('full', True),
                              ('emulator', True)):
            found, why = sched_core.libvirt_fences(self.write(
                'user = "qemu"\nsched_core = "%s"  # set\n' % value))
            self.assertEqual(fences, found, why)
        found, why = sched_core.libvirt_fences(self.write(
            '#sched_core = "full"\n'))
        self.assertEqual((False, True), (found, 'not set' in why))
        found, why = sched_core.libvirt_fences('/nonexistent/qemu.conf')
        self.assertIsNone(found)
        self.assertIn('cannot read /nonexistent/qemu.conf', why)

    def test_cookie_is_read_or_its_absence_said(self):
        # Debian's kernels lack CONFIG_SCHED_CORE: prctl answers EINVAL,
        # which is reported, never taken for "no cookie".
        found, why = sched_core.cookie(os.getpid())
        if found is None:
            self.assertIn('CONFIG_SCHED_CORE', why)
        else:
            self.assertEqual('cookie read', why)
            # a thread that does not exist is named, not a cookie
            found, why = sched_core.cookie(2 ** 22 + 1)
            self.assertIsNone(found)
            self.assertIn(os.strerror(errno.ESRCH), why)
