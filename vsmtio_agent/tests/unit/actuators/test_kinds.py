"""Each kind of knob on a real host part: read, record, write, restore.

Pinning and shares on libvirt's in-process test driver (real libvirt API
and errors), the kernel knobs on a file tree laid out as sysfs, and the
RASS class on a procfs-like tree (no process here has ``sched_rass``).
"""

import os

import fixtures
import libvirt
import testtools

from vsmtio_agent.actuators import base
from vsmtio_agent.actuators import checkpoint
from vsmtio_agent.actuators import kernel_knob
from vsmtio_agent.actuators import libvirt_errors
from vsmtio_agent.actuators import pinning
from vsmtio_agent.actuators import rass_class
from vsmtio_agent.actuators import shares
from vsmtio_agent.tests.unit.host import fixtures as host_fixtures
from vsmtio_agent.tests.unit.host import test_libvirt_driver as tld


class KindTestCase(testtools.TestCase):

    def setUp(self):
        super().setUp()
        tmp = self.useFixture(fixtures.TempDir()).path
        self.path = os.path.join(tmp, 'ckpt.json')
        self.checkpoint = checkpoint.Checkpoint(self.path, 'b')

    def saved(self):
        """The record as a fresh agent would read it after a crash."""
        c = checkpoint.Checkpoint(self.path, 'b')
        c.load()
        return c


class TestDomainKinds(KindTestCase):

    def setUp(self):
        super().setUp()
        self.dom = self.useFixture(tld.TestDomain())
        self.record = self.checkpoint.domain(self.dom.uuid,
                                             self.dom.dom.ID(), 'vm')

    def test_pinning(self):
        act = pinning.VcpuPinning(self.record, self.dom.dom)
        self.assertEqual(list(range(8)), act.read('1'))
        act.write('1', [2, 6])
        act.write('1', [3])      # the first original wins
        self.assertEqual([tld.ALL, {3}], self.dom.pins())
        rec = self.saved().domain(self.dom.uuid, self.dom.dom.ID())
        self.assertEqual(list(range(8)), rec.original('pins', '1'))
        self.assertEqual([], act.restore_all())
        self.assertEqual([tld.ALL, tld.ALL], self.dom.pins())
        self.assertEqual([], self.record.keys('pins'))

    def test_shares(self):
        # The test driver accepts the call but its value is fake (always
        # 50): that the value lands is asserted on a real qemu guest
        # (tests/functional/test_real_guest.py); here, the record.
        act = shares.CpuShares(self.record, self.dom.dom)
        before = act.read(shares.KEY)
        self.assertEqual('weight', act.parameter)
        act.write(shares.KEY, before * 2)
        rec = self.saved().domain(self.dom.uuid, self.dom.dom.ID())
        self.assertEqual(before, rec.original('cpu_shares', shares.KEY))
        act.restore(shares.KEY)
        self.assertTrue(self.checkpoint.empty)

    def test_a_gone_domain_and_a_refusal_are_told_apart(self):
        act = pinning.VcpuPinning(self.record, self.dom.dom)
        act.keep('0')
        self.dom.dom.destroy()
        self.assertRaises(libvirt_errors.DomainGone, act.write, '0', [1])
        # a read-only connection: libvirt refuses the change itself
        other = self.useFixture(tld.TestDomain())
        ro = libvirt.openReadOnly('test:///default')
        self.addCleanup(ro.close)
        act = pinning.VcpuPinning(base.MemoryRecord(),
                                  ro.lookupByUUIDString(other.uuid))
        exc = self.assertRaises(base.ActuatorError, act.write, '0', [1])
        self.assertTrue(exc.denied)
        self.assertEqual([tld.ALL, tld.ALL], other.pins())


class TestKernelKinds(KindTestCase):

    def test_timeout_knob_and_rass_io_cpus(self):
        sysfs = self.useFixture(host_fixtures.FakeSysfs(patched=True))
        act = kernel_knob.KernelKnob(self.checkpoint, sysfs.root)
        timeout = 'module/kvm/parameters/ctx_retention_timeout_ns'
        io_cpus = 'kernel/vsmtio/rass_io_cpus'
        act.write(timeout, 50000)
        act.write(io_cpus, '4-7')
        self.assertEqual(50000, sysfs.read_knob())
        self.assertEqual('4-7', act.read(io_cpus))
        saved = self.saved()
        self.assertEqual(200000, saved.original('knobs', timeout))
        self.assertEqual('', saved.original('knobs', io_cpus))
        self.assertEqual([], act.restore_all())
        self.assertEqual(200000, sysfs.read_knob())
        self.assertEqual('', act.read(io_cpus))

    def test_an_unwritable_knob_stays_recorded(self):
        sysfs = self.useFixture(host_fixtures.FakeSysfs(knob_writable=False))
        act = kernel_knob.KernelKnob(self.checkpoint, sysfs.root)
        relpath = 'module/kvm/parameters/halt_poll_ns'
        exc = self.assertRaises(base.ActuatorError, act.write, relpath, 1)
        self.assertTrue(exc.denied)
        # recorded before the write was tried, and kept when restore fails
        self.assertEqual([relpath], self.checkpoint.keys('knobs'))
        self.assertEqual([relpath], [k for k, _ in act.restore_all()])
        self.assertEqual([relpath], self.checkpoint.keys('knobs'))

    def test_rass_class(self):
        qemu = self.useFixture(host_fixtures.FakeQemuProcfs('u1'))
        threads = {i: (qemu.pid, tid) for i, tid in qemu.tids.items()}
        record = self.checkpoint.domain('u1', 3, 'vm')
        act = rass_class.RassClass(record, qemu.root, threads.get)
        act.write('0', 'io')
        act.write('1', 'cpu')
        self.assertEqual(('io', 'cpu'), (qemu.sched_rass(0),
                                         qemu.sched_rass(1)))
        act.restore('0')
        self.assertEqual('none', qemu.sched_rass(0))
        # a thread that is gone took its class with it: nothing to restore
        del threads[1]
        self.assertEqual([], act.restore_all())
        self.assertTrue(self.checkpoint.empty)
        self.assertRaises(base.ActuatorError, act.read, '1')
