"""Per-thread scheduler counters of vCPU threads, read from procfs.

QEMU names each vCPU thread ``CPU <n>/KVM`` (``CPU <n>/TCG`` under TCG), so
the threads are found without asking QEMU over QMP (which would taint the
domain). Three small files per thread give what the monitor needs:
``schedstat`` (run time, run-queue wait, timeslices), ``status`` (voluntary
and involuntary switches, MIST's I_cpu) and ``stat`` (the CPU it last ran
on). They are read directly, against an injectable root, rather than
through psutil: psutil would re-validate each thread id and keeps one
process-global procfs path, and it has no schedstat reader. psutil finds the
QEMU process itself (:func:`find_qemu_pid`).

This is the agent's hot path (every vCPU, every period), so the reader
keeps each thread's files open (one ``pread(2)`` per file and period), reads
``status`` and ``stat`` only for threads that were switched in or out since
the last period (``schedstat`` says so), and parses in C where the
``_procread`` extension was built, in Python otherwise, with the same
results. ``doc/benchmarks/agent_tick.rst`` has the profile behind each step.

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
import psutil

LOG = logging.getLogger(__name__)

_VCPU_COMM = re.compile(r'^CPU (\d+)/(KVM|TCG|HVF|WHPX)$')


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


def parse_schedstat(text):
    """``run_ns wait_ns timeslices`` -> (run_ns, wait_ns)."""
    fields = text.split()
    if len(fields) < 2 or not all(f.isdigit() for f in fields[:2]):
        raise ValueError('malformed schedstat %r' % text[:60])
    return int(fields[0]), int(fields[1])


def parse_schedstat_runs(text):
    """``run_ns wait_ns timeslices`` -> (run_ns, wait_ns, timeslices).

    ``timeslices`` (how many times the thread was switched in) is None
    where the file has no third field.
    """
    run_ns, wait_ns = parse_schedstat(text)
    third = text.split()[2:3]
    return run_ns, wait_ns, (int(third[0]) if third and third[0].isdigit()
                             else None)


def _switch_count(text, key):
    """The value of line ``key`` (``...ctxt_switches:``) as an int.

    Searched from the end: the kernel prints these lines last or nearly.
    """
    at = text.rfind('\n' + key)
    if at < 0:
        if not text.startswith(key):
            return None
        at = -1
    start = at + 1 + len(key)
    end = text.find('\n', start)
    value = text[start:end if end >= 0 else len(text)].strip(' \t')
    if not value.isdigit():
        raise ValueError('malformed %s %r' % (key[:-1], value[:30]))
    return int(value)


def parse_status_switches(text):
    """(voluntary, involuntary) context switches from a ``status`` file.

    Two ``str.find`` calls rather than a regular expression over the whole
    file: this runs for every vCPU every period, and a multi-line regex
    scan of the ~1.4 KiB file was a fifth of the agent's sampling time.
    """
    voluntary = _switch_count(text, 'voluntary_ctxt_switches:')
    involuntary = _switch_count(text, 'nonvoluntary_ctxt_switches:')
    if voluntary is None or involuntary is None:
        raise ValueError('status has no context switch counts')
    return voluntary, involuntary


def parse_stat_cpu(text):
    """The ``processor`` field (39th) of a ``stat`` file.

    The command name (field 2) may hold spaces and parentheses (``CPU
    0/KVM``), so fields are counted after its last ``)``.
    """
    _, paren, rest = text.rpartition(')')
    fields = rest.split()
    if not paren or len(fields) < 37 or not fields[36].lstrip('-').isdigit():
        raise ValueError('malformed stat %r' % text[:60])
    return int(fields[36])


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

    An unreadable process (gone, or not ours) gives an empty map.
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
        match = _VCPU_COMM.match(comm)
        if match:
            out[int(match.group(1))] = int(tid)
    return out


# Bits of the last field of a reading (the C reader uses the same values):
# which file was malformed, or could not be read for want of permission.
BAD_SCHEDSTAT, BAD_STATUS, BAD_STAT = 1, 2, 4
DENIED_SCHEDSTAT, DENIED_STATUS, DENIED_STAT = 8, 16, 32
_FILES = ('schedstat', 'status', 'stat')
_BAD = (BAD_SCHEDSTAT, BAD_STATUS, BAD_STAT)
_DENIED = (DENIED_SCHEDSTAT, DENIED_STATUS, DENIED_STAT)


def _pread(fd):
    """The text of a held file; None if permission is denied."""
    try:
        return os.pread(fd, 4096, 0).decode('ascii', 'replace')
    except PermissionError:
        return None


def _read_thread(fds, last, bad):
    """One thread's counters from its held files: the pure-Python reader.

    ``fds`` are the thread's ``schedstat``, ``status`` and ``stat``
    descriptors (-1 where the caller could not open one), ``last`` what
    this returned for the same thread the period before (or None), and
    ``bad`` the :data:`DENIED_SCHEDSTAT`... bits the caller found opening
    them. Returns ``(run_ns, delay_ns, timeslices, voluntary, involuntary,
    cpu, bad)``, None for each counter that cannot be had, with the bits
    of the files that were malformed or denied. An exited thread raises
    :class:`ProcessLookupError`.

    ``schedstat`` is read first, and gates the other two: a thread whose
    run time and timeslice count have not moved since ``last`` was neither
    switched in nor out since then (a switch-out adds the time run to the
    first, a switch-in counts in the second), so its context switch counts
    in ``status`` and the CPU it last ran on in ``stat`` are still those
    of ``last``, which is then reused (returned itself if nothing moved).
    ``stat``'s field is where the thread is queued, which for a woken
    thread not yet run may already be another CPU: the reuse reports the
    CPU it last ran on, which is what :class:`ThreadCounters` promises.
    ``schedstat`` must be read before the other two for this to hold: a
    switch after that read changes what the next period's read sees.

    ``vsmtio_agent/linux/_procread.c`` is the same function in C, used when
    built; the unit tests hold both to the same results.
    """
    run = delay = runs = None
    if fds[0] >= 0:
        text = _pread(fds[0])
        if text is None:
            bad |= DENIED_SCHEDSTAT
        else:
            try:
                run, delay, runs = parse_schedstat_runs(text)
            except ValueError:
                bad |= BAD_SCHEDSTAT
    if (last is not None and runs is not None and last[0] == run
            and last[2] == runs):
        if last[1] == delay:
            return last
        return (run, delay, runs, last[3], last[4], last[5],
                bad | (last[6] & ~(BAD_SCHEDSTAT | DENIED_SCHEDSTAT)))
    voluntary = involuntary = cpu = None
    text = _pread(fds[1]) if fds[1] >= 0 else ''
    if text is None:
        bad |= DENIED_STATUS
    elif fds[1] >= 0:
        try:
            voluntary, involuntary = parse_status_switches(text)
        except ValueError:
            bad |= BAD_STATUS
    text = _pread(fds[2]) if fds[2] >= 0 else ''
    if text is None:
        bad |= DENIED_STAT
    elif fds[2] >= 0:
        try:
            cpu = parse_stat_cpu(text)
        except ValueError:
            bad |= BAD_STAT
    return run, delay, runs, voluntary, involuntary, cpu, bad


def _read_threads(items):
    """:func:`_read_thread` for each ``(fds, last, bad)`` of ``items``.

    A list in the same order, with None for a thread that exited: one
    call for a whole domain's vCPU threads, as ``_procread.read_threads``
    does in C (where the per-thread call and its Python around it was a
    tenth of a period's cost).
    """
    out = []
    for fds, last, bad in items:
        try:
            out.append(_read_thread(fds, last, bad))
        except (FileNotFoundError, ProcessLookupError):
            out.append(None)
    return out


try:
    from vsmtio_agent.linux import _procread
except ImportError:     # not built: the pure-Python reader does the same
    _procread = None


def native_available():
    """Whether the C reader (``_procread``) was built and imports."""
    return _procread is not None


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

    __slots__ = ('fds', 'bad', 'last', 'counters')

    def __init__(self, fds, bad):
        self.fds, self.bad = fds, bad
        self.last = self.counters = None


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
    ``pread`` of 19 bytes instead of three. The C reader is used when it
    was built (``native=None``), the pure-Python one otherwise or with
    ``native=False``; ``doc/benchmarks/agent_tick.rst`` has the profile
    behind both.
    """

    def __init__(self, procfs_root='/proc', max_open=None, native=None):
        self.root = procfs_root
        self.max_open = fd_budget() if max_open is None else max_open
        if native and _procread is None:
            raise RuntimeError('the C procfs reader was not built')
        self.native = _procread is not None if native is None else native
        self._read_thread = (_procread.read_thread if self.native
                             else _read_thread)
        self._read_threads = (_procread.read_threads if self.native
                              else _read_threads)
        if _procread is None:
            LOG.info('Reading vCPU threads\' procfs counters in Python: the '
                     'C reader (vsmtio_agent.linux._procread) was not built '
                     '(it needs gcc and Python\'s headers at install time).')
        self._warned = set()
        self._held = {}     # pid -> {tid: _Held}
        self._nheld = 0

    def read(self, pid, tid, schedstat=True):
        """Counters of thread ``tid`` of process ``pid``.

        Returns ``None`` if the thread is gone (the caller re-discovers).
        ``schedstat`` is kept for callers that pass it: ``schedstat`` is
        always read now, since it decides whether the other files must be.
        """
        threads = self._held.get(pid)
        held = threads.get(tid) if threads is not None else None
        try:
            if held is None:
                held = self._hold(pid, tid)
                if held is None:
                    return self._read_once(pid, tid)
            raw = self._read_thread(held.fds, held.last, held.bad)
        except (FileNotFoundError, ProcessLookupError):
            self.forget(pid, tid)
            return None
        if raw is not held.last:
            if raw[6]:
                self._report(raw[6], tid)
            held.last = raw
            held.counters = ThreadCounters(raw[0], raw[1], raw[3], raw[4],
                                           raw[5])
        return held.counters

    def read_many(self, pid, tids):
        """:meth:`read` of each thread of ``tids``, in one pass.

        A list in the order of ``tids``, None for a thread that is gone.
        The held threads of ``pid`` are read in one call of the reader
        (the C reader loops in C); the rest one by one, as :meth:`read`.
        """
        threads = self._held.get(pid)
        if threads is None or len(threads) < len(tids):
            # Files to open first (a new process or thread): the rare case.
            return [self.read(pid, tid) for tid in tids]
        helds = [threads.get(tid) for tid in tids]
        if None in helds:
            return [self.read(pid, tid) for tid in tids]
        raws = self._read_threads([(h.fds, h.last, h.bad) for h in helds])
        out = []
        for tid, held, raw in zip(tids, helds, raws):
            if raw is None:
                self.forget(pid, tid)
                out.append(None)
                continue
            if raw is not held.last:
                if raw[6]:
                    self._report(raw[6], tid)
                held.last = raw
                held.counters = ThreadCounters(raw[0], raw[1], raw[3],
                                               raw[4], raw[5])
            out.append(held.counters)
        return out

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
            raw = self._read_thread(fds, None, bad)
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


def find_qemu_pid(uuid, pidfile=None, procfs_root='/proc'):
    """The pid of the QEMU process running domain ``uuid``.

    libvirt keeps a pid file per domain; where it is absent or stale (a
    session or embedded driver), the QEMU command line names the domain by
    ``-uuid``. The pid is checked against that command line either way.
    """
    uuid = uuid.lower()

    def runs(pid):
        try:
            with open(os.path.join(procfs_root, str(pid), 'cmdline'),
                      'rb') as f:
                args = f.read().decode('utf-8', 'replace').split('\0')
        except OSError:
            return False
        return any(a.lower() == uuid for a in args) or any(
            'uuid=' + uuid in a.lower() for a in args)

    if pidfile:
        try:
            pid = int(_read(pidfile).strip())
            if runs(pid):
                return pid
        except (OSError, ValueError):
            pass
    if procfs_root != '/proc':
        candidates = (int(p) for p in os.listdir(procfs_root) if p.isdigit())
    else:
        candidates = (p.pid for p in psutil.process_iter(['name'])
                      if 'qemu' in (p.info['name'] or ''))
    for pid in candidates:
        if runs(pid):
            return pid
    return None
