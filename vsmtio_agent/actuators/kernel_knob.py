"""Host-wide kernel knobs under sysfs, keyed by their path below it.

The retention timeout LTCR tunes (the patched kernel's
``ctx_retention_timeout_ns``, or stock KVM's ``halt_poll_ns``) and the
patched kernel's ``rass_io_cpus`` (a CPU list). Their originals are
host-wide: they stay recorded until written back, whatever the domains do.
"""

import contextlib

from vsmtio_agent.actuators import base
from vsmtio_agent.linux import kernel_knobs
from vsmtio_contract import kernel_abi

KIND = 'knobs'


@contextlib.contextmanager
def translated():
    """A knob file's KnobError as the contract's ActuatorError."""
    try:
        yield
    except kernel_knobs.KnobError as exc:
        raise base.ActuatorError(str(exc), denied=exc.denied) from exc


class KernelKnob(base.Actuator):

    kind = KIND

    def __init__(self, record, sysfs_root,
                 text_knobs=(kernel_abi.RASS_IO_CPUS,)):
        super().__init__(record)
        self.root = sysfs_root
        self.text_knobs = frozenset(text_knobs)

    def knob(self, relpath):
        """The file ``relpath`` names: one integer, or text for a list."""
        cls = (kernel_knobs.TextKnob if relpath in self.text_knobs
               else kernel_knobs.Knob)
        return cls(self.root, relpath)

    def read(self, key):
        with translated():
            return self.knob(key).read()

    def _set(self, key, value):
        # By the value's type: a text original is written back as text.
        cls = (kernel_knobs.TextKnob if isinstance(value, str)
               else kernel_knobs.Knob)
        with translated():
            cls(self.root, key).write(value)
