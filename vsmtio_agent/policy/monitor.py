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


def _delta(prev, cur, field):
    before = getattr(prev, field)
    after = getattr(cur, field)
    if before is None or after is None or after < before:
        return None
    return after - before


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


def derive(prev, cur, idle_switch_threshold, topology=None):
    """Per-vCPU :class:`VcpuStats` between two snapshots.

    Only vCPUs present in both snapshots have stats: a vCPU seen once has
    no period yet. ``topology``, when given, maps each vCPU's last CPU to
    its core.
    """
    period_ns = cur.time_ns - prev.time_ns
    if period_ns <= 0:
        raise ValueError('snapshots are not in time order (%d -> %d)'
                         % (prev.time_ns, cur.time_ns))
    period_s = period_ns / NS_PER_S
    stats = {}
    for ref, now in cur.vcpus.items():
        before = prev.vcpus.get(ref)
        if before is None:
            continue
        d = {f: _delta(before, now, f) for f in (
            'run_ns', 'retention_ns', 'retentions', 'retention_timeouts',
            'instructions', 'cycles', 'base_cycles', 'miss_cycles',
            'voluntary_switches', 'involuntary_switches',
            'runqueue_delay_ns', 'halts')}
        core = None
        if topology is not None and now.cpu is not None:
            found = topology.core_of(now.cpu)
            core = found.core_id if found is not None else None
        stats[ref] = model.VcpuStats(
            period_ns=period_ns,
            weight=now.weight,
            core_id=core,
            utilisation=_ratio(d['run_ns'], period_ns),
            retention_rate=_ratio(d['retention_ns'], period_ns),
            retention_frequency=_ratio(d['retentions'], period_s),
            retention_timeouts=d['retention_timeouts'],
            ipc=_ratio(d['instructions'], d['cycles']),
            cpi_stack=cpi_stack(d['instructions'], d['cycles'],
                                d['base_cycles'], d['miss_cycles']),
            voluntary_switches=d['voluntary_switches'],
            involuntary_switches=d['involuntary_switches'],
            i_cpu=interference_ratio(d['voluntary_switches'],
                                     d['involuntary_switches'], period_s,
                                     idle_switch_threshold),
            runqueue_delay_ratio=_ratio(d['runqueue_delay_ns'], period_ns),
            instruction_rate=_ratio(d['instructions'], period_s),
            halt_rate=_ratio(d['halts'], period_s),
        )
    return stats
