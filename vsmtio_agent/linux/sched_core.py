"""Core scheduling: a thread's cookie, and libvirt's ``sched_core``.

Where the kernel has core scheduling (``CONFIG_SCHED_CORE``), threads of
different cookies never run on one core's hyperthreads at once; libvirt
gives each VM's vCPUs a cookie of their own when qemu.conf's
``sched_core`` is ``vcpus``, ``emulator`` or ``full``. The agent asks
both so that it never pairs vCPUs the host keeps apart (a pair that could
not co-run gains nothing, and placing them so would hide the fence from
whoever reads the plan). Kernels without it (Debian's, among others)
answer ``EINVAL``: then no cookie is known, which is said, not guessed.
Nothing here writes.
"""

import ctypes
import errno
import os
import re

PR_SCHED_CORE = 62
PR_SCHED_CORE_GET = 0
PIDTYPE_PID = 0

QEMU_CONF = '/etc/libvirt/qemu.conf'
#: the ``sched_core`` values under which libvirt gives VMs cookies
FENCING = ('vcpus', 'emulator', 'full')

_libc = None
_LINE = re.compile(r'\s*sched_core\s*=\s*"([^"]*)"\s*(#.*)?')


def _prctl():
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    return _libc.prctl


def cookie(tid):
    """(cookie or None, why): ``tid``'s core-scheduling cookie.

    0 is no cookie. None with the reason where the kernel has no core
    scheduling, the thread is gone or may not be asked.
    """
    value = ctypes.c_ulong(0)
    prctl = _prctl()
    prctl.restype = ctypes.c_int
    rc = prctl(ctypes.c_int(PR_SCHED_CORE), ctypes.c_ulong(PR_SCHED_CORE_GET),
               ctypes.c_ulong(tid), ctypes.c_ulong(PIDTYPE_PID),
               ctypes.byref(value))
    if rc == 0:
        return value.value, 'cookie read'
    err = ctypes.get_errno()
    if err == errno.EINVAL:
        return None, ('the kernel has no core scheduling '
                      '(CONFIG_SCHED_CORE)')
    return None, 'thread %d: %s' % (tid, os.strerror(err))


def supported():
    """(bool, why): whether this kernel answers PR_SCHED_CORE_GET."""
    found, why = cookie(os.getpid())
    return found is not None, why


def parse_qemu_conf(text):
    """qemu.conf's ``sched_core`` value, or None when it is not set."""
    value = None
    for line in text.splitlines():
        match = _LINE.fullmatch(line)
        if match:
            value = match.group(1)
    return value


def libvirt_fences(path=QEMU_CONF):
    """(True, False or None, why): whether libvirt gives VMs cookies.

    None where qemu.conf cannot be read (the agent then relies on the
    cookies it can read, or on nothing).
    """
    try:
        with open(path, encoding='utf-8', errors='replace') as f:
            value = parse_qemu_conf(f.read())
    except OSError as exc:
        return None, 'cannot read %s: %s' % (path, exc.strerror or exc)
    if value is None:
        return False, '%s: sched_core not set (libvirt: none)' % path
    return value in FENCING, '%s: sched_core = "%s"' % (path, value)
