"""MIST through the libvirt driver, on libvirt's test driver.

The domain carries the nova metadata nova 34 writes (``<nova:extraSpecs>``),
so the reservation the agent honours is read as on a compute host. The
procfs root is a copy (the real one's IRQs must not move in a unit test);
it says the host has no bounded RT runtime, so CPU protection takes the
cpu-shares fallback here. Real-time on real vCPU threads is asserted on a
real qemu guest (``vsmtio_agent/tests/functional/test_mist.py``).
"""

import os
import uuid

import fixtures
import libvirt
import testtools

from vsmtio_agent.actuators import ledger
from vsmtio_agent.drivers import libvirt as libvirt_driver
from vsmtio_agent.drivers import mist as mist_host
from vsmtio_agent.drivers.mist import meter
from vsmtio_agent import model
from vsmtio_agent.policy import mist
from vsmtio_agent.tests.unit.actuators import test_mist_actuators as acts
from vsmtio_agent.tests.unit.host import fixtures as host_fixtures

NOVA_XML = """<domain type='test'>
  <name>%(name)s</name><uuid>%(uuid)s</uuid>
  <metadata>
    <nova:instance xmlns:nova="http://openstack.org/xmlns/libvirt/nova/1.1">
      <nova:flavor name="r500" id="7">
        <nova:vcpus>2</nova:vcpus>
        <nova:extraSpecs>%(specs)s</nova:extraSpecs>
      </nova:flavor>
    </nova:instance>
  </metadata>
  <memory>65536</memory><vcpu>2</vcpu>
  <os><type>hvm</type></os>
</domain>"""


def spec(name, value):
    return '<nova:extraSpec name="%s">%s</nova:extraSpec>' % (name, value)


class TestReservationFromNovaMetadata(testtools.TestCase):

    def test_honoured_reservation(self):
        xml = NOVA_XML % {'name': 'x', 'uuid': str(uuid.uuid4()),
                          'specs': spec('vsmtio:io_reservation_iops', '500')
                          + spec('resources:CUSTOM_VSMTIO_IO_IOPS', '400')
                          + spec('hw:cpu_policy', 'shared')}
        specs = meter.flavor_extra_specs(xml)
        self.assertEqual('500', specs['vsmtio:io_reservation_iops'])
        self.assertEqual('shared', specs['hw:cpu_policy'])

    def test_block_totals(self):
        stats = {'block.count': 2, 'block.0.rd.reqs': 3,
                 'block.0.wr.reqs': 4, 'block.0.rd.bytes': 10,
                 'block.0.wr.bytes': 20, 'block.1.rd.reqs': 1,
                 'block.1.wr.reqs': 0, 'block.1.rd.bytes': 5,
                 'block.1.wr.bytes': 0,
                 'block.0.rd.times': 100, 'block.0.wr.times': 200,
                 'block.0.fl.times': 7, 'block.1.rd.times': 50,
                 'block.1.wr.times': 0}
        self.assertEqual((8, 35, 357), meter.block_totals(stats))
        self.assertEqual((None, None, None), meter.block_totals({}))
        # a disk without request times: counts, but no evidence of demand
        del stats['block.1.wr.times']
        self.assertEqual((8, 35, None), meter.block_totals(stats))
        del stats['block.1.wr.reqs']
        self.assertEqual((None, None, None), meter.block_totals(stats))


class TestMistThroughTheDriver(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.sysfs = self.useFixture(host_fixtures.FakeSysfs(cores=2))
        self.irqs = self.useFixture(acts.FakeIrqs())
        host_fixtures.write(os.path.join(
            self.irqs.root, 'sys/kernel/sched_rt_runtime_us'), '-1\n')
        self.conf = host_fixtures.make_conf(
            self, sysfs_root=self.sysfs.root, procfs_root=self.irqs.root,
            guard=False)
        self.conn = libvirt.open('test:///default')
        self.addCleanup(self.conn.close)
        self.uuid = str(uuid.uuid4())
        self.dom = self.conn.createXML(NOVA_XML % {
            'name': 'r-' + self.uuid[:8], 'uuid': self.uuid,
            'specs': spec('vsmtio:io_reservation_iops', '500')
            + spec('resources:CUSTOM_VSMTIO_IO_IOPS', '500')})
        self.addCleanup(self._destroy)
        self.weight = self.dom.blkioParameters(0)['weight']

    def _destroy(self):
        try:
            self.dom.destroy()
        except libvirt.libvirtError:
            pass

    def driver(self):
        d = libvirt_driver.LibvirtHostDriver(self.conf)
        self.addCleanup(d.close)
        return d

    def decision(self, protect):
        verdict = mist.Verdict(protect=True, reason='test')
        return model.Decision(timeout_ns=200000, placements={},
                              protect={self.uuid: verdict} if protect
                              else {})

    def test_sample_carries_the_reservation(self):
        drv = self.driver()
        snap = drv.sample()
        self.assertEqual(model.Reservation(iops=500),
                         snap.domains[self.uuid].reservation)

    def test_protect_release_and_restore(self):
        drv = self.driver()
        drv.recover()
        drv.sample()
        result = drv.apply(self.decision(True))
        self.assertEqual(1000, self.dom.blkioParameters(0)['weight'])
        self.assertEqual('0', self.irqs.affinity(36))       # block IRQ
        self.assertEqual('1-3', self.irqs.affinity(38))     # network IRQ
        self.assertEqual('0-3', self.irqs.affinity(26))     # untouched
        self.assertIn(mist_host.CPU, drv.mist.protected[self.uuid])
        self.assertGreaterEqual(result.applied, 4)
        # held: applying again changes nothing
        again = drv.apply(self.decision(True))
        self.assertEqual(0, again.applied)
        # released: every original back
        drv.apply(self.decision(False))
        self.assertEqual(self.weight, self.dom.blkioParameters(0)['weight'])
        self.assertEqual('0-3', self.irqs.affinity(36))
        self.assertEqual('0-3', self.irqs.affinity(38))
        self.assertTrue(drv.checkpoint.empty)

    def test_stop_restores(self):
        drv = self.driver()
        drv.recover()
        drv.sample()
        drv.apply(self.decision(True))
        drv.restore()
        self.assertEqual(self.weight, self.dom.blkioParameters(0)['weight'])
        self.assertEqual('0-3', self.irqs.affinity(36))

    def test_a_crashed_agent_is_undone_at_the_next_start(self):
        drv = self.driver()
        drv.recover()
        drv.sample()
        drv.apply(self.decision(True))
        drv.close()                 # dies without restoring
        path = self.conf.vsmtio_agent.checkpoint_path
        self.assertTrue(os.path.exists(path))
        self.assertEqual('0', self.irqs.affinity(36))
        fresh = self.driver()
        fresh.recover()
        self.assertEqual(self.weight, self.dom.blkioParameters(0)['weight'])
        self.assertEqual('0-3', self.irqs.affinity(36))
        self.assertFalse(os.path.exists(path))

    def test_a_dry_run_writes_nothing(self):
        self.conf.set_override('dry_run', True, group='vsmtio_agent')
        from vsmtio_agent import agent as agent_mod
        drv = self.driver()
        ag = agent_mod.Agent(self.conf, drv)
        ag.tick()                   # the start period
        ag._apply(self.decision(True))
        self.assertEqual(self.weight, self.dom.blkioParameters(0)['weight'])
        self.assertEqual('0-3', self.irqs.affinity(36))
        self.assertFalse(os.path.exists(
            self.conf.vsmtio_agent.checkpoint_path))

    def test_irq_separation_can_be_turned_off(self):
        self.conf.set_override('mist_irq_separation', False,
                               group='vsmtio_agent')
        drv = self.driver()
        drv.recover()
        drv.sample()
        drv.apply(self.decision(True))
        self.assertEqual('0-3', self.irqs.affinity(36))
        self.assertEqual(1000, self.dom.blkioParameters(0)['weight'])
        drv.restore()

    def test_mist_outranks_the_split_on_cpu_shares(self):
        # One knob, two mechanisms that want it: the ledger says who. The
        # test driver keeps no scheduler parameters (it answers a fixed
        # weight), so what is in force is what the driver last wrote.
        drv = self.driver()
        drv.recover()
        drv.sample()
        opts = self.conf.vsmtio_agent
        original = self.dom.schedulerParameters()['weight']

        def in_force():
            return drv.domains.get(self.uuid).shares[1]

        threads = drv.topology().cores[0].threads
        split = {model.VcpuRef(self.uuid, 0): model.Placement(
            0, model.Role.IO, threads[0], (threads[0],))}

        def apply(protect, split_on=True):
            verdict = mist.Verdict(protect=True, reason='test')
            result = drv.apply(model.Decision(
                timeout_ns=200000, placements=split, split=split_on,
                protect={self.uuid: verdict} if protect else {}))
            return in_force(), result

        def recorded():
            return drv.checkpoint.domain(self.uuid, self.dom.ID()).original(
                'cpu_shares', 'cpu_shares')

        by_split = round(original * opts.io_cpu_shares_factor)
        by_mist = round(original * opts.mist_cpu_shares_factor)
        self.assertNotEqual(by_split, by_mist)
        # the split alone raises them
        self.assertEqual(by_split, apply(False)[0])
        self.assertEqual(ledger.RASS, drv.checkpoint.owners.holder(
            'cpu_shares', self.uuid, 'cpu_shares'))
        # MIST takes them over, from the original, not the split's value
        self.assertEqual(by_mist, apply(True)[0])
        self.assertEqual(ledger.MIST, drv.checkpoint.owners.holder(
            'cpu_shares', self.uuid, 'cpu_shares'))
        self.assertEqual(original, recorded())
        # the split, still on, leaves them alone while MIST holds them
        self.assertEqual(by_mist, apply(True)[0])
        # MIST lets go: the original back, and the split takes it again;
        # the split's pins (unchanged, so not claimed again) stay its own
        self.assertEqual(by_split, apply(False)[0])
        self.assertEqual(ledger.RASS, drv.checkpoint.owners.holder(
            'cpu_shares', self.uuid, 'cpu_shares'))
        self.assertEqual(ledger.RASS, drv.checkpoint.owners.holder(
            'pins', self.uuid, '0'))
        self.assertEqual(original, recorded())
        # withdrawing the split does not undo MIST's protection
        self.assertEqual(by_mist, apply(True)[0])
        self.assertEqual(by_mist, apply(True, split_on=False)[0])
        self.assertEqual(original, recorded())
        drv.restore()
        self.assertEqual(original, in_force())
        self.assertTrue(drv.checkpoint.empty)
        self.assertIsNone(drv.checkpoint.owners.holder(
            'cpu_shares', self.uuid, 'cpu_shares'))

    def test_describe_says_why_no_real_time(self):
        mode = self.driver().describe()
        self.assertTrue(any('sched_rt_runtime_us is -1' in m
                            for m in mode.missing), mode.missing)


class TestUnadmittedReservation(testtools.TestCase):

    def test_a_declaration_without_resources_is_not_protected(self):
        self.useFixture(fixtures.FakeLogger())
        sysfs = self.useFixture(host_fixtures.FakeSysfs(cores=2))
        conf = host_fixtures.make_conf(self, sysfs_root=sysfs.root)
        conn = libvirt.open('test:///default')
        self.addCleanup(conn.close)
        uid = str(uuid.uuid4())
        dom = conn.createXML(NOVA_XML % {
            'name': 'u-' + uid[:8], 'uuid': uid,
            'specs': spec('vsmtio:io_reservation_iops', '500')})
        self.addCleanup(dom.destroy)
        drv = libvirt_driver.LibvirtHostDriver(conf)
        self.addCleanup(drv.close)
        self.assertFalse(drv.sample().domains[uid].reservation.reserved)


class TestRtBudgetPerReservation(testtools.TestCase):
    """Each protected domain's cgroups get what its reservation needs.

    On a copy of a cgroup v1 cpu tree with RT group scheduling (no kernel
    here has it). The threads are named, not made real-time: raising
    real threads to SCHED_RR is the functional test's, on a real guest.
    """

    def setUp(self):
        super().setUp()
        self.sysfs = self.useFixture(host_fixtures.FakeSysfs(cores=2))
        self.cg = self.useFixture(acts.FakeCgroups())
        os.makedirs(os.path.join(self.sysfs.root, 'fs'), exist_ok=True)
        os.symlink(self.cg.root, os.path.join(self.sysfs.root, 'fs/cgroup'))
        proc = self.useFixture(fixtures.TempDir()).path
        host_fixtures.write(os.path.join(
            proc, 'sys/kernel/sched_rt_period_us'), '1000000\n')
        self.conf = host_fixtures.make_conf(
            self, sysfs_root=self.sysfs.root, procfs_root=proc)
        from vsmtio_agent.actuators import checkpoint
        from vsmtio_agent.drivers.mist import cpu
        self.record = checkpoint.Checkpoint(
            self.conf.vsmtio_agent.checkpoint_path)
        self.cpu = cpu.CpuProtection(self.conf.vsmtio_agent, self.record)

    def protect(self, uuid, groups, reservation):
        self.cpu._threads[uuid] = {'1/%d' % i: g for i, g in
                                   enumerate(groups)}
        self.cpu._reserved[uuid] = reservation

    def test_runtime_follows_the_reservation(self):
        # issue 31.2: every vCPU cgroup got mist_rt_runtime_us (400 ms of
        # each second) whatever the domain had reserved
        self.protect('a', ['machine/dom-a/vcpu0', 'machine/dom-a/vcpu1'],
                     model.Reservation(iops=500))
        self.protect('b', ['machine/dom-b/vcpu0'],
                     model.Reservation(iops=2000))
        self.cpu.grant()
        # 500 IOPS x 100 us = 50 ms a second, split over two cgroups
        self.assertEqual(25000, self.cg.value('machine/dom-a/vcpu0'))
        self.assertEqual(25000, self.cg.value('machine/dom-a/vcpu1'))
        self.assertEqual(50000, self.cg.value('machine/dom-a'))
        self.assertEqual(200000, self.cg.value('machine/dom-b/vcpu0'))
        self.assertEqual(250000, self.cg.value('machine'))
        self.assertEqual({'a': (50000, 50000), 'b': (200000, 200000)},
                         self.cpu.budgets)
        # the ceiling per domain, never the whole period
        self.conf.set_override('mist_rt_runtime_us', 1000000,
                               group='vsmtio_agent')
        self.protect('b', ['machine/dom-b/vcpu0'],
                     model.Reservation(iops=20000))
        self.cpu.grant()
        self.assertEqual(950000, self.cg.value('machine/dom-b/vcpu0'))
        # released: the groups go back, children first
        self.cpu.release_threads('b', _Log())
        self.cpu.release_threads('a', _Log())
        self.assertEqual(0, self.cg.value('machine'))
        self.assertEqual(0, self.cg.value('machine/dom-b/vcpu0'))


class _Log:
    def note(self, text):
        pass
