"""The procfs reader on real procfs and on garbage.

On this machine's real threads its readings are psutil's of the same
files; malformed files give missing counters and a bit saying which, and
the ``schedstat`` gate reuses a reading only where nothing moved. A
thread that exits, even between two of its files, must end as a missing
thread, never as an exception out of the reader.
"""

import logging
import os
import tempfile
import threading
import time

import fixtures
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
import psutil
import testtools

from vsmtio_agent.linux import procfs
from vsmtio_agent.tests.unit.host import test_procfs

FILES = ('schedstat', 'status', 'stat')


def open_thread(tid, pid=None):
    base = '/proc/%d/task/%d/' % (pid or os.getpid(), tid)
    return tuple(os.open(base + name, os.O_RDONLY) for name in FILES)


def close_all(fds):
    for fd in fds:
        if fd >= 0:
            os.close(fd)


def readers():
    """The reading functions under test (a name for each message)."""
    return [('python', procfs._read_thread)]


def read(fds, last=None, bad=0):
    return procfs._read_thread(fds, last, bad)


def wait_asleep(tid):
    """Wait until thread ``tid`` sleeps (its counters then stand still)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with open('/proc/self/task/%d/stat' % tid) as f:
            if f.read().rpartition(')')[2].split()[0] == 'S':
                return
        time.sleep(0.001)


def wait_gone(tid):
    deadline = time.monotonic() + 10     # join() precedes the exit
    while (os.path.exists('/proc/self/task/%d' % tid)
           and time.monotonic() < deadline):
        time.sleep(0.001)


class TestRealThreads(testtools.TestCase):

    def test_same_reading_as_psutil(self):
        named = self.useFixture(test_procfs.NamedThreads(4, accel='KVM'))
        for tid in named.tids.values():
            fds = open_thread(tid)
            self.addCleanup(close_all, fds)
            # The threads block: their counters then stand still.
            wait_asleep(tid)
            c = read(fds)
            run, delay, runs, vol, invol, cpu, bad = c
            self.assertEqual(0, bad)
            self.assertGreater(run, 0)
            self.assertGreaterEqual(runs, 1)
            self.assertGreaterEqual(vol, 1)     # slept once
            thread = psutil.Process(tid)
            self.assertEqual((vol, invol), tuple(thread.num_ctx_switches()))
            self.assertEqual(cpu, thread.cpu_num())
            self.assertIn(cpu, range(os.cpu_count()))

    def test_every_thread_of_this_process(self):
        # Whatever the threads do (this one runs), the reader sees
        # counters that only go forward, one reading after the other.
        for tid in map(int, os.listdir('/proc/self/task')):
            try:
                fds = open_thread(tid)
            except FileNotFoundError:
                continue        # exited since listdir
            self.addCleanup(close_all, fds)
            a, b, c = read(fds), read(fds), read(fds)
            for i in range(5):
                self.assertLessEqual(a[i], b[i])
                self.assertLessEqual(b[i], c[i])
            self.assertEqual((0, 0, 0), (a[6], b[6], c[6]))

    def test_the_gate_skips_status_and_stat_of_a_thread_that_slept(self):
        named = self.useFixture(test_procfs.NamedThreads(1))
        fds = open_thread(named.tids[0])
        self.addCleanup(close_all, fds)
        wait_asleep(named.tids[0])
        for name, read in readers():
            first = read(fds, None, 0)
            # Nothing moved: the same reading, itself.
            self.assertIs(first, read(fds, first, 0), name)
            # Same run time and run count: status and stat are not read
            # again (the marked values of the last reading stand) ...
            marked = first[:3] + (-7, -8, -9) + first[6:]
            self.assertEqual(marked, read(fds, marked, 0), name)
            # ... but a delay that moved is taken from schedstat.
            delayed = (first[0], first[1] - 1) + marked[2:]
            self.assertEqual(marked, read(fds, delayed, 0), name)
            # Another run time, or run count: everything is read again.
            for moved in ((first[0] - 1,) + marked[1:],
                          first[:2] + (first[2] - 1,) + marked[3:]):
                self.assertEqual(first, read(fds, moved, 0), name)

    def test_a_thread_that_ran_is_read_again(self):
        tid = threading.get_native_id()
        fds = open_thread(tid)
        self.addCleanup(close_all, fds)
        for name, read in readers():
            first = read(fds, None, 0)
            time.sleep(0.001)       # one more voluntary switch
            second = read(fds, first, 0)
            self.assertGreater(second[0], first[0], name)
            self.assertGreater(second[2], first[2], name)
            self.assertGreater(second[3], first[3], name)

    def test_a_thread_gone_between_its_files(self):
        # schedstat from a live thread, status and stat from an exited
        # one: what a vCPU exiting mid-read looks like.
        live = open_thread(threading.get_native_id())
        self.addCleanup(close_all, live)
        named = test_procfs.NamedThreads(1)
        named.setUp()
        tid = named.tids[0]
        dead = open_thread(tid)
        self.addCleanup(close_all, dead)
        named.cleanUp()
        wait_gone(tid)
        for name, read in readers():
            self.assertRaises(ProcessLookupError, read,
                              (live[0], dead[1], dead[2]), None, 0)
            self.assertRaises(ProcessLookupError, read, dead, None, 0)
            first = read(live, None, 0)
            self.assertRaises(ProcessLookupError, read, dead, first, 0)


class TestThreadReader(testtools.TestCase):
    """ThreadReader's behaviour."""

    def reader(self, *args, **kwargs):
        return procfs.ThreadReader(*args, **kwargs)

    def test_exited_thread_is_missing_and_its_files_closed(self):
        log = self.useFixture(fixtures.FakeLogger(level=logging.WARNING))
        named = test_procfs.NamedThreads(2, accel='KVM')
        named.setUp()
        fds = len(os.listdir('/proc/self/fd'))
        reader = self.reader()
        for tid in named.tids.values():
            self.assertIsNotNone(reader.read(os.getpid(), tid))
        self.assertEqual(fds + 6, len(os.listdir('/proc/self/fd')))
        named.cleanUp()
        for tid in named.tids.values():
            wait_gone(tid)
            self.assertIsNone(reader.read(os.getpid(), tid))
            self.assertIsNone(reader.read(os.getpid(), tid))  # not held
        self.assertEqual(fds, len(os.listdir('/proc/self/fd')))
        self.assertEqual('', log.output)

    def test_a_sleeping_thread_costs_one_file(self):
        named = self.useFixture(test_procfs.NamedThreads(1))
        tid = named.tids[0]
        wait_asleep(tid)
        reader = self.reader()
        first = reader.read(os.getpid(), tid)
        self.assertIs(first, reader.read(os.getpid(), tid))
        # status and stat are held but, the thread not having run, unread:
        # shown by swapping them for files that could not be parsed.
        held = reader._held[os.getpid()][tid]
        fds = held.fds
        try:
            with tempfile.TemporaryFile() as junk:
                held.fds = (fds[0], junk.fileno(), junk.fileno())
                self.assertIs(first, reader.read(os.getpid(), tid))
                held.fds = (fds[0], -1, -1)
                self.assertIs(first, reader.read(os.getpid(), tid))
        finally:
            held.fds = fds
            reader.close()

    def test_no_schedstat_on_this_kernel(self):
        # A kernel without CONFIG_SCHED_INFO has no schedstat: the other
        # counters are still read, every time, and the thread is not
        # taken for gone.
        root = self.useFixture(fixtures.TempDir()).path
        task = os.path.join(root, '77', 'task', '78')
        test_procfs.host_fixtures.write(
            os.path.join(task, 'status'),
            'voluntary_ctxt_switches:\t5\nnonvoluntary_ctxt_switches:\t2\n')
        stat = os.path.join(task, 'stat')
        fields = ' '.join(['0'] * 35 + ['1'] + ['0'] * 5)
        test_procfs.host_fixtures.write(stat, '78 (CPU 0/KVM) S ' + fields)
        reader = self.reader(root)
        c = reader.read(77, 78)
        self.assertEqual((None, None, 5, 2, 1), (
            c.run_ns, c.runqueue_delay_ns, c.voluntary_switches,
            c.involuntary_switches, c.cpu))
        test_procfs.host_fixtures.write(stat, '78 (CPU 0/KVM) S ' +
                                        fields.replace(' 1 ', ' 0 '))
        self.assertEqual(0, reader.read(77, 78).cpu)
        self.assertIsNone(reader.read(77, 79))

    def test_denied_open_gives_missing_counters_once_logged(self):
        log = self.useFixture(fixtures.FakeLogger())
        tid = threading.get_native_id()
        reader = self.reader()
        real_open = os.open

        def deny_stat(path, flags):
            if path.endswith('/stat'):
                raise PermissionError(13, 'Permission denied', path)
            return real_open(path, flags)

        # Root reads every procfs file: a denied open cannot be made
        # real here, so os.open is replaced for this one file.
        self.useFixture(fixtures.MonkeyPatch('os.open', deny_stat))
        for _ in range(2):
            c = reader.read(os.getpid(), tid)
            self.assertIsNone(c.cpu)
            self.assertIsNotNone(c.voluntary_switches)
            self.assertIsNotNone(c.run_ns)
        self.assertEqual(1, log.output.count('cannot read stat'))

    def test_budget_and_held_files_give_the_same_counters(self):
        named = self.useFixture(test_procfs.NamedThreads(2))
        held, once = self.reader(), self.reader(max_open=0)
        for tid in named.tids.values():
            wait_asleep(tid)
            self.assertEqual(held.read(os.getpid(), tid),
                             once.read(os.getpid(), tid))
        self.assertEqual(0, once._nheld)

    def test_read_many_is_read_for_each_thread(self):
        log = self.useFixture(fixtures.FakeLogger(level=logging.WARNING))
        named = test_procfs.NamedThreads(3)
        named.setUp()
        tids = list(named.tids.values())
        for tid in tids:
            wait_asleep(tid)
        many, one = self.reader(), self.reader()
        fds = len(os.listdir('/proc/self/fd'))
        # first the files are opened, then read in one call: both give
        # what read() gives, and the same readings again while asleep
        for _ in range(3):
            got = many.read_many(os.getpid(), tids)
            self.assertEqual([one.read(os.getpid(), t) for t in tids], got)
        self.assertEqual(fds + 18, len(os.listdir('/proc/self/fd')))
        self.assertEqual([], many.read_many(os.getpid(), []))
        named.cleanUp()
        for tid in tids:
            wait_gone(tid)
        self.assertEqual([None] * 3, many.read_many(os.getpid(), tids))
        self.assertEqual([None] * 3, many.read_many(os.getpid(), tids))
        one.close()
        self.assertEqual(fds, len(os.listdir('/proc/self/fd')))
        self.assertEqual('', log.output)

    def test_read_many_cadence_and_bad_files(self):
        # read_many over held threads:
        # carried counts say when they were read, a gated thread keeps
        # its counters object, and a malformed file is logged once.
        log = self.useFixture(fixtures.FakeLogger(level=logging.WARNING))
        root = self.useFixture(fixtures.TempDir()).path
        write = test_procfs.host_fixtures.write
        stat = '%d (CPU %d/KVM) S ' + ' '.join(['0'] * 35 + ['%d'] +
                                               ['0'] * 5)

        def thread(tid, schedstat, status=None, cpu=None):
            task = os.path.join(root, '77', 'task', str(tid))
            write(os.path.join(task, 'schedstat'), schedstat)
            if status is not None:
                write(os.path.join(task, 'status'), status)
            if cpu is not None:
                write(os.path.join(task, 'stat'), stat % (tid, 0, cpu))

        good = ('voluntary_ctxt_switches:\t%d\n'
                'nonvoluntary_ctxt_switches:\t2\n')
        thread(78, '100 5 3\n', good % 5, 1)
        thread(79, '200 6 4\n', 'Name:\tCPU 1/KVM\n', 0)
        reader = self.reader(root)
        self.addCleanup(reader.close)
        self.assertEqual(
            [(100, 5, 5, 2, 1, None), (200, 6, None, None, 0, None)],
            reader.read_many(77, [78, 79], 1000, 2, 0))
        # both switched; 78's counts are not due, 79's are (still bad)
        thread(78, '150 5 4\n', good % 7)
        thread(79, '250 6 5\n')
        second = reader.read_many(77, [78, 79], 2000, 2, 1)
        self.assertEqual(
            [(150, 5, 5, 2, 1, 1000), (250, 6, None, None, 0, None)],
            second)
        # 78 due again: read (a carried reading does not gate it); 79
        # not switched since: its counters as they were
        third = reader.read_many(77, [78, 79], 3000, 2, 0)
        self.assertEqual((150, 5, 7, 2, 1, None), third[0])
        self.assertIs(second[1], third[1])
        self.assertIsInstance(third[0], procfs.ThreadCounters)
        self.assertEqual(1, log.output.count('ignoring status'))
        self.assertNotIn('stat of', log.output.replace('status of', ''))

    def test_read_many_beyond_the_budget(self):
        named = self.useFixture(test_procfs.NamedThreads(2))
        tids = list(named.tids.values())
        for tid in tids:
            wait_asleep(tid)
        held, once = self.reader(), self.reader(max_open=3)
        self.addCleanup(held.close)
        self.addCleanup(once.close)
        expected = held.read_many(os.getpid(), tids)
        self.assertEqual(expected, once.read_many(os.getpid(), tids))
        self.assertEqual(expected, once.read_many(os.getpid(), tids))
        self.assertEqual(3, once._nheld)


def _stat(cpu, comm='CPU 0/KVM'):
    return '4242 (%s) S %s %s %s' % (comm, ' '.join(['0'] * 35), cpu,
                                     ' '.join(['0'] * 13))


GARBAGE = {
    'schedstat': ['1 2 3\n', '1 2\n', '1 2 x\n', 'x 2 3', '', '1\n',
                  '123456789012345678901234567890 1 1\n', ' 1\t2\x1c3 '],
    'status': [
        'Name:\tCPU 0/KVM\nvoluntary_ctxt_switches:\t5\n'
        'nonvoluntary_ctxt_switches:\t2\n',
        'voluntary_ctxt_switches:\t5\nnonvoluntary_ctxt_switches:\t2',
        'voluntary_ctxt_switches:  7 \t\nnonvoluntary_ctxt_switches:\t\n',
        'voluntary_ctxt_switches:\tlots\nnonvoluntary_ctxt_switches:\t1\n',
        'nonvoluntary_ctxt_switches:\t1\n', 'Name:\tqemu\n', '',
        'xvoluntary_ctxt_switches:\t1\nnonvoluntary_ctxt_switches:\t1\n',
        'voluntary_ctxt_switches:\t1\nvoluntary_ctxt_switches:\t9\n'
        'nonvoluntary_ctxt_switches:\t3\n'],
    'stat': [_stat(1), _stat(-1), _stat('--1'), _stat(1, 'a) (b'),
             _stat('x'), '1 (x) S 1 2', 'no paren ' * 10, '\x00\xff' * 10,
             _stat(1).replace(')', ''), ''],
}


class TestGarbage(testtools.TestCase):
    """Any file content gives a reading: counters or None, and bits."""

    def read_files(self, texts, last=None):
        with tempfile.TemporaryDirectory() as tmp:
            fds = []
            for name, text in zip(FILES, texts):
                path = os.path.join(tmp, name)
                with open(path, 'wb') as f:
                    f.write(text if isinstance(text, bytes)
                            else text.encode('latin-1'))
                fds.append(os.open(path, os.O_RDONLY))
            try:
                return read(tuple(fds), last)
            finally:
                close_all(fds)

    def assertReading(self, reading):
        self.assertEqual(7, len(reading))
        for counter in reading[:6]:
            self.assertTrue(counter is None or type(counter) is int)
        self.assertEqual(0, reading[6] & ~(procfs.BAD_SCHEDSTAT
                                           | procfs.BAD_STATUS
                                           | procfs.BAD_STAT))

    def test_known_cases(self):
        for i, name in enumerate(FILES):
            for text in GARBAGE[name]:
                texts = [GARBAGE[n][0] for n in FILES]
                texts[i] = text
                self.assertReading(self.read_files(texts))
        self.assertEqual((1, 2, 3, 5, 2, 1, 0),
                         self.read_files([GARBAGE[n][0] for n in FILES]))

    def test_bits(self):
        self.assertEqual((None,) * 6 + (procfs.BAD_SCHEDSTAT
                                        | procfs.BAD_STATUS
                                        | procfs.BAD_STAT,),
                         self.read_files(['x', 'y', 'z']))

    @settings(max_examples=300, deadline=None)
    @given(st.binary(max_size=300), st.binary(max_size=300),
           st.binary(max_size=400))
    def test_any_bytes(self, schedstat, status, stat):
        self.assertReading(self.read_files([schedstat, status, stat]))
