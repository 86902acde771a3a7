"""Writable kernel knobs: the patched kernel's timeout, or KVM halt polling.

A knob is one sysfs file holding one integer. Whether it can be changed is
found by writing its current value back (a no-op): ``access(2)`` says yes to
root even for read-only module parameters, which then fail with EACCES.
"""

import errno
import logging
import os

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
    """One integer sysfs file under an injectable root."""

    def __init__(self, sysfs_root, relpath):
        self.relpath = relpath
        self.path = os.path.join(sysfs_root, relpath)

    def __repr__(self):
        return 'Knob(%s)' % self.path

    def exists(self):
        return os.path.exists(self.path)

    def read(self):
        try:
            with open(self.path) as f:
                text = f.read().strip()
        except OSError as exc:
            raise KnobError('cannot read %s: %s' % (self.path, exc.strerror),
                            denied=exc.errno in (errno.EACCES, errno.EPERM))
        try:
            return int(text)
        except ValueError:
            raise KnobError('%s holds %r, not an integer'
                            % (self.path, text[:40]))

    def write(self, value):
        try:
            with open(self.path, 'w') as f:
                f.write('%d\n' % int(value))
        except OSError as exc:
            raise KnobError(
                'cannot write %d to %s: %s'
                % (value, self.path, exc.strerror or exc),
                denied=exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS))

    def probe(self):
        """Return (writable, reason). Writes the current value back."""
        if not self.exists():
            return False, '%s does not exist' % self.path
        try:
            self.write(self.read())
        except KnobError as exc:
            return False, str(exc)
        return True, '%s is writable' % self.path
