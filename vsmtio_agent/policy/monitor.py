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

import dataclasses

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


# The layout derive() unpacks: weight, cpu, the cumulative counters, and
# when the switch counts were read.
assert model.VcpuCounters._fields == (
    'weight', 'cpu', 'run_ns', 'retention_ns', 'retentions',
    'retention_timeouts', 'instructions', 'cycles', 'base_cycles',
    'miss_cycles', 'voluntary_switches', 'involuntary_switches',
    'runqueue_delay_ns', 'halts', 'switches_ns')


_new = object.__new__
# derive builds VcpuStats (and the C loop CpiStack) without their dataclass
# __init__, which is only right while construction does nothing but set
# the fields, in this order.
assert not hasattr(model.VcpuStats, '__post_init__')
assert not hasattr(model.CpiStack, '__post_init__')
assert tuple(f.name for f in dataclasses.fields(model.VcpuStats)) == (
    'period_ns', 'weight', 'core_id', 'utilisation', 'retention_rate',
    'retention_frequency', 'retention_timeouts', 'ipc', 'cpi_stack',
    'voluntary_switches', 'involuntary_switches', 'i_cpu',
    'runqueue_delay_ratio', 'instruction_rate', 'halt_rate',
    'switch_window_ns')
assert tuple(f.name for f in dataclasses.fields(model.CpiStack)) == (
    'base', 'miss', 'waiting')

try:
    from vsmtio_agent.policy import _monitor
except ImportError:     # not built: the Python loop gives the same stats
    _monitor = None

#: Whether :func:`derive` runs its per-vCPU loop in C (``_monitor``). True
#: where the extension was built; the tests set it False to run the Python
#: loop, which is the reference.
native = _monitor is not None


def derive(prev, cur, idle_switch_threshold, topology=None, last=None):
    """Per-vCPU :class:`VcpuStats` between two snapshots.

    Only vCPUs present in both snapshots have stats: a vCPU seen once has
    no period yet. ``topology``, when given, maps each vCPU's last CPU to
    its core.

    A counter's delta is None where either reading lacks it or it went
    backwards, and so is every rate built on it.

    Switch counts a host read on a slower cadence than the period (their
    :class:`VcpuCounters` say when, ``switches_ns``) are counted over the
    time between their two readings, which the stats give as
    ``switch_window_ns``, and I_cpu's idle threshold is a rate over that
    window. Where no new reading came in this period, the vCPU's stats in
    ``last`` (the previous period's) give the last window's counts and
    I_cpu; without them, they are None.

    This runs for every vCPU every period, so it is written for speed
    (``doc/benchmarks/agent_tick.rst`` has the profile): the two
    :class:`VcpuCounters` tuples are unpacked and their deltas taken
    inline rather than field by field (``getattr``) or in a comprehension
    (twice the cost), and each
    :class:`VcpuStats` is built by storing its fields in its ``__dict__``
    in their order rather than through the frozen dataclass's
    ``__init__`` (which sets each of its 16 fields through
    ``object.__setattr__``): the same object (fields, equality, repr,
    ``dataclasses.replace``) at a quarter of the cost. (One store per
    field keeps the dict sharing its keys with the class's other
    instances; a ``dict.update`` with keywords builds a dict first and
    costs a third more.) The rates are :func:`_ratio`'s,
    :func:`cpi_stack`'s and :func:`interference_ratio`'s.

    That Python still cost 2 to 5 us a vCPU (0.55 to 1 ms of the period
    for 200 vCPUs), so where the ``_monitor`` extension was built
    (``vsmtio_agent/policy/_monitor.c``, optional like the C procfs
    reader) the loop runs in C, at 0.3 to 0.45 of the cost
    (``tools/bench_derive.py``): the same rules, the same float
    operations in the same order (the same bits), each
    :class:`VcpuStats` built the same way. :func:`_derive` below is the
    reference and the fallback: it runs where the extension is missing or
    :data:`native` is False, for the whole call where C cannot take its
    arguments (snapshots whose vCPUs are not in a dict, a time that is
    not an int), and for each vCPU whose counters C cannot compute
    exactly (not ints of 64 bits, a delta over 2**53, not a 15-field
    tuple). Should the C loop raise, the call is done again in Python,
    whose answer (or error) is the reference's.
    """
    period_ns = cur.time_ns - prev.time_ns
    if period_ns <= 0:
        raise ValueError('snapshots are not in time order (%d -> %d)'
                         % (prev.time_ns, cur.time_ns))
    if native:
        try:
            done = _monitor.derive(
                prev.vcpus, cur.vcpus, prev.time_ns, cur.time_ns,
                period_ns, period_ns / NS_PER_S, idle_switch_threshold,
                None if topology is None else topology.core_ids,
                last if last else None, model.VcpuStats, model.CpiStack)
        except Exception:
            done = NotImplemented
        if done is not NotImplemented:
            stats, todo = done
            if todo:    # in their places (C left None there)
                vcpus = cur.vcpus
                _derive(prev, cur, idle_switch_threshold, topology, last,
                        [(ref, vcpus[ref]) for ref in todo], stats)
            return stats
    return _derive(prev, cur, idle_switch_threshold, topology, last,
                   cur.vcpus.items(), {})


def _derive(prev, cur, idle_switch_threshold, topology, last, vcpus, stats):
    """:func:`derive`'s loop in Python over ``vcpus``' (ref, counters).

    The reference the C loop (``_monitor.derive``) is held to; it adds
    each vCPU's stats to ``stats`` and returns it.
    """
    period_ns = cur.time_ns - prev.time_ns
    period_s = period_ns / NS_PER_S
    prev_ns, cur_ns = prev.time_ns, cur.time_ns
    last_of = last.get if last else {}.get
    before_of = prev.vcpus.get
    # core_of(cpu).core_id, None where the CPU is unknown (or None)
    core_id_of = topology.core_ids.get if topology is not None else None
    vcpu_stats = model.VcpuStats
    for ref, now in vcpus:
        before = before_of(ref)
        if before is None:
            continue
        # Unpacked and subtracted inline: the same deltas as a
        # comprehension over the two tuples' counters, at half the cost.
        (_w, _c, run0, ret0, rets0, to0, ins0, cyc0, base0, miss0, vol0,
         invol0, delay0, halts0, t0) = before
        (weight, cpu, run, ret_ns, rets, timeouts, ins, cycles, base, miss,
         vol, invol, delay, halts, t1) = now
        run = (None if run0 is None or run is None or run < run0
               else run - run0)
        ret_ns = (None if ret0 is None or ret_ns is None or ret_ns < ret0
                  else ret_ns - ret0)
        rets = (None if rets0 is None or rets is None or rets < rets0
                else rets - rets0)
        timeouts = (None if to0 is None or timeouts is None
                    or timeouts < to0 else timeouts - to0)
        ins = (None if ins0 is None or ins is None or ins < ins0
               else ins - ins0)
        cycles = (None if cyc0 is None or cycles is None or cycles < cyc0
                  else cycles - cyc0)
        base = (None if base0 is None or base is None or base < base0
                else base - base0)
        miss = (None if miss0 is None or miss is None or miss < miss0
                else miss - miss0)
        vol = (None if vol0 is None or vol is None or vol < vol0
               else vol - vol0)
        invol = (None if invol0 is None or invol is None or invol < invol0
                 else invol - invol0)
        delay = (None if delay0 is None or delay is None or delay < delay0
                 else delay - delay0)
        halts = (None if halts0 is None or halts is None or halts < halts0
                 else halts - halts0)
        core = (None if core_id_of is None or cpu is None
                else core_id_of(cpu))
        if t0 is None and t1 is None:   # both read at their snapshot
            window = None
            # interference_ratio(vol, invol, period_s, ...), inline
            i_cpu = (None if vol is None or invol is None
                     or (vol + invol) / period_s < idle_switch_threshold
                     else invol / max(vol, 1))
        else:
            window = ((cur_ns if t1 is None else t1)
                      - (prev_ns if t0 is None else t0))
            if window > 0:
                i_cpu = (None if vol is None or invol is None else
                         interference_ratio(vol, invol, window / NS_PER_S,
                                            idle_switch_threshold))
                if window == period_ns:
                    window = None
            else:       # no new reading: the last window's, if any
                held = last_of(ref)
                if held is None:
                    vol = invol = i_cpu = window = None
                else:
                    vol = held.voluntary_switches
                    invol = held.involuntary_switches
                    i_cpu = held.i_cpu
                    window = held.switch_window_ns or held.period_ns
                    if window == period_ns:
                        window = None
        st = stats[ref] = _new(vcpu_stats)
        fields = st.__dict__    # filled in the order of the fields
        fields['period_ns'] = period_ns
        fields['weight'] = weight
        fields['core_id'] = core
        fields['utilisation'] = None if run is None else run / period_ns
        fields['retention_rate'] = (None if ret_ns is None
                                    else ret_ns / period_ns)
        fields['retention_frequency'] = (None if rets is None
                                         else rets / period_s)
        fields['retention_timeouts'] = timeouts
        fields['ipc'] = (None if ins is None or cycles is None
                         or cycles <= 0 else ins / cycles)  # _ratio
        fields['cpi_stack'] = (None if ins is None else
                               cpi_stack(ins, cycles, base, miss))
        fields['voluntary_switches'] = vol
        fields['involuntary_switches'] = invol
        fields['i_cpu'] = i_cpu
        fields['runqueue_delay_ratio'] = (None if delay is None
                                          else delay / period_ns)
        fields['instruction_rate'] = None if ins is None else ins / period_s
        fields['halt_rate'] = None if halts is None else halts / period_s
        fields['switch_window_ns'] = window
    return stats
