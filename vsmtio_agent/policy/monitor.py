"""The Workload Monitor (paper §4.1): per-vCPU rates over one period.

The monitor turns two cumulative :class:`~vsmtio_agent.model.Snapshot`
readings into :class:`~vsmtio_agent.model.VcpuStats`: the context retention
rate and frequency RASS ranks by (§4.3.1) and LTCR measures I/O-bound
vCPUs with (§4.2), IPC for CPU-bound vCPUs (§4.2), the cycle-accounting CPI
stack (§4.3.2), and MIST's interference indicator
I_cpu = involuntary / voluntary context switches.

A counter missing from either reading, or one that went backwards (the
domain restarted), yields ``None`` for every rate built on it: a host
without a PMU has no IPC, not an IPC of zero.
"""

from vsmtio_agent import model

NS_PER_S = 1e9


def _ratio(num, den):
    if num is None or den is None or den <= 0:
        return None
    return num / den


def cpi_stack(instructions, cycles, base_cycles, miss_cycles):
    """The base, miss and waiting components of CPI (§4.3.2).

    Base and miss cycles and the CPI come from counters; waiting is what
    is left of the CPI once they are taken out (never negative).
    """
    if not instructions or cycles is None:
        return None
    if base_cycles is None or miss_cycles is None:
        return None
    base = base_cycles / instructions
    miss = miss_cycles / instructions
    waiting = max(0.0, cycles / instructions - base - miss)
    return model.CpiStack(base=base, miss=miss, waiting=waiting)


def interference_ratio(voluntary, involuntary, period_s,
                       idle_switch_threshold):
    """MIST's I_cpu: involuntary over voluntary switches, or None.

    A vCPU that switches fewer than ``idle_switch_threshold`` times a
    second is nearly idle and its ratio is noise, so it has none. A vCPU
    that never blocks voluntarily divides by one, not by zero.
    """
    if voluntary is None or involuntary is None or period_s <= 0:
        return None
    if (voluntary + involuntary) / period_s < idle_switch_threshold:
        return None
    return involuntary / max(voluntary, 1)


def _delta(before, now):
    """``now - before`` of a cumulative counter; None if it cannot be had.

    None where either reading lacks the counter or it went backwards (the
    domain restarted): a missing figure, never a zero.
    """
    if before is None or now is None or now < before:
        return None
    return now - before


def _switches(before, now, prev_ns, cur_ns, idle_switch_threshold, held):
    """``(voluntary, involuntary, i_cpu, window_ns)`` of one vCPU.

    A host may read switch counts on a slower cadence than the period
    (``switches_ns`` says when, None: at the snapshot's time); the counts
    are then over the time between their two readings, the window, whose
    length is given where it is not the period. Where no new reading came
    in (an empty window), the last period's stats ``held`` give the last
    window's counts and I_cpu, if there are any.
    """
    window = ((cur_ns if now.switches_ns is None else now.switches_ns)
              - (prev_ns if before.switches_ns is None
                 else before.switches_ns))
    if window > 0:
        vol = _delta(before.voluntary_switches, now.voluntary_switches)
        invol = _delta(before.involuntary_switches,
                       now.involuntary_switches)
        i_cpu = interference_ratio(vol, invol, window / NS_PER_S,
                                   idle_switch_threshold)
    elif held is None:
        return None, None, None, None
    else:
        vol, invol = held.voluntary_switches, held.involuntary_switches
        i_cpu = held.i_cpu
        window = held.switch_window_ns or held.period_ns
    return vol, invol, i_cpu, None if window == cur_ns - prev_ns else window


def _per(count, divisor):
    return None if count is None else count / divisor


def derive(prev, cur, idle_switch_threshold, topology=None, last=None):
    """Per-vCPU :class:`VcpuStats` between two snapshots.

    Only vCPUs present in both snapshots have stats: a vCPU seen once has
    no period yet. ``topology``, when given, maps each vCPU's last CPU to
    its core.

    A counter's delta is None where either reading lacks it or it went
    backwards, and so is every rate built on it. Switch counts read on a
    slower cadence than the period are counted over their own window
    (:func:`_switches`), and I_cpu's idle threshold is a rate over it;
    ``last`` (the previous period's stats) fills in a vCPU with no new
    reading.
    """
    period_ns = cur.time_ns - prev.time_ns
    if period_ns <= 0:
        raise ValueError('snapshots are not in time order (%d -> %d)'
                         % (prev.time_ns, cur.time_ns))
    period_s = period_ns / NS_PER_S
    core_ids = topology.core_ids if topology is not None else {}
    held = last or {}
    stats = {}
    for ref, now in cur.vcpus.items():
        before = prev.vcpus.get(ref)
        if before is None:
            continue
        (run, retention_ns, retentions, timeouts, instructions, cycles,
         base, miss, _vol, _invol, delay, halts) = map(
            _delta, before[2:14], now[2:14])
        vol, invol, i_cpu, window = _switches(
            before, now, prev.time_ns, cur.time_ns, idle_switch_threshold,
            held.get(ref))
        stats[ref] = model.VcpuStats(
            period_ns=period_ns,
            weight=now.weight,
            core_id=None if now.cpu is None else core_ids.get(now.cpu),
            utilisation=_per(run, period_ns),
            retention_rate=_per(retention_ns, period_ns),
            retention_frequency=_per(retentions, period_s),
            retention_timeouts=timeouts,
            ipc=None if instructions is None else _ratio(instructions,
                                                         cycles),
            cpi_stack=None if instructions is None else cpi_stack(
                instructions, cycles, base, miss),
            voluntary_switches=vol,
            involuntary_switches=invol,
            i_cpu=i_cpu,
            runqueue_delay_ratio=_per(delay, period_ns),
            instruction_rate=_per(instructions, period_s),
            halt_rate=_per(halts, period_s),
            switch_window_ns=window)
    return stats


def served_rates(prev, cur):
    """``{domain: requests and packets served per second}``.

    Between two snapshots' :attr:`~vsmtio_agent.model.DomainCounters.
    served`; None for a domain the host counts nothing for, one not in
    both, or one whose count went backwards (it restarted).
    """
    period_s = (cur.time_ns - prev.time_ns) / NS_PER_S
    out = {}
    for domain, now in cur.domains.items():
        before = prev.domains.get(domain)
        a = None if before is None else before.served
        b = now.served
        out[domain] = (None if a is None or b is None or b < a
                       or period_s <= 0 else (b - a) / period_s)
    return out
