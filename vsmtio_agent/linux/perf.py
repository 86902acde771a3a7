"""Per-thread event counters through ``perf_event_open(2)``.

The guard and LTCR judge CPU-bound vCPUs by the instructions they retire
(``doc/source/policy.rst``); libvirt's perf events are per domain, so the
agent counts each vCPU thread itself: one counting (not sampling) event per
thread, opened once and read with one ``read(2)`` a period. A host without
a hardware PMU (these development machines, many VMs) refuses hardware
events: the reader then says why once and reports every count as missing,
never as zero, and the guard keeps no mechanism it cannot judge.

Only the syscall's stable prefix of ``struct perf_event_attr``
(``PERF_ATTR_SIZE_VER0``, 64 bytes) is used. Counts are scaled by
``time_enabled / time_running`` when the kernel multiplexed the counter.
"""

import ctypes
import errno
import os
import platform
import struct

from oslo_log import log as logging

LOG = logging.getLogger(__name__)

PERF_TYPE_HARDWARE = 0
PERF_TYPE_SOFTWARE = 1
PERF_COUNT_HW_INSTRUCTIONS = 1
PERF_COUNT_SW_TASK_CLOCK = 1
PERF_FORMAT_TOTAL_TIME_ENABLED = 1 << 0
PERF_FORMAT_TOTAL_TIME_RUNNING = 1 << 1
PERF_FLAG_FD_CLOEXEC = 1 << 3
ATTR_SIZE_VER0 = 64
# flags bit 5: exclude_kernel (the host kernel's part of a vCPU thread is
# KVM's exits and scheduling, not guest work)
EXCLUDE_KERNEL = 1 << 5
_SYSCALL = {'x86_64': 298, 'aarch64': 241}
# type u32, size u32, config u64, sample_period u64, sample_type u64,
# read_format u64, flags u64, wakeup_events u32, bp_type u32, config1 u64
_ATTR = struct.Struct('=IIQQQQQIIQ')
_READ = struct.Struct('=QQQ')      # value, time_enabled, time_running

EVENTS = {
    'instructions': (PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS),
    'task-clock': (PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK),
}


class PerfUnavailable(Exception):
    """The host cannot count this event; the text says why."""


def attr(event, exclude_kernel=True):
    """The packed ``perf_event_attr`` prefix for a named event."""
    try:
        type_, config = EVENTS[event]
    except KeyError:
        raise ValueError('unknown perf event %r (choose from %s)'
                         % (event, ', '.join(sorted(EVENTS)))) from None
    flags = EXCLUDE_KERNEL if exclude_kernel else 0
    read_format = (PERF_FORMAT_TOTAL_TIME_ENABLED
                   | PERF_FORMAT_TOTAL_TIME_RUNNING)
    return _ATTR.pack(type_, ATTR_SIZE_VER0, config, 0, 0, read_format,
                      flags, 0, 0, 0)


def scaled(raw):
    """The count in one ``read(2)`` of a counter, scaled.

    None if it never ran (the kernel could not schedule it on the PMU).
    """
    value, enabled, running = _READ.unpack(raw)
    if running == 0:
        return None
    if running >= enabled:
        return value
    return int(round(value * enabled / running))


_libc = None


def _open(tid, packed):
    global _libc
    nr = _SYSCALL.get(platform.machine())
    if nr is None:
        raise PerfUnavailable('perf_event_open: no syscall number for %s'
                              % platform.machine())
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    buf = ctypes.create_string_buffer(packed, len(packed))
    fd = _libc.syscall(ctypes.c_long(nr), buf, ctypes.c_int(tid),
                       ctypes.c_int(-1), ctypes.c_int(-1),
                       ctypes.c_ulong(PERF_FLAG_FD_CLOEXEC))
    if fd < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return fd


class ThreadCounters(object):
    """One counting event per thread, kept open between periods."""

    def __init__(self, event='instructions', exclude_kernel=True):
        self.event = event
        self._attr = attr(event, exclude_kernel)
        self._fds = {}
        self.unavailable = None

    def read(self, tid):
        """The thread's cumulative count, or None (missing, not zero)."""
        if self.unavailable is not None:
            return None
        fd = self._fds.get(tid)
        if fd is None:
            try:
                fd = _open(tid, self._attr)
            except PerfUnavailable as exc:
                self._give_up(str(exc))
                return None
            except OSError as exc:
                if exc.errno in (errno.ENOENT, errno.EOPNOTSUPP,
                                 errno.ENODEV, errno.EINVAL, errno.ENOSYS):
                    self._give_up('perf_event_open(%s): %s (no PMU for '
                                  'this event here)'
                                  % (self.event, exc.strerror))
                elif exc.errno in (errno.EACCES, errno.EPERM):
                    self._give_up('perf_event_open(%s): %s (see '
                                  'kernel.perf_event_paranoid)'
                                  % (self.event, exc.strerror))
                return None     # ESRCH: the thread is gone
            self._fds[tid] = fd
        try:
            raw = os.read(fd, _READ.size)
        except OSError:
            self.forget(tid)
            return None
        return scaled(raw) if len(raw) == _READ.size else None

    def _give_up(self, why):
        self.unavailable = why
        LOG.warning('Per-vCPU %s not counted: %s', self.event, why)
        self.close()

    def retain(self, tids):
        """Close the counters of threads not in ``tids``."""
        for tid in [t for t in self._fds if t not in tids]:
            self.forget(tid)

    def forget(self, tid):
        fd = self._fds.pop(tid, None)
        if fd is not None:
            os.close(fd)

    def close(self):
        for tid in list(self._fds):
            self.forget(tid)
