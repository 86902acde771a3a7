"""The one interface between the agent and a host.

Every host the agent drives (the simulated SMT host, a libvirt/KVM host on a
stock or patched kernel) implements :class:`HostDriver`. The agent's loop is
the same for all of them::

    topology = driver.topology()
    driver.recover()                # the daemon only: undo a crashed run
    while running:                  # vsmtio_agent.agent.Agent.loop
        driver.advance(period)      # a real host sleeps; the simulator runs
        snapshot = driver.sample()
        decision = engine.step(...) # pure policy, no I/O
        driver.apply(decision)
    driver.restore()

What callers need beyond that (``interrupt`` to end a sleeping
``advance``, ``vcpu_pins`` and ``refusals`` for ``status`` and the
metrics, ``vcpu_threads``) is here too,
with defaults for hosts that have none of it: no caller asks a driver
what it happens to implement.

Drivers are found through the ``vsmtio_agent.host_drivers`` stevedore
namespace and built with the agent's oslo.config object.
"""

import abc
import dataclasses


class HostDriverError(Exception):
    """A host operation failed in a way the agent should report."""


@dataclasses.dataclass(frozen=True)
class HostMode:
    """What the host offers and why: shown by ``vsmtio-agent check``.

    ``mode`` is one of ``simulated``, ``patched`` (the host kernel has the
    vSMT-IO patches: real retention timeout and RASS knobs) or ``stock``
    (LTCR tunes halt polling where writable; RASS becomes pinning).
    ``missing`` lists what would be needed for the fuller mode.
    ``benefits`` says, one line per mechanism or measure, whether this
    host can benefit from it and why (empty: not said).
    ``knobs`` names, for the policy engine, the levers the driver turns:
    ``retention`` (a retention timeout), ``per_vm_retention`` (one per
    VM: ``Decision.timeouts``), ``vm_weights`` (``Decision.weights``); a
    mechanism whose lever is missing is never tried.
    """

    mode: str
    reason: str
    capabilities: tuple = ()
    missing: tuple = ()
    knobs: frozenset = frozenset()
    benefits: tuple = ()


@dataclasses.dataclass(frozen=True)
class ApplyResult:
    """Counts of changes a driver made or failed to make in one apply."""

    applied: int = 0
    unchanged: int = 0
    failed: int = 0
    messages: tuple = ()


@dataclasses.dataclass(frozen=True)
class Restored:
    """What putting back a previous agent's changes did.

    ``recorded`` originals were found; ``remaining`` of them could not be
    written back and stay recorded; ``dropped`` of them were values no
    host takes (out of range: each said in the log) and left the record
    unwritten; ``refused`` says why nothing was tried (another agent holds
    the host, the checkpoint is not trusted). ``vsmtio-agent restore``
    prints it.
    """

    recorded: int = 0
    remaining: int = 0
    refused: str = None
    dropped: int = 0


class HostDriver(metaclass=abc.ABCMeta):
    """A host whose vCPUs the agent observes and places."""

    @classmethod
    def register_opts(cls, conf):
        """Register the driver's own options on ``conf`` and list them.

        A driver shipped beside the agent (the simulated host's
        ``[vsmtio_sim]``) brings its options with it, so the agent's
        start-up check covers them without knowing the driver. Returns
        ``{group name: [options]}``; the default has none.
        """
        return {}

    @abc.abstractmethod
    def describe(self):
        """Return a :class:`HostMode`."""

    @abc.abstractmethod
    def topology(self):
        """Return the :class:`~vsmtio_agent.model.Topology` to work on."""

    @abc.abstractmethod
    def advance(self, seconds):
        """Let ``seconds`` of host time pass (sleep, or simulate)."""

    @abc.abstractmethod
    def sample(self):
        """Return a :class:`~vsmtio_agent.model.Snapshot` of every vCPU."""

    @abc.abstractmethod
    def apply(self, decision):
        """Apply a :class:`~vsmtio_agent.model.Decision`; return ApplyResult.

        Drivers change only what differs from what is already applied, and
        record every original value before they first change it.
        """

    def recover(self):
        """Put back what a previous, crashed agent left changed.

        The daemon calls this once at start, before its first period, and
        only when it will apply (not for ``status``, ``check`` or
        ``--dry-run``, which must write nothing); ``vsmtio-agent restore``
        calls it alone. Returns a :class:`Restored`. The default has
        nothing to recover (the simulated host starts fresh).
        """
        return Restored()

    @abc.abstractmethod
    def restore(self):
        """Put back every value this driver changed since it started."""

    def close(self):
        """Release connections; the default has none."""

    def interrupt(self):
        """End a pending :meth:`advance` early (the daemon is stopping).

        The default has nothing to interrupt (an ``advance`` that does not
        sleep).
        """

    def vcpu_threads(self):
        """``{VcpuRef: host thread id}`` of the vCPU threads found.

        The default (a host without threads of its own, the simulated
        one) knows none.
        """
        return {}

    def preview(self, decision):
        """What :meth:`apply` would change, one line each; writes nothing.

        For ``--dry-run``, which lists the changes it does not make. The
        default (a host that cannot say before it applies) lists none.
        """
        return ()

    def domain_names(self):
        """``{domain: name}`` the operator knows each domain by.

        For ``status`` and the log: nova's server name where the host
        knows it. The default knows none (the domain's id stands in).
        """
        return {}

    def mist_levers(self):
        """``{lever: one line}``: how MIST protects a VM on this host.

        For ``status``, beside MIST's verdicts, one line per lever the
        host may lack: ``CPU`` (real time with a budget of the VM's own,
        or the cpu shares fallback and why) and ``block I/O`` (the weight
        set, or why the host has none: an I/O scheduler without
        proportional weights); None where it is not known yet. The
        default (a host without MIST) has none.
        """
        return {}

    def vcpu_pins(self):
        """``{VcpuRef: frozenset of CPUs}`` as the host has them now.

        For ``status``: what is in force, not what was planned. The
        default (a host without pinning) knows none.
        """
        return {}

    def refusals(self):
        """``{mechanism: why}``: the guard's mechanisms the host refused.

        Keyed by the guard's names (``retention``, ``split``, ``weight``),
        each with the host's own reason (a read-only knob, a denied
        pinning). ``status``, the metrics and the panel show such a
        mechanism as refused and its value as not in force: the decision
        still carries the value the policy chose, which the host did not
        take. Asked every period, so it reads nothing from the host. The
        default (a host that takes every value, the simulated one)
        refused none.
        """
        return {}
