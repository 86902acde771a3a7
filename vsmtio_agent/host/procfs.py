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

Parsers raise :class:`ValueError` on malformed text; :func:`read_thread`
turns that into missing counters (``None``), never into zeros.
"""

import dataclasses
import os
import re
from typing import Optional

from oslo_log import log as logging
import psutil

LOG = logging.getLogger(__name__)

_VCPU_COMM = re.compile(r'^CPU (\d+)/(KVM|TCG|HVF|WHPX)$')
_SWITCHES = re.compile(r'^(non)?voluntary_ctxt_switches:[ \t]*(\S*)[ \t]*$',
                       re.M)


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


def parse_status_switches(text):
    """(voluntary, involuntary) context switches from a ``status`` file."""
    found = {}
    for non, value in _SWITCHES.findall(text):
        if not value.isdigit():
            raise ValueError('malformed %svoluntary_ctxt_switches %r'
                             % (non, value[:30]))
        found[non] = int(value)
    if len(found) != 2:
        raise ValueError('status has no context switch counts')
    return found[''], found['non']


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


class ThreadReader:
    """Reads :class:`ThreadCounters`; logs each kind of bad input once."""

    def __init__(self, procfs_root='/proc'):
        self.root = procfs_root
        self._warned = set()

    _FILES = (('status', parse_status_switches,
               ('voluntary_switches', 'involuntary_switches')),
              ('stat', parse_stat_cpu, ('cpu',)))
    _SCHEDSTAT = (('schedstat', parse_schedstat,
                   ('run_ns', 'runqueue_delay_ns')),)

    def read(self, pid, tid, schedstat=True):
        """Counters of thread ``tid`` of process ``pid``.

        ``schedstat=False`` skips run time and run-queue delay (libvirt
        already reports them for qemu domains). Returns ``None`` if the
        thread is gone (the caller re-discovers).
        """
        base = '%s/%d/task/%d/' % (self.root, pid, tid)
        values = {}
        files = self._FILES + (self._SCHEDSTAT if schedstat else ())
        try:
            for name, parse, keys in files:
                try:
                    parsed = parse(_read(base + name))
                except ValueError as exc:
                    self._warn_once(name, 'ignoring %s of thread %s: %s'
                                    % (name, tid, exc))
                    continue
                except PermissionError as exc:
                    self._warn_once(name + '-perm', 'cannot read %s: %s'
                                    % (name, exc))
                    continue
                if not isinstance(parsed, tuple):
                    parsed = (parsed,)
                values.update(zip(keys, parsed))
        except (FileNotFoundError, ProcessLookupError):
            return None
        return ThreadCounters(**values)

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
