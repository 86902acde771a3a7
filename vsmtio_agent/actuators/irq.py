"""IRQ affinity: which host CPUs handle one interrupt (MIST §IV).

The knob is ``/proc/irq/<N>/smp_affinity_list``. Keys are IRQ numbers (as
text); values are CPU lists in the kernel's syntax (``0-3,6``). Only IRQs
the agent wrote are recorded, so only those are ever restored: an IRQ it
did not move is never touched, at stop or after a crash.

``procfs_root`` is injectable: unit tests run on a copy of the tree.
"""

import errno
import os
import re

from vsmtio_agent.actuators import attempt
from vsmtio_agent.actuators import base
from vsmtio_agent.actuators import checkpoint
from vsmtio_agent.linux import topology

_LINE = re.compile(r'^\s*(\d+):((?:\s+\d+)+)\s+(.*)$')
# the trigger column: "5-edge", "1-edge", "PCI-MSI-edge", "fasteoi", ...
_TRIGGER = re.compile(r'(^|-)(edge|level|fasteoi|simple|edge-level)$',
                      re.IGNORECASE)


def read_interrupts(procfs_root='/proc'):
    """``{irq: action names}`` of the numbered IRQs in /proc/interrupts.

    The action names follow the chip, hwirq and trigger columns
    (``virtio1-req.0``, ``eth0-TxRx-0``, several joined by ``, ``). An IRQ
    without an action has none (an empty string).
    """
    with open(os.path.join(procfs_root, 'interrupts')) as f:
        text = f.read()
    out = {}
    for line in text.splitlines()[1:]:
        match = _LINE.match(line)
        if not match:
            continue
        out[int(match.group(1))] = _actions(match.group(3))
    return out


def _actions(rest):
    """The action names after the chip, hwirq and trigger columns."""
    tokens = rest.split()
    for i in range(len(tokens) - 1, -1, -1):
        if _TRIGGER.search(tokens[i]):
            return ' '.join(tokens[i + 1:])
    columns = re.split(r'\s{2,}', rest.strip())
    return columns[-1] if len(columns) >= 3 else ''


class IrqAffinity(base.Actuator):
    """``/proc/irq/<N>/smp_affinity_list``, one IRQ per key."""

    kind = checkpoint.IRQ_AFFINITY

    def __init__(self, record, procfs_root='/proc'):
        super().__init__(record)
        self.procfs_root = procfs_root

    def _path(self, key):
        return os.path.join(self.procfs_root, 'irq', str(int(key)),
                            'smp_affinity_list')

    def read(self, key):
        try:
            with open(self._path(key)) as f:
                return topology.format_cpu_list(
                    topology.parse_cpu_list(f.read().strip()))
        except (OSError, ValueError) as exc:
            raise base.ActuatorError('cannot read IRQ %s affinity: %s'
                                     % (key, exc))

    def _set(self, key, value):
        path = self._path(key)
        try:
            with open(path, 'w') as f:
                f.write(value + '\n')
        except FileNotFoundError:
            if self.recorded(key):
                return      # the IRQ went away (device removed): nothing
            raise base.ActuatorError('IRQ %s does not exist' % key)
        except OSError as exc:
            # Managed IRQs (multi-queue devices) and some chips refuse a
            # move with EIO/EINVAL; that is the device's, not ours.
            raise base.ActuatorError(
                'cannot set IRQ %s affinity to %s: %s' % (key, value, exc),
                denied=exc.errno in (errno.EACCES, errno.EPERM))

    def move(self, irq, cpus):
        """Give ``irq`` the CPUs ``cpus``; False if it has them already."""
        want = topology.format_cpu_list(cpus)
        if self.read(str(irq)) == want:
            return False
        attempt.write(self, str(irq), want)
        return True
