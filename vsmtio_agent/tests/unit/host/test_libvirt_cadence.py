"""The libvirt driver's slow cadence of switch counts, through sample().

``[vsmtio_agent] switch_read_periods``: each vCPU thread's ``status`` and
``stat`` are read on its turn only (a rotating share of the threads each
period), ``schedstat`` every period; what the driver's snapshots say of
when the counts were read, and what ``derive`` makes of them.
"""

import os
import time
import uuid

import fixtures
import libvirt

from vsmtio_agent import model
from vsmtio_agent.policy import monitor
from vsmtio_agent.tests.unit.host import fixtures as host_fixtures
from vsmtio_agent.tests.unit.host import test_libvirt_driver as base
from vsmtio_agent.tests.unit.host import test_mist_host


def ran(qemu, index, run_ns, voluntary, cpu):
    """Thread ``index`` ran: new schedstat, status and stat."""
    task = os.path.join(qemu.root, str(qemu.pid), 'task',
                        str(qemu.tids[index]))
    host_fixtures.write(os.path.join(task, 'schedstat'),
                        '%d %d %d\n' % (run_ns, run_ns + 1000, run_ns))
    host_fixtures.write(os.path.join(task, 'status'),
                        'voluntary_ctxt_switches:\t%d\n'
                        'nonvoluntary_ctxt_switches:\t3\n' % voluntary)
    host_fixtures.write(os.path.join(task, 'stat'), '%d (CPU %d/KVM) S %s\n'
                        % (qemu.tids[index], index,
                           ' '.join(['0'] * 35 + [str(cpu)] + ['0'] * 8)))


class TestSwitchReadPeriods(base.DriverTestCase):

    def test_each_thread_read_on_its_turn_and_counted_over_its_window(self):
        dom = self.useFixture(base.TestDomain())
        qemu = self.useFixture(host_fixtures.FakeQemuProcfs(dom.uuid,
                                                            name=dom.name))
        drv = self.driver(qemu=qemu, switch_read_periods=2)
        refs = [model.VcpuRef(dom.uuid, i) for i in range(2)]

        first = drv.sample()    # the first reading of a thread is whole
        self.assertEqual([0, 10], [first.vcpus[r].voluntary_switches
                                   for r in refs])
        self.assertEqual([None, None], [first.vcpus[r].switches_ns
                                        for r in refs])

        # both threads run and switch 20 more times, move to CPU 5
        for i in range(2):
            ran(qemu, i, 100 + i, 20 + 10 * i, 5)
        second = drv.sample()
        got = [second.vcpus[r] for r in refs]
        # schedstat every period, for both (the test driver has no delay)
        self.assertEqual([1100, 1101], [c.runqueue_delay_ns for c in got])
        # status and stat for one of the two only: its turn
        fresh = [c.switches_ns is None for c in got]
        self.assertEqual(1, sum(fresh), got)
        now, then = got[fresh.index(True)], got[fresh.index(False)]
        self.assertEqual(5, now.cpu)
        self.assertEqual(first.time_ns, then.switches_ns)
        self.assertNotEqual(5, then.cpu)        # still the one read then
        stats = monitor.derive(first, second, 10.0)
        s_now, s_then = (stats[refs[fresh.index(True)]],
                         stats[refs[fresh.index(False)]])
        self.assertEqual(20, s_now.voluntary_switches)
        self.assertIsNone(s_now.switch_window_ns)   # the period
        self.assertIsNone(s_then.voluntary_switches)    # nothing read yet

        # nothing ran since: the other thread's turn reads it now, the
        # first one's counts are confirmed by the gate (fresh, unread)
        third = drv.sample()
        self.assertEqual([None, None], [third.vcpus[r].switches_ns
                                        for r in refs])
        self.assertEqual([20, 30], [third.vcpus[r].voluntary_switches
                                    for r in refs])
        stats = monitor.derive(second, third, 10.0, last=stats)
        s_then = stats[refs[fresh.index(False)]]
        # its 20 switches over the two periods between its readings
        self.assertEqual(20, s_then.voluntary_switches)
        self.assertEqual(third.time_ns - first.time_ns,
                         s_then.switch_window_ns)
        self.assertEqual(0, stats[refs[fresh.index(True)]]
                         .voluntary_switches)

    def test_every_period_by_default_one(self):
        dom = self.useFixture(base.TestDomain())
        qemu = self.useFixture(host_fixtures.FakeQemuProcfs(dom.uuid,
                                                            name=dom.name))
        drv = self.driver(qemu=qemu, switch_read_periods=1)
        drv.sample()
        for i in range(2):
            ran(qemu, i, 100 + i, 20 + 10 * i, 5)
        snap = drv.sample()
        for i in range(2):
            c = snap.vcpus[model.VcpuRef(dom.uuid, i)]
            self.assertEqual((20 + 10 * i, 5, None),
                             (c.voluntary_switches, c.cpu, c.switches_ns))


class TestReservedDomainsEveryPeriod(base.DriverTestCase):

    def test_a_mist_reserved_domain_is_read_every_period(self):
        # MIST counts periods of I_cpu (its streaks, the hysteresis of a
        # VM protected again soon after its release): a reserved domain's
        # switch counts are read every period whatever the cadence.
        conn = libvirt.open('test:///default')
        self.addCleanup(conn.close)
        uid = str(uuid.uuid4())
        dom = conn.createXML(test_mist_host.NOVA_XML % {
            'name': 'r-' + uid[:8], 'uuid': uid,
            'specs': test_mist_host.spec('vsmtio:io_reservation_iops', '500')
            + test_mist_host.spec('resources:CUSTOM_VSMTIO_IO_IOPS', '500')})
        self.addCleanup(dom.destroy)
        qemu = self.useFixture(host_fixtures.FakeQemuProcfs(
            uid, name='r-' + uid[:8]))
        drv = self.driver(qemu=qemu, switch_read_periods=2,
                          mist=True, guard=False)
        refs = [model.VcpuRef(uid, i) for i in range(2)]
        snap = drv.sample()
        self.assertTrue(snap.domains[uid].reservation.reserved)
        for period in range(1, 4):
            for i in range(2):
                ran(qemu, i, 100 * period + i, 20 * period + i, period)
            snap = drv.sample()
            self.assertEqual(
                [(20 * period + i, period, None) for i in range(2)],
                [(snap.vcpus[r].voluntary_switches, snap.vcpus[r].cpu,
                  snap.vcpus[r].switches_ns) for r in refs])


class TestDriverWithoutVcpuStats(base.DriverTestCase):
    """test:/// has no vCPU stats: virDomainGetVcpus fills in, sparingly."""

    def calls(self):
        real = libvirt.virDomain.vcpus
        seen = []

        def vcpus(dom):
            seen.append(dom.UUIDString())
            return real(dom)
        self.useFixture(fixtures.MonkeyPatch('libvirt.virDomain.vcpus',
                                             vcpus))
        return seen

    def test_read_threads_cost_no_call_after_the_first(self):
        dom = self.useFixture(base.TestDomain())
        qemu = self.useFixture(host_fixtures.FakeQemuProcfs(dom.uuid,
                                                            name=dom.name))
        seen = self.calls()
        drv = self.driver(qemu=qemu, switch_read_periods=1)
        drv.sample()
        first = seen.count(dom.uuid)
        self.assertEqual(1, first)      # the vCPU count, once
        for period in range(1, 4):
            for i in range(2):
                ran(qemu, i, 1000 * period + i, 20 * period, 5)
            snap = drv.sample()
            self.assertEqual(
                [1000 * period, 1000 * period + 1],
                [snap.vcpus[model.VcpuRef(dom.uuid, i)].run_ns
                 for i in range(2)])     # the threads' own run time
        self.assertEqual(first, seen.count(dom.uuid))

    def test_a_vcpu_without_its_thread_takes_libvirts_figures(self):
        dom = self.useFixture(base.TestDomain())
        seen = self.calls()
        drv = self.driver()     # no QEMU process: no thread is read
        for _ in range(3):
            snap = drv.sample()
            for i in range(2):
                self.assertIsNotNone(
                    snap.vcpus[model.VcpuRef(dom.uuid, i)].run_ns)
        # the count once, then the run times each period
        self.assertEqual(4, seen.count(dom.uuid))


class TestThreadCountersFirst(base.DriverTestCase):

    def test_the_threads_run_time_and_delay_before_libvirts(self):
        # libvirt's vcpu.N.time is in clock ticks (10 ms): the thread's
        # schedstat, in ns, is taken where it was read.
        dom = self.useFixture(base.TestDomain())
        qemu = self.useFixture(host_fixtures.FakeQemuProcfs(dom.uuid,
                                                            name=dom.name))
        drv = self.driver(qemu=qemu)
        real = libvirt.virConnect.getAllDomainStats

        def with_vcpu_stats(conn, stats, flags=0):
            out = []
            for one, record in real(conn, stats, flags):
                if not stats & libvirt.VIR_DOMAIN_STATS_VCPU:
                    out.append((one, record))
                    continue
                record = dict(record, **{'vcpu.current': 2})
                for i in range(2):
                    record['vcpu.%d.time' % i] = 30000000
                    record['vcpu.%d.delay' % i] = 7
                out.append((one, record))
            return out
        self.useFixture(fixtures.MonkeyPatch(
            'libvirt.virConnect.getAllDomainStats', with_vcpu_stats))
        for i in range(2):
            ran(qemu, i, 12345 + i, 20, 5)
        drv.sample()
        # a kvm domain read from procfs: libvirt's vCPU group each period
        drv.sampler.domains.get(dom.uuid).kvm = True
        snap = drv.sample()
        self.assertEqual(
            [(12345, 13345), (12346, 13346)],
            [(snap.vcpus[model.VcpuRef(dom.uuid, i)].run_ns,
              snap.vcpus[model.VcpuRef(dom.uuid, i)].runqueue_delay_ns)
             for i in range(2)])
        # a vCPU whose thread was not found: libvirt's figures
        os.rename(os.path.join(qemu.root, str(qemu.pid)),
                  os.path.join(qemu.root, 'gone'))
        drv.sampler.source.close()
        snap = drv.sampler.sample()
        c = snap.vcpus[model.VcpuRef(dom.uuid, 0)]
        self.assertEqual((30000000, 7), (c.run_ns, c.runqueue_delay_ns))


class TestVcpuGroupOnlyForKvm(base.DriverTestCase):

    def test_the_vcpu_group_is_asked_for_while_a_kvm_domain_runs(self):
        # libvirtd reads three procfs files per vCPU and asks QEMU over
        # QMP for the vCPU group: only KVM's halt statistics need it.
        dom = self.useFixture(base.TestDomain())
        asked = []
        real = libvirt.virConnect.getAllDomainStats

        def recorded(conn, stats, flags=0):
            asked.append(bool(stats & libvirt.VIR_DOMAIN_STATS_VCPU))
            return real(conn, stats, flags)
        self.useFixture(fixtures.MonkeyPatch(
            'libvirt.virConnect.getAllDomainStats', recorded))
        drv = self.driver()
        del asked[:]
        snap = drv.sample()
        self.assertEqual(2, len([r for r in snap.vcpus
                                 if r.domain == dom.uuid]))
        drv.sample()
        self.assertTrue(asked)
        self.assertNotIn(True, asked)
        drv.sampler.domains.get(dom.uuid).kvm = True
        del asked[:]
        drv.sample()
        self.assertIn(True, asked)


class TestKvmStatisticsFromLibvirt(base.DriverTestCase):
    """Retention counters from libvirt's vCPU group."""

    def sampled(self, patched, keys):
        dom = self.useFixture(base.TestDomain())
        real = libvirt.virConnect.getAllDomainStats

        def with_kvm_stats(conn, stats, flags=0):
            out = []
            for one, record in real(conn, stats, flags):
                if stats & libvirt.VIR_DOMAIN_STATS_VCPU:
                    record = dict(record, **{'vcpu.current': 2})
                    record.update(('vcpu.0.' + k, v)
                                  for k, v in keys.items())
                out.append((one, record))
            return out
        self.useFixture(fixtures.MonkeyPatch(
            'libvirt.virConnect.getAllDomainStats', with_kvm_stats))
        drv = self.driver(vcpu_source='procfs')
        drv.sampler.patched = patched
        drv.sample()
        drv.sampler.domains.get(dom.uuid).kvm = True
        snap = drv.sample()
        return [(c.retention_ns, c.retentions, c.retention_timeouts,
                 c.halts) for c in (snap.vcpus[model.VcpuRef(dom.uuid, i)]
                                    for i in range(2))]

    def test_stock_halt_polling(self):
        self.assertEqual(
            [(30 + 12, 9, 9 - 7, 5), (None, None, None, None)],
            self.sampled(False, {
                'halt_poll_success_ns.sum': 30,
                'halt_poll_fail_ns.sum': 12,
                'halt_attempted_poll.sum': 9,
                'halt_successful_poll.sum': 7,
                'halt_exits.sum': 5}))

    def test_stock_with_a_counter_missing(self):
        self.assertEqual(
            [(None, 9, None, None), (None, None, None, None)],
            self.sampled(False, {'halt_poll_success_ns.sum': 30,
                                 'halt_attempted_poll.sum': 9}))

    def test_patched_kernel_counters(self):
        self.assertEqual(
            [(400, 3, None, None), (None, None, None, None)],
            self.sampled(True, {'retention_ns.sum': 400,
                                'retentions.sum': 3,
                                'halt_poll_success_ns.sum': 30}))


class TestLibvirtSource(base.DriverTestCase):
    """``vcpu_source = libvirt``: libvirt's figures, no procfs."""

    def test_run_time_delay_and_cpu_from_libvirt_only(self):
        dom = self.useFixture(base.TestDomain())
        # a QEMU's threads are there, but this source does not read them
        qemu = self.useFixture(host_fixtures.FakeQemuProcfs(dom.uuid,
                                                            name=dom.name))
        for i in range(2):
            ran(qemu, i, 12345 + i, 20, 5)
        asked = []
        real = libvirt.virConnect.getAllDomainStats

        def with_vcpu_stats(conn, stats, flags=0):
            if stats & libvirt.VIR_DOMAIN_STATS_STATE:  # not MIST's call
                asked.append(bool(stats & libvirt.VIR_DOMAIN_STATS_VCPU))
            out = []
            for one, record in real(conn, stats, flags):
                if stats & libvirt.VIR_DOMAIN_STATS_VCPU:
                    record = dict(record, **{'vcpu.current': 2})
                    for i in range(2):
                        record['vcpu.%d.time' % i] = 30000000 + i
                        record['vcpu.%d.delay' % i] = 7 + i
                out.append((one, record))
            return out
        self.useFixture(fixtures.MonkeyPatch(
            'libvirt.virConnect.getAllDomainStats', with_vcpu_stats))
        drv = self.driver(qemu=qemu, vcpu_source='libvirt')
        self.assertIn('from libvirt', ' '.join(drv.describe().capabilities))
        del asked[:]        # describe's own call, for the served measure
        snap = drv.sample()
        cpus = {number: cpu for number, _s, _t, cpu in dom.dom.vcpus()[0]}
        got = [snap.vcpus[model.VcpuRef(dom.uuid, i)] for i in range(2)]
        self.assertEqual(
            [(30000000 + i, 7 + i, cpus[i], None, None) for i in range(2)],
            [(c.run_ns, c.runqueue_delay_ns, c.cpu, c.voluntary_switches,
              c.involuntary_switches) for c in got])
        self.assertEqual([True], asked)     # the vCPU group, every period


class TestRunningDomainsListed(base.DriverTestCase):
    """getAllDomainStats only when the running domains changed.

    With the served statistics off (``served_stats``, and MIST, which
    needs them), which every period's call would otherwise ask for. With
    lifecycle events (test:/// sends them, as libvirtd does) a period
    where nothing changed makes no call; without, the ids are listed each
    period.
    """

    events = True
    steady = []     # the calls of a period where nothing changed

    def setUp(self):
        super().setUp()
        self.calls = []
        real_stats = libvirt.virConnect.getAllDomainStats
        real_ids = libvirt.virConnect.listDomainsID

        def stats(conn, groups, flags=0):
            if groups & libvirt.VIR_DOMAIN_STATS_STATE:  # not MIST's call
                self.calls.append('getAllDomainStats')
            return real_stats(conn, groups, flags)

        def ids(conn):
            self.calls.append('listDomainsID')
            return real_ids(conn)
        self.useFixture(fixtures.MonkeyPatch(
            'libvirt.virConnect.getAllDomainStats', stats))
        self.useFixture(fixtures.MonkeyPatch(
            'libvirt.virConnect.listDomainsID', ids))

    def driver(self, **overrides):
        overrides.setdefault('served_stats', False)
        overrides.setdefault('mist', False)
        drv = super().driver(**overrides)
        drv.sample()
        self.assertEqual(self.events, drv.sampler.connection.events)
        return drv

    def sampled(self, drv, changes=None):
        """The domains of a period and the calls it made.

        With ``changes`` (the count before a change), once its event
        arrived.
        """
        deadline = time.monotonic() + 10
        while (self.events and changes is not None
               and drv.sampler.connection.changes == changes
               and time.monotonic() < deadline):
            time.sleep(0.01)    # the event loop's thread delivers it
        del self.calls[:]
        snap = drv.sample()
        return ({r.domain for r in snap.vcpus}, list(self.calls))

    def test_a_start_a_stop_and_a_restart_are_each_seen_at_once(self):
        one = self.useFixture(base.TestDomain())
        drv = self.driver()
        both = ['listDomainsID', 'getAllDomainStats']
        for _ in range(2):      # nothing changed
            domains, calls = self.sampled(drv)
            self.assertIn(one.uuid, domains)
            self.assertEqual(self.steady, calls)
        changes = drv.sampler.connection.changes
        two = self.useFixture(base.TestDomain())
        domains, calls = self.sampled(drv, changes)
        self.assertEqual(both, calls)
        self.assertTrue({one.uuid, two.uuid} <= domains)
        self.assertEqual(self.steady, self.sampled(drv)[1])
        # a restart: the same UUID, a new id, a new incarnation
        old_id = drv.sampler.domains.get(one.uuid).id
        changes = drv.sampler.connection.changes
        one.dom.destroy()
        one.dom = one.conn.createXML(base.DOMAIN_XML % {
            'name': one.name, 'uuid': one.uuid, 'cpuset': '', 'metadata': ''})
        domains, calls = self.sampled(drv, changes)
        self.assertEqual(both, calls)
        self.assertIn(one.uuid, domains)
        self.assertNotEqual(old_id, drv.sampler.domains.get(one.uuid).id)
        changes = drv.sampler.connection.changes
        two.dom.destroy()
        domains, calls = self.sampled(drv, changes)
        self.assertEqual(both, calls)
        self.assertNotIn(two.uuid, domains)
        self.assertIsNone(drv.sampler.domains.get(two.uuid))
        self.assertEqual(self.steady, self.sampled(drv)[1])

    def test_listed_again_after_relist_s_whatever_the_events(self):
        self.useFixture(base.TestDomain())
        drv = self.driver()
        self.useFixture(fixtures.MonkeyPatch(
            'vsmtio_agent.drivers.libvirt.domains.RELIST_S', 0.0))
        self.assertEqual(['listDomainsID'], self.sampled(drv)[1])

    def test_a_lost_connection_lists_them_afresh(self):
        one = self.useFixture(base.TestDomain())
        drv = self.driver()
        drv.connection.close()      # as after a loss: a new connection
        self.assertFalse(drv.connection.events)
        domains, calls = self.sampled(drv)
        self.assertEqual(['listDomainsID', 'getAllDomainStats'], calls)
        self.assertIn(one.uuid, domains)
        self.assertEqual(self.events, drv.connection.events)


class TestRunningDomainsListedWithoutEvents(TestRunningDomainsListed):

    events = False
    steady = ['listDomainsID']

    def setUp(self):
        super().setUp()

        def no_events(conn, *args):
            raise libvirt.libvirtError('this driver sends no events')
        self.useFixture(fixtures.MonkeyPatch(
            'libvirt.virConnect.domainEventRegisterAny', no_events))
