"""IRQ affinity: which host CPUs handle one interrupt (MIST §IV).

The knob is ``/proc/irq/<N>/smp_affinity_list``. Keys are IRQ numbers (as
text); values are ``{'cpus': CPU list in the kernel's syntax, 'actions':
the IRQ's action names in /proc/interrupts}``. Only IRQs the agent wrote
are recorded, so only those are ever restored: an IRQ it did not move is
never touched, at stop or after a crash.

An IRQ number names a device only while that device holds it: after a
hotplug the number may belong to another device. So the original carries
the action names it had, and a restore writes only while the IRQ still
has them; an IRQ that now serves someone else is logged and its record
dropped (the device the agent moved is gone, and nothing of it is left to
put back). A record from an agent that kept only the CPU list is restored
as it was kept.

irqbalance rewrites the affinity of every IRQ it is not told to leave
alone, every ten seconds: moving such an IRQ under it is a race that
undoes the separation and makes the restore write over irqbalance's
choice. :func:`irqbalance` finds it and what it leaves alone.

``procfs_root`` is injectable: unit tests run on a copy of the tree.
"""

import errno
import os
import re

from oslo_log import log as logging

from vsmtio_agent.actuators import attempt
from vsmtio_agent.actuators import base
from vsmtio_agent.actuators import bounds
from vsmtio_agent.actuators import checkpoint
from vsmtio_agent.linux import topology

LOG = logging.getLogger(__name__)

_LINE = re.compile(r'\s*([0-9]+):((?:\s+[0-9]+)+)\s+(.*)')
# the trigger column: "5-edge", "1-edge", "PCI-MSI-edge", "fasteoi", ...
_TRIGGER = re.compile(r'(^|-)(edge|level|fasteoi|simple|edge-level)\Z',
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
        match = _LINE.fullmatch(line)
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


def _banned_irqs(argv):
    """IRQs irqbalance's command line bans (``--banirq=N``, ``-i N``)."""
    out = set()
    args = iter(argv)
    for arg in args:
        value = None
        if arg.startswith('--banirq='):
            value = arg.split('=', 1)[1]
        elif arg in ('--banirq', '-i'):
            value = next(args, None)
        elif arg.startswith('-i') and arg[2:].isdigit():
            value = arg[2:]
        if value is not None and value.strip().isdigit():
            out.add(int(value))
    return out


def irqbalance(procfs_root='/proc'):
    """``(pid, banned IRQs)`` of a running irqbalance, or None.

    What irqbalance leaves alone is what its command line bans
    (``--banirq``, its documented way; ``/etc/default/irqbalance``'s
    ``IRQBALANCE_ARGS`` reaches it there), read from the running process,
    not from a file it may not have read.
    """
    try:
        names = os.listdir(procfs_root)
    except OSError:
        return None
    for name in names:
        if not name.isdigit():
            continue
        proc = os.path.join(procfs_root, name)
        try:
            with open(os.path.join(proc, 'comm')) as f:
                if f.read().strip() != 'irqbalance':
                    continue
            with open(os.path.join(proc, 'cmdline'), 'rb') as f:
                argv = f.read().decode('utf-8', 'replace').split('\0')
        except OSError:
            continue        # gone meanwhile, or not ours to read
        return int(name), _banned_irqs(argv[1:])
    return None


class IrqAffinity(base.Actuator):
    """``/proc/irq/<N>/smp_affinity_list``, one IRQ per key."""

    kind = checkpoint.IRQ_AFFINITY

    def __init__(self, record, procfs_root='/proc'):
        super().__init__(record)
        self.procfs_root = procfs_root

    def _path(self, key):
        return os.path.join(self.procfs_root, 'irq', str(int(key)),
                            'smp_affinity_list')

    def actions(self, key):
        """The IRQ's action names now; None if it is not in the list."""
        try:
            return read_interrupts(self.procfs_root).get(int(key))
        except OSError as exc:
            raise base.ActuatorError('cannot read interrupts: %s' % exc)

    def read(self, key):
        try:
            with open(self._path(key)) as f:
                cpus = topology.format_cpu_list(
                    topology.parse_cpu_list(f.read().strip()))
        except (OSError, ValueError) as exc:
            raise base.ActuatorError('cannot read IRQ %s affinity: %s'
                                     % (key, exc))
        return {'cpus': cpus, 'actions': self.actions(key)}

    def invalid(self, key, original):
        """An IRQ number and CPU ids Linux can have.

        Whether the CPUs are online is the kernel's to say (it refuses an
        affinity to none of them); whether the IRQ is still the one moved,
        :meth:`restore`'s.
        """
        why = bounds.number_key(key, bounds.MAX_IRQ, 'IRQ')
        if why:
            return why
        if isinstance(original, dict):
            original = original.get('cpus')
        if not isinstance(original, str):
            return 'CPUs %r are not a CPU list' % (original,)
        return bounds.cpus(original)

    def _set(self, key, value):
        if isinstance(value, dict):
            value = value['cpus']
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

    def restore(self, key):
        """The original back, only to the IRQ that was moved.

        Its action names must be those recorded with the original; if the
        IRQ now serves another device (or none), nothing is written and
        the record is dropped.
        """
        try:
            original = self.record.original(self.kind, key)
        except KeyError:
            return
        if isinstance(original, dict):
            now = self.actions(key)
            if now != original['actions']:
                LOG.warning('IRQ %s serves %s now, not %r as when it was '
                            'moved: its affinity is not written back and '
                            'its record is dropped', key,
                            'nothing' if now is None else repr(now),
                            original['actions'])
                self.record.forget(self.kind, key)
                return
        super().restore(key)

    def move(self, irq, cpus, actions=None):
        """Give ``irq`` the CPUs ``cpus``; False if it has them already.

        ``actions`` are its action names when the move was planned: an
        IRQ that has changed hands meanwhile is not moved (None: whatever
        it serves now).
        """
        want = topology.format_cpu_list(cpus)
        now = self.read(str(irq))
        if actions is None:
            actions = now['actions']
        if now['actions'] != actions:
            raise base.ActuatorError('IRQ %d serves %r now, not %r: not '
                                     'moved' % (irq, now['actions'], actions))
        if now['cpus'] == want:
            return False
        attempt.write(self, str(irq), {'cpus': want, 'actions': actions})
        return True
