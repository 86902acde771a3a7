"""Writable kernel files: KVM's and the patched kernel's knobs.

The retention timeout (the patched kernel's, or KVM's halt polling), the
patched kernel's ``rass_io_cpus`` under sysfs and each thread's
``sched_rass`` under procfs. A knob is one file holding one integer (or,
for :class:`TextKnob`, one word or a CPU list). Whether it can be changed is
found by writing its current value back (a no-op): ``access(2)`` says yes to
root even for read-only module parameters, which then fail with EACCES.
"""

import errno
import os

from oslo_log import log as logging

LOG = logging.getLogger(__name__)

# Stock KVM: how long a halted vCPU polls before it sleeps, in ns. The
# closest stock analogue of the paper's context-retention timeout.
HALT_POLL_NS = 'module/kvm/parameters/halt_poll_ns'

# The patched kernel (host_kernel_patches/ABI.rst, ABI version 1): its
# presence and version, and the host-wide context-retention timeout (ns,
# 0..10000000).
ABI_VERSION = 'kernel/vsmtio/abi_version'
KNOWN_ABI_VERSIONS = (1,)
RETENTION_TIMEOUT_NS = 'module/kvm/parameters/ctx_retention_timeout_ns'
RETENTION_TIMEOUT_MAX_NS = 10000000
# RASS in the patched scheduler: each core's I/O hyperthread (a cpulist),
# and each thread's class (none|io|cpu) under /proc/<pid>/task/<tid>/.
RASS_IO_CPUS = 'kernel/vsmtio/rass_io_cpus'
SCHED_RASS = 'sched_rass'


def patched_abi(sysfs_root):
    """(version, why): the vsmtio kernel ABI version, or None and why."""
    knob = Knob(sysfs_root, ABI_VERSION)
    if not knob.exists():
        return None, 'no vSMT-IO kernel ABI (%s absent)' % knob.path
    try:
        version = knob.read()
    except KnobError as exc:
        return None, str(exc)
    if version not in KNOWN_ABI_VERSIONS:
        return None, ('vSMT-IO kernel ABI version %d is not one this agent '
                      'knows (%s)' % (version, KNOWN_ABI_VERSIONS))
    return version, ('vSMT-IO kernel ABI version %d at %s'
                     % (version, knob.path))


class KnobError(Exception):
    """A knob could not be read or written; ``denied`` if by permission."""

    def __init__(self, message, denied=False):
        super().__init__(message)
        self.denied = denied


class Knob:
    """One integer sysfs (or procfs) file under an injectable root."""

    def __init__(self, root, relpath):
        self.relpath = relpath
        self.path = os.path.join(root, relpath)

    def __repr__(self):
        return '%s(%s)' % (type(self).__name__, self.path)

    def exists(self):
        return os.path.exists(self.path)

    def read_text(self):
        try:
            with open(self.path) as f:
                return f.read().strip()
        except OSError as exc:
            raise KnobError('cannot read %s: %s' % (self.path, exc.strerror),
                            denied=exc.errno in (errno.EACCES, errno.EPERM))

    def write_text(self, text):
        try:
            with open(self.path, 'w') as f:
                f.write(text + '\n')
        except OSError as exc:
            raise KnobError(
                'cannot write %s to %s: %s'
                % (text or "''", self.path, exc.strerror or exc),
                denied=exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS))

    def read(self):
        text = self.read_text()
        try:
            return int(text)
        except ValueError:
            raise KnobError('%s holds %r, not an integer'
                            % (self.path, text[:40]))

    def write(self, value):
        self.write_text('%d' % int(value))

    def probe(self, write=True):
        """Return (writable, reason).

        With ``write`` the current value is written back: the only sure
        test. Without, nothing is written and the file's mode and
        ``access(2)`` decide (``access`` alone says yes to root): for
        commands that must not change the host.
        """
        if not self.exists():
            return False, '%s does not exist' % self.path
        if not write:
            try:
                self.read()
                mode = os.stat(self.path).st_mode
            except (KnobError, OSError) as exc:
                return False, str(exc)
            if not mode & 0o222 or not os.access(self.path, os.W_OK):
                return False, '%s is read-only (mode %03o)' % (
                    self.path, mode & 0o777)
            return True, '%s is writable by its mode (not written)' % (
                self.path)
        try:
            self.write(self.read())
        except KnobError as exc:
            return False, str(exc)
        return True, '%s is writable' % self.path


class TextKnob(Knob):
    """A knob holding one word or a CPU list (``rass_io_cpus``)."""

    def read(self):
        return self.read_text()

    def write(self, value):
        self.write_text(str(value))
