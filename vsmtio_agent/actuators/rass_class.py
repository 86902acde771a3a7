"""The patched kernel's RASS class of each vCPU thread of one domain.

``/proc/<pid>/task/<tid>/sched_rass`` holds ``none``, ``io`` or ``cpu``
(host_kernel_patches/ABI.rst). Keys are vCPU indexes (as strings); the
thread behind an index is found by the caller's ``thread_of``, since QEMU
may replace its threads. A thread that is gone took its class with it:
there is nothing to restore.
"""

from vsmtio_agent.actuators import base
from vsmtio_agent.actuators import bounds
from vsmtio_agent.actuators import kernel_knob
from vsmtio_agent.linux import kernel_knobs
from vsmtio_contract import kernel_abi

KIND = 'rass'
CLASSES = ('none', 'io', 'cpu')


class RassClass(base.Actuator):

    kind = KIND

    def __init__(self, record, procfs_root, thread_of):
        """``thread_of(index)`` -> ``(qemu pid, vCPU tid)`` or None."""
        super().__init__(record)
        self.root = procfs_root
        self.thread_of = thread_of

    def knob(self, key):
        where = self.thread_of(int(key))
        if where is None:
            raise base.ActuatorError('vCPU %s has no thread' % key)
        return kernel_knobs.TextKnob(
            self.root, '%d/task/%d/%s' % (where + (kernel_abi.SCHED_RASS,)))

    def read(self, key):
        with kernel_knob.translated():
            return self.knob(key).read()

    def _set(self, key, value):
        with kernel_knob.translated():
            self.knob(key).write(value)

    def invalid(self, key, original):
        why = bounds.number_key(key, bounds.MAX_VCPUS - 1, 'vCPU')
        if why is None and original not in CLASSES:
            why = 'class %r is not one of %s' % (original, ', '.join(CLASSES))
        return why

    def restore(self, key):
        if self.thread_of(int(key)) is None:
            self.record.forget(self.kind, key)
            return
        super().restore(key)
