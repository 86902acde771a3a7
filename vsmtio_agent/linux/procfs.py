"""Per-thread scheduler counters of vCPU threads, read from procfs.

QEMU names each vCPU thread ``CPU <n>/KVM`` (``CPU <n>/TCG`` under TCG), so
the threads are found without asking QEMU over QMP (which would taint the
domain). Three small files per thread give what the monitor needs:
``schedstat`` (run time, run-queue wait, timeslices), ``status`` (voluntary
and involuntary switches, MIST's I_cpu) and ``stat`` (the CPU it last ran
on). They are read directly, against an injectable root, rather than
through psutil: psutil would re-validate each thread id and keeps one
process-global procfs path, and it has no schedstat reader. Which process
is a domain's QEMU is not this module's to say: libvirt's own state says
(:mod:`vsmtio_agent.drivers.libvirt.qemu_identity`), and the threads are
looked for only in that process.

This runs for every vCPU every period, so the reader keeps each thread's
files open (one ``pread(2)`` per file and period), reads ``status`` and
``stat`` only for threads that were switched in or out since the last
period (``schedstat`` says so), and for those only on a slower cadence
where the caller asks for one (:meth:`ThreadReader.read_many`). The
parsers and the reading of one thread's held files are
:mod:`vsmtio_agent.linux.procread`'s.

Parsers raise :class:`ValueError` on malformed text;
:meth:`ThreadReader.read` turns that into missing counters (``None``), never
into zeros.
"""

import os
import re
import resource
from typing import NamedTuple
from typing import Optional

from oslo_log import log as logging

from vsmtio_agent.linux import procread

LOG = logging.getLogger(__name__)

# Matched whole (fullmatch): ``$`` would also match before a newline.
_VCPU_COMM = re.compile(r'CPU ([0-9]+)/(KVM|TCG|HVF|WHPX)')


class ThreadCounters(NamedTuple):
    """Cumulative counters of one thread; ``None`` where unreadable.

    A named tuple rather than a frozen dataclass: one is built per vCPU
    per period, and a frozen dataclass costs twice as much to build.
    """

    run_ns: Optional[int] = None
    runqueue_delay_ns: Optional[int] = None
    voluntary_switches: Optional[int] = None
    involuntary_switches: Optional[int] = None
    cpu: Optional[int] = None
    # When the switch counts and the CPU were read, if in an earlier
    # reading (the slow cadence: ThreadReader.read_many); None: this one.
    switches_ns: Optional[int] = None


def _read(path):
    # One read(2) of at most 4 KiB: procfs files of a thread are small,
    # and this is the agent's hot path (three files per vCPU per period).
    fd = os.open(path, os.O_RDONLY)
    try:
        return os.read(fd, 4096).decode('ascii', 'replace')
    finally:
        os.close(fd)


def vcpu_threads(pid, procfs_root='/proc'):
    """Map vCPU index -> thread id for QEMU process ``pid``.

    ``pid`` must be one libvirt's state named as a domain's QEMU
    (:mod:`~vsmtio_agent.drivers.libvirt.qemu_identity`): any process can
    name its threads ``CPU 0/KVM``. An unreadable process (gone, or not
    ours) gives an empty map.
    """
    task_dir = os.path.join(procfs_root, str(pid), 'task')
    try:
        tids = os.listdir(task_dir)
    except OSError:
        return {}
    out = {}
    for tid in tids:
        if not tid.isdigit():
            continue
        try:
            comm = _read(os.path.join(task_dir, tid, 'comm')).strip()
        except OSError:
            continue
        match = _VCPU_COMM.fullmatch(comm)
        if match:
            out[int(match.group(1))] = int(tid)
    return out


# The pure-Python reader and the parsers, under the names callers know.
BAD_SCHEDSTAT, BAD_STATUS, BAD_STAT = (
    procread.BAD_SCHEDSTAT, procread.BAD_STATUS, procread.BAD_STAT)
DENIED_SCHEDSTAT, DENIED_STATUS, DENIED_STAT = (
    procread.DENIED_SCHEDSTAT, procread.DENIED_STATUS, procread.DENIED_STAT)
STALE = procread.STALE
parse_schedstat = procread.parse_schedstat
parse_schedstat_runs = procread.parse_schedstat_runs
parse_status_switches = procread.parse_status_switches
parse_stat_cpu = procread.parse_stat_cpu
_read_thread = procread._read_thread
_FILES = procread.FILES
_BAD = (BAD_SCHEDSTAT, BAD_STATUS, BAD_STAT)
_DENIED = (DENIED_SCHEDSTAT, DENIED_STATUS, DENIED_STAT)
# what ThreadReader logs: every bit but STALE (a cadence, not a fault)
_REPORTED = STALE - 1


# Descriptors the reader leaves to the rest of the agent (the libvirt
# connection, the metrics server, logs) out of the soft RLIMIT_NOFILE.
_RESERVED_FDS = 256


def fd_budget():
    """How many procfs files a :class:`ThreadReader` may hold open.

    Half of what the soft ``RLIMIT_NOFILE`` leaves after a reserve: with
    the common soft limit of 1024 that is 384 files (128 vCPUs at three
    files each); the daemon raises its soft limit to the hard one at start
    (:func:`raise_nofile_limit`), so a dense host keeps every file open.
    """
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        soft = 1 << 20
    return max(0, (soft - _RESERVED_FDS) // 2)


def raise_nofile_limit():
    """Raise the soft ``RLIMIT_NOFILE`` to the hard one; return the soft.

    Safe for the agent: nothing in it uses ``select(2)`` (which breaks on
    descriptors above 1023); libvirt and Python's selectors use poll/epoll.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError) as exc:
            LOG.debug('RLIMIT_NOFILE stays at %s: %s', soft, exc)
    return soft


class _Held:
    """One thread's open files, its last reading and counters."""

    __slots__ = ('fds', 'bad', 'last', 'counters', 'fresh_ns')

    def __init__(self, fds, bad):
        self.fds, self.bad = fds, bad
        self.last = self.counters = self.fresh_ns = None


class ThreadReader:
    """Reads :class:`ThreadCounters`; logs each kind of bad input once.

    The files of each thread are opened once and re-read with one
    ``pread(2)`` at offset 0 each period (procfs regenerates a seq_file
    read from offset 0): no path walk through ``/proc/<pid>/task/<tid>``.
    An open file stays bound to its task, so a reused thread id can never
    be read as the old vCPU: a read of an exited thread fails with
    ``ESRCH`` and the caller re-discovers. Beyond ``max_open`` held files
    (:func:`fd_budget`) files are opened per read.

    ``schedstat`` gates the two costlier files (:func:`_read_thread`): a
    vCPU that was not switched in or out since the last period costs one
    ``pread`` of a short line instead of three.
    """

    def __init__(self, procfs_root='/proc', max_open=None):
        self.root = procfs_root
        self.max_open = fd_budget() if max_open is None else max_open
        self._warned = set()
        self._held = {}     # pid -> {tid: _Held}
        self._nheld = 0

    def read(self, pid, tid, schedstat=True, now_ns=None, due=True):
        """Counters of thread ``tid`` of process ``pid``.

        Returns ``None`` if the thread is gone (the caller re-discovers).
        ``schedstat`` is kept for callers that pass it: ``schedstat`` is
        always read now, since it decides whether the other files must be.
        ``now_ns`` is the caller's time of the reading and ``due`` whether
        ``status`` and ``stat`` are due, for :meth:`read_many`'s slow
        cadence.
        """
        threads = self._held.get(pid)
        held = threads.get(tid) if threads is not None else None
        try:
            if held is None:
                held = self._hold(pid, tid)
                if held is None:
                    return self._read_once(pid, tid)
            raw = _read_thread(held.fds, held.last, held.bad, due)
        except (FileNotFoundError, ProcessLookupError):
            self.forget(pid, tid)
            return None
        if raw is held.last:
            if not raw[6] & STALE:
                held.fresh_ns = now_ns
            return held.counters
        if raw[6] & _REPORTED:
            self._report(raw[6], tid)
        held.last = raw
        if raw[6] & STALE:
            switches_ns = held.fresh_ns
        else:
            held.fresh_ns, switches_ns = now_ns, None
        held.counters = ThreadCounters(raw[0], raw[1], raw[3], raw[4],
                                       raw[5], switches_ns)
        return held.counters

    def read_many(self, pid, tids, now_ns=None, every=1, offset=0):
        """:meth:`read` of each thread of ``tids``, in their order.

        A list, None for a thread that is gone.

        The slow cadence: ``status`` and ``stat`` (switch counts, last
        CPU: most of a running thread's reading) of thread ``tids[i]`` are
        due only when ``(offset + i) % every`` is 0; the caller moves
        ``offset`` on by one each period (and by the threads before
        ``pid``'s), so each thread's are read every ``every`` periods and
        ``1 / every`` of them each period. A thread not due that was
        switched since its last reading keeps that reading's counts and
        CPU, and its :class:`ThreadCounters` says when they were read
        (``switches_ns``, the ``now_ns`` of that call); one that was not
        switched since has the same counts now (the gate), which count as
        read now. The counters are cumulative, so a consumer that takes
        their deltas over the time between the two readings
        (``vsmtio_agent.policy.monitor.derive``) loses nothing but
        timeliness.
        """
        if every < 1 or offset < 0:
            raise ValueError('read_many needs every >= 1 and offset >= 0')
        if every > 1 and now_ns is None:
            raise ValueError('a slow cadence needs the time of the reading')
        return [self.read(pid, tid, now_ns=now_ns,
                          due=(offset + i) % every == 0)
                for i, tid in enumerate(tids)]

    def _open(self, pid, tid):
        """The thread's three descriptors and the bits of denied opens.

        ``status`` first: its absence means the thread is gone
        (:class:`FileNotFoundError`). A kernel without ``schedstat``
        leaves -1 in its place (no gate), as does a denied open.
        """
        base = '%s/%d/task/%d/' % (self.root, pid, tid)
        fds, bad = [-1, -1, -1], 0
        try:
            for i in (1, 2, 0):
                try:
                    fds[i] = os.open(base + _FILES[i], os.O_RDONLY)
                except PermissionError:
                    bad |= _DENIED[i]
                except FileNotFoundError:
                    if i != 0:
                        raise
        except BaseException:
            for fd in fds:
                if fd >= 0:
                    os.close(fd)
            raise
        return tuple(fds), bad

    def _hold(self, pid, tid):
        """Open and keep the thread's files; None beyond the budget."""
        if self._nheld + 3 > self.max_open:
            return None
        fds, bad = self._open(pid, tid)
        held = _Held(fds, bad)
        self._held.setdefault(pid, {})[tid] = held
        self._nheld += 3
        return held

    def _read_once(self, pid, tid):
        fds, bad = self._open(pid, tid)
        try:
            raw = _read_thread(fds, None, bad)
        finally:
            for fd in fds:
                if fd >= 0:
                    os.close(fd)
        if raw[6]:
            self._report(raw[6], tid)
        return ThreadCounters(raw[0], raw[1], raw[3], raw[4], raw[5])

    def _report(self, bits, tid):
        for name, bad, denied in zip(_FILES, _BAD, _DENIED):
            if bits & bad:
                self._warn_once(name, 'ignoring %s of thread %s: not in '
                                'the expected format' % (name, tid))
            if bits & denied:
                self._warn_once(name + '-perm', 'cannot read %s of thread '
                                '%s: permission denied' % (name, tid))

    def forget(self, pid, tid=None):
        """Close the files held for thread ``tid`` (all of ``pid``'s)."""
        threads = self._held.get(pid)
        if not threads:
            return
        for key in [t for t in threads if tid is None or t == tid]:
            for fd in threads.pop(key).fds:
                if fd >= 0:
                    os.close(fd)
            self._nheld -= 3
        if not threads:
            del self._held[pid]

    def retain(self, pids):
        """Close the files of every process not in ``pids``."""
        for pid in [p for p in self._held if p not in pids]:
            self.forget(pid)

    def close(self):
        self.retain(())

    def _warn_once(self, key, message):
        if key not in self._warned:
            self._warned.add(key)
            LOG.warning('%s (further such errors are not logged)', message)
