"""The product against vanilla over several seeds, for ``compare``.

One seed is one draw of the guard's chaotic path and of the model's
noise: on ``fig5_hbase_pagerank`` the product's I/O gain differs by
more than 0.1 from one seed to another. So what ``vsmtio-sim compare --steady``
says of the product it says over the seeds it ran: per VM the mean
ratio with its 95% interval (:mod:`~vsmtio_sim.intervals`), the range
and in how many seeds the VM kept its floors net of that seed's A/A run
(:func:`~vsmtio_sim.tenants.judge`); the I/O gain seed by seed and as a
mean; and, per seed, what the product's guard kept, for what the gain
came from.
"""

import prettytable

from vsmtio_sim import intervals
from vsmtio_sim import tenants


def _verdicts(run, kernel, baseline, cycle_s, null=None):
    """One seed's verdicts of ``kernel``, floors net of its A/A run.

    And of ``null``, another seed's run of ``baseline``, where there is
    one (:func:`~vsmtio_sim.tenants.judge`).
    """
    results = run['results']
    return tenants.judge(results[kernel], results[baseline], run.get('aa'),
                         cycle_s, null)


def nulls(runs, baseline='vanilla'):
    """``{seed: null run}``: each seed's, another seed's ``baseline`` run.

    Empty where ``runs`` (as :func:`aggregate` takes) has one seed only.
    """
    return tenants.nulls({s: run['results'][baseline]
                          for s, run in runs.items()})


def _vm_figures(per_seed):
    """One VM's figures over the seeds from ``{seed: verdict}``."""
    ratios = {s: v['ratio'] for s, v in per_seed.items()}
    mean, low, high = intervals.interval(list(ratios.values()))
    known = [r for r in ratios.values() if r is not None]
    judged = [v['ok'] for v in per_seed.values() if v['ok'] is not None]
    first = next(iter(per_seed.values()))
    return {'role': first['role'], 'metric': first['metric'],
            'adversary': first['adversary'], 'ratios': ratios,
            'mean': mean, 'low': low, 'high': high,
            'min': min(known, default=None), 'max': max(known, default=None),
            # how many of the seeds it was judged on it kept its floors
            'kept': sum(judged), 'judged': len(judged)}


def _agent(result):
    """What the product's guard kept on one seed (None: no agent)."""
    a = result.get('agent')
    if a is None:
        return None
    return {'mechanisms': list(a.get('mechanisms') or ()),
            'weights': a.get('weights') or {},
            'timeouts_us': a.get('timeouts_us'),
            'timeout_us': a.get('timeout_us')}


def aggregate(runs, kernel='vsmtio', baseline='vanilla', cycle_s=0.0):
    """``kernel`` against ``baseline`` over the seeds of ``runs``.

    ``runs`` is :func:`~vsmtio_sim.runner.compare_seeds`'s answer
    (``{seed: {'results': {kernel: result}, 'aa': A/A run}}``). Returns
    ``seeds``; per VM (``vms``) its ratio on each seed, their mean with
    its interval (``mean``, ``low``, ``high``), ``min``, ``max`` and in how
    many of the ``judged`` seeds it ``kept`` its floors; ``io_gain``, the
    geometric mean over the honest serving VMs
    (:func:`~vsmtio_sim.tenants.summary`), ``by_seed`` and as a mean with
    its interval; and ``agent``, per seed, what the guard kept.
    ``cycle_s``: the period of the scenario's phases
    (:func:`~vsmtio_sim.tenants.judge`). Each seed's window floors also
    take another seed's vanilla run as its null run (:func:`nulls`).
    """
    seeds = list(runs)
    null = nulls(runs, baseline)
    verdicts = {s: _verdicts(runs[s], kernel, baseline, cycle_s,
                             null.get(s))
                for s in seeds}
    vms = sorted(verdicts[seeds[0]])
    gains = {s: tenants.summary(verdicts[s])['io_gain'] for s in seeds}
    mean, low, high = intervals.interval(list(gains.values()))
    return {
        'kernel': kernel, 'baseline': baseline, 'seeds': seeds,
        'vms': {vm: _vm_figures({s: verdicts[s][vm] for s in seeds})
                for vm in vms},
        'io_gain': {'by_seed': gains, 'mean': mean, 'low': low,
                    'high': high},
        'agent': {s: _agent(runs[s]['results'][kernel]) for s in seeds}}


def _x(v):
    return '-' if v is None else '%.3f' % v


def vm_table(agg):
    """Per VM: its mean ratio over the seeds, range and floors kept."""
    t = prettytable.PrettyTable(['VM', 'judged on', 'mean [95% interval]',
                                 'range', 'kept its floors'])
    t.align = 'r'
    t.align['VM'] = t.align['judged on'] = 'l'
    for vm, f in agg['vms'].items():
        t.add_row([vm, f['metric'].replace('_per_s', '/s'),
                   intervals.text(f['mean'], f['low'], f['high']),
                   '%s - %s' % (_x(f['min']), _x(f['max'])),
                   'adversary, not judged' if f['adversary'] else
                   '%d of %d seeds' % (f['kept'], f['judged'])])
    return t.get_string()


def gain_line(agg):
    """The product's I/O gain seed by seed, then its mean."""
    g = agg['io_gain']
    return ('%s I/O gain (geometric mean over the honest serving VMs): %s; '
            'mean %s' % (agg['kernel'], ', '.join(
                'seed %s %s' % (s, _x(v)) for s, v in g['by_seed'].items()),
                intervals.text(g['mean'], g['low'], g['high'])))


def _pairs(mapping, fmt):
    return ', '.join(fmt % kv for kv in sorted(mapping.items()))


def kept_line(seed, agent):
    """One seed's kept mechanisms, per-VM weights and retention timeouts."""
    if agent is None:
        return 'seed %s: no agent' % seed
    timeouts = agent['timeouts_us']
    if timeouts is None:
        retention = 'one host-wide timeout %s us' % _g(agent['timeout_us'])
    else:
        retention = _pairs(timeouts, '%s %g us') or 'no VM'
    return ('seed %s: kept %s; weights %s; retention %s'
            % (seed, ', '.join(agent['mechanisms']) or 'none',
               # no factor set: every VM at its own cgroup weight
               _pairs(agent['weights'], '%s x%g') or 'every VM x1',
               retention))


def _g(v):
    return '-' if v is None else '%g' % v


def report(agg):
    """The text ``compare`` prints of ``aggregate``'s answer.

    Every kernel ran on the first seed; the others ran only the product,
    its baseline and the baseline's A/A run
    (:func:`~vsmtio_sim.runner.compare_seeds`).
    """
    seeds = agg['seeds']
    head = ('%s against %s over seed(s) %s, each VM against its floors '
            'net of that seed\'s A/A run'
            % (agg['kernel'], agg['baseline'],
               ', '.join(str(s) for s in seeds)))
    if len(seeds) == 1:
        lines = [head + '.', 'One seed of several: results differ between '
                 'seeds (--seeds 1,2,3 gives a mean and its interval).']
    else:
        lines = [head + ' (every kernel ran on seed %s; only %s, %s and '
                 'its A/A run on the others):'
                 % (seeds[0], agg['kernel'], agg['baseline'])]
    lines.append(vm_table(agg))
    lines.append(gain_line(agg))
    lines.append('What %s\'s guard kept at the end, per seed (the '
                 'measured window also holds the guard\'s own probe '
                 'periods):' % agg['kernel'])
    lines.extend('  ' + kept_line(s, a) for s, a in agg['agent'].items())
    return '\n'.join(lines)
