"""The vCPU threads' counters in KVM's records, on real KVM vCPUs.

The BPF iterator over a QEMU's vCPU files also copies the counters of the
thread that runs each vCPU (``kvm_vcpu.pid``, set at its first
``KVM_RUN``), so that the sampler reads a kvm domain with one read per
QEMU. A child process (as in :mod:`test_kvmstats`) runs real vCPUs: the
first ``ran`` of them enter a real-mode guest whose ``out`` exits to user
space at once, again every ``every`` seconds (0: once, then the thread
sleeps and its counters stand still); the others never run. Their counters
are checked against procfs's and the task iterator's for the same thread,
and the sampler's snapshot against the one it builds with two reads.
"""

import fcntl
import os
import shutil
import subprocess
import sys
import time

import fixtures
import testtools

from vsmtio_agent.linux import kvmstats
from vsmtio_agent.linux import procfs
from vsmtio_agent.linux import taskiter
from vsmtio_agent import model
from vsmtio_agent.tests.unit.host import test_kvmstats
from vsmtio_agent.tests.unit.host import test_libvirt_driver as tld
from vsmtio_agent.tests.unit.host import test_taskiter

# ``RUN_CHILD n ran every [-uuid U]``: prints its vCPU threads' ids (by
# index) once each of the first ``ran`` vCPUs has run (and, with every 0,
# every vCPU thread sleeps); exits when stdin closes.
RUN_CHILD = test_kvmstats.KVM_CHILD_PRELUDE + r'''
n, ran, every = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
kvm = os.open('/dev/kvm', os.O_RDWR | os.O_CLOEXEC)
vm = fcntl.ioctl(kvm, KVM_CREATE_VM, 0)
mem = mmap.mmap(-1, 0x1000)
mem[0:4] = bytes([0xe6, 0x10, 0xeb, 0xfc])      # out 0x10, al; jmp -4
fcntl.ioctl(vm, KVM_SET_USER_MEMORY_REGION, struct.pack(
    'IIQQQ', 0, 0, 0, 0x1000,
    ctypes.addressof(ctypes.c_char.from_buffer(mem))))
vcpus = [real_mode_vcpu(vm, i) for i in range(n)]
tids = [None] * n
ready = threading.Barrier(n + 1)
def body(index):
    tids[index] = threading.get_native_id()
    with open('/proc/self/task/%d/comm' % tids[index], 'w') as f:
        f.write('CPU %d/KVM' % index)
    if index < ran:
        fcntl.ioctl(vcpus[index], KVM_RUN, 0)   # the out exits at once
    ready.wait()
    while index < ran and every:
        time.sleep(every)
        fcntl.ioctl(vcpus[index], KVM_RUN, 0)
    threading.Event().wait()
for index in range(n):
    threading.Thread(target=body, args=(index,), daemon=True).start()
ready.wait()
def state(tid):
    with open('/proc/self/task/%d/stat' % tid) as f:
        return f.read().rpartition(')')[2].split()[0]
while not every and not all(state(t) == 'S' for t in tids):
    time.sleep(0.01)
print(' '.join(map(str, tids)), flush=True)
sys.stdin.read()
'''


# The agent in a pid namespace of its own (a container): RUN_CHILD (argv 1)
# in it, both vCPUs run once; the ids in KVM's records are those procfs
# mounted there shows, as the task iterator's.
IN_NAMESPACE = r'''
import subprocess, sys
from vsmtio_agent.linux import kvmstats, taskiter
child = subprocess.Popen([sys.executable, '-c', sys.argv[1], '2', '2', '0'],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         text=True)
tids = [int(t) for t in child.stdout.readline().split()]
_stats, kvm_tids, threads = kvmstats.KvmStatsReader().read_all(child.pid)
task = taskiter.TaskIterReader().read_many(child.pid, tids)
print(child.pid, kvm_tids == tids, threads == task, None not in threads)
child.kill()
'''


class RunVM(test_kvmstats.VM):
    """``n`` real vCPUs, the first ``ran`` of which ran (every ``every`` s)."""

    child = RUN_CHILD

    def __init__(self, test, n, ran, every, uuid=None):
        super().__init__(test, n, uuid)
        self.ran, self.every = ran, every

    def child_args(self):
        return [str(self.n), str(self.ran), repr(self.every)]


def task_reader(test):
    try:
        reader = taskiter.TaskIterReader()
    except taskiter.Unavailable as exc:
        test.skipTest('no BPF task iterator here: %s' % exc)
    test.addCleanup(reader.close)
    return reader


class TestThreadCounters(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.kvm = test_kvmstats.kvm_reader(self)
        self.tasks = task_reader(self)
        self.procfs = procfs.ThreadReader('/proc')
        self.addCleanup(self.procfs.close)

    def test_a_running_vcpu_has_its_threads_counters(self):
        vm = self.useFixture(RunVM(self, 2, 1, 0.001))
        tid = vm.tids[0]
        first = self.procfs.read(vm.pid, tid)
        time.sleep(0.02)
        before = self.tasks.read(vm.pid, tid)
        time.sleep(0.02)
        stats, tids, threads = self.kvm.read_all(vm.pid)
        time.sleep(0.02)
        after = self.tasks.read(vm.pid, tid)
        time.sleep(0.02)
        last = self.procfs.read(vm.pid, tid)
        self.assertEqual([0, 1], sorted(stats))
        self.assertEqual(stats, self.kvm.read(vm.pid))  # read()'s, as ever
        # vCPU 1 never ran: KVM knows no thread of it
        self.assertEqual([tid, None], tids)
        self.assertIsNone(threads[1])
        counters = threads[0]
        self.assertIsInstance(counters, procfs.ThreadCounters)
        self.assertIsNone(counters.switches_ns)    # as the task iterator's
        self.assertIn(counters.cpu, range(os.cpu_count()))
        # a running thread: each counter between two readings of procfs
        # and of the task iterator
        for field in ('run_ns', 'runqueue_delay_ns', 'voluntary_switches',
                      'involuntary_switches'):
            value = getattr(counters, field)
            self.assertLessEqual(getattr(first, field), value, field)
            self.assertLessEqual(getattr(before, field), value, field)
            self.assertLessEqual(value, getattr(after, field), field)
            self.assertLessEqual(value, getattr(last, field), field)
        # and it does run: it ran and switched over the readings
        self.assertGreater(last.run_ns, first.run_ns)
        self.assertGreater(last.voluntary_switches, first.voluntary_switches)

    def test_a_sleeping_vcpu_equals_the_task_iterator(self):
        vm = self.useFixture(RunVM(self, 3, 3, 0))
        _stats, tids, threads = self.kvm.read_all(vm.pid)
        self.assertEqual(vm.tids, tids)
        self.assertEqual(self.tasks.read_many(vm.pid, vm.tids), threads)

    def test_no_thread_for_vcpus_that_never_ran(self):
        vm = self.useFixture(RunVM(self, 2, 0, 0))
        stats, tids, threads = self.kvm.read_all(vm.pid)
        self.assertEqual([0, 1], sorted(stats))
        self.assertEqual([None, None], tids)
        self.assertEqual([None, None], threads)
        self.assertEqual(({}, [], []), self.kvm.read_all(None))

    def test_in_a_pid_namespace(self):
        # The reader in a new pid namespace: its QEMU is pid 2 there, and
        # the kernel's ids (task->pid) are others.
        if not os.access('/dev/kvm', os.R_OK | os.W_OK):
            self.skipTest('no usable /dev/kvm here')
        if not shutil.which('unshare'):
            self.skipTest('unshare (util-linux) is not installed')
        out = subprocess.run(
            ['unshare', '--pid', '--fork', '--mount-proc', sys.executable,
             '-c', IN_NAMESPACE, RUN_CHILD], capture_output=True, text=True,
            timeout=60,
            env=dict(os.environ, PYTHONPATH=test_taskiter.this_tree()))
        if out.returncode and 'unshare failed' in out.stderr:
            self.skipTest('no pid namespace here: %s' % out.stderr.strip())
        self.assertEqual(0, out.returncode, out.stderr)
        self.assertEqual('2 True True True', out.stdout.strip())


class TestOneReadPerQemu(tld.DriverTestCase):
    """A test:///default domain marked kvm whose QEMU's vCPUs ran."""

    def vm_sampled_as_kvm(self, ran, every):
        test_kvmstats.kvm_reader(self)  # skip where it cannot be read here
        self.dom = self.useFixture(tld.TestDomain())
        self.vm = self.useFixture(RunVM(self, 2, ran, every, self.dom.uuid))
        drv = self.driver(switch_read_periods=1, thread_reader='bpf')
        drv.sample()
        drv.sampler.domains.get(self.dom.uuid).kvm = True
        drv.sample()
        # what the sampler asks each reader for this QEMU from now on
        self.asked = {'task': 0, 'kvm': 0}
        for name, reader, method in (
                ('task', drv.sampler.reader, 'read_many'),
                ('kvm', drv.sampler.kvm, 'read_vcpus')):
            self.useFixture(fixtures.MonkeyPatch(
                '%s.%s' % (type(reader).__module__, type(reader).__name__)
                + '.' + method, self._counted(name, getattr(
                    type(reader), method))))
        return drv

    def _counted(self, name, method):
        def counted(reader, pid, *args, **kwargs):
            if pid == self.vm.pid:
                self.asked[name] += 1
            return method(reader, pid, *args, **kwargs)
        return counted

    def vcpus(self, snap):
        return {ref: c for ref, c in snap.vcpus.items()
                if ref.domain == self.dom.uuid}

    def test_one_read_per_qemu(self):
        drv = self.vm_sampled_as_kvm(2, 0.001)
        snaps = [drv.sample()]
        time.sleep(0.05)    # its threads run
        snaps.append(drv.sample())
        self.assertEqual({'task': 0, 'kvm': 2}, self.asked)
        for snap in snaps:
            for index in range(2):
                counters = snap.vcpus[model.VcpuRef(self.dom.uuid, index)]
                self.assertGreater(counters.run_ns, 0)
                self.assertGreater(counters.voluntary_switches, 0)
                self.assertIn(counters.cpu, range(os.cpu_count()))
                self.assertIsNone(counters.switches_ns)
                self.assertEqual(0, counters.halts)     # out exits only
        self.assertGreater(
            snaps[1].vcpus[model.VcpuRef(self.dom.uuid, 0)].run_ns,
            snaps[0].vcpus[model.VcpuRef(self.dom.uuid, 0)].run_ns)

    def test_the_same_snapshot_as_two_reads(self):
        # Sleeping vCPU threads: their counters stand still.
        drv = self.vm_sampled_as_kvm(2, 0)
        one = self.vcpus(drv.sample())
        self.assertEqual({'task': 0, 'kvm': 1}, self.asked)
        # KVM's records without the threads' counters: two reads
        read_vcpus = type(drv.sampler.kvm).read_vcpus
        self.useFixture(fixtures.MonkeyPatch(
            'vsmtio_agent.linux.kvmstats.KvmStatsReader.read_vcpus',
            lambda reader, pid, *args: read_vcpus(
                reader, pid, *args)._replace(tids=[], vcpus=[])))
        two = self.vcpus(drv.sample())
        self.assertEqual(1, self.asked['task'])
        self.assertEqual(2, len(one))
        self.assertEqual(one, two)

    def test_a_vcpu_that_never_ran_is_read_as_before(self):
        drv = self.vm_sampled_as_kvm(1, 0)
        snap = drv.sample()
        self.assertEqual({'task': 1, 'kvm': 1}, self.asked)
        reader = taskiter.TaskIterReader()
        self.addCleanup(reader.close)
        threads = reader.read_many(self.vm.pid, self.vm.tids)
        for index in range(2):
            counters = snap.vcpus[model.VcpuRef(self.dom.uuid, index)]
            self.assertEqual(threads[index].run_ns, counters.run_ns)
            self.assertEqual(0, counters.halts)


# ``MANY_CHILD n``: a VM with n vCPUs that never run (their files alone);
# prints an empty line once they are made, exits when stdin closes.
MANY_CHILD = test_kvmstats.KVM_CHILD_PRELUDE + r'''
kvm = os.open('/dev/kvm', os.O_RDWR | os.O_CLOEXEC)
vm = fcntl.ioctl(kvm, KVM_CREATE_VM, 0)
vcpus = [fcntl.ioctl(vm, KVM_CREATE_VCPU, i) for i in range(int(sys.argv[1]))]
print(flush=True)
sys.stdin.read()
'''
KVM_CHECK_EXTENSION, KVM_CAP_MAX_VCPUS = 0xAE03, 66


class ManyVcpus(test_kvmstats.VM):
    """``n`` KVM vCPUs that never ran: their files, no threads."""

    child = MANY_CHILD


class TestInTheThreadsRun(testtools.TestCase):
    """KVM's vCPU records read in the threads program's run (threads.bpf.c).

    The same records as the iterator's for the same QEMU (its vCPU
    threads asleep: their counters stand still), for the processes asked,
    once each.
    """

    def setUp(self):
        super().setUp()
        self.reader = test_taskiter.threads_reader(self)
        self.kvm = test_kvmstats.kvm_reader(self)
        self.with_run = kvmstats.KvmStatsReader(self.reader)
        self.addCleanup(self.with_run.close)

    def test_the_same_records_as_the_iterator(self):
        # one VM whose vCPUs all ran, one with a vCPU that never ran;
        # their threads asked for with one of them
        ran = self.useFixture(RunVM(self, 3, 3, 0))
        half = self.useFixture(RunVM(self, 2, 1, 0))
        self.reader.begin([half.pid], [ran.pid, half.pid])
        for vm in (ran, half):
            self.assertEqual(self.kvm.read_all(vm.pid),
                             self.with_run.read_all(vm.pid))
        self.assertEqual(0, self.with_run.links)
        self.assertEqual(self.reader.read_many(half.pid, half.tids),
                         test_taskiter.procfs_reading(half.pid, half.tids))
        self.assertEqual(0, self.reader.links)
        stats, tids, _threads = self.kvm.read_all(half.pid)
        self.assertEqual([0, 1], sorted(stats))
        self.assertEqual([half.tids[0], None], tids)

    def test_kvms_other_files_beside_the_vcpus(self):
        # VM_CHILD opens each vCPU's statistics file right after it, an
        # anonymous file of KVM's whose private data is the vCPU too, and
        # each VM has its VM file: once the run has found a vCPU file by
        # its name, it tells the rest from these by KVM's vCPU file
        # operations, in every QEMU it reads
        vms = [self.useFixture(test_kvmstats.VM(self, n)) for n in (3, 2)]
        self.reader.begin([], [vm.pid for vm in vms])
        for vm in vms:
            want = self.kvm.read_all(vm.pid)
            self.assertEqual(list(range(vm.n)), sorted(want[0]))
            self.assertEqual(want, self.with_run.read_all(vm.pid))
        self.assertEqual(0, self.with_run.links)

    def test_read_once_and_only_where_asked(self):
        vm = self.useFixture(RunVM(self, 2, 2, 0))
        other = self.useFixture(RunVM(self, 1, 1, 0))
        self.reader.begin([vm.pid, other.pid], [vm.pid])
        self.assertIsNone(self.reader.take_vcpus(other.pid))    # not asked
        raw = self.reader.take_vcpus(vm.pid)
        self.assertEqual(2, len(kvmstats._decode(raw)[0]))
        self.assertIsNone(self.reader.take_vcpus(vm.pid))       # taken
        # through the reader: the iterator's, for either
        self.assertEqual(self.kvm.read_all(vm.pid),
                         self.with_run.read_all(vm.pid))
        self.assertEqual(self.kvm.read_all(other.pid),
                         self.with_run.read_all(other.pid))
        self.assertEqual(2, self.with_run.links)
        # the threads of vm, asked for too, are still there to take
        self.assertEqual(test_taskiter.procfs_reading(vm.pid, vm.tids),
                         self.reader.read_many(vm.pid, vm.tids))
        self.assertEqual(0, self.reader.links)
        # read in a run again: the links are not needed any more
        self.reader.begin([], [vm.pid, other.pid])
        self.assertEqual(self.kvm.read_all(vm.pid),
                         self.with_run.read_all(vm.pid))
        self.assertEqual(1, self.with_run.links)
        self.with_run.read_all(other.pid)
        self.assertEqual(0, self.with_run.links)

    def test_more_vcpus_than_it_holds(self):
        # 2048 vCPU records a run: of processes of n vCPUs each, those
        # whose vCPUs all fit are read in full, the next one not (read
        # as without the run, through the iterator's link).
        fd = os.open('/dev/kvm', os.O_RDWR | os.O_CLOEXEC)
        try:
            most = fcntl.ioctl(fd, KVM_CHECK_EXTENSION, KVM_CAP_MAX_VCPUS)
        finally:
            os.close(fd)
        n = min(700, most)
        fit = 2048 // n
        vms = [self.useFixture(ManyVcpus(self, n)) for _ in range(fit + 1)]
        self.reader.begin([], [vm.pid for vm in vms])
        for vm in vms[:fit]:
            stats, tids, _threads = kvmstats._decode(
                self.reader.take_vcpus(vm.pid))
            self.assertEqual(list(range(n)), sorted(stats))
            self.assertEqual([None] * n, tids)      # never ran
        self.assertIsNone(self.reader.take_vcpus(vms[fit].pid))
        self.assertEqual(n, len(self.with_run.read(vms[fit].pid)))
        self.assertEqual(1, self.with_run.links)
