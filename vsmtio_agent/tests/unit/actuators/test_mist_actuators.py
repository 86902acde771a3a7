"""MIST's actuators on real parts where they run here.

IRQ affinity and cgroup RT runtime on copies of the procfs/cgroupfs
layout (writing the host's IRQs or cgroups from a unit test would change
the machine); the thread policy on a real thread of this process
(SCHED_BATCH needs no privilege, and its record/restore path is the one
SCHED_RR takes); libvirt knobs on the ``test:///default`` driver; the
record on real files.
"""

import os
import threading

import fixtures
import libvirt
import testtools

from vsmtio_agent.actuators import base
from vsmtio_agent.actuators import blkio
from vsmtio_agent.actuators import checkpoint
from vsmtio_agent.actuators import irq
from vsmtio_agent.actuators import rt
from vsmtio_agent.tests.unit.host.fixtures import write

INTERRUPTS = """\
           CPU0       CPU1       CPU2       CPU3
 24:          1          0          0          0  IO-APIC   5-edge      ACPI:Ged
 26:          0          8          0          0  IO-APIC   4-edge      ttyS0
 28:          0          0          0          0  PCI-MSIX-0000:00:01.0   0-edge      virtio0-config
 36:          0     823556          0          0  PCI-MSIX-0000:00:02.0   1-edge      virtio1-req.0
 38:          0      50137          0          0  PCI-MSIX-0000:00:03.0   1-edge      virtio2-input.0
 39:      37364          0          0          0  PCI-MSIX-0000:00:03.0   2-edge      virtio2-output.0
 40:          0          0          0          0  PCI-MSI-0000:00:1f.2   0-edge
 44:         12          0          0          0  IR-PCI-MSI 512000-edge      ahci[0000:00:1f.2], eth9
NMI:          0          0          0          0   Non-maskable interrupts
LOC:    2223456    2273458          0          0   Local timer interrupts
"""  # noqa: E501


class FakeIrqs(fixtures.Fixture):
    """A procfs root with /proc/interrupts and /proc/irq/N files."""

    def _setUp(self):
        self.root = self.useFixture(fixtures.TempDir()).path
        write(os.path.join(self.root, 'interrupts'), INTERRUPTS)
        for n in (24, 26, 28, 36, 38, 39, 40, 44):
            write(self.affinity_file(n), '0-3\n')

    def affinity_file(self, n):
        return os.path.join(self.root, 'irq', str(n), 'smp_affinity_list')

    def affinity(self, n):
        with open(self.affinity_file(n)) as f:
            return f.read().strip()


class TestIrq(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.fake = self.useFixture(FakeIrqs())
        self.record = base.MemoryRecord()
        self.act = irq.IrqAffinity(self.record, self.fake.root)

    def test_read_interrupts_names_and_actionless(self):
        irqs = irq.read_interrupts(self.fake.root)
        self.assertEqual('virtio1-req.0', irqs[36])
        self.assertEqual('virtio2-output.0', irqs[39])
        self.assertEqual('ACPI:Ged', irqs[24])
        self.assertEqual('', irqs[40])
        self.assertEqual('ahci[0000:00:1f.2], eth9', irqs[44])
        self.assertNotIn('NMI', irqs)

    def test_move_records_once_and_restores_only_its_own(self):
        self.assertTrue(self.act.move(36, {0}))
        self.assertFalse(self.act.move(36, {0}))   # already there
        self.act.move(38, {1, 2, 3})
        self.assertEqual('0', self.fake.affinity(36))
        self.assertEqual('1-3', self.fake.affinity(38))
        # someone else moves an IRQ the agent never touched
        write(self.fake.affinity_file(26), '2\n')
        self.assertEqual([], self.act.restore_all())
        self.assertEqual('0-3', self.fake.affinity(36))
        self.assertEqual('0-3', self.fake.affinity(38))
        self.assertEqual('2', self.fake.affinity(26))
        self.assertEqual([], self.record.keys(self.act.kind))

    def test_a_refused_move_is_an_error_and_keeps_nothing_wrong(self):
        os.unlink(self.fake.affinity_file(39))
        os.makedirs(self.fake.affinity_file(39))    # EISDIR on write
        self.assertRaises(base.ActuatorError, self.act.move, 39, {1})
        # the write never happened: nothing recorded for a restore to redo
        self.assertEqual([], self.record.keys(self.act.kind))

    def test_a_vanished_irq_restores_as_nothing(self):
        self.act.move(36, {0})
        os.unlink(self.fake.affinity_file(36))
        self.assertEqual([], self.act.restore_all())
        self.assertEqual([], self.record.keys(self.act.kind))

    def test_the_original_carries_the_irqs_identity(self):
        self.act.move(36, {0}, 'virtio1-req.0')
        self.assertEqual({'cpus': '0-3', 'actions': 'virtio1-req.0'},
                         self.record.original(self.act.kind, '36'))

    def test_restore_after_hotplug_writes_no_other_devices_irq(self):
        # the disk is unplugged and IRQ 36 goes to a new NIC
        self.act.move(36, {0})
        write(os.path.join(self.fake.root, 'interrupts'), INTERRUPTS.replace(
            'virtio1-req.0', 'virtio7-input.0'))
        write(self.fake.affinity_file(36), '2\n')      # the NIC's own
        with fixtures.FakeLogger() as logged:
            self.assertEqual([], self.act.restore_all())
        self.assertEqual('2', self.fake.affinity(36))
        self.assertEqual([], self.record.keys(self.act.kind))
        self.assertIn("IRQ 36 serves 'virtio7-input.0' now, not "
                      "'virtio1-req.0'", logged.output)

    def test_restore_of_an_irq_that_is_gone_from_the_list(self):
        self.act.move(36, {0}, 'virtio1-req.0')
        write(os.path.join(self.fake.root, 'interrupts'), '\n'.join(
            line for line in INTERRUPTS.splitlines()
            if not line.startswith(' 36:')))
        self.assertEqual([], self.act.restore_all())
        self.assertEqual('0', self.fake.affinity(36))
        self.assertEqual([], self.record.keys(self.act.kind))

    def test_an_irq_that_changed_hands_is_not_moved(self):
        e = self.assertRaises(base.ActuatorError, self.act.move, 36, {0},
                              'virtio9-req.0')
        self.assertIn('not moved', str(e))
        self.assertEqual('0-3', self.fake.affinity(36))
        self.assertEqual([], self.record.keys(self.act.kind))

    def test_an_earlier_agents_record_is_restored_as_kept(self):
        self.record.record(self.act.kind, '36', '1')
        self.assertEqual([], self.act.restore_all())
        self.assertEqual('1', self.fake.affinity(36))


class TestIrqbalance(testtools.TestCase):

    def proc(self, pid, comm, argv):
        write(os.path.join(self.root, str(pid), 'comm'), comm + '\n')
        with open(os.path.join(self.root, str(pid), 'cmdline'), 'wb') as f:
            f.write(b'\0'.join(a.encode() for a in argv) + b'\0')

    def setUp(self):
        super().setUp()
        self.root = self.useFixture(fixtures.TempDir()).path
        self.proc(1, 'systemd', ['/sbin/init'])
        write(os.path.join(self.root, 'interrupts'), INTERRUPTS)

    def test_none_running(self):
        self.assertIsNone(irq.irqbalance(self.root))

    def test_running_with_its_banned_irqs(self):
        self.proc(812, 'irqbalance',
                  ['/usr/sbin/irqbalance', '--foreground', '--banirq=36',
                   '-i', '38', '-i39', '--banirq', '40', '--banirq=x'])
        self.assertEqual((812, {36, 38, 39, 40}),
                         irq.irqbalance(self.root))


class TestThreadPolicy(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.stop.wait, daemon=True)
        self.thread.start()
        self.addCleanup(self.thread.join)
        self.addCleanup(self.stop.set)
        self.key = '%d/%d' % (os.getpid(), self.thread.native_id)
        self.record = base.MemoryRecord()
        self.act = rt.ThreadPolicy(self.record)

    def test_write_records_identity_and_restore_puts_back(self):
        tid = self.thread.native_id
        before = os.sched_getscheduler(tid)
        self.act.write(self.key, {'policy': os.SCHED_BATCH, 'priority': 0})
        self.assertEqual(os.SCHED_BATCH, os.sched_getscheduler(tid))
        original = self.record.original(self.act.kind, self.key)
        self.assertEqual(before, original['policy'])
        self.assertEqual(rt.thread_start('/proc', os.getpid(), tid),
                         original['start'])
        self.assertIsNotNone(original['start'])
        self.act.restore(self.key)
        self.assertEqual(before, os.sched_getscheduler(tid))

    def test_restore_skips_a_thread_that_is_gone(self):
        self.act.write(self.key, {'policy': os.SCHED_BATCH, 'priority': 0})
        self.stop.set()
        self.thread.join()
        self.assertEqual([], self.act.restore_all())
        self.assertEqual([], self.record.keys(self.act.kind))

    def test_restore_skips_another_thread_with_the_same_id(self):
        self.act.write(self.key, {'policy': os.SCHED_BATCH, 'priority': 0})
        kept = self.record.kept[self.act.kind][self.key]
        kept['start'] += 1      # as if the id now named a newer thread
        self.act.restore(self.key)
        self.assertEqual(os.SCHED_BATCH,
                         os.sched_getscheduler(self.thread.native_id))
        os.sched_setscheduler(self.thread.native_id, os.SCHED_OTHER,
                              os.sched_param(0))

    def test_no_such_thread_is_an_error(self):
        self.assertRaises(base.ActuatorError, self.act.read,
                          '%d/%d' % (os.getpid(), 2 ** 22 + 7))

    def test_a_thread_without_a_readable_start_is_not_changed(self):
        # a procfs root where the thread's stat is missing (as under a
        # procfs mounted hidepid): nothing could identify it at restore
        empty = self.useFixture(fixtures.TempDir()).path
        act = rt.ThreadPolicy(self.record, empty)
        exc = self.assertRaises(base.ActuatorError, act.write, self.key,
                                {'policy': os.SCHED_BATCH, 'priority': 0})
        self.assertIn('start time', str(exc))
        self.assertEqual(os.SCHED_OTHER,
                         os.sched_getscheduler(self.thread.native_id))
        self.assertEqual([], self.record.keys(act.kind))

    def test_an_original_without_a_start_is_dropped_not_applied(self):
        self.record.record(self.act.kind, self.key,
                           {'policy': os.SCHED_IDLE, 'priority': 0,
                            'start': None})
        [(key, exc)] = self.act.restore_all()
        self.assertIsInstance(exc, base.Dropped)
        self.assertIn('no start time', str(exc))
        self.assertEqual(os.SCHED_OTHER,
                         os.sched_getscheduler(self.thread.native_id))
        self.assertEqual([], self.record.keys(self.act.kind))


class FakeCgroups(fixtures.Fixture):
    """A cgroup v1 cpu controller tree with RT group scheduling files."""

    GROUPS = {'': 950000, 'machine': 0, 'machine/dom-a': 0,
              'machine/dom-a/vcpu0': 0, 'machine/dom-a/vcpu1': 0,
              'machine/dom-b': 0, 'machine/dom-b/vcpu0': 0,
              'system': 50000}

    def _setUp(self):
        self.root = self.useFixture(fixtures.TempDir()).path
        self.cpu = os.path.join(self.root, 'cpu')
        for group, value in self.GROUPS.items():
            write(os.path.join(self.cpu, group, rt.RT_FILE), '%d\n' % value)

    def value(self, group):
        with open(os.path.join(self.cpu, group, rt.RT_FILE)) as f:
            return int(f.read())


class TestRtRuntime(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.fake = self.useFixture(FakeCgroups())
        self.record = base.MemoryRecord()
        self.order = []
        test = self

        class Logged(rt.CgroupRtRuntime):
            def _set(self, key, value):
                test.order.append((key, value))
                super()._set(key, value)

        self.act = Logged(self.record, self.fake.cpu)

    def test_grants_cover_children_and_never_lower_a_parent(self):
        plan = rt.grants(self.act, {'machine/dom-a/vcpu0': 100000,
                                    'machine/dom-a/vcpu1': 100000})
        self.assertEqual([('machine', 200000), ('machine/dom-a', 200000),
                          ('machine/dom-a/vcpu0', 100000),
                          ('machine/dom-a/vcpu1', 100000)], plan)
        write(os.path.join(self.fake.cpu, 'machine', rt.RT_FILE),
              '500000\n')
        plan = dict(rt.grants(self.act, {'machine/dom-b/vcpu0': 100000}))
        self.assertEqual(500000, plan['machine'])

    def test_written_top_down_restored_bottom_up(self):
        for group, value in rt.grants(self.act,
                                      {'machine/dom-b/vcpu0': 100000}):
            self.act.write(group, value)
        self.assertEqual(['machine', 'machine/dom-b', 'machine/dom-b/vcpu0'],
                         [k for k, _ in self.order])
        self.assertEqual(100000, self.fake.value('machine/dom-b/vcpu0'))
        self.order.clear()
        self.assertEqual([], self.act.restore_all())
        self.assertEqual(['machine/dom-b/vcpu0', 'machine/dom-b', 'machine'],
                         [k for k, _ in self.order])
        self.assertEqual(0, self.fake.value('machine'))
        self.assertEqual(50000, self.fake.value('system'))

    def test_a_group_gone_with_its_domain_restores_as_nothing(self):
        self.act.write('machine/dom-b/vcpu0', 100000)
        import shutil
        shutil.rmtree(os.path.join(self.fake.cpu, 'machine/dom-b'))
        self.assertEqual([], self.act.restore_all())

    def test_rt_mode(self):
        proc = self.useFixture(fixtures.TempDir()).path
        knob = os.path.join(proc, 'sys/kernel/sched_rt_runtime_us')
        write(os.path.join(proc, 'sys/kernel/sched_rt_period_us'),
              '1000000\n')
        for value, mode in (('-1', None), ('0', None),
                            ('950000', 'group')):
            write(knob, value + '\n')
            got, why = rt.rt_mode(proc, self.fake.root, 'machine/x')
            self.assertEqual(mode, got, why)
        # no RT group scheduling in this kernel: the host-wide bound
        os.unlink(os.path.join(self.fake.cpu, rt.RT_FILE))
        self.assertEqual('global',
                         rt.rt_mode(proc, self.fake.root, 'machine/x')[0])
        # cgroup v2 (no v1 cpu path for the thread): the host-wide bound
        self.assertEqual('global', rt.rt_mode(proc, self.fake.root, None)[0])

    def test_only_group_scheduling_gives_a_vm_its_own_budget(self):
        # the host-wide bound is every RT thread's together: no VM's own
        proc = self.useFixture(fixtures.TempDir()).path
        write(os.path.join(proc, 'sys/kernel/sched_rt_period_us'),
              '1000000\n')
        write(os.path.join(proc, 'sys/kernel/sched_rt_runtime_us'),
              '950000\n')
        self.assertTrue(rt.per_vm_budget(proc, self.fake.root,
                                         'machine/x')[0])
        os.unlink(os.path.join(self.fake.cpu, rt.RT_FILE))
        budget, why = rt.per_vm_budget(proc, self.fake.root, 'machine/x')
        self.assertFalse(budget)
        self.assertIn('no per-VM real-time budget: no real-time group '
                      'scheduling', why)
        write(os.path.join(proc, 'sys/kernel/sched_rt_runtime_us'), '-1\n')
        budget, why = rt.per_vm_budget(proc, self.fake.root, None)
        self.assertFalse(budget)
        self.assertIn('sched_rt_runtime_us is -1', why)

    def test_a_bound_that_leaves_others_nothing_is_no_bound(self):
        # a runtime equal to the period leaves other tasks nothing
        proc = self.useFixture(fixtures.TempDir()).path
        write(os.path.join(proc, 'sys/kernel/sched_rt_period_us'),
              '1000000\n')
        os.unlink(os.path.join(self.fake.cpu, rt.RT_FILE))
        knob = os.path.join(proc, 'sys/kernel/sched_rt_runtime_us')
        write(knob, '1000000\n')
        self.assertIsNone(rt.rt_mode(proc, self.fake.root, None)[0])
        for value, share, mode in ((1000000, 0.05, None),
                                   (990000, 0.05, None),
                                   (950000, 0.05, 'global'),
                                   (950000, 0.1, None),
                                   (900000, 0.1, 'global')):
            write(knob, '%d\n' % value)
            got, why = rt.rt_mode(proc, self.fake.root, None, share)
            self.assertEqual(mode, got, (value, share, why))
        write(knob, '1000000\n')
        why = rt.rt_mode(proc, self.fake.root, None, 0.05)[1]
        self.assertIn('leaves other tasks less than 5%', why)

    def test_period_of_a_group_or_the_host(self):
        proc = self.useFixture(fixtures.TempDir()).path
        write(os.path.join(proc, 'sys/kernel/sched_rt_period_us'),
              '1000000\n')
        group = os.path.join(self.fake.cpu, 'machine')
        self.assertEqual(1000000, rt.period_us(proc, group))
        write(os.path.join(group, rt.PERIOD_FILE), '500000\n')
        self.assertEqual(500000, rt.period_us(proc, group))


class TestBudget(testtools.TestCase):
    """A protected domain's RT runtime follows its reservation (31.2)."""

    def budget(self, iops=None, bps=None, period=1000000, cap=400000,
               share=0.05):
        from vsmtio_agent import model
        return rt.budget_us(model.Reservation(iops=iops, bytes_per_s=bps),
                            period, 100.0, 1000.0, cap, share)

    def test_proportional_to_the_reservation(self):
        self.assertEqual((50000, 50000), self.budget(iops=500))
        self.assertEqual((100000, 100000), self.budget(iops=1000))
        # bandwidth: 40 MiB/s at 1000 us per MiB
        self.assertEqual((40000, 40000), self.budget(bps=40 << 20))
        # both: requests and their bytes
        self.assertEqual((90000, 90000), self.budget(iops=500,
                                                     bps=40 << 20))
        # counted in the group's own period
        self.assertEqual((25000, 25000), self.budget(iops=500,
                                                     period=500000))

    def test_bounded_by_the_option_and_never_the_whole_period(self):
        self.assertEqual((400000, 2000000), self.budget(iops=20000))
        self.assertEqual((950000, 2000000), self.budget(
            iops=20000, cap=1000000))
        self.assertEqual((900000, 2000000), self.budget(
            iops=20000, cap=1000000, share=0.1))

    def test_at_least_a_millisecond(self):
        self.assertEqual((rt.MIN_GRANT_US, 100), self.budget(iops=1))
        self.assertEqual((rt.MIN_GRANT_US, 0), self.budget())

    def test_cpu_cgroup_of_a_thread(self):
        proc = self.useFixture(fixtures.TempDir()).path
        write(os.path.join(proc, '7/task/9/cgroup'),
              '12:pids:/machine/q\n4:cpu,cpuacct:/machine/q/vcpu0\n'
              '0::/\n')
        self.assertEqual('machine/q/vcpu0', rt.cpu_cgroup(proc, 7, 9))
        write(os.path.join(proc, '7/task/9/cgroup'), '0::/machine.slice\n')
        self.assertIsNone(rt.cpu_cgroup(proc, 7, 9))


class TestBlkioWeight(testtools.TestCase):
    """``test:///default`` keeps a domain's blkio weight."""

    def setUp(self):
        super().setUp()
        self.conn = libvirt.open('test:///default')
        self.addCleanup(self.conn.close)
        self.dom = self.conn.listAllDomains()[0]
        self.record = base.MemoryRecord()

    def test_blkio_weight_set_and_restored(self):
        act = blkio.BlkioWeight(self.record, self.dom)
        before = self.dom.blkioParameters(0)['weight']
        act.write(blkio.KEY, 900)
        act.write(blkio.KEY, 800)
        self.assertEqual(800, self.dom.blkioParameters(0)['weight'])
        self.assertEqual(before, self.record.original(act.kind, blkio.KEY))
        act.restore(blkio.KEY)
        self.assertEqual(before, self.dom.blkioParameters(0)['weight'])
        self.assertEqual([], self.record.keys(act.kind))

    def test_a_domain_that_is_gone_is_an_error(self):
        dom = self.conn.defineXML(
            "<domain type='test'><name>off</name><memory>65536</memory>"
            "<os><type>hvm</type></os></domain>")
        self.addCleanup(dom.undefine)
        act = blkio.BlkioWeight(self.record, dom)
        self.assertRaises(base.ActuatorError, act.write, blkio.KEY, 900)


class TestOneRecordForMist(testtools.TestCase):
    """MIST's kinds live in the checkpoint, durable before the write."""

    def setUp(self):
        super().setUp()
        self.path = os.path.join(
            self.useFixture(fixtures.TempDir()).path, 'ckpt.json')

    def test_durable_before_the_write(self):
        fake = self.useFixture(FakeIrqs())
        ckpt = checkpoint.Checkpoint(self.path, 'b1')
        act = irq.IrqAffinity(ckpt, fake.root)
        act.move(36, {0})
        again = checkpoint.Checkpoint(self.path, 'b1')
        self.assertTrue(again.load())
        self.assertEqual({'cpus': '0-3', 'actions': 'virtio1-req.0'},
                         again.original(act.kind, '36'))
        irq.IrqAffinity(again, fake.root).restore_all()
        again.save()
        self.assertEqual('0-3', fake.affinity(36))
        self.assertFalse(os.path.exists(self.path))

    def test_an_unwritable_record_refuses_the_change(self):
        fake = self.useFixture(FakeIrqs())
        os.makedirs(self.path)       # the file's place is a directory
        ckpt = checkpoint.Checkpoint(self.path, 'b1')
        act = irq.IrqAffinity(ckpt, fake.root)
        e = self.assertRaises(base.ActuatorError, act.move, 36, {0})
        self.assertIn('not changing it', str(e))
        self.assertEqual('0-3', fake.affinity(36))
        self.assertEqual([], ckpt.keys(act.kind))


class TestAttempt(testtools.TestCase):

    def test_a_refused_write_leaves_no_record(self):
        fake = self.useFixture(FakeIrqs())
        record = base.MemoryRecord()

        class Refusing(irq.IrqAffinity):
            def _set(self, key, value):
                raise base.ActuatorError('EPERM', denied=True)

        act = Refusing(record, fake.root)
        e = self.assertRaises(base.ActuatorError, act.move, 36, {0})
        self.assertTrue(e.denied)
        self.assertEqual([], record.keys(act.kind))
        self.assertEqual([], act.restore_all())

    def test_a_write_that_changed_the_knob_stays_recorded(self):
        fake = self.useFixture(FakeIrqs())
        record = base.MemoryRecord()

        class HalfWay(irq.IrqAffinity):
            def _set(self, key, value):
                super()._set(key, value)
                raise base.ActuatorError('failed after writing')

        act = HalfWay(record, fake.root)
        self.assertRaises(base.ActuatorError, act.move, 36, {0})
        self.assertEqual(['36'], record.keys(act.kind))
