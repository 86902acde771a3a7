"""The running kernel's own tables of its host, read, not measured.

What the calibration (:mod:`vsmtio_bench.calibrate`) takes from the
kernel rather than from a clock: the cpuidle driver, governor and idle
states (``/sys/devices/system/cpu/cpuidle`` and each CPU's ``cpuidle``
directory: name, exit latency and target residency in microseconds, as
the driver declares them), which CPUs are SMT siblings
(``topology/thread_siblings_list``, ``smt/active``), and the fair
scheduler's tunables where debugfs shows them (``/sys/kernel/debug/sched``,
root and a mounted debugfs). Every reader takes the tree's root, so the
unit tests read a fake one; a file that is absent reads as None, never
as an error: what a host does not show is said, not guessed.
"""

import os
import pathlib
import re

CPU_ROOT = '/sys/devices/system/cpu'
DEBUG_SCHED = '/sys/kernel/debug/sched'

#: The drivers' polling state (``state0`` of ``intel_idle`` and
#: ``acpi_idle``): a CPU spinning, which the model's ``polling`` state
#: and ``idle=poll`` are, not a C-state a woken thread leaves.
POLL = 'POLL'

#: The scheduler tunables debugfs shows (ns), the ones the model reads.
TUNABLES = ('base_slice_ns', 'latency_ns', 'min_granularity_ns',
            'wakeup_granularity_ns')


def read(path):
    """The stripped text of ``path``, or None where it cannot be read."""
    try:
        return pathlib.Path(path).read_text().strip()
    except OSError:
        return None


def _int(text):
    try:
        return int(text)
    except (TypeError, ValueError):
        return None


def cpu_list(text):
    """The CPUs of a kernel CPU list (``0-3,8``), as a sorted list."""
    out = set()
    for part in (text or '').split(','):
        part = part.strip()
        if not part:
            continue
        lo, _, hi = part.partition('-')
        if not lo.isdigit() or (hi and not hi.isdigit()):
            return []
        out.update(range(int(lo), int(hi or lo) + 1))
    return sorted(out)


def cpuidle(root=CPU_ROOT, cpu=0):
    """The cpuidle tables: driver, governor and the states of ``cpu``.

    ``driver`` is None where the kernel has no cpuidle at all, ``none``
    where it has no driver for this CPU (a guest without ``haltpoll``, a
    host booted with ``cpuidle.off``): the CPU then idles by its
    architecture's default, HLT on x86. Each state: its directory, name,
    description, exit latency and target residency (us) and whether it
    is disabled.
    """
    base = os.path.join(root, 'cpuidle')
    table = {
        'driver': read(os.path.join(base, 'current_driver')),
        # _ro where the governor is fixed at boot (cpuidle.governor=)
        'governor': (read(os.path.join(base, 'current_governor_ro'))
                     or read(os.path.join(base, 'current_governor'))),
        'source': base, 'cpu': cpu, 'states': [],
    }
    sdir = os.path.join(root, 'cpu%d' % cpu, 'cpuidle')
    try:
        names = os.listdir(sdir)
    except OSError:
        names = []
    for name in sorted((n for n in names if re.match(r'state\d+\Z', n)),
                       key=lambda n: int(n[5:])):
        d = os.path.join(sdir, name)
        table['states'].append({
            'state': name, 'name': read(os.path.join(d, 'name')),
            'desc': read(os.path.join(d, 'desc')),
            'exit_latency_us': _int(read(os.path.join(d, 'latency'))),
            'target_residency_us': _int(read(os.path.join(d, 'residency'))),
            'disabled': read(os.path.join(d, 'disable')) == '1'})
    return table


def usable_states(table):
    """The states a woken thread may have to leave, shallowest first.

    Not the polling state, not a disabled one, not one without its two
    figures.
    """
    return [s for s in table['states']
            if s['name'] != POLL and not s['disabled']
            and s['exit_latency_us'] is not None
            and s['target_residency_us'] is not None]


def smt(root=CPU_ROOT):
    """SMT as the kernel reports it: active, its control, sibling pairs.

    ``pairs`` are the sibling groups of more than one CPU, each once,
    from every online CPU's ``topology/thread_siblings_list``.
    """
    active = read(os.path.join(root, 'smt', 'active'))
    groups = set()
    try:
        names = os.listdir(root)
    except OSError:
        names = []
    for name in names:
        if not re.match(r'cpu\d+\Z', name):
            continue
        sib = cpu_list(read(os.path.join(root, name, 'topology',
                                         'thread_siblings_list')))
        if len(sib) > 1:
            groups.add(tuple(sib))
    return {'active': None if active is None else active == '1',
            'control': read(os.path.join(root, 'smt', 'control')),
            'pairs': [list(g) for g in sorted(groups)]}


def smt_refusal(info, allowed):
    """Why sibling co-run speeds cannot be measured here, or None.

    ``allowed`` is the CPUs this process may run on. The co-run needs
    two threads of one core, both usable.
    """
    if info['active'] is False or not info['pairs']:
        return ('no SMT: no CPU has a sibling thread (smt/active %s, '
                'smt/control %s), so there is no co-run to measure'
                % ({True: '1', False: '0', None: 'absent'}[info['active']],
                   info['control'] or 'absent'))
    if not sibling_pair(info, allowed):
        return ('no two sibling threads among the CPUs this process may '
                'use (%s)' % ','.join(map(str, sorted(allowed))))
    return None


def sibling_pair(info, allowed):
    """The first two siblings both in ``allowed``, or None."""
    for group in info['pairs']:
        mine = [c for c in group if c in allowed]
        if len(mine) >= 2:
            return mine[:2]
    return None


def sched_tunables(root=DEBUG_SCHED):
    """``{tunable: ns}`` of :data:`TUNABLES` debugfs shows, and why not.

    ``(values, None)`` where some were read; ``({}, reason)`` where none
    was (debugfs not mounted, not root, a kernel without them).
    """
    values = {}
    for name in TUNABLES:
        v = _int(read(os.path.join(root, name)))
        if v is not None:
            values[name] = v
    if values:
        return values, None
    return {}, ('%s not readable (debugfs not mounted, or not root)'
                % root)
