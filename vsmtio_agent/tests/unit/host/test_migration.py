"""A live migration as each host's agent sees it (``test:///default``).

To the source host's agent a live-migrated domain is one that stops
running; to the destination's, one with the same uuid and a new libvirt
id that starts running with the live definition the source had, vCPU
pins and cpu shares included (libvirt sends the live definition when the
migration begins). ``test:///default`` cannot migrate, so each test plays
the two ends: the source domain destroyed, then the same uuid created
again with the pins it carried, under a second agent (its own checkpoint
and sysfs). doc/source/fleet.rst describes the protocol.
"""

import time
import unittest

import libvirt

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

    def migrate(self):
        """The domain leaves the source and arrives, as it was, elsewhere."""
        travelled = self.dom.pins()
        self.dom.dom.destroy()
        conn = libvirt.open('test:///default')
        self.addCleanup(conn.close)
        arrived = conn.createXML(base.DOMAIN_XML % {
            'name': self.dom.name, 'uuid': self.dom.uuid, 'cpuset': '',
            'metadata': ''})
        self.addCleanup(arrived.destroy)
        for vcpu, cpus in enumerate(travelled):
            arrived.pinVcpu(vcpu, tuple(i in cpus for i in range(8)))
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

    def test_destination_picks_the_arrived_domain_up(self):
        self.source.sample()   # (the source forgets it, as above)
        arrived = self.migrate()
        dest = self.destination()
        refs = sorted(r.index for r in dest.sample().vcpus
                      if r.domain == self.dom.uuid)
        self.assertEqual([0, 1], refs)
        result = dest.apply(model.Decision(50000, {
            model.VcpuRef(self.dom.uuid, 1): base.placement(
                1, model.Role.CPU, 1)}))
        self.assertEqual(0, result.failed)
        self.assertEqual([{2}, {1}], self.pins(arrived))
        self.assertIn(self.dom.uuid, self.checkpoint_data()['domains'])

    @unittest.expectedFailure
    def test_destination_does_not_keep_what_travelled(self):
        """Known gap (doc/source/fleet.rst): the source's pins travel.

        The destination agent records the pins the domain arrived with
        as its originals and puts them back at its stop; the protocol
        gives a domain started by migration what nova gives a domain on
        that host (here: no pin).
        """
        arrived = self.migrate()
        dest = self.destination()
        dest.sample()
        dest.apply(model.Decision(50000, {
            model.VcpuRef(self.dom.uuid, 0): base.placement(
                1, model.Role.CPU, 1)}))
        dest.restore()
        self.assertEqual([ALL, ALL], self.pins(arrived))
