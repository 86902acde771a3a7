"""The kernel bench's processes: vCPUs stood in for by processes, for real.

Everything that touches the running kernel: the ``cpu`` controller's
groups (:class:`Groups`, cgroup v1 ``cpu.shares`` or v2 ``cpu.weight``,
whichever the host mounts), the calibrated busy loop, the request server
and the spinner (forked processes pinned to one CPU), the ping-pong that
times a context switch and a cross-CPU wake-up, and the host's facts
(release, ``HZ``, CPU model, load). Pure Python: the busy loop and the
clocks are Python's, the absolute ``clock_nanosleep`` and the timer slack
go through ``ctypes`` to the C library.
"""

import contextlib
import ctypes
import ctypes.util
import gzip
import multiprocessing
import os
import platform
import signal
import time

from vsmtio_bench import host_tables
from vsmtio_bench import kernel_math

MONO = time.CLOCK_MONOTONIC
TIMER_ABSTIME = 1
PR_SET_TIMERSLACK = 29
# the server's timer slack: a device's completion comes when it comes,
# not up to 50 us late as a timer of a normal task may (the default slack)
TIMER_SLACK_NS = 1
# the spinner reads the clock once per this many iterations (~30 us)
SPIN_CHUNK = 2000
# how long the processes have to start and join their groups before
# the measured window's warm-up starts
START_S = 0.3
# how long after its window's end a process may take to report
REPORT_S = 30.0


class Unavailable(Exception):
    """What a bench cannot measure on this host, and why (its message)."""


class _Timespec(ctypes.Structure):
    _fields_ = [('tv_sec', ctypes.c_long), ('tv_nsec', ctypes.c_long)]


def _libc():
    try:
        return ctypes.CDLL(ctypes.util.find_library('c') or 'libc.so.6',
                           use_errno=True)
    except OSError:
        return None


_LIBC = _libc()


def sleeper():
    """A function sleeping until an absolute CLOCK_MONOTONIC time (ns).

    The C library's ``clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME)``
    where ``ctypes`` finds it; else ``time.sleep`` of what remains (which
    since Python 3.11 sleeps to an absolute deadline of its own, taken a
    few hundred nanoseconds later).
    """
    fn = getattr(_LIBC, 'clock_nanosleep', None)
    if fn is None:
        def sleep_until(deadline):
            left = deadline - time.clock_gettime_ns(MONO)
            if left > 0:
                time.sleep(left / 1e9)
        return sleep_until
    fn.argtypes = [ctypes.c_int, ctypes.c_int,
                   ctypes.POINTER(_Timespec), ctypes.c_void_p]
    ts = _Timespec()
    ref = ctypes.byref(ts)

    def sleep_until(deadline):
        ts.tv_sec, ts.tv_nsec = divmod(deadline, 1000000000)
        while fn(MONO, TIMER_ABSTIME, ref, None):
            pass                        # EINTR: sleep again to the deadline
    return sleep_until


def set_timer_slack(ns):
    """Set this process's timer slack (prctl); whether it was set."""
    prctl = getattr(_LIBC, 'prctl', None)
    return bool(prctl is not None and prctl(PR_SET_TIMERSLACK, ns, 0, 0,
                                            0) == 0)


def spin(n):
    """The busy loop: ``n`` iterations of nothing."""
    for _ in range(n):
        pass


def calibrate(trials=30, n=200000):
    """Nanoseconds per iteration of :func:`spin`, the fastest of ``trials``.

    The fastest, not the mean: a trial another task interrupted is
    slower, never faster, and a burst is a fixed amount of work.
    """
    best = None
    clock = time.perf_counter_ns
    for _ in range(trials):
        t0 = clock()
        spin(n)
        dt = clock() - t0
        best = dt if best is None or dt < best else best
    return best / float(n)


def iterations(burst_us, ns_per_iter):
    return max(1, int(round(burst_us * 1000.0 / ns_per_iter)))


def burst_accuracy(burst_us, ns_per_iter, samples=2000):
    """How long a calibrated burst takes, timed burst by burst (ns)."""
    n = iterations(burst_us, ns_per_iter)
    clock = time.perf_counter_ns
    out = []
    for _ in range(samples):
        t0 = clock()
        spin(n)
        out.append(clock() - t0)
    return out


# -- the processes ------------------------------------------------------


def pin_parent(cpu, allowed):
    """Keep this process off the measured CPU (where there is another).

    ``allowed`` is the CPUs it may use, taken before it was pinned to
    the measured one to calibrate there: its affinity then is that CPU
    alone, and the others would be lost (no parent kept off the CPU, no
    second CPU for the remote wake-up).
    """
    others = set(allowed) - {cpu}
    if others:
        os.sched_setaffinity(0, others)


def _child_setup(cpu):
    os.sched_setaffinity(0, {cpu})
    set_timer_slack(TIMER_SLACK_NS)
    # the parent's handlers are not the child's: a signal ends it
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _server(conn, cpu, n, wait_ns, spin_ns, start, measure, end):
    """One vCPU of the server: burst, device wait, again, until ``end``.

    The wait is an absolute sleep to the request's deadline (its device
    completing); the wake-up delay is from that deadline to running again.
    With ``spin_ns`` it first spins up to that long for the completion (a
    completion inside the spin is caught without sleeping), as KVM's halt
    polling does.
    """
    _child_setup(cpu)
    sleep_until = sleeper()
    clock = time.clock_gettime_ns
    cpu_clock = time.process_time_ns
    sleep_until(start)
    count = 0
    delays = []
    cpu0 = None
    while True:
        for _ in range(n):
            pass
        t = clock(MONO)
        if t >= end:
            break
        deadline = t + wait_ns
        if spin_ns:
            limit = t + spin_ns if spin_ns < wait_ns else deadline
            while clock(MONO) < limit:
                pass
        if spin_ns < wait_ns:
            sleep_until(deadline)
        woke = clock(MONO)
        if woke >= measure:
            if cpu0 is None:
                cpu0, t0 = cpu_clock(), woke
            count += 1
            delays.append(woke - deadline)
    cpu1 = cpu_clock()
    conn.send({'requests': count, 'delays': delays,
               'cpu_ns': cpu1 - cpu0 if cpu0 is not None else 0,
               'window_ns': t - t0 if cpu0 is not None else 0})
    conn.close()


def _spinner(conn, cpu, start, measure, end):
    """The CPU-bound VM: spins until ``end``; its CPU time in the window.

    Also its iterations per second of the window: the speed of a
    computing loop, which a busy SMT sibling slows (:func:`corun`).
    """
    _child_setup(cpu)
    sleeper()(start)
    clock = time.clock_gettime_ns
    cpu0 = None
    chunks = 0
    while True:
        for _ in range(SPIN_CHUNK):
            pass
        chunks += 1
        t = clock(MONO)
        if cpu0 is None and t >= measure:
            cpu0, t0, c0 = time.process_time_ns(), t, chunks
        if t >= end:
            break
    conn.send({'cpu_ns': time.process_time_ns() - cpu0,
               'window_ns': t - t0,
               'iterations_per_s': ((chunks - c0) * SPIN_CHUNK / (t - t0)
                                    * 1e9 if t > t0 else None)})
    conn.close()


def _waiter(conn, cpu, start, end):
    """A waiting loop: reads the clock until ``end``, as a poll does.

    Halt polling's analogue on a sibling: a loop that waits for an event
    by checking for it. Python's check is an interpreter loop around a
    clock read, heavier on the core than a PAUSE loop: the speed it
    leaves a computing sibling is a lower bound of a real poll's.
    """
    _child_setup(cpu)
    sleeper()(start)
    clock = time.clock_gettime_ns
    while clock(MONO) < end:
        pass
    conn.send(None)
    conn.close()


_CTX = multiprocessing.get_context('fork')


class _Children(object):
    """Forked children, each with a pipe back; all killed on the way out."""

    def __init__(self):
        self.procs = []

    def start(self, target, *args):
        recv, send = _CTX.Pipe(duplex=False)
        p = _CTX.Process(target=target, args=(send,) + args, daemon=True)
        p.start()
        send.close()
        self.procs.append((p, recv))
        return p

    def results(self, end):
        """Each child's report, in the order they were started.

        Waits until ``end`` (CLOCK_MONOTONIC ns) and :data:`REPORT_S`
        after it: a child that has not reported by then is stuck, not
        slow.
        """
        out = []
        for p, recv in self.procs:
            left = (end - time.clock_gettime_ns(MONO)) / 1e9 + REPORT_S
            if not recv.poll(max(left, 0.0)):
                raise RuntimeError('a bench process did not report')
            out.append(recv.recv())
        return out

    def close(self):
        for p, recv in self.procs:
            if p.is_alive():
                p.kill()
            p.join(5)
            recv.close()
        self.procs = []


def _window(seconds, warmup_s):
    """``(start, measure, end)`` of a point, CLOCK_MONOTONIC ns.

    The processes start at ``start`` (:data:`START_S` from now, time to
    fork and join their groups), are measured from ``measure`` (after
    ``warmup_s``) and stop at ``end``.
    """
    start = time.clock_gettime_ns(MONO) + int(START_S * 1e9)
    measure = start + int(warmup_s * 1e9)
    return start, measure, measure + int(seconds * 1e9)


def run_point(groups, cpu, burst_us, wait_us, threads, ratio, seconds,
              warmup_s, ns_per_iter, spinner=True, spin_us=0.0,
              server=True):
    """One point: the server (``threads`` processes) and/or the spinner.

    ``ratio`` is the server group's weight over the spinner's. Returns
    the server's requests/s, its CPU share and wake-up delays (ns), and
    the spinner's CPU share, over the window after ``warmup_s``.
    """
    if groups is not None:
        groups.set_ratio(ratio)
    start, measure, end = _window(seconds, warmup_s)
    kids = _Children()
    try:
        servers = spinners = ()
        if server:
            n = iterations(burst_us, ns_per_iter)
            servers = [kids.start(_server, cpu, n, int(wait_us * 1e3),
                                  int(spin_us * 1e3), start, measure, end)
                       for _ in range(threads)]
        if spinner:
            spinners = [kids.start(_spinner, cpu, start, measure, end)]
        if groups is not None:
            for p in servers:
                groups.join('server', p.pid)
            for p in spinners:
                groups.join('spinner', p.pid)
        if time.clock_gettime_ns(MONO) >= start:
            raise RuntimeError('the processes took longer than %.1f s to '
                               'start' % START_S)
        res = kids.results(end)
    finally:
        kids.close()
    out = {'requests_per_s': None, 'server_cpu': None, 'delays': [],
           'spinner_cpu': None}
    srv = res[:len(servers)]
    if srv:
        out['requests_per_s'] = sum(r['requests'] / r['window_ns'] * 1e9
                                    for r in srv if r['window_ns'])
        out['server_cpu'] = sum(r['cpu_ns'] / r['window_ns']
                                for r in srv if r['window_ns'])
        out['delays'] = [d for r in srv for d in r['delays']]
    if spinners:
        r = res[-1]
        out['spinner_cpu'] = r['cpu_ns'] / r['window_ns']
    return out


#: What :func:`corun` may run on the sibling: nothing, a computing loop
#: or a waiting loop.
BESIDE = (None, 'compute', 'wait')


def corun(cpu, sibling, seconds, warmup_s, beside=None):
    """Iterations/s of a computing loop on ``cpu``, ``beside`` on ``sibling``.

    On two SMT siblings of one core, against ``beside=None`` (the
    sibling idle), the speed a computing vCPU keeps beside a computing
    or a waiting one: the model's co-run inputs, measured.
    """
    if beside not in BESIDE:
        raise ValueError('beside: %r is not one of %s' % (beside, BESIDE))
    start, measure, end = _window(seconds, warmup_s)
    kids = _Children()
    try:
        kids.start(_spinner, cpu, start, measure, end)
        if beside == 'compute':
            kids.start(_spinner, sibling, start, measure, end)
        elif beside == 'wait':
            kids.start(_waiter, sibling, start, end)
        res = kids.results(end)
    finally:
        kids.close()
    return res[0]['iterations_per_s']


# -- context switches ---------------------------------------------------


def _pong(conn, cpu, rfd, wfd, n):
    _child_setup(cpu)
    read, write = os.read, os.write
    for _ in range(n):
        read(rfd, 1)
        write(wfd, b'x')
    conn.send(None)
    conn.close()


def pingpong(cpu_a, cpu_b, n):
    """Nanoseconds per round trip of one byte between two processes.

    On one CPU a round trip is two context switches; on two it is two
    wake-ups of a process sleeping on another CPU. Each leg also pays a
    pipe write and read in Python: :func:`pipe_baseline` measures those.
    """
    a_r, b_w = os.pipe()
    b_r, a_w = os.pipe()
    kids = _Children()
    old = os.sched_getaffinity(0)
    try:
        kids.start(_pong, cpu_b, b_r, b_w, n + 100)
        os.sched_setaffinity(0, {cpu_a})
        read, write = os.read, os.write
        for _ in range(100):            # both running, caches warm
            write(a_w, b'x')
            read(a_r, 1)
        t0 = time.perf_counter_ns()
        for _ in range(n):
            write(a_w, b'x')
            read(a_r, 1)
        dt = time.perf_counter_ns() - t0
        kids.results(time.clock_gettime_ns(MONO))
    finally:
        os.sched_setaffinity(0, old)
        kids.close()
        for fd in (a_r, a_w, b_r, b_w):
            os.close(fd)
    return dt / float(n)


def pipe_baseline(cpu, n):
    """Nanoseconds of two pipe writes and reads in one process, no switch."""
    r, w = os.pipe()
    old = os.sched_getaffinity(0)
    try:
        os.sched_setaffinity(0, {cpu})
        read, write = os.read, os.write
        t0 = time.perf_counter_ns()
        for _ in range(n):
            write(w, b'x')
            read(r, 1)
            write(w, b'x')
            read(r, 1)
        dt = time.perf_counter_ns() - t0
    finally:
        os.sched_setaffinity(0, old)
        os.close(r)
        os.close(w)
    return dt / float(n)


def measure_switches(cpu, repetitions, round_trips):
    """Context switch on one CPU and wake-up on another, with spreads.

    Each of ``repetitions`` times ``round_trips`` round trips one CPU,
    across two (where this process may use another) and the pipe
    operations alone; each one's summary, and the repetitions' raw
    values under ``repetitions``, from which a derived figure's spread
    follows.
    """
    other = [c for c in sorted(os.sched_getaffinity(0) | {cpu}) if c != cpu]
    rows = {'round_trip_one_cpu_ns': [], 'round_trip_two_cpus_ns': [],
            'pipe_baseline_ns': []}
    for _ in range(repetitions):
        rows['pipe_baseline_ns'].append(pipe_baseline(cpu, round_trips))
        rows['round_trip_one_cpu_ns'].append(pingpong(cpu, cpu, round_trips))
        if other:
            rows['round_trip_two_cpus_ns'].append(
                pingpong(cpu, other[0], round_trips))
    return switch_summary(rows, round_trips, other[0] if other else None)


def switch_summary(rows, round_trips, other_cpu):
    """The switch and the remote wake-up from each repetition's rows.

    ``rows`` ``{'round_trip_one_cpu_ns', 'round_trip_two_cpus_ns',
    'pipe_baseline_ns': [ns per repetition]}``, the second empty where
    there is no other CPU.
    """
    out = {k: kernel_math.summary(v) for k, v in rows.items()}
    base = out['pipe_baseline_ns']['median']
    one = out['round_trip_one_cpu_ns']['median']
    two = out['round_trip_two_cpus_ns']['median']
    # a round trip is two switches (one CPU) or two remote wake-ups (two
    # CPUs) plus four pipe operations, which the baseline times alone
    out['context_switch_ns'] = (one - base) / 2.0
    out['remote_wakeup_ns'] = (two - base) / 2.0 if two else None
    out['round_trips'] = round_trips
    out['other_cpu'] = other_cpu
    out['repetitions'] = rows
    return out


# -- the cpu controller's groups ----------------------------------------


def _mounts():
    try:
        with open('/proc/mounts') as f:
            return [line.split() for line in f]
    except OSError:
        return []


def find_controller():
    """``(version, root)`` of the ``cpu`` controller, or Unavailable."""
    for fields in _mounts():
        if len(fields) > 3 and fields[2] == 'cgroup' and 'cpu' in (
                fields[3].split(',')):
            return 1, fields[1]
    for fields in _mounts():
        if len(fields) > 2 and fields[2] == 'cgroup2':
            try:
                with open(os.path.join(fields[1],
                                       'cgroup.controllers')) as f:
                    if 'cpu' in f.read().split():
                        return 2, fields[1]
            except OSError:
                continue
    raise Unavailable('no cpu controller: neither a cgroup v1 hierarchy '
                      'with cpu nor a cgroup v2 one offering it')


class Groups(object):
    """The server's and the spinner's groups, in a directory of our own.

    Created under the controller's root (``vsmtio-kbench-PID``), removed
    by :meth:`close` whatever happened (its processes are gone by then;
    any left are moved back to the root first). With ``shield`` that
    directory's own weight is ``shield`` times the default, so the
    machine's other jobs take less of the measured CPU.
    """

    NAMES = ('server', 'spinner')

    def __init__(self, shield=0.0):
        self.version, self.root = find_controller()
        self.top = os.path.join(self.root, 'vsmtio-kbench-%d' % os.getpid())
        self.file = 'cpu.shares' if self.version == 1 else 'cpu.weight'
        try:
            os.mkdir(self.top)
        except OSError as exc:
            raise Unavailable('cannot create a group under %s: %s'
                              % (self.root, exc.strerror))
        try:
            if self.version == 2:
                self._write(os.path.join(self.top, 'cgroup.subtree_control'),
                            '+cpu')
            if shield:
                # the bench's own group outweighs the machine's other
                # jobs on the measured CPU; inside it the server and the
                # spinner meet as they would at the root
                self._write(os.path.join(self.top, self.file),
                            self.value(shield))
            for name in self.NAMES:
                os.mkdir(os.path.join(self.top, name))
        except OSError as exc:
            self.close()
            raise Unavailable('cannot set up the groups under %s: %s'
                              % (self.top, exc.strerror))

    @staticmethod
    def _write(path, value):
        with open(path, 'w') as f:
            f.write(str(value))

    def value(self, ratio):
        """The ``cpu.shares`` / ``cpu.weight`` of ``ratio`` x the default."""
        return (kernel_math.v1_shares(ratio) if self.version == 1
                else kernel_math.v2_weight(ratio))

    def set_ratio(self, ratio):
        """The server's weight at ``ratio`` times the spinner's."""
        self._write(os.path.join(self.top, 'server', self.file),
                    self.value(ratio or 1.0))
        self._write(os.path.join(self.top, 'spinner', self.file),
                    self.value(1.0))

    def join(self, name, pid):
        self._write(os.path.join(self.top, name, 'cgroup.procs'), pid)

    def close(self):
        for name in self.NAMES:
            path = os.path.join(self.top, name)
            with contextlib.suppress(OSError):
                with open(os.path.join(path, 'cgroup.procs')) as f:
                    left = f.read().split()
                for pid in left:
                    with contextlib.suppress(OSError):
                        self._write(os.path.join(self.root, 'cgroup.procs'),
                                    pid)
            with contextlib.suppress(OSError):
                os.rmdir(path)
        with contextlib.suppress(OSError):
            os.rmdir(self.top)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# -- the host -----------------------------------------------------------


def cpu_busy(seconds=1.0):
    """``{cpu: busy fraction}`` over ``seconds`` (/proc/stat)."""
    def read():
        out = {}
        with open('/proc/stat') as f:
            for line in f:
                parts = line.split()
                if parts[0].startswith('cpu') and parts[0] != 'cpu':
                    vals = [int(x) for x in parts[1:]]
                    idle = vals[3] + (vals[4] if len(vals) > 4 else 0)
                    out[int(parts[0][3:])] = (sum(vals), idle)
        return out
    a = read()
    time.sleep(seconds)
    b = read()
    busy = {}
    for cpu in a:
        tot = b[cpu][0] - a[cpu][0]
        busy[cpu] = 1.0 - (b[cpu][1] - a[cpu][1]) / tot if tot else 0.0
    return busy


def least_loaded(seconds=1.0):
    """The CPU (of this process's) that was busy the least, and all."""
    busy = cpu_busy(seconds)
    allowed = os.sched_getaffinity(0)
    cpu = min((c for c in busy if c in allowed), key=lambda c: busy[c])
    return cpu, busy


def loadavg():
    return host_tables.read('/proc/loadavg')


def kernel_config():
    """``(text, source)`` of the running kernel's configuration, or None."""
    release = platform.release()
    try:
        with gzip.open('/proc/config.gz', 'rt') as f:
            return f.read(), '/proc/config.gz'
    except OSError:
        pass
    path = '/boot/config-%s' % release
    try:
        with open(path) as f:
            return f.read(), path
    except OSError:
        return None, None


def cpu_model():
    try:
        with open('/proc/cpuinfo') as f:
            for line in f:
                if line.startswith('model name'):
                    return line.split(':', 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def smt_active():
    return host_tables.smt()['active']


def host_profile():
    """What the host is: release, fair class, HZ, CPUs, cgroup version."""
    release = platform.release()
    text, source = kernel_config()
    hz = kernel_math.config_value(text, 'HZ') if text else None
    try:
        version = find_controller()[0]
    except Unavailable:
        version = None
    preempt = None
    with contextlib.suppress(OSError):
        with open('/sys/kernel/debug/sched/preempt') as f:
            preempt = f.read().strip()
    return {
        'name': platform.node() or None,
        'kernel_release': release,
        'scheduler': kernel_math.scheduler_of(release),
        'scheduler_source': 'the release (EEVDF since 6.6)',
        'hz': int(hz) if hz and hz.isdigit() else None,
        'hz_source': source,
        'cpu_model': cpu_model(),
        'cpus': os.cpu_count(),
        'smt_active': smt_active(),
        'cgroup_version': version,
        'preempt': preempt,
        'python': platform.python_version(),
        'timer_slack_ns': TIMER_SLACK_NS,
        'clock_nanosleep': getattr(_LIBC, 'clock_nanosleep', None)
        is not None,
        'is_root': os.geteuid() == 0,
    }
