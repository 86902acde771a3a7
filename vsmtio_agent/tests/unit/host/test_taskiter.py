"""The BPF task iterator reader on this machine's real kernel and threads.

It must give what the procfs reader gives for the same live threads (of
this process and of another one, as the agent reads QEMU's), None for a
thread that is gone, hold one link per process and release it, and say
clearly why it cannot be used where it cannot. The readings are compared
while the threads sleep: their counters then stand still, so that two
readings made one after the other are equal, field by field.

Skipped only where the program truly cannot load here (the skip says
why); not being built where clang and libbpf's headers are installed is a
failure (the project's machines build it: .ci/install-debian-packages).
"""

import errno
import os
import shutil
import subprocess
import sys
import threading

import fixtures
import testtools

from vsmtio_agent.drivers import base
from vsmtio_agent.drivers.libvirt import sampling
from vsmtio_agent.linux import procfs
from vsmtio_agent.linux import taskiter
from vsmtio_agent import model
from vsmtio_agent.tests.unit.host import test_libvirt_driver as tld
from vsmtio_agent.tests.unit.host import test_procfs
from vsmtio_agent.tests.unit.host import test_procfs_readers

wait_asleep = test_procfs_readers.wait_asleep
wait_gone = test_procfs_readers.wait_gone

# A QEMU stand-in: N threads named as QEMU names vCPU threads, that block
# once, then sleep until stdin closes; prints its thread ids (by vCPU
# index) when they all sleep. Further arguments (``-uuid U``) are QEMU's
# command line, by which the libvirt driver finds the process.
CHILD = r'''
import os, sys, threading, time
with open('/proc/self/comm', 'w') as f:
    f.write('qemu-vsmtio-test')
n = int(sys.argv[1])
if sys.argv[2:3] == ['--stack']:
    threading.stack_size(int(sys.argv[3]))
    del sys.argv[2:4]
stop, ready = threading.Event(), threading.Barrier(n + 1)
tids = [None] * n
def body(index):
    tids[index] = threading.get_native_id()
    with open('/proc/self/task/%d/comm' % tids[index], 'w') as f:
        f.write('CPU %d/KVM' % index)
    time.sleep(0.001)
    ready.wait()
    stop.wait()
for index in range(n):
    threading.Thread(target=body, args=(index,), daemon=True).start()
ready.wait()
def state(tid):
    with open('/proc/self/task/%d/stat' % tid) as f:
        return f.read().rpartition(')')[2].split()[0]
while any(state(t) != 'S' for t in tids):
    time.sleep(0.001)
print(' '.join(map(str, tids)), flush=True)
sys.stdin.read()
'''

# The agent in a pid namespace of its own (a container): its threads' ids
# there, which procfs mounted there shows, are not the kernel's task->pid.
IN_NAMESPACE = r'''
import os, threading, time
from vsmtio_agent.linux import procfs, taskiter
stop = threading.Event()
threads = [threading.Thread(target=stop.wait) for _ in range(3)]
for t in threads:
    t.start()
tids = [t.native_id for t in threads]
def state(tid):
    with open('/proc/self/task/%d/stat' % tid) as f:
        return f.read().rpartition(')')[2].split()[0]
while any(state(t) != 'S' for t in tids):
    time.sleep(0.001)
bpf = taskiter.TaskIterReader().read_many(os.getpid(), tids)
same = bpf == procfs.ThreadReader().read_many(os.getpid(), tids)
print(os.getpid(), same, None not in bpf)
stop.set()
'''


def this_tree():
    """The directory holding this tree's package, for a child's path."""
    return os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(taskiter.__file__))))


def without_capabilities(test, code):
    """The output of Python ``code`` run with no capabilities at all.

    In a child (``setpriv``: no inheritable or bounding capabilities),
    importing this tree; the child must exit 0. Skips where setpriv
    (util-linux) is missing.
    """
    if not shutil.which('setpriv'):
        test.skipTest('setpriv (util-linux) is not installed')
    out = subprocess.run(
        ['setpriv', '--inh-caps=-all', '--bounding-set=-all', '--',
         sys.executable, '-c', code],
        capture_output=True, text=True, timeout=60,
        env=dict(os.environ, PYTHONPATH=this_tree()))
    test.assertEqual(0, out.returncode, out.stderr)
    return out.stdout


def can_build():
    return bool(shutil.which('clang')) and os.path.exists(
        '/usr/include/bpf/libbpf.h')


def bpf_reader(test):
    """A :class:`taskiter.TaskIterReader`, or skip saying why it cannot."""
    try:
        reader = taskiter.TaskIterReader()
    except taskiter.Unavailable as exc:
        if taskiter._taskiter is None and can_build():
            test.fail('clang and libbpf are installed but %s' % exc)
        test.skipTest('the BPF reader cannot be used here: %s' % exc)
    test.addCleanup(reader.close)
    return reader


def procfs_reading(pid, tids):
    """The procfs reader's counters, every file read (no cadence)."""
    reader = procfs.ThreadReader()
    try:
        return reader.read_many(pid, tids)
    finally:
        reader.close()


def open_fds():
    return len(os.listdir('/proc/self/fd'))


class Child(fixtures.Fixture):
    """Another process with ``n`` sleeping threads, as QEMU's vCPUs."""

    def __init__(self, n, uuid=None, stack=None):
        super().__init__()
        self.n, self.uuid, self.stack = n, uuid, stack

    def _setUp(self):
        qemu_args = ['-uuid', self.uuid] if self.uuid else []
        if self.stack:      # each thread's (many threads)
            qemu_args = ['--stack', str(self.stack)] + qemu_args
        self.proc = subprocess.Popen(
            [sys.executable, '-c', CHILD, str(self.n)] + qemu_args,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.addCleanup(self.stop)
        self.tids = [int(t) for t in self.proc.stdout.readline().split()]
        self.pid = self.proc.pid

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.proc.stdin.close()
        self.proc.stdout.close()


class TestBuilt(testtools.TestCase):

    def test_built_where_it_can_be(self):
        if not can_build():
            self.skipTest('clang or libbpf-dev is not installed: '
                          '_taskiter is not built')
        self.assertIsNotNone(taskiter._taskiter,
                             'vsmtio_agent.linux._taskiter is not built: '
                             'pip install -e . (or python setup.py '
                             'build_ext --inplace) with clang and '
                             'libbpf-dev installed')


class TestSameCountersAsProcfs(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.reader = bpf_reader(self)

    def assertSame(self, pid, tids):
        bpf = self.reader.read_many(pid, tids)
        self.assertEqual(procfs_reading(pid, tids), bpf)
        for counters in bpf:
            self.assertIsNone(counters.switches_ns)     # read now
            self.assertGreater(counters.run_ns, 0)
            self.assertGreaterEqual(counters.voluntary_switches, 1)
            self.assertIn(counters.cpu, range(os.cpu_count()))
        return bpf

    def test_threads_of_this_process(self):
        named = self.useFixture(test_procfs.NamedThreads(4, accel='KVM'))
        tids = list(named.tids.values())
        for tid in tids:
            wait_asleep(tid)
        self.assertSame(os.getpid(), tids)
        # in the order asked, whatever the kernel's
        self.assertSame(os.getpid(), tids[::-1])

    def test_threads_of_another_process_many_of_them(self):
        # More threads than the first buffer holds (256 records).
        child = self.useFixture(Child(300))
        self.assertEqual(300, len(child.tids))
        self.assertSame(child.pid, child.tids)
        self.assertEqual(1, self.reader.links)

    def test_a_running_thread_reads_between_two_procfs_readings(self):
        # This thread runs: its counters move, never backwards.
        tid = threading.get_native_id()
        pid = os.getpid()
        before = procfs_reading(pid, [tid])[0]
        now = self.reader.read(pid, tid)
        after = procfs_reading(pid, [tid])[0]
        for i in range(4):
            self.assertLessEqual(before[i], now[i])
            self.assertLessEqual(now[i], after[i])

    def test_in_a_pid_namespace(self):
        # In a new pid namespace the child is pid 1 and its threads 2..4;
        # the kernel's ids (task->pid) are others.
        if not shutil.which('unshare'):
            self.skipTest('unshare (util-linux) is not installed')
        out = subprocess.run(
            ['unshare', '--pid', '--fork', '--mount-proc', sys.executable,
             '-c', IN_NAMESPACE], capture_output=True, text=True,
            timeout=60, env=dict(os.environ, PYTHONPATH=this_tree()))
        if out.returncode and 'unshare failed' in out.stderr:
            self.skipTest('no pid namespace here: %s' % out.stderr.strip())
        self.assertEqual(0, out.returncode, out.stderr)
        self.assertEqual('1 True True', out.stdout.strip())

    def test_a_gone_thread_is_none(self):
        named = self.useFixture(test_procfs.NamedThreads(2))
        gone = threading.Thread(target=lambda: None)
        gone.start()
        tid = gone.native_id
        gone.join()
        wait_gone(tid)
        out = self.reader.read_many(os.getpid(),
                                    [named.tids[0], tid, named.tids[1]])
        self.assertIsNone(out[1])
        self.assertIsNotNone(out[0])
        self.assertIsNotNone(out[2])

    def test_a_gone_process(self):
        child = self.useFixture(Child(2))
        self.assertSame(child.pid, child.tids)
        child.stop()
        # its link is held, and reads nothing: every thread is gone
        self.assertEqual([None, None],
                         self.reader.read_many(child.pid, child.tids))
        # a process gone before its first reading: no link is made
        # (or one that reads nothing); never an exception
        self.reader.forget(child.pid)
        self.assertEqual([None], self.reader.read_many(child.pid,
                                                       child.tids[:1]))
        # a domain whose process was not found: no pid, no threads
        self.assertEqual([], self.reader.read_many(None, []))


def threads_reader(test):
    """A reader that reads with the threads program, or skip saying why.

    Skipped only on a kernel older than the program needs (6.13).
    """
    reader = bpf_reader(test)
    if reader.threads_why is not None:
        if tuple(map(int, os.uname().release.split('.')[:2])) >= (6, 13):
            test.fail('Linux >= 6.13, but %s' % reader.threads_why)
        test.skipTest(reader.threads_why)
    return reader


class TestThreadsProgram(testtools.TestCase):
    """Every process's threads in one run (threads.bpf.c)."""

    def setUp(self):
        super().setUp()
        self.reader = threads_reader(self)

    def test_same_counters_as_procfs_and_no_link(self):
        # Three processes in one run, each read in another order than
        # the kernel's, one of them with more threads than one buffer
        # of the task iterator's holds; then a process not asked for.
        children = [self.useFixture(Child(n)) for n in (2, 300, 3)]
        fds = open_fds()
        self.reader.begin([c.pid for c in children])
        for child in children:
            tids = child.tids[::-1]
            self.assertEqual(procfs_reading(child.pid, tids),
                             self.reader.read_many(child.pid, tids))
        self.assertEqual(0, self.reader.links)
        self.assertEqual(fds, open_fds())
        named = self.useFixture(test_procfs.NamedThreads(2))
        tids = list(named.tids.values())
        for tid in tids:
            wait_asleep(tid)
        self.assertEqual(procfs_reading(os.getpid(), tids),
                         self.reader.read_many(os.getpid(), tids))
        self.assertEqual(1, self.reader.links)      # not in the run

    def test_each_reading_is_taken_once(self):
        # A second reading of a process in the same period reads it
        # again (its link), never the run's reading a second time.
        tid = threading.get_native_id()
        pid = os.getpid()
        self.reader.begin([pid])
        first = self.reader.read(pid, tid)
        self.assertEqual(0, self.reader.links)
        second = self.reader.read(pid, tid)
        self.assertEqual(1, self.reader.links)
        # (a running thread's run time moves at the scheduler's ticks)
        self.assertLessEqual(first.run_ns, second.run_ns)

    def test_gone_threads_and_processes(self):
        child = self.useFixture(Child(2))
        gone = self.useFixture(Child(1))
        gone.stop()
        self.reader.begin([child.pid, gone.pid, 2 ** 31 - 1])
        # a thread that is not (or no longer) the process's: None
        self.assertEqual([None, procfs_reading(child.pid, child.tids)[1]],
                         self.reader.read_many(
                             child.pid, [gone.tids[0], child.tids[1]]))
        # a process the kernel did not find: as without the run
        self.assertEqual([None], self.reader.read_many(gone.pid, gone.tids))
        self.assertEqual([], self.reader.read_many(None, []))

    def test_in_a_pid_namespace(self):
        # Processes named, and threads numbered, in the reader's pid
        # namespace: the child is pid 1 there, a task the kernel numbers
        # otherwise.
        if not shutil.which('unshare'):
            self.skipTest('unshare (util-linux) is not installed')
        out = subprocess.run(
            ['unshare', '--pid', '--fork', '--mount-proc', sys.executable,
             '-c', IN_NAMESPACE.replace(
                 'bpf = taskiter.TaskIterReader().read_many(',
                 'reader = taskiter.TaskIterReader()\n'
                 'reader.begin([os.getpid()])\n'
                 'assert reader.threads_why is None, reader.threads_why\n'
                 'bpf = reader.read_many(')
             + 'print(reader.links)\n'],
            capture_output=True, text=True,
            timeout=60, env=dict(os.environ, PYTHONPATH=this_tree()))
        if out.returncode and 'unshare failed' in out.stderr:
            self.skipTest('no pid namespace here: %s' % out.stderr.strip())
        self.assertEqual(0, out.returncode, out.stderr)
        self.assertEqual('1 True True\n0', out.stdout.strip())

    def test_a_run_the_kernel_refuses(self):
        # Every reading from then on is the task iterator's, as logged.
        log = self.useFixture(fixtures.FakeLogger())
        refused = self.reader._threads

        class Refusing:
            def run(self, pids):
                raise PermissionError(errno.EPERM, 'cannot run the BPF '
                                      'threads program: Operation not '
                                      'permitted')

            def close(self):
                refused.close()

        self.reader._threads = Refusing()
        child = self.useFixture(Child(2))
        self.reader.begin([child.pid])
        self.assertEqual(procfs_reading(child.pid, child.tids),
                         self.reader.read_many(child.pid, child.tids))
        self.assertEqual(1, self.reader.links)
        self.assertIsNone(self.reader._threads)
        self.assertIn('Operation not permitted', self.reader.threads_why)
        self.assertIn('with a task iterator of its own from now on',
                      log.output)
        self.reader.begin([child.pid])      # nothing to run now
        self.assertRaises(ValueError, refused.run, [child.pid])


class TestThreadsProgramLimits(testtools.TestCase):
    """The program's room, and misuse of the extension's type."""

    def setUp(self):
        super().setUp()
        threads_reader(self)    # skip where it cannot load
        self.threads = taskiter._taskiter.Threads()
        self.addCleanup(self.threads.close)

    def test_more_processes_or_threads_than_it_holds(self):
        # The first THREADS_MAX_PROCS processes asked are read; of those,
        # each one whose threads all fit in the room left (8192 records),
        # in full; the others not (None: read as without the run).
        counters = procfs.ThreadCounters
        read = taskiter._taskiter.READ_THREADS
        most = taskiter._taskiter.THREADS_MAX_PROCS
        first, last = self.useFixture(Child(2)), self.useFixture(Child(2))
        # ids no process has (beyond pid_max): not found, room for all
        wants = {first.pid: read}
        wants.update(dict.fromkeys(range(2 ** 30, 2 ** 30 + most - 1), read))
        wants[last.pid] = read
        self.threads.run(wants)
        self.assertEqual(procfs_reading(first.pid, first.tids),
                         self.threads.take(first.pid, first.tids, counters))
        self.assertIsNone(self.threads.take(last.pid, last.tids, counters))
        # nine processes of 1001 threads (1000 and the main one)
        many = [self.useFixture(Child(1000, stack=65536)) for _ in range(9)]
        self.threads.run({child.pid: read for child in many})
        for child in many[:8]:
            self.assertEqual(1000, len(list(filter(None, self.threads.take(
                child.pid, child.tids, counters)))))
        self.assertIsNone(self.threads.take(many[8].pid, many[8].tids,
                                            counters))

    def test_misuse(self):
        counters = procfs.ThreadCounters
        me = [threading.get_native_id()]
        pid = os.getpid()
        read = taskiter._taskiter.READ_THREADS
        self.assertRaises(TypeError, self.threads.run, [pid])
        self.assertRaises(TypeError, self.threads.run, {'1': read})
        self.assertRaises(TypeError, self.threads.run, {pid: None})
        self.threads.run({-1: read, 0: read, 2 ** 40: read, pid: read})
        self.assertIsNone(self.threads.take(-1, me, counters))
        self.assertIsNone(self.threads.take(0, me, counters))
        self.assertRaises(TypeError, self.threads.take, pid, me, dict)
        self.assertRaises(TypeError, self.threads.take, pid, 1, counters)
        self.assertRaises(TypeError, self.threads.take, pid, ['1'], counters)
        self.assertRaises(ValueError, self.threads.take, pid, me,
                          model.VcpuCounters, (None,) * 15, (0, 1, 2, 3, 15))
        # a failed take takes nothing
        self.assertIsNotNone(self.threads.take(pid, me, counters)[0])
        self.assertIsNone(self.threads.take(pid, me, counters))
        self.threads.close()
        self.threads.close()
        self.assertRaises(ValueError, self.threads.run, [pid])
        self.assertRaises(ValueError, self.threads.take, pid, me, counters)


class TestLinks(testtools.TestCase):

    def test_retain_forget_and_close_release_links(self):
        bpf_reader(self).close()    # skip where it cannot load
        one, two = self.useFixture(Child(1)), self.useFixture(Child(1))
        fds = open_fds()
        reader = taskiter.TaskIterReader()
        self.addCleanup(reader.close)
        reader.read_many(one.pid, one.tids)
        reader.read_many(two.pid, two.tids)
        reader.read_many(two.pid, two.tids)     # the same link again
        self.assertEqual(2, reader.links)
        held = open_fds()
        reader.retain({two.pid})
        self.assertEqual(1, reader.links)
        self.assertEqual(held - 1, open_fds())
        reader.forget(two.pid, two.tids[0])     # a thread holds nothing
        self.assertEqual(1, reader.links)
        reader.forget(two.pid)
        self.assertEqual(0, reader.links)
        reader.read_many(one.pid, one.tids)
        reader.close()
        self.assertEqual(0, reader.links)
        # the program's descriptors too (the link, the program, BTF)
        self.assertEqual(fds, open_fds())


class TestProgramErrors(testtools.TestCase):
    """Misuse of the extension raises; nothing crashes."""

    def setUp(self):
        super().setUp()
        bpf_reader(self)    # skip where it cannot load
        self.program = taskiter._taskiter.Program()
        self.addCleanup(self.program.close)

    def test_misuse(self):
        counters = procfs.ThreadCounters
        link = self.program.attach(os.getpid())
        self.assertRaises(KeyError, self.program.read, link + 1000, [1],
                          counters)
        self.assertRaises(TypeError, self.program.read, link, [1], tuple())
        self.assertRaises(TypeError, self.program.read, link, [1], dict)
        self.assertRaises(TypeError, self.program.read, link, ['1'],
                          counters)
        self.assertRaises(TypeError, self.program.read, link, 1, counters)
        self.assertRaises(ValueError, self.program.attach, 0)
        self.assertRaises(ValueError, self.program.attach, -1)
        self.assertEqual([None, None], self.program.read(
            link, [-1, 2 ** 40], counters))
        self.program.detach(link)
        self.assertRaises(KeyError, self.program.detach, link)
        self.program.close()
        self.program.close()
        self.assertRaises(ValueError, self.program.attach, os.getpid())
        self.assertRaises(ValueError, self.program.read, link, [1],
                          counters)

    def test_without_privileges_it_is_a_clear_oserror(self):
        # The agent without CAP_BPF/CAP_PERFMON/CAP_SYS_ADMIN (and with
        # unprivileged BPF disabled): an OSError with errno, not a crash.
        with open('/proc/sys/kernel/unprivileged_bpf_disabled') as f:
            if f.read().strip() == '0':
                self.skipTest('unprivileged BPF is allowed here')
        out = without_capabilities(self, (
            'import errno\n'
            'from vsmtio_agent.linux import _taskiter\n'
            'try:\n'
            '    _taskiter.Program()\n'
            'except OSError as exc:\n'
            '    print(errno.errorcode[exc.errno], exc)\n'))
        name, _, message = out.strip().partition(' ')
        self.assertIn(name, (errno.errorcode[errno.EPERM],
                             errno.errorcode[errno.EACCES]))
        self.assertIn('cannot load the BPF task iterator', message)


class TestTheDriverSamples(tld.DriverTestCase):

    def test_same_snapshot_as_with_procfs(self):
        # The libvirt driver on this machine's /proc: a test:///default
        # domain whose QEMU is a real process with two sleeping vCPU
        # threads, sampled with either reader.
        bpf_reader(self)
        dom = self.useFixture(tld.TestDomain())
        qemu = self.useFixture(Child(2, dom.uuid))
        snaps = {}
        for kind in ('bpf', 'procfs'):
            drv = self.driver(thread_reader=kind, switch_read_periods=1)
            self.assertIsInstance(drv.sampler.reader, {
                'bpf': taskiter.TaskIterReader,
                'procfs': procfs.ThreadReader}[kind])
            snaps[kind] = drv.sample()
            self.assertEqual(
                qemu.tids, [drv.domains.entries[dom.uuid].tids[i]
                            for i in range(2)])
            # what `vsmtio-agent check` says it reads with
            said = {
                'bpf': "vCPU threads' counters from a BPF task iterator, "
                       "every counter every period (thread_reader = bpf)",
                'procfs': "vCPU threads' counters from procfs at /proc, "
                          "switch counts on a cadence of 1 periods "
                          "(thread_reader = procfs)"}
            self.assertIn(said[kind], drv.describe().capabilities)
        refs = [model.VcpuRef(dom.uuid, i) for i in range(2)]
        self.assertEqual([snaps['procfs'].vcpus[r] for r in refs],
                         [snaps['bpf'].vcpus[r] for r in refs])
        for ref in refs:
            counters = snaps['bpf'].vcpus[ref]
            self.assertGreaterEqual(counters.voluntary_switches, 1)
            self.assertIsNotNone(counters.runqueue_delay_ns)
            self.assertIsNone(counters.switches_ns)

    def test_check_says_every_qemu_is_read_in_one_run(self):
        # What `vsmtio-agent check` says, where the threads program loads;
        # and the sampler's period reads its QEMU without a link (the one
        # its first period read it through, its pid not yet known to the
        # run, released).
        threads_reader(self)
        dom = self.useFixture(tld.TestDomain())
        qemu = self.useFixture(Child(2, dom.uuid))
        drv = self.driver(thread_reader='bpf')
        drv.sample()
        drv.sample()
        self.assertIn("every QEMU's threads in one BPF program run a period",
                      drv.describe().capabilities)
        self.assertEqual(qemu.tids, [drv.domains.entries[dom.uuid].tids[i]
                                     for i in range(2)])
        self.assertEqual(0, drv.sampler.reader.links)

    def test_a_gone_thread_the_same_as_with_procfs(self):
        # A vCPU thread gone between its discovery and its reading: with
        # either reader the period is built the general way (the other
        # vCPU from its thread, that one from virDomainGetVcpus) and the
        # threads are found again the next period. With BPF, the period
        # had first been read in the shape of a vCPU's counters.
        bpf_reader(self)
        dom = self.useFixture(tld.TestDomain())
        qemu = self.useFixture(Child(2, dom.uuid))
        gone = threading.Thread(target=lambda: None)
        gone.start()
        gone.join()
        wait_gone(gone.native_id)
        snaps = {}
        for kind in ('bpf', 'procfs'):
            drv = self.driver(thread_reader=kind, switch_read_periods=1)
            drv.sample()
            entry = drv.domains.entries[dom.uuid]
            entry.tids = {0: qemu.tids[0], 1: gone.native_id}
            reader = drv.sampler.reader
            spy = self.useFixture(fixtures.MockPatchObject(
                reader, 'read_many', wraps=reader.read_many)).mock
            snaps[kind] = drv.sample()
            # (test:///default's other domains have no process here)
            self.assertEqual(
                [sampling._THREAD_ONLY if kind == 'bpf' else None],
                [c.kwargs.get('shape') for c in spy.call_args_list
                 if c.args[0] == qemu.pid])
            self.assertEqual({}, entry.tids)    # found again next period
            self.assertEqual(qemu.tids, [
                drv.domains.threads_of(entry, 2)[i] for i in range(2)])
        first, second = (model.VcpuRef(dom.uuid, i) for i in range(2))
        self.assertEqual(snaps['procfs'].vcpus[first],
                         snaps['bpf'].vcpus[first])
        self.assertIsNotNone(snaps['bpf'].vcpus[first].voluntary_switches)
        for snap in snaps.values():
            # test:///'s figures: no thread counters, its CPU and time
            vcpu = snap.vcpus[second]
            self.assertEqual(
                (None, None, None),
                (vcpu.voluntary_switches, vcpu.involuntary_switches,
                 vcpu.runqueue_delay_ns))
            self.assertEqual(dom.dom.vcpus()[0][1][3], vcpu.cpu)
            self.assertGreater(vcpu.run_ns, 0)


class TestShape(testtools.TestCase):
    """Counters read in another tuple's shape (what the sampler asks)."""

    def setUp(self):
        super().setUp()
        self.reader = bpf_reader(self)

    def test_a_vcpus_counters_as_the_sampler_builds_them(self):
        child = self.useFixture(Child(3))
        shape = sampling._THREAD_ONLY
        self.assertEqual((2, 12, 10, 11, 1), shape.places)
        shaped = self.reader.read_many(child.pid, child.tids, shape=shape)
        plain = self.reader.read_many(child.pid, child.tids)
        self.assertEqual([sampling._from_thread(*c) for c in plain], shaped)
        for counters in shaped:
            self.assertIs(model.VcpuCounters, type(counters))
        self.assertEqual(plain, [shape.counters(c) for c in shaped])
        self.assertIsNone(shape.counters(None))
        gone = self.reader.read_many(child.pid, [child.tids[0], 2 ** 31],
                                     shape=shape)
        self.assertEqual([shaped[0], None], gone)

    def test_shapes_it_cannot_build_raise(self):
        program = taskiter._taskiter.Program()
        self.addCleanup(program.close)
        link = program.attach(os.getpid())
        me = [threading.get_native_id()]
        vcpu = model.VcpuCounters
        self.assertRaises(ValueError, program.read, link, me, vcpu,
                          (None,) * 15, (0, 1, 2, 3, 15))
        self.assertRaises(ValueError, program.read, link, me, vcpu,
                          (None,) * 15, (0, 1, 2, 3, -1))
        self.assertRaises(TypeError, program.read, link, me, vcpu,
                          (None,) * 15, (0, 1, 2, 3))
        self.assertRaises(TypeError, program.read, link, me, vcpu,
                          [None] * 15, (0, 1, 2, 3, 4))
        self.assertRaises(TypeError, program.read, link, me, vcpu,
                          (None,) * 15, (0, 1, 2, 3, '4'))
        # the template's other items are its own
        out = program.read(link, me, vcpu, tuple(range(100, 115)),
                           (14, 13, 12, 11, 10))[0]
        self.assertEqual(tuple(range(100, 110)), out[:10])
        self.assertIs(vcpu, type(out))
        self.assertIn(out[10], range(os.cpu_count()))   # the CPU
        self.assertGreater(out[14], 0)                  # the run time
        self.assertGreaterEqual(out[12], 1)             # voluntary


class TestFactory(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.log = self.useFixture(fixtures.FakeLogger())

    def make(self, *args):
        reader = taskiter.thread_reader(*args)
        self.addCleanup(reader.close)
        return reader

    def test_auto_is_bpf_where_it_loads(self):
        bpf_reader(self)
        self.assertIsInstance(self.make('/proc', 'auto'),
                              taskiter.TaskIterReader)
        self.assertIn('BPF task iterator (thread_reader = auto)',
                      self.log.output)
        self.assertIsInstance(self.make('/proc', 'bpf'),
                              taskiter.TaskIterReader)

    def test_procfs_elsewhere_or_when_asked(self):
        tmp = self.useFixture(fixtures.TempDir()).path
        reader = self.make(tmp, 'auto')
        self.assertIsInstance(reader, procfs.ThreadReader)
        self.assertEqual(tmp, reader.root)
        self.assertIn('from procfs: procfs_root is %s' % tmp,
                      self.log.output)
        self.assertIsInstance(self.make('/proc', 'procfs'),
                              procfs.ThreadReader)
        self.assertIn('from procfs: thread_reader = procfs',
                      self.log.output)
        exc = self.assertRaises(taskiter.Unavailable, taskiter.thread_reader,
                                tmp, 'bpf')
        self.assertIn('thread_reader = bpf, but procfs_root is', str(exc))
        self.assertRaises(ValueError, taskiter.thread_reader, '/proc',
                          'ebpf')

    def test_not_built(self):
        self.useFixture(fixtures.MonkeyPatch(
            'vsmtio_agent.linux.taskiter._taskiter', None))
        self.useFixture(fixtures.MonkeyPatch(
            'vsmtio_agent.linux.taskiter._NOT_BUILT', 'no module'))
        exc = self.assertRaises(taskiter.Unavailable, taskiter.thread_reader,
                                '/proc', 'bpf')
        self.assertIn('thread_reader = bpf, but the BPF reader', str(exc))
        self.assertIn('was not built: it needs clang and libbpf', str(exc))
        self.assertIsInstance(self.make('/proc', 'auto'),
                              procfs.ThreadReader)
        self.assertIn('from procfs: the BPF reader', self.log.output)

    def test_does_not_load(self):
        # What a host without CAP_BPF, BTF or Linux >= 6.1 gives the
        # factory: the program's OSError (test_without_privileges_... has
        # the real one).
        class Refused:
            def __init__(self):
                raise PermissionError(errno.EPERM, 'cannot load the BPF '
                                      'task iterator: Operation not '
                                      'permitted')

        module = type(sys)('_taskiter')
        module.Program = Refused
        self.useFixture(fixtures.MonkeyPatch(
            'vsmtio_agent.linux.taskiter._taskiter', module))
        exc = self.assertRaises(taskiter.Unavailable, taskiter.thread_reader,
                                '/proc', 'bpf')
        self.assertIn('does not load', str(exc))
        self.assertIn('CAP_BPF', str(exc))
        self.assertIsInstance(self.make('/proc', 'auto'),
                              procfs.ThreadReader)

    def test_the_sampler_fails_clearly_with_bpf_that_cannot_be_had(self):
        tmp = self.useFixture(fixtures.TempDir()).path
        exc = self.assertRaises(
            base.HostDriverError, sampling.Sampler, None, None, tmp, False,
            None, 1, 'bpf')
        self.assertIn('thread_reader = bpf, but procfs_root is', str(exc))
        sampler = sampling.Sampler(None, None, tmp, False, None, 1)
        self.addCleanup(sampler.reader.close)
        self.assertIsInstance(sampler.reader, procfs.ThreadReader)
