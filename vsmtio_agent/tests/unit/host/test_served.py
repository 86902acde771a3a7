"""What every running domain serves, through the libvirt driver's sample().

libvirt's test driver answers ``getAllDomainStats`` with the state group
only, whatever is asked: the calls and the records' shape are real, and
the block and interface figures a libvirtd would add are added to its
records here (as libvirt names them). Real figures of a real guest are
``vsmtio_agent/tests/functional/test_served.py``'s.
"""

import fixtures
import libvirt
import testtools

from vsmtio_agent.drivers.libvirt import served
from vsmtio_agent import model
from vsmtio_agent.tests.unit.host import fixtures as host_fixtures
from vsmtio_agent.tests.unit.host import test_libvirt_driver as base

BLOCK = {'block.count': 2,
         'block.0.rd.reqs': 3, 'block.0.wr.reqs': 4,
         'block.0.rd.bytes': 10, 'block.0.wr.bytes': 20,
         'block.0.rd.times': 100, 'block.0.wr.times': 200,
         'block.1.rd.reqs': 1, 'block.1.wr.reqs': 0,
         'block.1.rd.bytes': 5, 'block.1.wr.bytes': 0,
         'block.1.rd.times': 50, 'block.1.wr.times': 0}
NET = {'net.count': 2,
       'net.0.rx.pkts': 11, 'net.0.tx.pkts': 7, 'net.0.rx.bytes': 900,
       'net.1.rx.pkts': 2, 'net.1.tx.pkts': 0}


class TestTotals(testtools.TestCase):

    def test_packets_summed_over_interfaces(self):
        self.assertEqual(20, served.net_packets(NET))
        self.assertEqual(0, served.net_packets({'net.count': 0}))
        self.assertIsNone(served.net_packets({}))
        partial = dict(NET)
        del partial['net.1.tx.pkts']
        self.assertIsNone(served.net_packets(partial))

    def test_counters_of_a_record(self):
        got = served.counters(dict(BLOCK, **NET),
                              model.Reservation(iops=5))
        self.assertEqual(model.DomainCounters(
            io_requests=8, io_bytes=35, reservation=model.Reservation(iops=5),
            io_busy_ns=350, net_packets=20), got)
        self.assertEqual(28, got.served)
        # no disk and no interface: it serves nothing; no stats: unknown
        self.assertEqual(0, served.counters({'block.count': 0,
                                             'net.count': 0}).served)
        nothing = served.counters({'state.state': 1})
        self.assertEqual((None, None, None, None), (
            nothing.io_requests, nothing.io_bytes, nothing.net_packets,
            nothing.served))
        # disks counted, interfaces not: what is counted is served
        self.assertEqual(8, served.counters(BLOCK).served)


class TestEveryDomainServes(base.DriverTestCase):

    def setUp(self):
        super().setUp()
        self.calls = []
        self.figures = {}       # uuid -> the groups' figures to add
        real = libvirt.virConnect.getAllDomainStats

        def stats(conn, groups, flags=0):
            self.calls.append(groups)
            return [(dom, dict(record, **self.figures.get(
                dom.UUIDString(), {}))) for dom, record in real(
                    conn, groups, flags)]
        self.useFixture(fixtures.MonkeyPatch(
            'libvirt.virConnect.getAllDomainStats', stats))

    def test_one_bulk_call_per_period_for_every_domain(self):
        one = self.useFixture(base.TestDomain())
        two = self.useFixture(base.TestDomain())
        self.figures[one.uuid] = dict(BLOCK, **NET)
        self.figures[two.uuid] = {'block.count': 0, 'net.count': 1,
                                  'net.0.rx.pkts': 4, 'net.0.tx.pkts': 5}
        drv = self.driver()
        for _ in range(3):
            del self.calls[:]
            snap = drv.sample()
            self.assertEqual(1, len(self.calls))
            self.assertEqual(served.GROUPS,
                             self.calls[0] & served.GROUPS)
            self.assertEqual(28, snap.domains[one.uuid].served)
            self.assertEqual((0, 9), (snap.domains[two.uuid].io_requests,
                                      snap.domains[two.uuid].net_packets))
            self.assertEqual(model.Reservation(),
                             snap.domains[one.uuid].reservation)
        # every running domain, and only those
        self.assertTrue({one.uuid, two.uuid} <= set(snap.domains))
        self.assertEqual({r.domain for r in snap.vcpus}, set(snap.domains))
        two.dom.destroy()
        self.assertNotIn(two.uuid, drv.sample().domains)

    def test_missing_statistics_are_none_not_a_crash(self):
        one = self.useFixture(base.TestDomain())
        partial = dict(BLOCK, **NET)
        del partial['block.1.wr.reqs'], partial['net.0.tx.pkts']
        self.figures[one.uuid] = partial
        bare = self.useFixture(base.TestDomain())     # the state alone
        snap = self.driver().sample()
        for uuid in (one.uuid, bare.uuid):
            got = snap.domains[uuid]
            self.assertEqual((None, None, None, None), (
                got.io_requests, got.io_bytes, got.net_packets, got.served))
        # its vCPUs are observed as ever
        self.assertIn(model.VcpuRef(one.uuid, 0), snap.vcpus)

    def test_off_asks_for_no_statistics(self):
        # (MIST measures its reserved domains whatever this says)
        self.useFixture(base.TestDomain())
        drv = self.driver(served_stats=False, mist=False)
        snap = drv.sample()
        self.assertEqual({}, snap.domains)
        self.assertFalse(any(groups & served.GROUPS for groups in self.calls))


class TestWhatTheHostCanBenefitFrom(base.DriverTestCase):
    """``vsmtio-agent check``'s lines, one per mechanism or measure."""

    def benefits(self, **overrides):
        drv = self.driver(**overrides)
        return dict(line.split(': ', 1) for line in drv.describe().benefits)

    def test_smt_host_with_halt_polling(self):
        self.useFixture(base.TestDomain())
        got = self.benefits()
        self.assertEqual('yes: 4 cores with SMT siblings',
                         got['RASS (sibling split, borrowing)'])
        self.assertIn('yes: halt polling, through',
                      got['context retention (LTCR)'])
        # test:/// reports no block or interface statistics
        self.assertRegex(
            got['served I/O measure (block and interface statistics)'],
            r'^no: 0 of \d+ running domain\(s\) report them$')

    def test_host_without_siblings_or_a_writable_knob(self):
        self.sysfs = self.useFixture(host_fixtures.FakeSysfs(
            cores=2, threads=1, knob_writable=False))
        got = self.benefits(served_stats=False, mist=False)
        self.assertEqual('no: it needs SMT siblings, and each of the 2 '
                         'cores has one thread',
                         got['RASS (sibling split, borrowing)'])
        self.assertTrue(got['context retention (LTCR)'].startswith(
            'no: no patched kernel, and halt polling cannot be set'))
        self.assertEqual(
            'no: served_stats and mist are off',
            got['served I/O measure (block and interface statistics)'])

    def test_served_yes_where_libvirt_reports_them(self):
        self.useFixture(base.TestDomain())
        real = libvirt.virConnect.getAllDomainStats

        def stats(conn, groups, flags=0):
            return [(dom, dict(record, **BLOCK, **NET))
                    for dom, record in real(conn, groups, flags)]
        self.useFixture(fixtures.MonkeyPatch(
            'libvirt.virConnect.getAllDomainStats', stats))
        self.assertRegex(self.benefits()[
            'served I/O measure (block and interface statistics)'],
            r'^yes: (\d+) of \1 running domain\(s\) report them$')
