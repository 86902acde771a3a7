"""Writable kernel files: KVM's and the patched kernel's knobs.

The patched kernel's paths are its ABI, named in
:mod:`vsmtio_contract.kernel_abi`.

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


class KnobError(Exception):
    """A knob could not be read or written; ``denied`` if by permission."""

    def __init__(self, message, denied=False):
        super().__init__(message)
        self.denied = denied


def confined(root, relpath):
    """``root``/``relpath``, refusing a path that would leave ``root``.

    Keys come from the checkpoint, which root acts on: an absolute key
    (which ``os.path.join`` would take whole) or a ``..`` component could
    name any file on the host. Refused with ``KnobError`` (denied).
    """
    parts = relpath.split('/')
    if (not relpath or relpath.startswith('/') or '\0' in relpath
            or any(p in ('', '.', '..') for p in parts)):
        raise KnobError('%r is not a path below %s: refused'
                        % (relpath, root), denied=True)
    return os.path.join(root, relpath)


class Knob:
    """One integer sysfs (or procfs) file under an injectable root."""

    def __init__(self, root, relpath):
        self.relpath = relpath
        self.path = confined(root, relpath)

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
