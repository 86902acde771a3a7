"""A live migration as each host's agent sees it (``test:///default``).

To the source host's agent a live-migrated domain is one that stops
running; to the destination's, one with the same uuid and a new libvirt
id that starts running with the live definition the source had, vCPU
pins, cpu shares and metadata included (libvirt sends the live definition
when the migration begins). ``test:///default`` cannot migrate, so each
test plays the two ends: the source domain's live XML taken, the domain
destroyed, then created again from that XML under a second agent (its own
checkpoint and sysfs). doc/source/fleet.rst describes the protocol.
"""

import json
import time
from xml.etree import ElementTree

import libvirt

from vsmtio_agent.drivers.libvirt import carried as carried_mod
from vsmtio_agent.drivers.libvirt import domains
from vsmtio_agent import model
from vsmtio_agent.tests.unit.host import fixtures as host_fixtures
from vsmtio_agent.tests.unit.host import test_libvirt_driver as base

ALL = base.ALL


class MigrationTest(base.DriverTestCase):

    def setUp(self):
        super().setUp()
        self.dom = self.useFixture(base.TestDomain())
        self.other = self.useFixture(base.TestDomain())
        self.source = self.driver()
        self.source.sample()
        self.source.apply(model.Decision(50000, {
            model.VcpuRef(self.dom.uuid, 0): base.placement(
                2, model.Role.CPU, 2),
            model.VcpuRef(self.other.uuid, 0): base.placement(
                3, model.Role.CPU, 3)}))
        self.assertIn(self.dom.uuid, self.checkpoint_data()['domains'])
        self.source_conf = self.conf

    def migrate(self, edit=None):
        """The domain leaves the source and arrives, as it was, elsewhere.

        ``edit`` changes the live XML on the way (as nova's
        ``get_updated_guest_xml`` does).
        """
        xml = self.dom.dom.XMLDesc(0)
        self.dom.dom.destroy()
        if edit is not None:
            xml = edit(xml)
        conn = libvirt.open('test:///default')
        self.addCleanup(conn.close)
        arrived = conn.createXML(xml)
        self.addCleanup(arrived.destroy)
        return arrived

    def pins(self, dom):
        return [frozenset(i for i, on in enumerate(m) if on)
                for m in dom.vcpuPinInfo(0)]

    def destination(self):
        sysfs = self.useFixture(host_fixtures.FakeSysfs(cores=4))
        return self.driver(sysfs_root=sysfs.root)

    def source_recorded(self):
        with open(self.source_conf.vsmtio_agent.checkpoint_path) as f:
            return self.dom.uuid in f.read()

    def test_source_forgets_the_departed_domain_and_writes_nothing(self):
        self.dom.dom.destroy()
        # The departure is seen at the first period after libvirt's
        # lifecycle event reaches the agent (or a relist): a few periods.
        deadline = time.monotonic() + 2 * domains.RELIST_S
        while self.source_recorded() and time.monotonic() < deadline:
            self.source.sample()
            time.sleep(0.05)
        self.assertFalse(self.source_recorded())
        # What it changed elsewhere on its host still goes back.
        self.source.restore()
        self.assertEqual([ALL, ALL], self.other.pins())
        self.assertEqual(200000, self.sysfs.read_knob())

    def test_source_carries_the_originals_before_it_changes_anything(self):
        carried = json.loads(ElementTree.fromstring(self.dom.dom.metadata(
            libvirt.VIR_DOMAIN_METADATA_ELEMENT, carried_mod.NS,
            libvirt.VIR_DOMAIN_AFFECT_LIVE)).text)
        self.assertEqual({'pins': {'0': list(range(8))}}, carried)
        self.source.restore()
        self.assertEqual([ALL, ALL], self.dom.pins())
        # what is restored is no longer carried
        self.assertNotIn(carried_mod.NS, self.dom.dom.XMLDesc(0))

    def test_destination_writes_back_what_travelled(self):
        """The source's pins travel; nova's go back before anything else."""
        self.source.sample()   # (the source forgets it, as above)
        arrived = self.migrate()
        self.assertEqual([{2}, ALL], self.pins(arrived))
        dest = self.destination()
        refs = sorted(r.index for r in dest.sample().vcpus
                      if r.domain == self.dom.uuid)
        self.assertEqual([0, 1], refs)
        result = dest.apply(model.Decision(50000, {
            model.VcpuRef(self.dom.uuid, 1): base.placement(
                1, model.Role.CPU, 1)}))
        self.assertEqual(0, result.failed)
        self.assertEqual([ALL, {1}], self.pins(arrived))
        self.assertIn(self.dom.uuid, self.checkpoint_data()['domains'])
        self.assertIn('carries 1 original(s) the agent on',
                      self.log.output)
        dest.restore()
        self.assertEqual([ALL, ALL], self.pins(arrived))
        self.assertNotIn(carried_mod.NS, arrived.XMLDesc(0))

    def test_restore_at_stop_puts_back_what_the_domain_carried(self):
        arrived = self.migrate()
        dest = self.destination()
        dest.sample()
        dest.apply(model.Decision(50000, {
            model.VcpuRef(self.dom.uuid, 0): base.placement(
                1, model.Role.CPU, 1)}))
        self.assertEqual([{1}, ALL], self.pins(arrived))
        dest.restore()
        self.assertEqual([ALL, ALL], self.pins(arrived))

    def test_a_numa_instance_keeps_the_pins_nova_gave_it_there(self):
        """nova re-pins a NUMA instance for its destination: kept."""
        numa = ("<cpu><numa><cell id='0' cpus='0-1' memory='65536'/>"
                "</numa></cpu>")
        arrived = self.migrate(lambda xml: xml.replace(
            '</domain>', numa + '</domain>').replace(
            "cpuset='2'", "cpuset='3'"))
        self.assertEqual([{3}, ALL], self.pins(arrived))
        dest = self.destination()
        dest.sample()
        dest.apply(model.Decision(50000, {}))
        self.assertEqual([{3}, ALL], self.pins(arrived))
        self.assertEqual({}, self.checkpoint_data()['domains'])

    def test_what_does_not_fit_is_ignored_and_loses_nothing(self):
        for text in ('not json', '{"pins": {"0": [-1]}}',
                     '{"rass": {"0": "io"}}',
                     '{"pins": {"0": [%d]}}' % 4096):
            with self.subTest(text=text):
                dom = self.useFixture(base.TestDomain())
                dom.dom.setMetadata(
                    libvirt.VIR_DOMAIN_METADATA_ELEMENT,
                    '<originals host="elsewhere">%s</originals>' % text,
                    'vsmtio', carried_mod.NS, libvirt.VIR_DOMAIN_AFFECT_LIVE)
                dest = self.destination()
                dest.sample()
                result = dest.apply(model.Decision(50000, {}))
                self.assertEqual(0, result.failed)
                self.assertEqual([ALL, ALL], dom.pins())
        self.assertIn('carries originals that do not fit', self.log.output)
        self.assertIn('naming CPUs not on this host left out',
                      self.log.output)
