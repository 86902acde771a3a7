"""What an apply would change: the differences between a decision and
the host as the driver last saw or set it.

The plan is a list of :class:`Change` (an actuator, a key, the value) in
the order they are written: pins, shares, the retention timeout, the
patched kernel's ``rass_io_cpus`` and RASS classes. Pins stay inside the
CPUs nova gave each vCPU (its original pinning); a domain with an
I/O-bound vCPU gets its original shares times ``io_cpu_shares_factor``.
"""

import dataclasses
from typing import Any

from oslo_log import log as logging

from vsmtio_agent.actuators import base as actuator_base
from vsmtio_agent.actuators import kernel_knob
from vsmtio_agent.actuators import ledger
from vsmtio_agent.actuators import pinning
from vsmtio_agent.actuators import rass_class
from vsmtio_agent.actuators import shares as shares_mod
from vsmtio_agent.linux import kernel_knobs
from vsmtio_agent.linux import topology as topology_mod
from vsmtio_agent import model
from vsmtio_contract import kernel_abi

LOG = logging.getLogger(__name__)

PIN, SHARES, TIMEOUT, IO_CPUS, RASS = (
    'pin', 'shares', 'timeout', 'io_cpus', 'rass')
MAX_SHARES = 10000


@dataclasses.dataclass
class Change:
    """One knob to write: ``actuator.write(key, value)``."""

    mechanism: str
    actuator: actuator_base.Actuator
    key: str
    value: Any
    entry: Any = None     # the Domain, for a change of a domain's knob
    index: int = None     # the vCPU, for pins and RASS classes
    was: Any = None       # the value it replaces, as the driver knows it

    def describe(self):
        """One line for the operator: which knob, from what, to what.

        Logged at INFO once the change is made (``changed ...``) and by a
        dry run (``would change ...``).
        """
        def text(value):
            if value is None:
                return '?'
            if self.mechanism == PIN:
                return topology_mod.format_cpu_list(value)
            return str(value)

        what = {PIN: 'vCPU %s pins of %%s' % self.index,
                SHARES: 'cpu shares of %s',
                RASS: 'vCPU %s RASS class of %%s' % self.index,
                TIMEOUT: 'retention timeout (%s)' % self.key,
                IO_CPUS: 'RASS I/O CPUs (%s)' % self.key}[self.mechanism]
        if self.entry is not None:
            what = what % self.entry.label
        return '%s: %s -> %s' % (what, text(self.was), text(self.value))

    @property
    def label(self):
        """How failures name it: the domain, or None.

        A knob's error names its file already.
        """
        return self.entry.label if self.mechanism in (PIN, SHARES) else None

    @property
    def owner(self):
        """The mechanism that claims the knob in the ledger."""
        return ledger.LTCR if self.mechanism == TIMEOUT else ledger.RASS

    @property
    def knob(self):
        """The ledger's name of the knob: (kind, domain or None, key)."""
        return (self.actuator.kind,
                self.entry.uuid if self.entry is not None else None,
                self.key)


class Degradations:
    """Mechanisms the host refused: one refusal is enough to stop asking."""

    TEXT = {PIN: 'vCPU pinning denied (%s): placements are observed only',
            SHARES: 'cpu shares denied (%s): shares left alone'}

    def __init__(self):
        self.refused = set()
        self.reasons = {}     # mechanism -> the host's first refusal
        self.missing = []     # what describe() lists

    def allows(self, mechanism):
        return mechanism not in self.refused

    def refuse(self, mechanism, why):
        self.refused.add(mechanism)
        self.reasons.setdefault(mechanism, why)
        if mechanism == RASS:
            self.missing.append('RASS classes denied (%s)' % why)
            LOG.warning('Degrading: %s; RASS stays pinning only', why)
        elif mechanism == TIMEOUT:
            self.missing.append(why)
            LOG.warning('Degrading: retention timeout no longer applied: '
                        '%s', why)
        else:
            text = self.TEXT[mechanism] % why
            self.missing.append(text)
            LOG.warning('Degrading: %s', text)


class RetentionTimeout:
    """The knob LTCR's timeout goes to, and the value last put there."""

    def __init__(self, sysfs_root, patched):
        self.patched = patched
        self.relpath = (kernel_abi.RETENTION_TIMEOUT_NS if patched
                        else kernel_knobs.HALT_POLL_NS)
        self.root = sysfs_root
        self.probed = None      # (knob or None, why) once an apply probed
        self.applied = None
        self._na_logged = False
        self._looked = None     # look()'s answer, kept for refusal()

    def target(self):
        """(knob, why): probed by writing its value back, once."""
        if self.probed is None:
            knob = kernel_knobs.Knob(self.root, self.relpath)
            ok, why = knob.probe()
            self.probed = (knob if ok else None, why)
        return self.probed

    def look(self):
        """(knob or None, why) without writing: for ``describe``.

        ``check``, ``status`` and dry runs describe the host and must not
        write to it, so until an apply has probed the knob by writing its
        value back, its mode and ``access(2)`` answer.
        """
        if self.probed is not None:
            return self.probed
        knob = kernel_knobs.Knob(self.root, self.relpath)
        ok, why = knob.probe(write=False)
        return knob if ok else None, why

    def refused(self, why):
        self.probed = (None, why)

    def refusal(self):
        """Why the host does not take a timeout, or None where it may.

        The probe's answer once an apply probed the knob (or a write
        failed); before that the knob's mode, looked at once: the agent
        chose its levers from that same look when it started
        (``describe``), and ``status`` asks every period.
        """
        if self.probed is not None:
            knob, why = self.probed
        else:
            if self._looked is None:
                self._looked = self.look()
            knob, why = self._looked
        return why if knob is None else None

    def wanted(self, timeout_ns, log, probe=True):
        """``(value to write, value there)``; value None: nothing to do.

        Nothing to do: not applicable, or in force. ``probe=False`` looks
        at the knob without writing it (:meth:`look`).
        """
        knob, why = self.target() if probe else self.look()
        if knob is None:
            if probe and not self._na_logged:
                self._na_logged = True
                LOG.warning('Retention timeout not applicable: %s', why)
            return None, None
        value = int(timeout_ns)
        if self.patched:
            value = min(value, kernel_abi.RETENTION_TIMEOUT_MAX_NS)
        if value == self.applied:
            log.same()
            return None, None
        try:
            current = knob.read()
        except kernel_knobs.KnobError as exc:
            log.fail(str(exc))
            return None, None
        if current == value:
            self.applied = value
            log.same()
            return None, None
        return value, current


class Planner:

    def __init__(self, opts, domains, checkpoint, topology, patched,
                 degradations):
        """``topology`` is a callable: the driver reads it lazily."""
        self.opts = opts
        self.domains = domains
        self.checkpoint = checkpoint
        self.topology = topology
        self.patched = patched
        self.degradations = degradations
        self.knobs = kernel_knob.KernelKnob(checkpoint, opts.sysfs_root)
        self.timeout = RetentionTimeout(opts.sysfs_root, patched)
        self.io_cpus_done = False

    def plan(self, decision, log, probe=True):
        """The changes ``decision`` needs, in write order.

        ``probe=False`` (a dry run's preview) never probes the timeout's
        knob by writing its value back: planning then writes nothing.
        """
        changes = []
        if decision.split:
            changes += self._pins_and_shares(decision, log)
        if decision.retention:
            value, was = self.timeout.wanted(decision.timeout_ns, log, probe)
            if value is not None:
                changes.append(Change(TIMEOUT, self.knobs,
                                      self.timeout.relpath, value, was=was))
        if decision.split and self.patched:
            changes += self._io_cpus(log)
            changes += self._rass_classes(decision, log)
        return changes

    def _pins_and_shares(self, decision, log):
        host = {t for c in self.topology().cores for t in c.threads}
        changes, io_domains, touched = [], set(), set()
        for ref, placement in sorted(decision.placements.items()):
            entry = self.domains.get(ref.domain)
            if entry is None or ref.index not in entry.pins:
                log.same()
                continue
            touched.add(entry.uuid)
            if (placement.role == model.Role.IO
                    and decision.applies(placement)):
                io_domains.add(entry.uuid)
            if not self.degradations.allows(PIN):
                continue
            allowed = self._allowed(entry, ref.index) & host
            if not decision.applies(placement):
                # off the split's cores: where nova put it
                want = self._allowed(entry, ref.index)
                if want != entry.pins[ref.index]:
                    changes.append(Change(
                        PIN, pinning.VcpuPinning(
                            entry.record(self.checkpoint), entry.dom),
                        str(ref.index), sorted(want), entry, ref.index,
                        entry.pins[ref.index]))
                else:
                    log.same()
                continue
            want = frozenset(placement.threads) & allowed
            if not want:
                log.note('%s: plan %s is outside the CPUs nova gave it (%s)'
                         % (ref, list(placement.threads),
                            topology_mod.format_cpu_list(allowed)))
                # where nova put it, not where the agent last did: that
                # core may now be another trust domain's
                want = self._allowed(entry, ref.index)
            if want == entry.pins[ref.index]:
                log.same()
                continue
            changes.append(Change(
                PIN, pinning.VcpuPinning(entry.record(self.checkpoint),
                                         entry.dom),
                str(ref.index), sorted(want), entry, ref.index,
                entry.pins[ref.index]))
        factor = self.opts.io_cpu_shares_factor
        for uuid in sorted(touched):
            entry = self.domains.get(uuid)
            if (not self.degradations.allows(SHARES) or entry.shares is None
                    or factor == 1 or not self.checkpoint.owners.may(
                        ledger.RASS, shares_mod.KIND, uuid, shares_mod.KEY)):
                continue    # a knob a higher mechanism (MIST) holds
            original = self._original(entry, shares_mod.KIND,
                                      shares_mod.KEY, entry.shares[1])
            want = original
            if uuid in io_domains:
                want = min(int(round(original * factor)), MAX_SHARES)
            if want != entry.shares[1]:
                changes.append(Change(
                    SHARES, shares_mod.CpuShares(
                        entry.record(self.checkpoint), entry.dom,
                        entry.shares[0]),
                    shares_mod.KEY, want, entry, was=entry.shares[1]))
        return changes

    def _original(self, entry, kind, key, current):
        try:
            return entry.record(self.checkpoint).original(kind, key)
        except KeyError:
            return current

    def _allowed(self, entry, index):
        """CPUs the vCPU may use: where nova (its original pinning) put it."""
        return frozenset(self._original(entry, pinning.KIND, str(index),
                                        entry.pins[index]))

    def _io_cpus(self, log):
        """``rass_io_cpus``, once per start: every SMT core's I/O thread.

        A listed CPU needs an unlisted sibling, so single-thread cores are
        left out.
        """
        if self.io_cpus_done:
            return []
        key = kernel_abi.RASS_IO_CPUS
        want = topology_mod.format_cpu_list(
            c.io_thread for c in self.topology().cores
            if len(c.threads) > 1)
        try:
            current = self.knobs.read(key)
        except actuator_base.ActuatorError as exc:
            self.io_cpus_done = True
            log.fail(str(exc))
            return []
        if current == want:
            self.io_cpus_done = True
            log.same()
            return []
        return [Change(IO_CPUS, self.knobs, key, want, was=current)]

    def _rass_classes(self, decision, log):
        changes = []
        if not self.degradations.allows(RASS):
            return changes
        for ref, placement in sorted(decision.placements.items()):
            entry = self.domains.get(ref.domain)
            if entry is None or ref.index not in entry.tids:
                continue
            actuator = rass_class.RassClass(
                entry.record(self.checkpoint), self.opts.procfs_root,
                entry.thread_of)
            current = entry.rass.get(ref.index)
            if current is None:
                try:
                    current = entry.rass[ref.index] = actuator.read(
                        str(ref.index))
                except actuator_base.ActuatorError as exc:
                    log.fail(str(exc))
                    continue
            want = placement.role.value
            if not decision.applies(placement):
                # off the split's cores: the class it had before the agent
                want = self._original(entry, rass_class.KIND,
                                      str(ref.index), current)
            if current == want:
                log.same()
                continue
            changes.append(Change(RASS, actuator, str(ref.index),
                                  want, entry, ref.index, current))
        return changes

    def written(self, change):
        """Keep what the host now has: an unchanged plan costs nothing."""
        entry = change.entry
        if change.mechanism == TIMEOUT:
            self.timeout.applied = change.value
        elif change.mechanism == PIN:
            entry.pins[change.index] = frozenset(change.value)
        elif change.mechanism == SHARES:
            entry.shares = (change.actuator.parameter, change.value)
        elif change.mechanism == RASS:
            entry.rass[change.index] = change.value
