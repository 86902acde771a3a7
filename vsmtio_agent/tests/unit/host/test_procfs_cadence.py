"""The slow cadence of ``status`` and ``stat``, from the reader to MIST.

Each vCPU thread's switch counts and last CPU are read every ``every``
periods (``[vsmtio_agent] switch_read_periods``); ``schedstat`` every
period. What must hold: the reader reads what is due and carries the
rest; a due reading is always exact; a carried one says when
it was read; and a consumer (``monitor.derive``, then MIST's per-VM I_cpu)
counts every switch once, over the time its two readings really span, on
real threads whose switches the test makes happen between periods.
"""

import subprocess
import sys
import time

import testtools

from vsmtio_agent.linux import procfs
from vsmtio_agent.linux import procread
from vsmtio_agent import model
from vsmtio_agent.policy import mist
from vsmtio_agent.policy import monitor
from vsmtio_agent.tests.unit.host import test_procfs
from vsmtio_agent.tests.unit.host import test_procfs_readers as readers_test

STALE = procfs.STALE


CHILD = r"""
import os, sys, threading, time
n = int(sys.argv[1])
pipes = [os.pipe() for _ in range(n)]
tids = [None] * n
ready = threading.Barrier(n + 1)
def body(i):
    tids[i] = threading.get_native_id()
    ready.wait()
    while True:
        got = os.read(pipes[i][0], 1)
        if not got:
            return
        for _ in range(got[0]):
            time.sleep(0.0005)      # a voluntary switch each
        os.write(1, b'%d\n' % i)    # done: blocks in os.read next
for i in range(n):
    threading.Thread(target=body, args=(i,), daemon=True).start()
ready.wait()
os.write(1, (' '.join(map(str, tids)) + '\n').encode())
for line in sys.stdin:
    i, k = map(int, line.split())
    os.write(pipes[i][1], bytes([k]))
"""


def wait_blocked(pid, tid):
    """Wait until thread ``tid`` of ``pid`` sleeps."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with open('/proc/%d/task/%d/stat' % (pid, tid)) as f:
            if f.read().rpartition(')')[2].split()[0] == 'S':
                return
        time.sleep(0.001)


class Workers(object):
    """Real threads (in a child process) that switch only when told to.

    Thread ``i`` blocks reading its pipe; told to run, it sleeps ``k``
    times (a voluntary switch each), says so, and blocks again: between
    two periods the test makes chosen threads switch, and their counters
    then stand still while the reader reads them. A child process, so
    that no other thread of it contends with them (for the GIL): after
    saying it is done, a thread's next switch is its block.
    """

    def __init__(self, test, n):
        self.proc = subprocess.Popen(
            [sys.executable, '-c', CHILD, str(n)], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, text=True, bufsize=1)
        test.addCleanup(self.join)
        self.pid = self.proc.pid
        self.tids = [int(t) for t in self.proc.stdout.readline().split()]
        for tid in self.tids:
            wait_blocked(self.pid, tid)

    def run(self, which, sleeps=3):
        for i in which:
            self.proc.stdin.write('%d %d\n' % (i, sleeps))
            self.proc.stdin.flush()
            self.assertEqual(i, int(self.proc.stdout.readline()))
            wait_blocked(self.pid, self.tids[i])

    @staticmethod
    def assertEqual(a, b):
        if a != b:
            raise AssertionError('%r != %r' % (a, b))

    def join(self):
        self.proc.stdin.close()
        self.proc.kill()
        self.proc.wait()
        self.proc.stdout.close()


class TestDueAndStale(testtools.TestCase):
    """read_thread's ``due``: what the slow cadence reads and carries."""

    def test_a_thread_not_due_carries_its_last_counts_marked_stale(self):
        named = self.useFixture(test_procfs.NamedThreads(1))
        fds = readers_test.open_thread(named.tids[0])
        self.addCleanup(readers_test.close_all, fds)
        readers_test.wait_asleep(named.tids[0])
        for name, read in readers_test.readers():
            first = read(fds, None, 0)
            marked = first[:3] + (-7, -8, -9) + first[6:]
            # not switched since, not due: the gate holds, nothing read
            self.assertIs(marked, read(fds, marked, 0, False), name)
            # switched since (another run time), not due: carried, STALE
            moved = (first[0] - 1,) + marked[1:]
            stale = read(fds, moved, 0, False)
            self.assertEqual(first[:3] + (-7, -8, -9, STALE), stale, name)
            # a STALE reading gates nothing that is due: read afresh ...
            self.assertEqual(first, read(fds, stale, 0, True), name)
            # ... and stays STALE, itself, while not due and not switched
            self.assertIs(stale, read(fds, stale, 0, False), name)
            # the bits of the files carried stay, schedstat's are new
            bad = first[:6] + (procfs.BAD_STATUS | procfs.BAD_SCHEDSTAT,)
            bad = (first[0] - 1,) + bad[1:]
            self.assertEqual(first[:6] + (procfs.BAD_STATUS | STALE,),
                             read(fds, bad, 0, False), name)


class TestConsumerWindows(testtools.TestCase):
    """ThreadReader -> derive -> MIST over many periods, on real threads."""

    EVERY = 3
    N = 4
    PERIOD_NS = 100 * 10 ** 6

    def _period(self, reader, workers, k, now_ns):
        """One period's reading; the exact counts of each thread too."""
        tids = workers.tids
        got = reader.read_many(workers.pid, tids, now_ns, self.EVERY, k)
        truth = []
        for tid in tids:
            fds = readers_test.open_thread(tid, workers.pid)
            try:
                truth.append(procread._read_thread(fds, None, 0))
            finally:
                readers_test.close_all(fds)
        return got, truth

    def test_windows_tile_the_time_and_count_every_switch(self):
        refs = [model.VcpuRef('vm', i) for i in range(self.N)]
        snaps, stats_of, exact_of = self._run(refs)
        # Every window a vCPU's stats report is the time between two
        # exact readings of its counts, and the counts are what the
        # thread switched in that time: no switch lost or counted twice.
        for i, ref in enumerate(refs):
            self._check_windows(i, ref, snaps, stats_of, exact_of[i])
        # MIST's per-VM I_cpu weighs each vCPU by its rate over its window
        final = stats_of[-1]
        vol = sum(s.voluntary_switches * s.period_ns
                  / (s.switch_window_ns or s.period_ns)
                  for s in final.values())
        invol = sum(s.involuntary_switches * s.period_ns
                    / (s.switch_window_ns or s.period_ns)
                    for s in final.values())
        self.assertAlmostEqual(
            monitor.interference_ratio(vol, invol, 0.1, 10.0),
            mist.vm_i_cpu(final.values(), 10.0))

    def _run(self, refs):
        """Ten periods of reading and deriving; what was read and true.

        ``(snapshots, stats of each period after the first, {vCPU index:
        {time: (time, voluntary, involuntary)}})``: the last the exact
        counts of each thread at each period.
        """
        workers = Workers(self, self.N)
        reader = procfs.ThreadReader()
        self.addCleanup(reader.close)
        periods = 10
        period_ns = self.PERIOD_NS
        read_at = {i: None for i in range(self.N)}   # last exact reading
        snaps, stats_of = [], []
        exact_of = {i: {} for i in range(self.N)}   # the true counts
        last_stats = {}
        for k in range(periods):
            now_ns = (k + 1) * period_ns
            # thread 0 runs in the first periods only (then the gate
            # makes its idle counts exact every period); the others run
            # every period
            workers.run([i for i in range(self.N) if i or k < 3],
                        sleeps=2 + k % 3)
            got, truth = self._period(reader, workers, k, now_ns)
            for i, (c, t) in enumerate(zip(got, truth)):
                due = (k + i) % self.EVERY == 0 or k == 0
                exact = due or (i == 0 and k >= 4)
                if exact:
                    self.assertIsNone(c.switches_ns, (k, i))
                    self.assertEqual((t[3], t[4], t[5]),
                                     (c.voluntary_switches,
                                      c.involuntary_switches, c.cpu),
                                     (k, i))
                    read_at[i] = (now_ns, t[3], t[4])
                else:
                    when, vol, invol = read_at[i]
                    self.assertEqual(when, c.switches_ns, (k, i))
                    self.assertEqual((vol, invol), (c.voluntary_switches,
                                                    c.involuntary_switches))
                # schedstat is read every period
                self.assertEqual(t[0], c.run_ns, (k, i))
            snap = model.Snapshot(now_ns, {
                ref: model.VcpuCounters(
                    run_ns=c.run_ns, voluntary_switches=c.voluntary_switches,
                    involuntary_switches=c.involuntary_switches,
                    switches_ns=c.switches_ns)
                for ref, c in zip(refs, got)})
            if snaps:
                last_stats = monitor.derive(snaps[-1], snap, 10.0,
                                            last=last_stats)
                stats_of.append(last_stats)
            snaps.append(snap)
            for i, t in enumerate(truth):
                exact_of[i][now_ns] = (now_ns, t[3], t[4])
        return snaps, stats_of, exact_of

    def _check_windows(self, i, ref, snaps, stats_of, exact_times):
        """vCPU ``i``'s windows tile the time and count every switch."""
        closed = []
        previous = snaps[0].vcpus[ref]
        t_prev = previous.switches_ns or snaps[0].time_ns
        for snap, st in zip(snaps[1:], stats_of):
            c = snap.vcpus[ref]
            t = c.switches_ns or snap.time_ns
            if t > t_prev:
                # a new window closed this period: the stats say so
                s = st[ref]
                self.assertEqual(t - t_prev,
                                 s.switch_window_ns or s.period_ns)
                a, b = exact_times[t_prev], exact_times[t]
                self.assertEqual((b[1] - a[1], b[2] - a[2]),
                                 (s.voluntary_switches,
                                  s.involuntary_switches), (i, t))
                closed.append(s)
                t_prev = t
            elif not closed:
                # nothing read since the first reading: no counts
                self.assertIsNone(st[ref].voluntary_switches)
                self.assertIsNone(st[ref].i_cpu)
            else:
                # no new reading: the last window's counts stand
                for field in ('voluntary_switches',
                              'involuntary_switches', 'i_cpu'):
                    self.assertEqual(getattr(closed[-1], field),
                                     getattr(st[ref], field), field)
        self.assertTrue(closed)
        if i:   # ran every period: read over every-th periods
            self.assertIn(self.EVERY * self.PERIOD_NS,
                          [s.switch_window_ns for s in closed])
        # the windows tile the time from the first to the last reading
        first_t = snaps[0].vcpus[ref].switches_ns or snaps[0].time_ns
        self.assertEqual(t_prev - first_t,
                         sum(s.switch_window_ns or s.period_ns
                             for s in closed))
        self.assertEqual(
            exact_times[t_prev][1] - exact_times[first_t][1],
            sum(s.voluntary_switches for s in closed))
        # I_cpu over the window, its rate against the idle threshold
        for s in closed:
            window_s = (s.switch_window_ns or s.period_ns) / 1e9
            self.assertEqual(
                monitor.interference_ratio(
                    s.voluntary_switches, s.involuntary_switches,
                    window_s, 10.0), s.i_cpu)


class TestMistWindows(testtools.TestCase):

    def _stats(self, vol, invol, window_ms=None):
        return model.VcpuStats(
            period_ns=100 * 10 ** 6, weight=1024, core_id=None,
            utilisation=None, retention_rate=None, retention_frequency=None,
            retention_timeouts=None, ipc=None, cpi_stack=None,
            voluntary_switches=vol, involuntary_switches=invol, i_cpu=None,
            runqueue_delay_ratio=None,
            switch_window_ns=(None if window_ms is None
                              else window_ms * 10 ** 6))

    def test_rates_not_counts_are_summed(self):
        # one vCPU read over 0.3 s (80 voluntary and 20 involuntary
        # switches a period), one over the period (20 and 10): the VM
        # switches 100 and 30 times a period, I_cpu 0.3 (summing the
        # counts would give 70 / 260)
        stats = [self._stats(240, 60, 300), self._stats(20, 10)]
        self.assertAlmostEqual(0.3, mist.vm_i_cpu(stats, 10.0))
        # read over the period only: the counts themselves, as before
        self.assertAlmostEqual(
            0.25, mist.vm_i_cpu([self._stats(80, 20), self._stats(0, 0)],
                                10.0))
