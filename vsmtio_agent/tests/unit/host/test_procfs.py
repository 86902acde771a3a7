"""vCPU threads and their counters from real procfs, and from garbage."""

import os
import threading
import time

import fixtures
import testtools

from vsmtio_agent.linux import procfs
from vsmtio_agent.tests.unit.host import fixtures as host_fixtures


class NamedThreads(fixtures.Fixture):
    """Real threads of this process named as QEMU names vCPU threads."""

    def __init__(self, n, accel='TCG'):
        super().__init__()
        self.n, self.accel = n, accel

    def _setUp(self):
        self.stop = threading.Event()
        ready = threading.Barrier(self.n + 1)
        self.tids = {}

        def body(index):
            tid = threading.get_native_id()
            with open('/proc/self/task/%d/comm' % tid, 'w') as f:
                f.write('CPU %d/%s' % (index, self.accel))
            self.tids[index] = tid
            time.sleep(0.001)  # block once: a voluntary switch
            ready.wait()
            self.stop.wait()

        self.threads = [threading.Thread(target=body, args=(i,), daemon=True)
                        for i in range(self.n)]
        for t in self.threads:
            t.start()
        ready.wait()
        self.addCleanup(self._join)

    def _join(self):
        self.stop.set()
        for t in self.threads:
            t.join()


class TestParsers(testtools.TestCase):

    def test_real_files_of_this_thread(self):
        tid = threading.get_native_id()
        base = '/proc/self/task/%d/' % tid
        run_ns, delay = procfs.parse_schedstat(open(base + 'schedstat').read())
        self.assertGreater(run_ns, 0)
        self.assertGreaterEqual(delay, 0)
        vol, invol = procfs.parse_status_switches(open(base + 'status').read())
        self.assertGreaterEqual(vol + invol, 0)
        self.assertIn(procfs.parse_stat_cpu(open(base + 'stat').read()),
                      os.sched_getaffinity(0))

    def test_stat_with_parentheses_in_comm(self):
        fields = ' '.join(['0'] * 35 + ['3'] + ['0'] * 5)
        self.assertEqual(3, procfs.parse_stat_cpu('42 (CPU 0) (x)) S ' +
                                                  fields))

    def test_garbage(self):
        for text in ('', 'abc def', '12'):
            self.assertRaises(ValueError, procfs.parse_schedstat, text)
        for text in ('', 'voluntary_ctxt_switches:\tlots\n'
                         'nonvoluntary_ctxt_switches:\t1\n',
                     'Name:\tqemu\n'):
            self.assertRaises(ValueError, procfs.parse_status_switches, text)
        for text in ('', '1 (x) S 1 2', '\x00\xff' * 10):
            self.assertRaises(ValueError, procfs.parse_stat_cpu, text)


class TestVcpuThreads(testtools.TestCase):

    def test_finds_named_threads_of_a_real_process(self):
        named = self.useFixture(NamedThreads(3))
        self.assertEqual(named.tids, procfs.vcpu_threads(os.getpid()))

    def test_reads_counters_of_real_threads(self):
        named = self.useFixture(NamedThreads(2, accel='KVM'))
        reader = procfs.ThreadReader()
        for tid in named.tids.values():
            c = reader.read(os.getpid(), tid)
            self.assertIsNotNone(c.run_ns)
            self.assertIsNotNone(c.runqueue_delay_ns)
            # Each thread slept at least once.
            self.assertGreaterEqual(c.voluntary_switches, 1)
            self.assertIn(c.cpu, range(os.cpu_count()))

    def test_held_files_are_read_afresh_and_closed(self):
        # The reader keeps each thread's files open across periods: a
        # second read must see the thread's new counters, and the files
        # must be closed when the thread, or its process, is let go.
        named = self.useFixture(NamedThreads(1, accel='KVM'))
        tid = named.tids[0]
        fds = len(os.listdir('/proc/self/fd'))
        reader = procfs.ThreadReader()
        before = reader.read(os.getpid(), tid)
        self.assertEqual(fds + 3, len(os.listdir('/proc/self/fd')))
        named.stop.set()        # the thread wakes, runs and exits
        named.threads[0].join()
        deadline = time.monotonic() + 10   # join() precedes the exit
        while (os.path.exists('/proc/self/task/%d' % tid)
               and time.monotonic() < deadline):
            time.sleep(0.001)
        self.assertIsNone(reader.read(os.getpid(), tid))
        self.assertEqual(fds, len(os.listdir('/proc/self/fd')))
        self.assertIsNotNone(before.voluntary_switches)

    def test_held_files_see_new_counters(self):
        tid = threading.get_native_id()
        reader = procfs.ThreadReader()
        first = reader.read(os.getpid(), tid)
        time.sleep(0.001)       # one more voluntary switch
        second = reader.read(os.getpid(), tid)
        self.assertGreater(second.voluntary_switches,
                           first.voluntary_switches)
        self.assertGreater(second.run_ns, first.run_ns)
        reader.retain({os.getpid()})
        self.assertIsNotNone(reader.read(os.getpid(), tid))
        fds = len(os.listdir('/proc/self/fd'))
        reader.retain(())
        self.assertEqual(fds - 3, len(os.listdir('/proc/self/fd')))

    def test_beyond_the_budget_files_are_opened_per_read(self):
        tid = threading.get_native_id()
        fds = len(os.listdir('/proc/self/fd'))
        reader = procfs.ThreadReader(max_open=0)
        counters = reader.read(os.getpid(), tid)
        self.assertIsNotNone(counters.voluntary_switches)
        self.assertIsNotNone(counters.cpu)
        self.assertEqual(fds, len(os.listdir('/proc/self/fd')))

    def test_gone_process_or_thread(self):
        self.assertEqual({}, procfs.vcpu_threads(2 ** 22 + 7))
        self.assertIsNone(procfs.ThreadReader().read(os.getpid(), 2 ** 22))

    def test_garbage_procfs_gives_missing_counters_and_one_log_line(self):
        log = self.useFixture(fixtures.FakeLogger())
        root = self.useFixture(fixtures.TempDir()).path
        task = os.path.join(root, '77', 'task', '78')
        host_fixtures.write(os.path.join(task, 'comm'), 'CPU 0/KVM\n')
        host_fixtures.write(os.path.join(task, 'schedstat'), 'garbage\n')
        host_fixtures.write(os.path.join(task, 'status'),
                            'voluntary_ctxt_switches:\t5\n'
                            'nonvoluntary_ctxt_switches:\t2\n')
        host_fixtures.write(os.path.join(task, 'stat'), '\x00' * 50)
        self.assertEqual({0: 78}, procfs.vcpu_threads(77, root))
        reader = procfs.ThreadReader(root)
        for _ in range(3):
            c = reader.read(77, 78)
            self.assertIsNone(c.run_ns)
            self.assertIsNone(c.cpu)
            self.assertEqual((5, 2), (c.voluntary_switches,
                                      c.involuntary_switches))
        self.assertEqual(1, log.output.count('ignoring schedstat'))
        self.assertEqual(1, log.output.count('ignoring stat'))
