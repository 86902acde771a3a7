"""What ``vsmtio-agent status`` shows: one period, as a document and a table.

The running daemon writes :func:`document` of each
:class:`~vsmtio_agent.agent.Period` to ``status_path`` (read by ``status``
from another process); :func:`format_table` renders one for the operator.
"""

import dataclasses
import os
import time

import prettytable


def rows(period, pins):
    """The per-vCPU rows ``status`` prints, from one :class:`Period`.

    ``pins`` is the driver's ``vcpu_pins()``: what the host has.
    """
    if period is None or period.start:
        return []
    decision = period.decision
    rows = []
    for ref, placement in sorted(decision.placements.items()):
        st = period.stats.get(ref)
        # what the host has; the plan only where the split is applied
        pinned = pins.get(ref, placement.threads
                          if decision.applies(placement) else ())
        rows.append({
            'core': placement.core_id, 'domain': ref.domain,
            'vcpu': ref.index, 'class': placement.role.value,
            'retention_rate': getattr(st, 'retention_rate', None),
            'utilisation': getattr(st, 'utilisation', None),
            'ipc': getattr(st, 'ipc', None),
            'i_cpu': getattr(st, 'i_cpu', None),
            'pinned': sorted(pinned)})
    return rows


def document(period, driver, opts, mode):
    """The status file's document of one :class:`Period`."""
    ran = period is not None and not period.start
    return {'time': time.time(), 'pid': os.getpid(), 'mode': mode,
            'period': opts.period, 'ticks': period.number if period else 0,
            'timeout_ns': period.decision.timeout_ns if ran else None,
            'dry_run': opts.dry_run,
            'vcpus': rows(period, driver.vcpu_pins()),
            'mechanisms': sorted(period.kept) if period else [],
            'verdicts': ([dataclasses.asdict(v) for v in period.verdicts]
                         if period and period.verdicts is not None
                         else None),
            'mist': ({d: dataclasses.asdict(v)
                      for d, v in sorted(period.mist.items())}
                     if period and period.mist is not None else None)}


def format_table(doc):
    """A per-core table of one status document."""
    def num(value, fmt='%.2f'):
        return 'n/a' if value is None else fmt % value

    table = prettytable.PrettyTable(
        ['core', 'domain', 'vcpu', 'class', 'retention', 'util', 'IPC',
         'I_cpu', 'pinned'])
    table.align = 'l'
    for row in sorted(doc['vcpus'], key=lambda r: (r['core'], r['domain'],
                                                   r['vcpu'])):
        table.add_row([row['core'], row['domain'], row['vcpu'], row['class'],
                       num(row['retention_rate'], '%.3f'),
                       num(row.get('utilisation')), num(row['ipc']),
                       num(row['i_cpu']),
                       ','.join(map(str, row['pinned']))])
    timeout = doc['timeout_ns']
    head = ('mode %s, period %.2f s, %d period(s), retention timeout %s%s'
            % (doc['mode'], doc['period'], doc['ticks'],
               'n/a' if timeout is None else '%d us' % (timeout // 1000),
               ', dry run' if doc.get('dry_run') else ''))
    lines = [head]
    if doc.get('verdicts') is None:
        lines.append('guard off: every mechanism applied')
    else:
        lines.append('mechanisms kept: %s' % (
            ', '.join(doc.get('mechanisms') or ()) or 'none'))
        for v in doc['verdicts']:
            lines.append('  guard: %s %s (%s)' % (
                v['mechanism'], 'kept' if v['kept'] else 'dropped',
                v['reason']))
    mist = doc.get('mist')
    if mist is not None:
        lines.append('MIST: %d reserved VM(s), %d protected' % (
            len(mist), sum(1 for v in mist.values() if v['protect'])))
        for domain, v in sorted(mist.items()):
            lines.append('  %s: %s, I_cpu %s (%s)' % (
                domain, 'protected' if v['protect'] else 'not protected',
                num(v['i_cpu']), v['reason']))
    return '\n'.join(lines) + '\n' + table.get_string()
