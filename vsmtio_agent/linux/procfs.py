"""Per-thread scheduler counters of vCPU threads, read from procfs.

QEMU names each vCPU thread ``CPU <n>/KVM`` (``CPU <n>/TCG`` under TCG), so
the threads are found without asking QEMU over QMP (which would taint the
domain). Three small files per thread give what the monitor needs:
``schedstat`` (run time, run-queue wait), ``status`` (voluntary and
involuntary switches, MIST's I_cpu) and ``stat`` (the CPU it last ran on).
They are read directly, against an injectable root, rather than through
psutil: psutil would re-validate each thread id and keeps one
process-global procfs path, and it has no schedstat reader. psutil finds the
QEMU process itself (:func:`find_qemu_pid`).

Parsers raise :class:`ValueError` on malformed text;
:meth:`ThreadReader.read` turns that into missing counters (``None``), never
into zeros. The reader keeps the files open between periods (one
``pread(2)`` per file and period): ``doc/benchmarks/agent_tick.rst`` has the
profile behind that.
"""

import dataclasses
import os
import re
import resource
from typing import Optional

from oslo_log import log as logging
import psutil

LOG = logging.getLogger(__name__)

_VCPU_COMM = re.compile(r'^CPU (\d+)/(KVM|TCG|HVF|WHPX)$')


@dataclasses.dataclass(frozen=True)
class ThreadCounters:
    """Cumulative counters of one thread; ``None`` where unreadable."""

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


class ThreadReader:
    """Reads :class:`ThreadCounters`; logs each kind of bad input once.

    The files of each thread are opened once and re-read with one
    ``pread(2)`` at offset 0 each period (procfs regenerates a seq_file
    read from offset 0). That is one system call instead of three and no
    path walk through ``/proc/<pid>/task/<tid>``: measured here, 15 -> 9 us
    of CPU for ``status``, 10 -> 4.6 us for ``stat``, 8 -> 1.3 us for
    ``schedstat``. An open file stays bound to its task, so a reused
    thread id can never be read as the old vCPU: a read of an exited
    thread fails with ``ESRCH`` and the caller re-discovers. Beyond
    ``max_open`` held files (:func:`fd_budget`) files are opened per read.
    """

    def __init__(self, procfs_root='/proc', max_open=None):
        self.root = procfs_root
        self.max_open = fd_budget() if max_open is None else max_open
        self._warned = set()
        self._held = {}     # pid -> {(tid, file name): fd}
        self._nheld = 0

    def read(self, pid, tid, schedstat=True):
        """Counters of thread ``tid`` of process ``pid``.

        ``schedstat=False`` skips run time and run-queue delay (libvirt
        already reports them for qemu domains). Returns ``None`` if the
        thread is gone (the caller re-discovers).
        """
        try:
            switches = self._parsed(pid, tid, 'status',
                                    parse_status_switches) or (None, None)
            cpu = self._parsed(pid, tid, 'stat', parse_stat_cpu)
            times = (self._parsed(pid, tid, 'schedstat', parse_schedstat)
                     if schedstat else None) or (None, None)
        except (FileNotFoundError, ProcessLookupError):
            self.forget(pid, tid)
            return None
        return ThreadCounters(times[0], times[1], switches[0], switches[1],
                              cpu)

    def _parsed(self, pid, tid, name, parse):
        """``parse`` of one file; None (logged once) when unusable."""
        try:
            return parse(self._text(pid, tid, name))
        except ValueError as exc:
            self._warn_once(name, 'ignoring %s of thread %s: %s'
                            % (name, tid, exc))
        except PermissionError as exc:
            self._warn_once(name + '-perm', 'cannot read %s: %s'
                            % (name, exc))
        return None

    def _text(self, pid, tid, name):
        held = self._held.get(pid)
        fd = held.get((tid, name)) if held is not None else None
        if fd is None:
            path = '%s/%d/task/%d/%s' % (self.root, pid, tid, name)
            if self._nheld >= self.max_open:
                return _read(path)
            fd = os.open(path, os.O_RDONLY)
            self._held.setdefault(pid, {})[(tid, name)] = fd
            self._nheld += 1
        return os.pread(fd, 4096, 0).decode('ascii', 'replace')

    def forget(self, pid, tid=None):
        """Close the files held for thread ``tid`` (all of ``pid``'s)."""
        held = self._held.get(pid)
        if not held:
            return
        for key in [k for k in held if tid is None or k[0] == tid]:
            os.close(held.pop(key))
            self._nheld -= 1
        if not held:
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
