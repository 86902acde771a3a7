"""MIST's detection: which reserved VMs need protection now, and why.

MIST (Lee and Ra) protects VMs that reserved I/O from host-side
interference. Its performance monitor acts only when two things hold at
once (paper §IV): the VM gets *less I/O than it reserved*, and its vCPU
threads show *CPU interference*, measured by

    I_cpu = involuntary / voluntary context switches

over the VM's vCPU threads in one period, ignored when the VM switches so
little that the ratio is noise (nearly idle). The paper acts on
I_cpu > 0.05.

"Less than it reserved" assumes the VM asks for that much: the paper's
VMs always do. A reserved VM that only computes serves no I/O and would
count as short, and its computing vCPUs are preempted often enough to show
I_cpu: protecting it would run a CPU-bound VM at real-time priority on a
tenant's say-so. A VM that computes and keeps a trickle of I/O going (a
few requests a second, a flush now and then) is the same VM with an alibi.
So the shortfall must be one *its reservation explains*: on a reserved
dimension (IOPS, bytes per second) the VM was served at least
``min_demand_fraction`` of what it reserved, and less than all of it. The
paper's protected VM got 1,700 to 2,000 of its 3,000 reserved IOPS under
interference; a VM served a twentieth of its reservation is not being
denied its reservation, it is not using it. Besides, its requests were in
flight for at least ``min_queue_depth`` on average over the period
(Little's law: the requests' summed service time over the period's
length), the host's own evidence that it is waiting on I/O at all. Reads
and writes count, flushes do not (the host measures them so): a flush
moves no data the reservation promised, and is the cheapest way to look
busy. Where the host cannot measure either, there is no evidence and no
protection.

The price of the fraction: a VM interfered with so badly that it gets
less than ``min_demand_fraction`` of its reservation is not protected
either (it cannot be told from one that asks for that little); the
operator who would rather protect it lowers the fraction.

Interference is often transient (§IV), so the decision is debounced with
hysteresis: a VM is protected only after ``act_periods`` consecutive
periods in which both conditions held, and released only after
``clear_periods`` consecutive periods in which they did not. A protected
VM's own I_cpu falls once it runs at real-time priority, so a release
cannot tell whether the interferer has gone; if the VM needs protection
again soon after a release, the next release waits twice as long (up to
``max_clear_periods``), so a persistent interferer is not answered with a
protection that flaps.

Everything here is pure: snapshots and stats in, verdicts out. The host
driver applies the protection set (``vsmtio_agent.drivers.mist``).
"""

import dataclasses
import re
from typing import Optional

from vsmtio_agent import model
from vsmtio_agent.policy import monitor


@dataclasses.dataclass(frozen=True)
class Params:
    """The detector's settings (``[vsmtio_agent] mist_*`` options)."""

    threshold: float = 0.05
    act_periods: int = 3
    clear_periods: int = 10
    max_clear_periods: int = 80
    idle_switch_threshold: float = 10.0
    min_queue_depth: float = 0.05
    min_demand_fraction: float = 0.25

    def __post_init__(self):
        if self.threshold < 0:
            raise ValueError('the I_cpu threshold must not be negative')
        if not self.min_queue_depth > 0:
            raise ValueError('min_queue_depth must be positive')
        if not 0 < self.min_demand_fraction < 1:
            raise ValueError('min_demand_fraction must be above 0 and '
                             'below 1')
        if self.act_periods < 1 or self.clear_periods < 1:
            raise ValueError('act_periods and clear_periods must be >= 1')
        if self.max_clear_periods < self.clear_periods:
            raise ValueError('max_clear_periods must be >= clear_periods')

    @classmethod
    def from_conf(cls, conf):
        opts = conf.vsmtio_agent
        return cls(threshold=opts.mist_icpu_threshold,
                   act_periods=opts.mist_act_periods,
                   clear_periods=opts.mist_clear_periods,
                   max_clear_periods=max(opts.mist_clear_periods,
                                         opts.mist_max_clear_periods),
                   idle_switch_threshold=opts.idle_switch_threshold,
                   min_queue_depth=opts.mist_min_queue_depth,
                   min_demand_fraction=opts.mist_min_demand_fraction)


@dataclasses.dataclass(frozen=True)
class VmPeriod:
    """One VM over one period: its interference and I/O against reserved.

    ``iops``/``bytes_per_s`` are ``None`` where the host could not measure
    them (no block statistics): unmeasured, never zero. ``queue_depth`` is
    the mean number of its requests in flight over the period (the demand
    it shows), ``None`` where unmeasured.
    """

    i_cpu: Optional[float]
    iops: Optional[float]
    bytes_per_s: Optional[float]
    reservation: model.Reservation
    queue_depth: Optional[float] = None


@dataclasses.dataclass(frozen=True)
class VmState:
    """The detector's memory of one reserved VM between periods."""

    protected: bool = False
    streak: int = 0                 # consecutive periods against the state
    clear_after: int = 0            # periods of calm that release it
    since_release: Optional[int] = None


@dataclasses.dataclass(frozen=True)
class Verdict:
    """Whether a reserved VM is protected for the next period, and why."""

    protect: bool
    reason: str
    i_cpu: Optional[float] = None
    iops: Optional[float] = None
    bytes_per_s: Optional[float] = None
    queue_depth: Optional[float] = None


def vm_i_cpu(stats, idle_switch_threshold):
    """I_cpu of one VM from its vCPUs' :class:`VcpuStats` of one period.

    The switches of all its vCPU threads are summed (the paper counts the
    VM's); ``None`` when any count is missing or the VM is nearly idle.
    Counts taken over another window than the period (a host reading them
    on a slower cadence: ``switch_window_ns``) are summed as their rate
    over that window times the period, so that vCPUs read at different
    times weigh by their rates.
    """
    stats = list(stats)
    if not stats:
        return None
    vol = [s.voluntary_switches for s in stats]
    invol = [s.involuntary_switches for s in stats]
    if None in vol or None in invol:
        return None
    period_ns = stats[0].period_ns
    scale = [1 if s.switch_window_ns is None
             else period_ns / s.switch_window_ns for s in stats]
    if any(x != 1 for x in scale):
        vol = [v * x for v, x in zip(vol, scale)]
        invol = [v * x for v, x in zip(invol, scale)]
    return monitor.interference_ratio(sum(vol), sum(invol),
                                      period_ns / monitor.NS_PER_S,
                                      idle_switch_threshold)


def _rate(before, after, period_s):
    if before is None or after is None or after < before or period_s <= 0:
        return None
    return (after - before) / period_s


def observe(prev, cur, stats, idle_switch_threshold):
    """``{domain: VmPeriod}`` for the reserved domains in both snapshots.

    ``prev``/``cur`` are :class:`~vsmtio_agent.model.Snapshot` readings
    whose ``domains`` carry cumulative block I/O counters and the
    reservation; ``stats`` the period's per-vCPU rates.
    """
    period_s = (cur.time_ns - prev.time_ns) / monitor.NS_PER_S
    reserved = [(domain, now) for domain, now in cur.domains.items()
                if now.reservation.reserved]
    if not reserved:
        # Most periods of most hosts: no vCPU needs grouping (this runs
        # every period, and grouping is per vCPU).
        return {}
    by_domain = {}
    for ref, st in stats.items():
        by_domain.setdefault(ref.domain, []).append(st)
    out = {}
    for domain, now in reserved:
        before = prev.domains.get(domain)
        iops = bps = depth = None
        if before is not None:
            iops = _rate(before.io_requests, now.io_requests, period_s)
            bps = _rate(before.io_bytes, now.io_bytes, period_s)
            busy = _rate(before.io_busy_ns, now.io_busy_ns, period_s)
            depth = None if busy is None else busy / monitor.NS_PER_S
        out[domain] = VmPeriod(
            i_cpu=vm_i_cpu(by_domain.get(domain, ()), idle_switch_threshold),
            iops=iops, bytes_per_s=bps, reservation=now.reservation,
            queue_depth=depth)
    return out


def _dimensions(vm):
    """``(unit, served, reserved)`` of each dimension the VM reserved."""
    res = vm.reservation
    if res.iops:
        yield 'IOPS', vm.iops, res.iops
    if res.bytes_per_s:
        yield 'B/s', vm.bytes_per_s, res.bytes_per_s


def shortfall(vm, min_fraction=0.0):
    """What the VM gets below its reservation, as text; None if nothing.

    Only the dimensions served at least ``min_fraction`` of what was
    reserved count: below it, the VM is not short of its reservation, it
    is not using it. A reserved dimension that cannot be measured is not a
    shortfall: the detector acts on evidence only.
    """
    short = ['%.0f %s < %d reserved' % (got, unit, want)
             for unit, got, want in _dimensions(vm)
             if got is not None and min_fraction * want <= got < want]
    return ', '.join(short) or None


def _condition(params, vm):
    """(every condition holds, why) for one VM in one period."""
    if vm.queue_depth is None:
        return False, 'I/O demand not measured (no request times)'
    if vm.queue_depth < params.min_queue_depth:
        return False, ('no I/O demand (%.3f requests in flight < %.3f)'
                       % (vm.queue_depth, params.min_queue_depth))
    fraction = params.min_demand_fraction
    measured = [(unit, got, want) for unit, got, want in _dimensions(vm)
                if got is not None]
    if not measured:
        return False, 'I/O rate not measured'
    if all(got < fraction * want for _unit, got, want in measured):
        return False, ('too little I/O for its reservation to explain '
                       '(%s)' % ', '.join(
                           '%.0f %s < %.0f%% of %d reserved'
                           % (got, unit, 100 * fraction, want)
                           for unit, got, want in measured))
    if vm.i_cpu is None:
        return False, 'I_cpu not measured (VM nearly idle)'
    if vm.i_cpu <= params.threshold:
        return False, 'I_cpu %.3f <= %.3f' % (vm.i_cpu, params.threshold)
    short = shortfall(vm, fraction)
    if short is None:
        unmeasured = len(measured) < len(list(_dimensions(vm)))
        return False, ('I/O rate not measured' if unmeasured
                       else 'I/O meets its reservation')
    return True, 'I_cpu %.3f > %.3f and %s' % (vm.i_cpu, params.threshold,
                                               short)


def step_vm(params, state, vm):
    """The next :class:`VmState` and :class:`Verdict` of one VM."""
    state = state or VmState(clear_after=params.clear_periods)
    hold, why = _condition(params, vm)
    since = (None if state.since_release is None
             else state.since_release + 1)
    if not state.protected:
        streak = state.streak + 1 if hold else 0
        if streak < params.act_periods:
            new = dataclasses.replace(state, streak=streak,
                                      since_release=since)
            return new, _verdict(False, '%s (%d/%d periods)' % (
                why, streak, params.act_periods) if hold else why, vm)
        clear_after = params.clear_periods
        if since is not None and since <= state.clear_after:
            # needed again right after a release: hold longer next time
            clear_after = min(2 * state.clear_after,
                              params.max_clear_periods)
        new = VmState(protected=True, streak=0, clear_after=clear_after)
        return new, _verdict(True, '%s for %d periods' % (
            why, params.act_periods), vm)
    streak = 0 if hold else state.streak + 1
    if streak < state.clear_after:
        new = dataclasses.replace(state, streak=streak)
        return new, _verdict(True, 'protected; %s (%d/%d calm periods to '
                             'release)' % (why, streak, state.clear_after),
                             vm)
    new = VmState(protected=False, streak=0, clear_after=state.clear_after,
                  since_release=0)
    return new, _verdict(False, 'released after %d calm periods: %s'
                         % (state.clear_after, why), vm)


def _verdict(protect, reason, vm):
    return Verdict(protect=protect, reason=reason, i_cpu=vm.i_cpu,
                   iops=vm.iops, bytes_per_s=vm.bytes_per_s,
                   queue_depth=vm.queue_depth)


def step(params, states, vms):
    """Advance every reserved VM one period.

    ``states`` is the previous ``{domain: VmState}``; a domain missing from
    ``vms`` (gone, or no longer reserved) is forgotten. Returns the new
    states and ``{domain: Verdict}`` for every reserved VM.
    """
    new_states, verdicts = {}, {}
    for domain in sorted(vms):
        new_states[domain], verdicts[domain] = step_vm(
            params, states.get(domain), vms[domain])
    return new_states, verdicts


def protection_set(verdicts):
    """The domains to protect: ``{domain: Verdict}`` with protect set."""
    return {d: v for d, v in verdicts.items() if v.protect}


# -- interrupt separation (paper §IV, "competing interrupts") --------------

def irq_classes(irqs, block_pattern, net_pattern):
    """``(block, network)`` IRQ numbers by their action names.

    The configured set (``mist_irq_scope = pattern``): ``irqs`` maps an
    IRQ number to its action names (``/proc/interrupts``' last column); an
    IRQ is a block IRQ when a name matches ``block_pattern``, a network
    IRQ when one matches ``net_pattern``.
    """
    block_re, net_re = re.compile(block_pattern), re.compile(net_pattern)
    block, net = set(), set()
    for irq, names in irqs.items():
        names = [n.strip() for n in names.split(',') if n.strip()]
        if any(block_re.search(n) for n in names):
            block.add(irq)
        if any(net_re.search(n) for n in names):
            net.add(irq)
    return frozenset(block), frozenset(net)


def irq_plan(block_irqs, net_irqs, cpus, block_cpus=None, banned=()):
    """Disjoint host CPUs for block and network interrupts.

    Block IRQs go to ``block_cpus`` (default: the lowest of ``cpus``),
    network IRQs to the rest, as MIST's evaluation put block I/O on CPU 0
    and the network on CPUs 1-7. An IRQ in both sets (a device that is
    both, or whose role cannot be told) is left alone, and so is every
    IRQ in ``banned``. Returns ``{irq: frozenset of CPUs}``; empty when
    ``cpus`` cannot be split (one CPU).
    """
    cpus = frozenset(cpus)
    block_cpus = (frozenset(block_cpus) & cpus if block_cpus
                  else frozenset([min(cpus)]) if cpus else frozenset())
    net_cpus = cpus - block_cpus
    if not block_cpus or not net_cpus:
        return {}
    block, net, banned = set(block_irqs), set(net_irqs), set(banned)
    plan = {irq: block_cpus for irq in block - net - banned}
    plan.update({irq: net_cpus for irq in net - block - banned})
    return plan


def summary(verdicts):
    """One line per reserved VM, for logs and ``status``."""
    return {d: ('protect: ' if v.protect else 'hold off: ') + v.reason
            for d, v in sorted(verdicts.items())}
