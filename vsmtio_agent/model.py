"""Value types shared by the policy engine and every host driver.

The policy engine is pure (paper §4: samples in, decisions out), so these
types are the whole contract between it and the hosts it drives: a driver
reads a :class:`Topology` and cumulative :class:`VcpuCounters` into a
:class:`Snapshot`, and applies a :class:`Decision`.

Counters a host cannot measure (no PMU, no patched kernel) are ``None``:
missing, never zero.
"""

import dataclasses
import enum
import functools
from typing import Mapping, NamedTuple, Optional


class Role(str, enum.Enum):
    """A vCPU's class in retention-aware symbiotic scheduling (§4.3.1)."""

    IO = 'io'
    CPU = 'cpu'


class VcpuRef(NamedTuple):
    """Names one vCPU: its domain (instance UUID or name) and index.

    A named tuple rather than a frozen, ordered dataclass: every period
    hashes, compares and sorts one per vCPU many times over (dictionary
    keys in the monitor, the engine and RASS), which a tuple does in C.
    The hash, equality among refs and order are those the dataclass had
    (both are those of the ``(domain, index)`` tuple);
    ``doc/source/benchmarks/agent_tick.rst`` has the profile.
    """

    domain: str
    index: int

    def __str__(self):
        return '%s/%d' % (self.domain, self.index)


@dataclasses.dataclass(frozen=True)
class Core:
    """A physical core and its hyperthreads (logical CPU ids)."""

    core_id: int
    threads: tuple

    @property
    def io_thread(self):
        """The sibling RASS reserves for I/O-bound vCPUs (§4.3.1)."""
        return self.threads[-1]

    @property
    def cpu_thread(self):
        """The sibling RASS reserves for CPU-bound vCPUs (§4.3.1)."""
        return self.threads[0]


@dataclasses.dataclass(frozen=True)
class Topology:
    """The cores the agent may use, in a stable order."""

    cores: tuple

    def __post_init__(self):
        seen = set()
        for core in self.cores:
            if not core.threads:
                raise ValueError('core %d has no threads' % core.core_id)
            dup = seen.intersection(core.threads)
            if dup:
                raise ValueError('cpu %s is in two cores' % sorted(dup))
            seen.update(core.threads)

    @property
    def smt(self):
        return all(len(c.threads) >= 2 for c in self.cores)

    # The two look-ups run per vCPU per period: indexes built once per
    # topology (a frozen dataclass keeps them in its __dict__, outside its
    # fields, so equality and repr are unchanged).

    @functools.cached_property
    def _by_cpu(self):
        return {cpu: core for core in reversed(self.cores)
                for cpu in core.threads}

    @functools.cached_property
    def _by_id(self):
        return {core.core_id: core for core in reversed(self.cores)}

    @functools.cached_property
    def core_ids(self):
        """``{cpu: core id}``: :meth:`core_of`'s id, for a per-vCPU loop."""
        return {cpu: core.core_id for cpu, core in self._by_cpu.items()}

    def core_of(self, cpu):
        """The core of logical CPU ``cpu``; None if not in the topology."""
        return self._by_cpu.get(cpu)

    def core(self, core_id):
        """The first core numbered ``core_id``; KeyError if none."""
        return self._by_id[core_id]

    @classmethod
    def uniform(cls, n_cores, threads_per_core=2):
        """Cores numbered like Linux on Intel: siblings are N apart."""
        return cls(tuple(
            Core(c, tuple(c + t * n_cores for t in range(threads_per_core)))
            for c in range(n_cores)))


class VcpuCounters(NamedTuple):
    """Cumulative counters of one vCPU at one instant.

    Times are nanoseconds. ``run_ns`` is time on a hyperthread, including
    context retention (the guest is charged for it, §3). ``cpu`` is the
    hyperthread the vCPU last ran on and ``core_id`` the core the agent or
    the host has it on. ``base_cycles``/``miss_cycles`` are the cycle
    accounting components of §4.3.2, measured while the sibling retained.
    ``halts`` counts the times the vCPU went idle (HLT, or MWAIT where the
    guest retains): one per request a request loop serves, which is what a
    host can see of I/O throughput without looking inside the guest.

    A named tuple (immutable, as the dataclass it was): a driver builds one
    per vCPU per period, and the monitor reads every field of two of them,
    which costs a named tuple a fraction of what it costs a frozen
    dataclass (``doc/source/benchmarks/agent_tick.rst``).
    """

    weight: int = 1024
    cpu: Optional[int] = None
    run_ns: Optional[int] = None
    retention_ns: Optional[int] = None
    retentions: Optional[int] = None
    retention_timeouts: Optional[int] = None
    instructions: Optional[int] = None
    cycles: Optional[int] = None
    base_cycles: Optional[int] = None
    miss_cycles: Optional[int] = None
    voluntary_switches: Optional[int] = None
    involuntary_switches: Optional[int] = None
    runqueue_delay_ns: Optional[int] = None
    halts: Optional[int] = None
    # When the switch counts and ``cpu`` were read, where that was before
    # the snapshot (a host reading them on a slower cadence); None: at
    # the snapshot's time. Not a counter: derive times its deltas by it.
    switches_ns: Optional[int] = None


@dataclasses.dataclass(frozen=True)
class Reservation:
    """The I/O a VM reserved (MIST): IOPS and/or bytes per second.

    Set from the flavor (``vsmtio:io_reservation_iops``,
    ``vsmtio:io_reservation_bytes_per_s``); ``None`` is no reservation.
    """

    iops: Optional[int] = None
    bytes_per_s: Optional[int] = None

    @property
    def reserved(self):
        return bool(self.iops or self.bytes_per_s)


@dataclasses.dataclass(frozen=True)
class DomainCounters:
    """One domain's cumulative I/O counters and its reservation (MIST).

    ``io_requests`` (reads plus writes) and ``io_bytes`` are summed over
    its disks; ``io_busy_ns`` is the summed time its reads and writes
    spent in flight (flushes do not count), from which the demand it shows
    follows; ``net_packets`` (received plus sent) is summed over its
    interfaces; each ``None`` where the host has no such statistics.
    What a domain serves is what these count, on any host: the guard
    judges a serving VM by them, never by its vCPUs' idle exits (which
    context retention removes while the requests go on).
    """

    io_requests: Optional[int] = None
    io_bytes: Optional[int] = None
    reservation: Reservation = Reservation()
    io_busy_ns: Optional[int] = None
    net_packets: Optional[int] = None

    @property
    def served(self):
        """Requests and packets served so far; None if neither is counted."""
        if self.io_requests is None and self.net_packets is None:
            return None
        return (self.io_requests or 0) + (self.net_packets or 0)


@dataclasses.dataclass(frozen=True)
class Tenancy:
    """Whose a domain is, for trust domains on SMT siblings.

    ``project`` is the owner nova wrote in the domain's metadata (None:
    not known, so the domain trusts no other). ``cookies`` maps a vCPU
    index to its thread's core-scheduling cookie where the kernel could
    be asked (0: no cookie); a vCPU absent from it has none known.
    """

    project: Optional[str] = None
    cookies: Mapping = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Snapshot:
    """Every vCPU's cumulative counters at host time ``time_ns``.

    ``domains`` maps a domain to its :class:`DomainCounters`, for hosts
    that measure block I/O (empty elsewhere). ``tenancy`` maps a domain to
    its :class:`Tenancy` where the host knows it; ``core_scheduling`` says
    whether the host gives each VM its own core-scheduling cookie (True),
    does not (False), or cannot tell (None).
    """

    time_ns: int
    vcpus: Mapping
    domains: Mapping = dataclasses.field(default_factory=dict)
    tenancy: Mapping = dataclasses.field(default_factory=dict)
    core_scheduling: Optional[bool] = None


@dataclasses.dataclass(frozen=True)
class CpiStack:
    """Cycles per instruction split into base, miss and waiting (§4.3.2)."""

    base: float
    miss: float
    waiting: float

    @property
    def cpi(self):
        return self.base + self.miss + self.waiting


@dataclasses.dataclass(frozen=True)
class VcpuStats:
    """Per-period rates the Workload Monitor derives for one vCPU (§4.1).

    Rates whose counters are missing are ``None``. ``i_cpu`` is MIST's
    involuntary / voluntary switch ratio, ``None`` when the vCPU is nearly
    idle (too few switches for the ratio to mean anything).
    ``instruction_rate`` (retired per second) and ``halt_rate`` (idle
    entries per second) are the throughputs LTCR and the guard judge by.
    ``voluntary_switches`` and ``involuntary_switches`` are counted over
    ``switch_window_ns`` where the host reads them on a slower cadence
    than the period (None: over the period), and ``i_cpu`` is theirs.
    """

    period_ns: int
    weight: int
    core_id: Optional[int]
    utilisation: Optional[float]
    retention_rate: Optional[float]
    retention_frequency: Optional[float]
    retention_timeouts: Optional[int]
    ipc: Optional[float]
    cpi_stack: Optional[CpiStack]
    voluntary_switches: Optional[int]
    involuntary_switches: Optional[int]
    i_cpu: Optional[float]
    runqueue_delay_ratio: Optional[float]
    instruction_rate: Optional[float] = None
    halt_rate: Optional[float] = None
    switch_window_ns: Optional[int] = None

    @property
    def compute_share(self):
        """Share of the period spent running guest work (not retaining)."""
        if self.utilisation is None:
            return None
        return max(0.0, self.utilisation - (self.retention_rate or 0.0))


@dataclasses.dataclass(frozen=True)
class Placement:
    """Where RASS wants one vCPU: its core, role and home hyperthread.

    ``threads`` are the hyperthreads it may run on: an I/O-bound vCPU only
    on its core's I/O sibling; a CPU-bound vCPU on its home thread and, at
    lower priority than I/O-bound vCPUs, on the I/O sibling when that has
    nothing to run (§4.3.1).
    """

    core_id: int
    role: Role
    home: int
    threads: tuple


@dataclasses.dataclass(frozen=True)
class Swap:
    """A Workload Adjuster exchange of two vCPUs between cores (§4.4)."""

    a: VcpuRef
    core_a: int
    b: VcpuRef
    core_b: int


@dataclasses.dataclass(frozen=True)
class Decision:
    """What the policy engine asks of the host for the next period.

    ``placements`` is RASS's plan (each vCPU's class and hyperthreads);
    ``split`` says whether to apply it, and ``split_cores`` on which cores
    (None: all of them); every other vCPU stays where the host's own
    scheduler put it. ``retention`` says whether idle vCPUs may
    retain their context at all (else they halt and block, as on a host
    without vSMT-IO); ``borrow`` whether CPU-bound vCPUs may run on an idle
    I/O sibling. ``protect`` maps each reserved domain MIST protects in
    the next period to its :class:`~vsmtio_agent.policy.mist.Verdict`
    (empty: protect none).

    ``timeouts`` is per-VM retention: None retains every VM's idle vCPUs
    at ``timeout_ns`` (the paper's host-wide knob); a mapping
    ``{domain: ns}`` lets only those domains retain, each at its own
    timeout, and the others halt as on a stock host. ``weights`` maps a
    domain to a factor on its cgroup's CPU weight (absent: unchanged),
    a stock host's lever the guard may test like a mechanism.

    ``trial`` says the period is an arm of the guard's probe: what it
    changes the next period may undo, so a driver logs those changes
    quietly (the guard's verdict is what the log keeps).
    """

    timeout_ns: int
    placements: Mapping
    swaps: tuple = ()
    retention: bool = True
    split: bool = True
    borrow: bool = True
    split_cores: Optional[frozenset] = None
    protect: Mapping = dataclasses.field(default_factory=dict)
    timeouts: Optional[Mapping] = None
    weights: Mapping = dataclasses.field(default_factory=dict)
    trial: bool = False

    def retains(self, domain):
        """The timeout ``domain``'s idle vCPUs retain for, 0 for none."""
        if not self.retention:
            return 0
        if self.timeouts is None:
            return self.timeout_ns
        return self.timeouts.get(domain, 0)

    def applies(self, placement):
        """Whether the split puts ``placement`` in force (its core is split).

        ``split_cores`` None is the paper's split: every core.
        """
        return self.split and (self.split_cores is None
                               or placement.core_id in self.split_cores)
