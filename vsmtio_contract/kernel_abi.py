"""The patched host kernel's ABI as both sides probe it.

``host_kernel_patches/ABI.rst`` documents each path. The agent writes the
knobs (``vsmtio_agent.linux.kernel_knobs``); nova-compute only asks whether
the kernel carries a version this release knows, to advertise the
context-retention trait (``vsmtio_nova.capability``). Paths are relative to
the sysfs root (``/sys``) except :data:`SCHED_RASS`, which is per thread
under ``/proc/<pid>/task/<tid>/``.
"""

import os

# Its presence and version (ABI version 1).
ABI_VERSION = 'kernel/vsmtio/abi_version'
KNOWN_ABI_VERSIONS = (1,)
# The host-wide context-retention timeout, in ns (0..10000000).
RETENTION_TIMEOUT_NS = 'module/kvm/parameters/ctx_retention_timeout_ns'
RETENTION_TIMEOUT_MAX_NS = 10000000
# RASS in the patched scheduler: each core's I/O hyperthread (a cpulist),
# and each thread's class (none|io|cpu).
RASS_IO_CPUS = 'kernel/vsmtio/rass_io_cpus'
SCHED_RASS = 'sched_rass'


def patched_abi(sysfs_root):
    """(version, why): the vsmtio kernel ABI version, or None and why."""
    path = os.path.join(sysfs_root, ABI_VERSION)
    try:
        with open(path) as f:
            text = f.read().strip()
    except FileNotFoundError:
        return None, 'no vSMT-IO kernel ABI (%s absent)' % path
    except OSError as exc:
        return None, 'cannot read %s: %s' % (path, exc.strerror or exc)
    try:
        version = int(text)
    except ValueError:
        return None, '%s holds %r, not an integer' % (path, text[:40])
    if version not in KNOWN_ABI_VERSIONS:
        return None, ('vSMT-IO kernel ABI version %d is not one this agent '
                      'knows (%s)' % (version, KNOWN_ABI_VERSIONS))
    return version, 'vSMT-IO kernel ABI version %d at %s' % (version, path)
