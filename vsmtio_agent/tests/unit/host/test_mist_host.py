"""MIST through the libvirt driver, on libvirt's test driver.

The domain carries the nova metadata nova 34 writes (``<nova:extraSpecs>``),
so the reservation the agent honours is read as on a compute host. The
procfs root is a copy (the real one's IRQs must not move in a unit test);
it says the host has no bounded RT runtime, so CPU protection takes the
cpu-shares fallback here. Real-time on real vCPU threads is asserted on a
real qemu guest (``vsmtio_agent/tests/functional/test_mist.py``).
"""

import json
import os
import threading
import uuid

import fixtures
import libvirt
import testtools

from vsmtio_agent.actuators import ledger
from vsmtio_agent.drivers import libvirt as libvirt_driver
from vsmtio_agent.drivers.libvirt import served
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
  """ + host_fixtures.DAC_SECLABEL + """
</domain>"""

DEVICES_XML = """
  <devices>
    <disk type='file' device='disk'>
      <source file='%(disk)s'/><target dev='vda' bus='virtio'/>
    </disk>
    <interface type='bridge'>
      <source bridge='br0'/><target dev='tap1'/>
    </interface>
    <interface type='hostdev' managed='yes'>
      <source><address type='pci' domain='0x0000' bus='0x00' slot='0x05'
                       function='0x1'/></source>
    </interface>
    <hostdev mode='subsystem' type='pci' managed='yes'>
      <source><address domain='0x0000' bus='0x00' slot='0x06'
                       function='0x0'/></source>
    </hostdev>
  </devices>"""

# the host's disk controller, whose disk holds the guest's image
ROOT_DISK_IRQS = (35, 36)
# the uplink under the bridge the guest's tap is on: one IRQ per queue
UPLINK_IRQS = tuple(range(80, 88))
# assigned to the reserved domain: an SR-IOV VF and an NVMe controller
VF_IRQS, NVME_IRQS = (90, 91), (92, 93)
# a VF whose port is under a macvtap in passthrough mode
PASSTHROUGH_IRQS = (94, 95)


def with_devices(disk, xml):
    """``xml`` with an image at ``disk``, a tap, a VF and an NVMe.

    The tap is on bridge br0; the VF and the NVMe controller are assigned.
    """
    return xml.replace('</os>', '</os>' + DEVICES_XML % {'disk': disk})


def link(path, target):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    os.symlink(target, path)


def interrupts_line(n, chip, name):
    return (' %d:          0          0          0          0  %s   '
            '0-edge      %s\n' % (n, chip, name))


class FakeDevices(fixtures.Fixture):
    """A sysfs tree of a host's PCI controllers, as the kernel lays it out.

    ``/sys/dev/block/M:m``, ``/sys/class/net`` and ``/sys/bus/pci/devices``
    point into ``/sys/devices``:

    * the host's disk controller 0000:00:02.0 (IRQs 35, 36): a
      device-mapper volume on a partition of its disk vda holds the
      filesystem of the guest's disk image (``disk_dev``);
    * the uplink eth0, 0000:00:03.0, one IRQ per queue, 8 queues (80-87),
      joined by bridge br0 with two VMs' taps;
    * assigned to the reserved domain, bound to vfio-pci: an SR-IOV VF
      0000:00:05.1 (a network controller: 90, 91) and an NVMe controller
      0000:00:06.0 (storage: 92, 93);
    * the VF 0000:00:07.0 (94, 95), its port eth5 under macvtap0 alone;
      and 0000:00:08.0, a NIC bound to vfio-pci with a legacy line only.
    """

    def __init__(self, sysfs_root, disk_dev):
        super().__init__()
        self.root, self.disk_dev = sysfs_root, disk_dev

    def _setUp(self):
        pci = os.path.join(self.root, 'devices/pci0000:00')
        for dev, irqs, cls, driver in (
                ('0000:00:02.0', ROOT_DISK_IRQS, '0x010000', 'virtio-pci'),
                ('0000:00:03.0', UPLINK_IRQS, '0x020000', 'ixgbe'),
                ('0000:00:05.1', VF_IRQS, '0x020000', 'vfio-pci'),
                ('0000:00:06.0', NVME_IRQS, '0x010802', 'vfio-pci'),
                ('0000:00:07.0', PASSTHROUGH_IRQS, '0x020000', 'iavf'),
                ('0000:00:08.0', (), '0x020000', 'vfio-pci')):
            for n in irqs:
                host_fixtures.write(os.path.join(pci, dev, 'msi_irqs',
                                                 str(n)), 'msix\n')
            host_fixtures.write(os.path.join(pci, dev, 'irq'), '11\n')
            host_fixtures.write(os.path.join(pci, dev, 'class'), cls + '\n')
            os.makedirs(os.path.join(self.root, 'bus/pci/drivers', driver),
                        exist_ok=True)
            link(os.path.join(pci, dev, 'driver'),
                 '../../../bus/pci/drivers/' + driver)
            link(os.path.join(self.root, 'bus/pci/devices', dev),
                 '../../../devices/pci0000:00/' + dev)
        vda = os.path.join(pci, '0000:00:02.0/virtio1/block/vda')
        os.makedirs(os.path.join(vda, 'vda1'))
        dm = os.path.join(self.root, 'devices/virtual/block/dm-0')
        link(os.path.join(dm, 'slaves/vda1'), os.path.join(vda, 'vda1'))
        major, minor = self.disk_dev
        link(os.path.join(self.root, 'dev/block/%d:%d' % (major, minor)),
             '../../devices/virtual/block/dm-0')
        net = os.path.join(self.root, 'class/net')
        link(os.path.join(net, 'eth0/device'),
             '../../../devices/pci0000:00/0000:00:03.0')
        link(os.path.join(net, 'eth5/device'),
             '../../../devices/pci0000:00/0000:00:07.0')
        for name in ('br0', 'tap1', 'tap2', 'macvtap0', 'lo'):
            os.makedirs(os.path.join(net, name), exist_ok=True)
        for a, b in (('br0', 'eth0'), ('br0', 'tap1'), ('br0', 'tap2'),
                     ('macvtap0', 'eth5')):
            link(os.path.join(net, a, 'lower_' + b), '../' + b)
            link(os.path.join(net, b, 'upper_' + a), '../' + a)

    @staticmethod
    def interrupts():
        """``/proc/interrupts`` lines of the devices above."""
        lines = [interrupts_line(35, 'PCI-MSIX-0000:00:02.0',
                                 'virtio1-config')]
        lines += [interrupts_line(n, 'PCI-MSIX-0000:00:03.0',
                                  'eth0-TxRx-%d' % i)
                  for i, n in enumerate(UPLINK_IRQS)]
        for dev, irqs in (('0000:00:05.1', VF_IRQS),
                          ('0000:00:06.0', NVME_IRQS)):
            lines += [interrupts_line(n, 'PCI-MSIX-' + dev,
                                      'vfio-msix[%d](%s)' % (i, dev))
                      for i, n in enumerate(irqs)]
        return ''.join(lines)


NVME = (' 50:          0          0          0          0  '
        'PCI-MSIX-0000:00:04.0   0-edge      nvme0q1\n')


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
        self.assertEqual((8, 35, 350), served.block_totals(stats))
        # flushes are no demand: a guest that only flushes, slowly, keeps
        # a request in flight and shows none
        flushing = dict(stats, **{'block.0.fl.reqs': 10 ** 6,
                                  'block.0.fl.times': 10 ** 12})
        self.assertEqual((8, 35, 350), served.block_totals(flushing))
        self.assertEqual((None, None, None), served.block_totals({}))
        # a disk without request times: counts, but no evidence of demand
        del stats['block.1.wr.times']
        self.assertEqual((8, 35, None), served.block_totals(stats))
        del stats['block.1.wr.reqs']
        self.assertEqual((None, None, None), served.block_totals(stats))


class _MistDriverCase(testtools.TestCase):
    """A libvirt driver with MIST on, and one domain with a reservation."""

    def setUp(self):
        super().setUp()
        self.sysfs = self.useFixture(host_fixtures.FakeSysfs(cores=2))
        self.irqs = self.useFixture(acts.FakeIrqs())
        host_fixtures.write(os.path.join(
            self.irqs.root, 'sys/kernel/sched_rt_runtime_us'), '-1\n')
        self.conf = host_fixtures.make_conf(
            self, sysfs_root=self.sysfs.root, procfs_root=self.irqs.root,
            guard=False)
        # The guest's disk is this test module: its filesystem's device is
        # the host's, and the fake tree says what controller lies under it.
        disk = os.path.abspath(__file__)
        dev = os.stat(disk).st_dev
        self.disk_dev = (os.major(dev), os.minor(dev))
        self.useFixture(FakeDevices(self.sysfs.root, self.disk_dev))
        # an NVMe queue on the host serves no reserved domain
        host_fixtures.write(os.path.join(self.irqs.root, 'interrupts'),
                            acts.INTERRUPTS.replace(
                                'NMI:', NVME + FakeDevices.interrupts()
                                + 'NMI:'))
        for n in ((35, 50) + UPLINK_IRQS + VF_IRQS + NVME_IRQS):
            host_fixtures.write(self.irqs.affinity_file(n), '0-3\n')
        self.conn = libvirt.open('test:///default')
        self.addCleanup(self.conn.close)
        self.uuid = str(uuid.uuid4())
        self.dom = self.conn.createXML(with_devices(disk, NOVA_XML % {
            'name': 'r-' + self.uuid[:8], 'uuid': self.uuid,
            'specs': spec('vsmtio:io_reservation_iops', '500')
            + spec('resources:CUSTOM_VSMTIO_IO_IOPS', '500')}))
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

    def protected(self):
        """A driver that recovered, sampled and protected the domain."""
        drv = self.driver()
        drv.recover()
        drv.sample()
        drv.apply(self.decision(True))
        return drv


class TestMistThroughTheDriver(_MistDriverCase):
    """Protection, release and restore of the reserved domain."""

    def test_sample_carries_the_reservation(self):
        drv = self.driver()
        snap = drv.sample()
        self.assertEqual(model.Reservation(iops=500),
                         snap.domains[self.uuid].reservation)

    def test_reserved_domain_carries_what_it_serves(self):
        from vsmtio_agent.tests.unit.host import test_served
        real = libvirt.virConnect.getAllDomainStats
        calls = []

        def stats(conn, groups, flags=0):
            calls.append(groups)
            return [(dom, dict(record, **test_served.BLOCK,
                               **test_served.NET))
                    for dom, record in real(conn, groups, flags)]
        self.useFixture(fixtures.MonkeyPatch(
            'libvirt.virConnect.getAllDomainStats', stats))
        # MIST needs the counters even with the served statistics off
        self.conf.set_override('served_stats', False, 'vsmtio_agent')
        got = self.driver().sample().domains[self.uuid]
        self.assertEqual((model.Reservation(iops=500), 8, 20),
                         (got.reservation, got.io_requests, got.net_packets))
        self.assertEqual(1, len(calls))

    def test_protect_release_and_restore(self):
        drv = self.driver()
        drv.recover()
        drv.sample()
        result = drv.apply(self.decision(True))
        self.assertEqual(1000, self.dom.blkioParameters(0)['weight'])
        self.assertEqual('0', self.irqs.affinity(92))       # its NVMe
        self.assertEqual('1-3', self.irqs.affinity(90))     # its VF
        self.assertEqual('0-3', self.irqs.affinity(26))     # untouched
        self.assertIn(mist_host.CPU, drv.mist.protected[self.uuid])
        self.assertGreaterEqual(result.applied, 4)
        # held: applying again changes nothing
        again = drv.apply(self.decision(True))
        self.assertEqual(0, again.applied)
        # released: every original back
        drv.apply(self.decision(False))
        self.assertEqual(self.weight, self.dom.blkioParameters(0)['weight'])
        self.assertEqual('0-3', self.irqs.affinity(92))
        self.assertEqual('0-3', self.irqs.affinity(90))
        self.assertTrue(drv.checkpoint.empty)

    def test_stop_restores(self):
        drv = self.protected()
        drv.restore()
        self.assertEqual(self.weight, self.dom.blkioParameters(0)['weight'])
        self.assertEqual('0-3', self.irqs.affinity(92))

    def test_a_crashed_agent_is_undone_at_the_next_start(self):
        drv = self.protected()
        drv.close()                 # dies without restoring
        path = self.conf.vsmtio_agent.checkpoint_path
        self.assertTrue(os.path.exists(path))
        self.assertEqual('0', self.irqs.affinity(92))
        fresh = self.driver()
        fresh.recover()
        self.assertEqual(self.weight, self.dom.blkioParameters(0)['weight'])
        self.assertEqual('0-3', self.irqs.affinity(92))
        self.assertFalse(os.path.exists(path))

    def test_a_dry_run_writes_nothing(self):
        self.conf.set_override('dry_run', True, group='vsmtio_agent')
        from vsmtio_agent import agent as agent_mod
        drv = self.driver()
        ag = agent_mod.Agent(self.conf, drv)
        ag.tick()                   # the start period
        ag._apply(self.decision(True))
        self.assertEqual(self.weight, self.dom.blkioParameters(0)['weight'])
        self.assertEqual('0-3', self.irqs.affinity(92))
        self.assertFalse(os.path.exists(
            self.conf.vsmtio_agent.checkpoint_path))

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


class TestNoRealTimeWithoutPerVmBudget(_MistDriverCase):
    """A host-wide RT bound is no VM's budget: cpu shares, never SCHED_RR.

    Debian's kernels bound real-time threads only host-wide
    (``kernel.sched_rt_runtime_us``, 950000 of 1000000 us, and no
    ``cpu.rt_runtime_us`` per cgroup): one protected VM's threads could
    take that whole bound from every other real-time thread. The domain of
    ``test:///default`` has no QEMU process, so its entry is pointed at a
    real thread of this process: the one place a SCHED_RR write would
    show (the agent runs as root here, so nothing else would stop it).
    """

    def setUp(self):
        super().setUp()
        kernel = os.path.join(self.irqs.root, 'sys/kernel')
        host_fixtures.write(os.path.join(kernel, 'sched_rt_runtime_us'),
                            '950000\n')
        host_fixtures.write(os.path.join(kernel, 'sched_rt_period_us'),
                            '1000000\n')
        # only the thread below, never every thread of the test runner
        self.conf.set_override('mist_rt_threads', 'vcpus',
                               group='vsmtio_agent')
        stop = threading.Event()
        self.thread = threading.Thread(target=stop.wait, daemon=True)
        self.thread.start()
        self.addCleanup(self.thread.join)
        self.addCleanup(stop.set)
        self.policy = os.sched_getscheduler(self.thread.native_id)

    def test_global_rt_gets_the_shares_fallback_and_says_so(self):
        logged = self.useFixture(fixtures.FakeLogger())
        drv = self.driver()
        drv.recover()
        drv.sample()
        entry = drv.domains.get(self.uuid)
        entry.pid, entry.tids = os.getpid(), {0: self.thread.native_id}
        original = self.dom.schedulerParameters()['weight']
        for _ in range(3):
            result = drv.apply(self.decision(True))
            self.assertEqual(0, result.failed, result.messages)
        tid = self.thread.native_id
        self.assertEqual(self.policy, os.sched_getscheduler(tid))
        self.assertNotEqual(os.SCHED_RR,
                            os.sched_getscheduler(tid)
                            & ~os.SCHED_RESET_ON_FORK)
        self.assertEqual([], drv.checkpoint.keys('mist_sched_policy'))
        # the weight fallback, from the original shares
        self.assertEqual('shares', drv.mist.protected[self.uuid][
            mist_host.CPU])
        factor = self.conf.vsmtio_agent.mist_cpu_shares_factor
        self.assertEqual(round(original * factor), entry.shares[1])
        # said once in the log, and where check and status say the mode
        self.assertEqual(1, logged.output.count(
            'no per-VM real-time budget: no real-time group scheduling '
            '(no cpu.rt_runtime_us in the cpu cgroups): '
            'kernel.sched_rt_runtime_us bounds all real-time threads '
            'together at 950000 of 1000000 us'), logged.output)
        line = ('cpu shares x%.1f instead of real-time priority: no per-VM '
                'real-time budget' % factor)
        mode = drv.describe()
        self.assertTrue(any(m.startswith('MIST cpu: ' + line)
                            for m in mode.missing), mode.missing)
        cpu = drv.mist_levers()['CPU']
        self.assertTrue(cpu.startswith(line), cpu)
        from vsmtio_agent import agent as agent_mod
        from vsmtio_agent import status
        ag = agent_mod.Agent(self.conf, drv)
        ag.tick()
        doc = status.document(ag.tick(), drv, self.conf.vsmtio_agent,
                              mode.mode)
        path = os.path.join(self.useFixture(fixtures.TempDir()).path, 's')
        with open(path, 'w') as f:
            json.dump(doc, f)
        self.assertIn('  CPU: ' + line,
                      status.format_table(status.load(path)))
        drv.restore()
        self.assertEqual(original, entry.shares[1])

    def test_group_rt_is_reported_as_real_time(self):
        # the same host with RT group scheduling: a budget per VM
        cg = self.useFixture(acts.FakeCgroups())
        os.makedirs(os.path.join(self.sysfs.root, 'fs'), exist_ok=True)
        os.symlink(cg.root, os.path.join(self.sysfs.root, 'fs/cgroup'))
        drv = self.driver()
        self.assertTrue(drv.mist_levers()['CPU'].startswith(
            'real-time priority (SCHED_RR) with a per-VM budget'),
            drv.mist_levers()['CPU'])
        self.assertIn('MIST cpu: ' + drv.mist_levers()['CPU'],
                      drv.describe().capabilities)


class TestMistInterruptsThroughTheDriver(_MistDriverCase):
    """Which interrupts MIST moves for the reserved domain, and back."""

    def test_irq_separation_can_be_turned_off(self):
        self.conf.set_override('mist_irq_separation', False,
                               group='vsmtio_agent')
        drv = self.protected()
        self.assertEqual('0-3', self.irqs.affinity(92))
        self.assertEqual(1000, self.dom.blkioParameters(0)['weight'])
        drv.restore()

    def test_only_the_irqs_of_devices_the_domain_alone_owns(self):
        # Its tap is on br0, whose uplink eth0 has 8 queues every VM on
        # the bridge and the host share: none of them moves, nor the
        # controller of the host's disk its image lives on, nor any other
        # matching IRQ of the host (nvme0q1). Its own VF's and NVMe
        # controller's queues do.
        drv = self.protected()
        self.assertEqual({92: frozenset([0]), 93: frozenset([0]),
                          90: frozenset([1, 2, 3]),
                          91: frozenset([1, 2, 3])}, drv.mist.irq_plan)
        for n in NVME_IRQS:
            self.assertEqual('0', self.irqs.affinity(n), n)
        for n in VF_IRQS:
            self.assertEqual('1-3', self.irqs.affinity(n), n)
        for other in (UPLINK_IRQS + ROOT_DISK_IRQS
                      + (24, 26, 28, 38, 39, 40, 44, 50)):
            self.assertEqual('0-3', self.irqs.affinity(other), other)
        drv.restore()
        for n in VF_IRQS + NVME_IRQS:
            self.assertEqual('0-3', self.irqs.affinity(n), n)

    def test_an_assigned_device_back_with_its_host_driver_is_shared(self):
        # the VF is bound to its host driver again (the domain's XML still
        # names it): it serves the host, not the domain alone
        vf = os.path.join(self.sysfs.root, 'devices/pci0000:00/0000:00:05.1')
        os.unlink(os.path.join(vf, 'driver'))
        os.symlink('../../../bus/pci/drivers/ixgbe',
                   os.path.join(vf, 'driver'))
        logged = self.useFixture(fixtures.FakeLogger())
        drv = self.protected()
        self.assertEqual({92, 93}, set(drv.mist.irq_plan))
        self.assertIn('assigned device 0000:00:05.1: bound to ixgbe, not to '
                      'a VFIO driver', logged.output)
        drv.restore()

    def test_the_configured_set_is_host_wide(self):
        self.conf.set_override('mist_irq_scope', 'pattern',
                               group='vsmtio_agent')
        drv = self.protected()
        self.assertEqual('0', self.irqs.affinity(50))
        self.assertEqual('0', self.irqs.affinity(36))
        self.assertEqual('1-3', self.irqs.affinity(80))     # eth0-TxRx-0
        drv.restore()
        self.assertEqual('0-3', self.irqs.affinity(50))
        self.assertEqual('0-3', self.irqs.affinity(80))

    def test_the_ban_list_is_honoured(self):
        # the operator's ban list keeps an IRQ where it is
        self.conf.set_override('mist_irq_ban', [92, 91],
                               group='vsmtio_agent')
        drv = self.protected()
        self.assertEqual('0-3', self.irqs.affinity(92))
        self.assertEqual('0-3', self.irqs.affinity(91))
        self.assertEqual('1-3', self.irqs.affinity(90))
        self.assertEqual('0', self.irqs.affinity(93))
        drv.restore()

    def test_irqbalance_keeps_what_it_is_not_told_to_leave(self):
        # MIST leaves the IRQs irqbalance would move back within seconds
        # where they are, and says so
        logged = self.useFixture(fixtures.FakeLogger())
        host_fixtures.write(os.path.join(self.irqs.root, '4242/comm'),
                            'irqbalance\n')
        with open(os.path.join(self.irqs.root, '4242/cmdline'), 'wb') as f:
            f.write(b'/usr/sbin/irqbalance\0--foreground\0--banirq=90\0')
        drv = self.protected()
        self.assertEqual('1-3', self.irqs.affinity(90))     # banned there
        for n in (91, 92, 93):
            self.assertEqual('0-3', self.irqs.affinity(n), n)
        self.assertIn('irqbalance (pid 4242) runs and would move IRQs '
                      '91-93 back', logged.output)
        drv.restore()
        self.assertEqual('0-3', self.irqs.affinity(90))

    def test_a_refused_separation_gives_back_what_it_moved(self):
        # A host may let one vector move and refuse the next (EPERM); here
        # a stand-in refuses IRQ 91 that way, after 90 was moved.
        from vsmtio_agent.actuators import base as act_base
        from vsmtio_agent.actuators import irq as irq_act

        class Refusing(irq_act.IrqAffinity):
            def _set(self, key, value):
                if key == '91':
                    raise act_base.ActuatorError('EPERM', denied=True)
                super()._set(key, value)

        drv = self.driver()
        drv.recover()
        drv.sample()
        drv.mist.irq = Refusing(drv.checkpoint, self.irqs.root)
        drv.apply(self.decision(True))
        self.assertIn(mist_host.IRQ, drv.mist.unsupported)
        for n in VF_IRQS + NVME_IRQS:
            self.assertEqual('0-3', self.irqs.affinity(n), n)
        self.assertEqual([], drv.checkpoint.keys(drv.mist.irq.kind))
        drv.apply(self.decision(True))      # not tried again
        self.assertEqual('0-3', self.irqs.affinity(90))
        drv.restore()

    def test_an_irq_leaves_with_its_domains_protection(self):
        drv = self.protected()
        self.assertEqual('0', self.irqs.affinity(92))
        # the VF's IRQ 91 is banned meanwhile: it goes back at once
        self.conf.set_override('mist_irq_ban', [91], group='vsmtio_agent')
        drv.apply(self.decision(True))
        self.assertEqual('0-3', self.irqs.affinity(91))
        self.assertEqual('0', self.irqs.affinity(92))
        drv.apply(self.decision(False))
        self.assertEqual('0-3', self.irqs.affinity(92))
        self.assertTrue(drv.checkpoint.empty)

    def test_describe_says_what_interrupts_and_irqbalance(self):
        self.conf.set_override('mist_irq_ban', [24, 26],
                               group='vsmtio_agent')
        host_fixtures.write(os.path.join(self.irqs.root, '77/comm'),
                            'irqbalance\n')
        host_fixtures.write(os.path.join(self.irqs.root, '77/cmdline'),
                            'irqbalance\0')
        mode = self.driver().describe()
        self.assertIn("MIST interrupts: those of the devices a protected VM "
                      "alone owns (assigned to it); never IRQs 24,26",
                      mode.capabilities)
        self.assertIn('MIST interrupts: irqbalance (pid 77) runs: only the '
                      'IRQs its --banirq names are moved', mode.missing)


# What libvirt's qemu driver raises where the domain's cgroup has no
# weight file (no BFQ on the host): its code, domain and text.
NO_WEIGHT = 'blkio device weight is valid only for bfq or cfq scheduler'


def no_weight_error():
    """The ``libvirtError`` libvirt raises for a host without weights.

    Built by hand: libvirt's test driver keeps a weight of its own for
    every domain (it has no cgroups) and never refuses one, and the
    refusal comes from a running domain's cgroup, which a unit test
    cannot present to libvirt. Only the error is made: the domain, the
    driver and everything else are libvirt's test driver's.
    """
    exc = libvirt.libvirtError('Requested operation is not valid: '
                               + NO_WEIGHT)
    exc.err = (libvirt.VIR_ERR_OPERATION_INVALID, libvirt.VIR_FROM_CGROUP,
               'Requested operation is not valid: ' + NO_WEIGHT,
               libvirt.VIR_ERR_ERROR, 'Requested operation is not valid: '
               '%s', NO_WEIGHT, None, -1, -1)
    return exc


class TestNoBlkioWeightOnTheHost(_MistDriverCase):
    """An I/O scheduler without weights: the lever is missing, not failed.

    The host's disk under the guest's image (vda, below a partition and a
    device-mapper volume in the fake tree) uses mq-deadline, and libvirt
    refuses the domain's weight the way it does there (see
    :func:`no_weight_error`); every other call is the test driver's.
    """

    def setUp(self):
        super().setUp()
        host_fixtures.write(os.path.join(
            self.sysfs.root, 'devices/pci0000:00/0000:00:02.0/virtio1/'
            'block/vda/queue/scheduler'), 'none [mq-deadline] kyber\n')
        self.refuse = True
        self.calls = []
        real_read = libvirt.virDomain.blkioParameters
        real_set = libvirt.virDomain.setBlkioParameters

        def read(dom, flags=0):
            self.calls.append('read')
            if self.refuse and dom.isActive():
                raise no_weight_error()
            return real_read(dom, flags)

        def write(dom, params, flags=0):
            self.calls.append('set')
            if self.refuse and dom.isActive():
                raise no_weight_error()
            return real_set(dom, params, flags)
        self.useFixture(fixtures.MonkeyPatch(
            'libvirt.virDomain.blkioParameters', read))
        self.useFixture(fixtures.MonkeyPatch(
            'libvirt.virDomain.setBlkioParameters', write))
        self.why = ("the host's I/O scheduler (mq-deadline on vda) has no "
                    "proportional weights (bfq): libvirt: Requested "
                    "operation is not valid: " + NO_WEIGHT)

    def test_the_weight_is_skipped_and_said_once(self):
        logged = self.useFixture(fixtures.FakeLogger())
        drv = self.driver()
        drv.recover()
        drv.sample()
        for _ in range(3):
            result = drv.apply(self.decision(True))
            self.assertEqual(0, result.failed, result.messages)
        # asked once, never written, nothing recorded or claimed
        self.assertEqual(['read'], self.calls)
        self.assertEqual([], drv.checkpoint.keys('blkio_weight'))
        self.assertFalse(drv.checkpoint.owners.holds(
            ledger.MIST, 'blkio_weight', self.uuid, 'weight'))
        # the CPU and the interrupts are protected all the same
        held = drv.mist.protected[self.uuid]
        self.assertIn(mist_host.CPU, held)
        self.assertNotIn(mist_host.BLKIO, held)
        self.assertEqual('0', self.irqs.affinity(92))
        # said once in the log, and by check and status
        self.assertEqual(1, logged.output.count(
            'MIST blkio: not available: ' + self.why), logged.output)
        self.assertIn('MIST blkio: not available: ' + self.why,
                      drv.describe().missing)
        self.assertEqual('not available: ' + self.why,
                         drv.mist_levers()['block I/O'])
        from vsmtio_agent import agent as agent_mod
        from vsmtio_agent import status
        ag = agent_mod.Agent(self.conf, drv)
        ag.tick()
        doc = status.document(ag.tick(), drv, self.conf.vsmtio_agent,
                              'stock')
        path = os.path.join(self.useFixture(fixtures.TempDir()).path, 's')
        with open(path, 'w') as f:
            json.dump(doc, f)
        self.assertIn('  block I/O: not available: ' + self.why,
                      status.format_table(status.load(path)))
        # released and restored without a failure or a weight written
        released = drv.apply(self.decision(False))
        self.assertEqual(0, released.failed, released.messages)
        drv.restore()
        self.assertNotIn('set', self.calls)
        self.assertTrue(drv.checkpoint.empty)

    def test_check_reads_the_running_domains(self):
        # before any sample (vsmtio-agent check): the weight is read of
        # the domains libvirt lists, nothing written
        mode = self.driver().describe()
        self.assertIn('MIST blkio: not available: ' + self.why,
                      mode.missing)
        self.assertEqual(['read'], self.calls)

    def test_said_once_by_check_and_the_protection(self):
        # the daemon's start describes the host (reading a domain without
        # disks: the test driver's own), then protects the reserved one:
        # one refusal, said once, naming the scheduler under any image
        logged = self.useFixture(fixtures.FakeLogger())
        drv = self.driver()
        names = [d.name() for d in self.conn.listAllDomains(
            libvirt.VIR_CONNECT_LIST_DOMAINS_ACTIVE)]
        self.assertIn('test', names)
        self.assertIn('MIST blkio: not available: ' + self.why,
                      drv.describe().missing)
        drv.recover()
        drv.sample()
        for _ in range(2):
            result = drv.apply(self.decision(True))
            self.assertEqual(0, result.failed, result.messages)
        self.assertEqual(1, logged.output.count('MIST blkio: not available'),
                         logged.output)
        self.assertEqual('not available: ' + self.why,
                         drv.mist_levers()['block I/O'])

    def test_asked_again_now_and_then(self):
        self.useFixture(fixtures.FakeLogger())
        drv = self.driver()
        drv.recover()
        drv.sample()
        now = [100.0]
        drv.mist.clock = lambda: now[0]
        drv.apply(self.decision(True))
        # the operator loads BFQ: the next question finds the weight
        self.refuse = False
        now[0] += mist_host.BLKIO_RECHECK - 1
        drv.apply(self.decision(True))
        self.assertEqual(self.weight, self.dom.blkioParameters(0)['weight'])
        now[0] += 1
        result = drv.apply(self.decision(True))
        self.assertEqual(0, result.failed, result.messages)
        self.assertEqual(1000, self.dom.blkioParameters(0)['weight'])
        self.assertEqual(
            "the domain's blkiotune weight, 1000",
            drv.mist_levers()['block I/O'])
        self.assertIn("MIST blkio: the domain's blkiotune weight, 1000",
                      drv.describe().capabilities)
        # and what it set goes back
        drv.apply(self.decision(False))
        self.assertEqual(self.weight, self.dom.blkioParameters(0)['weight'])
        self.assertTrue(drv.checkpoint.empty)

    def test_a_stopped_domain_is_gone_not_a_missing_lever(self):
        # the same error code for a domain that is not running: libvirt's
        # test driver raises it for a defined, stopped domain
        from vsmtio_agent.actuators import blkio
        from vsmtio_agent.actuators import libvirt_errors
        self.refuse = False
        self.dom.destroy()
        self.assertRaises(libvirt_errors.DomainGone,
                          blkio.BlkioWeight(None, self.dom).read, 'weight')


class TestBlkioWeightWhereTheHostHasOne(_MistDriverCase):
    """libvirt's test driver offers the weight: MIST uses it."""

    def test_check_and_status_say_the_weight_is_used(self):
        drv = self.driver()
        self.assertIn("MIST blkio: the domain's blkiotune weight, 1000",
                      drv.describe().capabilities)
        drv.recover()
        drv.sample()
        result = drv.apply(self.decision(True))
        self.assertEqual(0, result.failed, result.messages)
        self.assertEqual(1000, self.dom.blkioParameters(0)['weight'])
        self.assertEqual("the domain's blkiotune weight, 1000",
                         drv.mist_levers()['block I/O'])
        self.assertFalse(any(m.startswith('MIST blkio')
                             for m in drv.describe().missing))


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
        # each vCPU cgroup's runtime follows what its domain reserved, not
        # a flat mist_rt_runtime_us (400 ms of each second)
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


PASSTHROUGH_XML = """<domain><devices>
  <interface type='direct'>
    <source dev='%s' mode='%s'/><target dev='macvtap0'/>
  </interface></devices></domain>"""


class TestDevices(testtools.TestCase):
    """From what a domain alone owns to its IRQs; nothing shared."""

    def setUp(self):
        super().setUp()
        self.root = self.useFixture(fixtures.TempDir()).path
        self.useFixture(FakeDevices(self.root, (254, 0)))
        # the host's disk, its image's filesystem: a real device number
        self.image = os.path.abspath(__file__)

    def domain_irqs(self, xml):
        from vsmtio_agent.drivers.mist import devices
        return devices.domain_irqs(self.root, xml)

    def test_what_a_domain_owns(self):
        from vsmtio_agent.drivers.mist import devices
        xml = with_devices(self.image, NOVA_XML % {
            'name': 'x', 'uuid': str(uuid.uuid4()), 'specs': ''})
        self.assertEqual((['0000:00:05.1', '0000:00:06.0'], []),
                         devices.owned_sources(xml))
        block, net, problems = self.domain_irqs(xml)
        self.assertEqual((set(NVME_IRQS), set(VF_IRQS), []),
                         (block, net, problems))
        self.assertRaises(ValueError, devices.owned_sources, '<domain')

    def test_nothing_shared_with_the_host_or_another_domain(self):
        # a disk image on the host's disk, a block device source, a tap on
        # a bridge with the uplink, the bridge itself: not the domain's
        # alone, whatever sysfs says lies under them
        xml = """<domain><devices>
          <disk type='file'><source file='%s'/></disk>
          <disk type='block'><source dev='/dev/dm-0'/></disk>
          <interface type='bridge'><source bridge='br0'/>
            <target dev='tap1'/></interface>
          <interface type='direct'><source dev='eth0' mode='bridge'/>
            <target dev='macvtap1'/></interface>
        </devices></domain>""" % self.image
        self.assertEqual((set(), set(), []), self.domain_irqs(xml))

    def test_a_port_under_its_passthrough_macvtap_alone(self):
        block, net, problems = self.domain_irqs(
            PASSTHROUGH_XML % ('eth5', 'passthrough'))
        self.assertEqual((set(), set(PASSTHROUGH_IRQS), []),
                         (block, net, problems))
        # the same port in another mode is shared with its other users
        self.assertEqual((set(), set(), []), self.domain_irqs(
            PASSTHROUGH_XML % ('eth5', 'bridge')))
        # a port with another upper device (a bridge) is shared
        net_dir = os.path.join(self.root, 'class/net')
        os.symlink('../br0', os.path.join(net_dir, 'eth5/upper_br0'))
        block, net, problems = self.domain_irqs(
            PASSTHROUGH_XML % ('eth5', 'passthrough'))
        self.assertEqual(set(), net)
        self.assertIn('port eth5 has other upper devices (br0): shared',
                      problems[0])
        # the uplink under the bridge is never taken for a passthrough port
        block, net, problems = self.domain_irqs(
            PASSTHROUGH_XML % ('eth0', 'passthrough'))
        self.assertEqual(set(), net)
        self.assertIn('port eth0 has other upper devices (br0)', problems[0])
        block, net, problems = self.domain_irqs(
            PASSTHROUGH_XML % ('../eth0', 'passthrough'))
        self.assertEqual(set(), net)
        self.assertIn('not a device name', problems[0])

    def test_only_its_own_msi_vectors(self):
        from vsmtio_agent.drivers.mist import devices
        hostdev = ("<domain><devices><hostdev mode='subsystem' type='pci'>"
                   "<source><address domain='0' bus='0' slot='%s' "
                   "function='%s'/></source></hostdev></devices></domain>")
        # a device bound to vfio-pci with a legacy line only: lines are
        # shared, so nothing
        self.assertEqual((set(), set(), []), self.domain_irqs(
            hostdev % ('0x08', '0')))
        # a device that is no storage or network controller
        gpu = os.path.join(self.root, 'devices/pci0000:00/0000:00:06.0')
        host_fixtures.write(os.path.join(gpu, 'class'), '0x030000\n')
        block, net, problems = self.domain_irqs(hostdev % ('0x06', '0'))
        self.assertEqual((set(), set()), (block, net))
        self.assertIn('neither a storage nor a network controller',
                      problems[0])
        # a device not in sysfs
        block, net, problems = self.domain_irqs(hostdev % ('0x1f', '7'))
        self.assertIn('0000:00:1f.7: not in sysfs', problems[0])
        # a parent's IRQ is not the device's own
        self.assertEqual(set(), devices.own_vectors(os.path.join(
            self.root, 'devices/pci0000:00')))
