"""Host-wide kernel knobs under sysfs, keyed by their path below it.

The retention timeout LTCR tunes (the patched kernel's
``ctx_retention_timeout_ns``, or stock KVM's ``halt_poll_ns``) and the
patched kernel's ``rass_io_cpus`` (a CPU list). Their originals are
host-wide: they stay recorded until written back, whatever the domains do.
"""

import contextlib

from vsmtio_agent.actuators import base
from vsmtio_agent.actuators import bounds
from vsmtio_agent.linux import kernel_knobs
from vsmtio_agent.linux import topology
from vsmtio_contract import kernel_abi

KIND = 'knobs'
# What each integer knob takes: kvm.halt_poll_ns is an unsigned int, the
# patched kernel's timeout its ABI's range; any other a u64.
RANGES = {
    kernel_knobs.HALT_POLL_NS: (0, 2 ** 32 - 1),
    kernel_abi.RETENTION_TIMEOUT_NS: (0, kernel_abi.RETENTION_TIMEOUT_MAX_NS),
}


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

    def invalid(self, key, original):
        """A number in the knob's range; a CPU list of this host's CPUs."""
        if key in self.text_knobs:
            if not isinstance(original, str):
                return '%s takes a CPU list, not %r' % (key, original)
            try:
                host = topology.online_cpus(self.root)
            except (OSError, ValueError):
                host = None     # the kernel refuses a CPU it lacks
            return bounds.cpus(original, host, empty=True)
        low, high = RANGES.get(key, (0, 2 ** 64 - 1))
        return bounds.integer(original, low, high, what=key)

    def _set(self, key, value):
        # By the value's type: a text original is written back as text.
        cls = (kernel_knobs.TextKnob if isinstance(value, str)
               else kernel_knobs.Knob)
        with translated():
            cls(self.root, key).write(value)
