"""KVM's vCPU statistics read with BPF, against KVM's own, on real VMs.

A child process creates a real KVM VM (``/dev/kvm``) with vCPUs whose
threads are named as QEMU names them; one vCPU runs a guest ``hlt`` in
real mode (an in-kernel irqchip: the vCPU then blocks in KVM, halted).
The reader's statistics of every vCPU must equal KVM's binary statistics
(``KVM_GET_STATS_FD``) of that vCPU, read by the child once the halted
vCPU's counters stand still. Skipped only where KVM or the BPF program
truly cannot be used here (the skip says why).
"""

import json
import os
import platform
import subprocess
import sys

import fixtures
import libvirt
import testtools

from vsmtio_agent.linux import kvmstats
from vsmtio_agent import model
from vsmtio_agent.tests.unit.host import test_libvirt_driver as tld
from vsmtio_agent.tests.unit.host import test_taskiter

# A QEMU stand-in with real KVM vCPUs: ``VM_CHILD n [-uuid U]``. Prints its
# vCPU threads' ids (by index) once they sleep and vCPU 0's halt is counted;
# then, for each line read, KVM's statistics of every vCPU as JSON
# ({index: {name: value}}); exits when stdin closes. The vCPUs' stats fds
# are taken before KVM_RUN (vCPU ioctls wait while the vCPU runs).
KVM_CHILD_PRELUDE = r'''
import ctypes, fcntl, json, mmap, os, struct, sys, threading, time
KVM_CREATE_VM, KVM_CREATE_VCPU, KVM_RUN = 0xAE01, 0xAE41, 0xAE80
KVM_CREATE_IRQCHIP, KVM_SET_USER_MEMORY_REGION = 0xAE60, 0x4020AE46
KVM_GET_SREGS, KVM_SET_SREGS, KVM_SET_REGS = 0x8138AE83, 0x4138AE84, 0x4090AE82
KVM_GET_STATS_FD = 0xAECE
with open('/proc/self/comm', 'w') as f:
    f.write('qemu-vsmtio-test')
def real_mode_vcpu(vm, index):
    """vCPU ``index`` of ``vm``, in real mode, its code at address 0."""
    vcpu = fcntl.ioctl(vm, KVM_CREATE_VCPU, index)
    sregs = bytearray(312)
    fcntl.ioctl(vcpu, KVM_GET_SREGS, sregs)
    struct.pack_into('QIH', sregs, 0, 0, 0xffff, 0)     # cs: base 0
    fcntl.ioctl(vcpu, KVM_SET_SREGS, bytes(sregs))
    regs = bytearray(144)
    struct.pack_into('QQ', regs, 128, 0, 2)             # rip 0, rflags
    fcntl.ioctl(vcpu, KVM_SET_REGS, bytes(regs))
    return vcpu
'''
VM_CHILD = KVM_CHILD_PRELUDE + r'''
n = int(sys.argv[1])
kvm = os.open('/dev/kvm', os.O_RDWR | os.O_CLOEXEC)
vm = fcntl.ioctl(kvm, KVM_CREATE_VM, 0)
fcntl.ioctl(vm, KVM_CREATE_IRQCHIP, 0)
mem = mmap.mmap(-1, 0x10000)
mem[0:3] = bytes([0xf4, 0xeb, 0xfd])        # hlt; jmp -3 (to the hlt)
addr = ctypes.addressof(ctypes.c_char.from_buffer(mem))
fcntl.ioctl(vm, KVM_SET_USER_MEMORY_REGION,
            struct.pack('IIQQQ', 0, 0, 0, 0x10000, addr))
vcpus, stats = [], []
for i in range(n):
    vcpu = real_mode_vcpu(vm, i)
    vcpus.append(vcpu)
    stats.append(fcntl.ioctl(vcpu, KVM_GET_STATS_FD, 0))
def read_stats(fd):
    flags, name_size, num, _id, desc, data = struct.unpack(
        'IIIIII', os.pread(fd, 24, 0))
    size = 16 + name_size
    descs = os.pread(fd, size * num, desc)
    out = {}
    for k in range(num):
        d = descs[k * size:(k + 1) * size]
        _f, _e, count, offset, _b = struct.unpack('IhHII', d[:16])
        if count == 1:
            out[d[16:].split(b'\0')[0].decode()] = struct.unpack(
                'Q', os.pread(fd, 8, data + offset))[0]
    return out
tids = [None] * n
named = threading.Barrier(n + 1)
def body(index):
    tids[index] = threading.get_native_id()
    with open('/proc/self/task/%d/comm' % tids[index], 'w') as f:
        f.write('CPU %d/KVM' % index)
    named.wait()
    if index == 0:
        fcntl.ioctl(vcpus[index], KVM_RUN, 0)   # halts, never returns
    else:
        threading.Event().wait()
for index in range(n):
    threading.Thread(target=body, args=(index,), daemon=True).start()
named.wait()
def state(tid):
    with open('/proc/self/task/%d/stat' % tid) as f:
        return f.read().rpartition(')')[2].split()[0]
last = None
while True:
    now = [read_stats(fd) for fd in stats]
    if (now == last and now[0]['halt_exits'] >= 1
            and all(state(t) == 'S' for t in tids)):
        break
    last = now
    time.sleep(0.01)
print(' '.join(map(str, tids)), flush=True)
for line in sys.stdin:
    print(json.dumps({i: read_stats(fd) for i, fd in enumerate(stats)}),
          flush=True)
'''


def kvm_reader(test):
    """A :class:`kvmstats.KvmStatsReader`, or skip saying why it cannot."""
    try:
        reader = kvmstats.KvmStatsReader()
    except kvmstats.Unavailable as exc:
        if kvmstats._taskiter is None and test_taskiter.can_build():
            test.fail('clang and libbpf are installed but %s' % exc)
        test.skipTest('KVM\'s statistics cannot be read with BPF here: %s'
                      % exc)
    test.addCleanup(reader.close)
    return reader


class VM(fixtures.Fixture):
    """A process with ``n`` real KVM vCPUs, vCPU 0 halted in its guest."""

    child = VM_CHILD    # its script, run with child_args() and -uuid U

    def child_args(self):
        return [str(self.n)]

    def __init__(self, test, n, uuid=None):
        super().__init__()
        self.test, self.n, self.uuid = test, n, uuid

    def _setUp(self):
        if platform.machine() not in ('x86_64', 'i686'):
            self.test.skipTest('the guest code here is x86 real mode')
        if not os.access('/dev/kvm', os.R_OK | os.W_OK):
            self.test.skipTest('no usable /dev/kvm here (%s)' % (
                'absent' if not os.path.exists('/dev/kvm')
                else 'not readable and writable by this user'))
        qemu_args = ['-uuid', self.uuid] if self.uuid else []
        self.proc = subprocess.Popen(
            [sys.executable, '-c', self.child] + self.child_args() + qemu_args,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True)
        self.addCleanup(self.stop)
        line = self.proc.stdout.readline()
        if not line:
            self.proc.wait(10)
            self.test.fail('the KVM child failed: %s'
                           % self.proc.stderr.read())
        self.tids = [int(t) for t in line.split()]
        self.pid = self.proc.pid

    def kvm_stats(self):
        """KVM's statistics of each vCPU, ``{index: {name: value}}``."""
        self.proc.stdin.write('\n')
        self.proc.stdin.flush()
        return {int(k): v for k, v in json.loads(
            self.proc.stdout.readline()).items()}

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        for f in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            f.close()


def as_kvm_names(stats):
    """A :class:`kvmstats.VcpuStats`'s present statistics, by KVM's names."""
    return {k: v for k, v in stats._asdict().items() if v is not None}


class TestSameAsKvm(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.reader = kvm_reader(self)

    def test_every_vcpu_equals_kvms_binary_statistics(self):
        vm = self.useFixture(VM(self, 4))
        read = self.reader.read(vm.pid)
        kvm = vm.kvm_stats()
        self.assertEqual(list(range(4)), sorted(read))
        for index in range(4):
            mine = as_kvm_names(read[index])
            self.assertEqual(
                {name: kvm[index][name] for name in mine}, mine)
            # x86: halt exits; a stock kernel: no retention counters
            self.assertIsNotNone(read[index].halt_exits)
            self.assertEqual('retentions' in kvm[index],
                             read[index].retentions is not None)
        self.assertGreaterEqual(read[0].halt_exits, 1)
        self.assertEqual([0, 0, 0], [read[i].halt_exits for i in (1, 2, 3)])
        # again, through the link now held
        self.assertEqual(read, self.reader.read(vm.pid))
        self.assertEqual(1, self.reader.links)

    def test_no_vcpu_files_no_process(self):
        self.assertEqual({}, self.reader.read(os.getpid()))
        self.assertEqual({}, self.reader.read(None))
        vm = self.useFixture(VM(self, 1))
        self.assertEqual([0], list(self.reader.read(vm.pid)))
        vm.stop()
        # its link is held and finds nothing; a new one likewise
        self.assertEqual({}, self.reader.read(vm.pid))
        self.reader.forget(vm.pid)
        self.assertEqual({}, self.reader.read(vm.pid))

    def test_links_are_released(self):
        one, two = self.useFixture(VM(self, 1)), self.useFixture(VM(self, 2))
        fds = test_taskiter.open_fds()
        reader = kvmstats.KvmStatsReader()
        self.addCleanup(reader.close)
        self.assertEqual([0], list(reader.read(one.pid)))
        self.assertEqual([0, 1], sorted(reader.read(two.pid)))
        reader.read(two.pid)
        self.assertEqual(2, reader.links)
        held = test_taskiter.open_fds()
        reader.retain({two.pid})
        self.assertEqual(1, reader.links)
        self.assertEqual(held - 1, test_taskiter.open_fds())
        reader.forget(two.pid)
        self.assertEqual(0, reader.links)
        reader.read(one.pid)
        reader.close()
        self.assertEqual(0, reader.links)
        self.assertEqual(fds, test_taskiter.open_fds())


class TestUnavailable(testtools.TestCase):

    def test_not_built(self):
        self.useFixture(fixtures.MonkeyPatch(
            'vsmtio_agent.linux.kvmstats._taskiter', None))
        self.useFixture(fixtures.MonkeyPatch(
            'vsmtio_agent.linux.kvmstats._NOT_BUILT', 'no module'))
        exc = self.assertRaises(kvmstats.Unavailable,
                                kvmstats.KvmStatsReader)
        self.assertIn('was not built: it needs clang and libbpf', str(exc))

    def test_without_privileges_it_says_why(self):
        # No capabilities (setpriv): the kernel refuses the program.
        kvm_reader(self)
        out = test_taskiter.without_capabilities(self, (
            'from vsmtio_agent.linux import kvmstats\n'
            'try:\n'
            '    kvmstats.KvmStatsReader()\n'
            'except kvmstats.Unavailable as exc:\n'
            '    print(exc)\n'))
        self.assertIn("the BPF iterator of KVM's vCPU files does not load",
                      out)
        self.assertIn('KVM with its BTF', out)


class TestTheSamplerReadsKvm(tld.DriverTestCase):
    """A test:///default domain marked kvm whose QEMU holds real vCPUs."""

    def setUp(self):
        super().setUp()
        kvm_reader(self)    # skip where it cannot be read here
        self.dom = self.useFixture(tld.TestDomain())
        self.vm = self.useFixture(VM(self, 2, self.dom.uuid))
        self.asked = []
        real = libvirt.virConnect.getAllDomainStats

        def recorded(conn, stats, flags=0):
            if stats & libvirt.VIR_DOMAIN_STATS_STATE:  # not MIST's call
                self.asked.append(bool(stats & libvirt.VIR_DOMAIN_STATS_VCPU))
            return real(conn, stats, flags)
        self.useFixture(fixtures.MonkeyPatch(
            'libvirt.virConnect.getAllDomainStats', recorded))

    def sampled_as_kvm(self, **overrides):
        """The driver, having sampled the domain, marked kvm, once."""
        drv = self.driver(switch_read_periods=1, **overrides)
        drv.sample()
        drv.sampler.domains.get(self.dom.uuid).kvm = True
        drv.sample()
        del self.asked[:]
        return drv

    def test_halts_and_retention_from_bpf_without_the_vcpu_group(self):
        drv = self.sampled_as_kvm(thread_reader='bpf')
        snaps = [drv.sample(), drv.sample()]
        # (a period where no domain started or stopped calls libvirt
        # for nothing: lifecycle events say so)
        self.assertNotIn(True, self.asked)
        kvm = self.vm.kvm_stats()
        for snap in snaps:
            for index in range(2):
                counters = snap.vcpus[model.VcpuRef(self.dom.uuid, index)]
                stats = kvm[index]
                # test:/// has no halt statistics: these are KVM's
                self.assertEqual(stats['halt_exits'], counters.halts)
                self.assertEqual(stats['halt_poll_success_ns']
                                 + stats['halt_poll_fail_ns'],
                                 counters.retention_ns)
                self.assertEqual(stats['halt_attempted_poll'],
                                 counters.retentions)
                self.assertEqual(stats['halt_attempted_poll']
                                 - stats['halt_successful_poll'],
                                 counters.retention_timeouts)
                # the thread's own counters, as before
                self.assertGreater(counters.run_ns, 0)
            self.assertGreaterEqual(
                snap.vcpus[model.VcpuRef(self.dom.uuid, 0)].halts, 1)
        self.assertIn("KVM's vCPU halt statistics from a BPF iterator over "
                      "each QEMU's vCPU files (libvirt's vCPU group is not "
                      "asked for)", drv.describe().capabilities)
        # its vCPU files read in the threads program's run where it loads
        # (no link held), else through a link of the iterator's
        self.assertEqual(0 if drv.sampler.reader.threads_why is None else 1,
                         drv.sampler.kvm.links)
        # a patched kernel's counters: not in this kernel, so missing, as
        # libvirt's keys would be
        drv.sampler.patched = True
        counters = drv.sample().vcpus[model.VcpuRef(self.dom.uuid, 0)]
        self.assertEqual((None, None, None), (
            counters.retention_ns, counters.retentions,
            counters.retention_timeouts))
        self.assertEqual(kvm[0]['halt_exits'], counters.halts)

    def test_the_vcpu_group_where_qemu_cannot_be_read(self):
        # QEMU gone: its vCPUs are not found; libvirt's group from the
        # next period on.
        drv = self.sampled_as_kvm(thread_reader='bpf')
        drv.sample()
        self.assertNotIn(True, self.asked)
        self.vm.stop()
        drv.sample()    # the period that finds QEMU gone
        self.assertNotIn(True, self.asked)
        drv.sample()    # the next one asks
        self.assertEqual([True], self.asked[-1:])

    def test_the_vcpu_group_with_procfs(self):
        drv = self.sampled_as_kvm(thread_reader='procfs')
        self.assertIsNone(drv.sampler.kvm)
        snap = drv.sample()
        self.assertEqual([True], self.asked)
        self.assertIsNone(snap.vcpus[model.VcpuRef(self.dom.uuid, 0)].halts)
        self.assertIn("KVM's vCPU halt statistics from libvirt's vCPU group: "
                      "the vCPU threads are read from procfs "
                      "(thread_reader = procfs)", drv.describe().capabilities)


class TestProgramErrors(testtools.TestCase):
    """Misuse of the extension's second program raises; nothing crashes."""

    def test_misuse(self):
        kvm_reader(self)    # skip where it cannot load
        program = kvmstats._taskiter.Program('kvm')
        self.addCleanup(program.close)
        self.assertRaises(ValueError, kvmstats._taskiter.Program, 'nope')
        link = program.attach(os.getpid())
        self.assertEqual(b'', program.read_raw(link))
        self.assertRaises(KeyError, program.read_raw, link + 1000)
        # its records are not the task iterator's
        self.assertRaises(TypeError, program.read, link, [1],
                          test_taskiter.procfs.ThreadCounters)
        program.detach(link)
        program.close()
        self.assertRaises(ValueError, program.read_raw, link)
