"""The simulator bench's sensitivity study and its section.

Every unsourced or disputed input of the model (``SWEEP``, one row per
input) is swept over its plausible range on ``SENSITIVITY_SCENARIOS``
under the three kernels the conclusions are about, each point a scenario
of its own (``scenario.set_input``). Each point is judged per honest VM
against its own vanilla figure (``judge``), never by class totals, and
the section says which of the benchmark's conclusions hold across each
input's range (``conclusions``).
"""

import concurrent.futures
import os
import sys
import tempfile
import time

import yaml

from vsmtio_bench import document
from vsmtio_bench import stats
from vsmtio_sim import runner
from vsmtio_sim import scenario

# The sensitivity study: every unsourced or disputed input, swept over its
# plausible range on SENSITIVITY_SCENARIOS under the three kernels the
# conclusions are about. DATA: one row per input, adding an input is one
# line. A row is (dotted path into scenario.inputs(), several paths joined
# by ',' move together; the values, each the input's value or 'xF' for F
# times the shipped one, the shipped value among them; why the range).
SWEEP = (
    ('scheduler.vm_cgroup_shares', (0, 1024, 8192),
     'libvirt gives every VM a cgroup of weight 1024 (shipped); 0 is one '
     'flat run queue, which Table 5\'s switch rates favour; 8192 a flavor '
     'weighted with quota:cpu_shares'),
    ('costs.smt_pair_speedup.max', (1.0, 1.3, 1.5),
     'Intel: Hyper-Threading gives "up to 30%" (shipped 1.3); 1.0 is no '
     'co-run gain at all, 1.5 beyond the source'),
    ('costs.cache_refill_gbps', (4, 16, 32),
     'an L3-to-L2 refill by demand misses (16 GB/s shipped, half the '
     'per-core L3 bandwidth); 4 is latency-bound, 32 streaming'),
    ('costs.cache_share_kib', (256, 1280),
     'what a switch evicts: the core\'s 256 KiB L2 (shipped) up to a '
     'hyperthread\'s share of the LLC'),
    ('costs.host_idle.per_core', (True, False),
     'a halted thread pays its C-state\'s exit only when its sibling idles '
     'too (the SDM\'s core C-state rule, shipped true); false charges each '
     'thread its own deep exit, an upper bound on the wake-up cost'),
    ('scheduler.net_completions', ('spread', 'flow', 'single'),
     'where a network completion lands: spread over the VM\'s vCPUs '
     '(shipped, the paper\'s section 6.3), back on the requester (tun automq '
     'with XPS), or on vCPU 0 (one queue, nova\'s default)'),
    ('haltpoll.shrink', (0, 2),
     'halt polling\'s shrink: Linux 5.3 resets the window (0, shipped, '
     'the paper\'s kernel); Linux 6.8 and later halve it'),
    ('workloads.*.working_set_kib', ('x0.25', 'x1', 'x4'),
     'estimates by kind (data/workloads.yaml), none measured'),
    ('costs.vm_exit_ns,costs.context_switch_ns,costs.l1d_flush_ns,'
     'costs.ipi_ns', ('x0.5', 'x1', 'x2'),
     'orders of magnitude from their authors, none measured here'),
    ('vsmtio.retention_yields', (False, True),
     'the paper ends a retention only on need_resched() (false, shipped); '
     'true is this project\'s variant'),
)
SENSITIVITY_SCENARIOS = ('fig5_hbase_pagerank', 'fig4_hbase_matmul')
SENSITIVITY_KERNELS = ('vanilla', 'vsmtio-paper', 'vsmtio')

# Each honest VM's floor under the product, by what it does: a serving VM
# (requests) at vanilla's, a computing VM (instructions) at 0.97 of it.
FLOORS = {'requests_per_s': 1.0, 'instructions_per_s': 0.97}


def _label(value):
    return str(value).lower() if isinstance(value, bool) else str(value)


def _factor(value):
    """The multiplier a value such as ``'x0.5'`` names, else None."""
    if isinstance(value, str) and value.startswith('x'):
        try:
            return float(value[1:])
        except ValueError:
            return None
    return None


def point_doc(doc, paths, value):
    """``doc`` with every one of ``paths`` (',' joined) set to ``value``."""
    factor = _factor(value)
    if factor is not None:
        value = (lambda old: type(old)(old * factor))
    for path in paths.split(','):
        doc = scenario.set_input(doc, path, value)
    return doc


def vm_ratios(res, kernel):
    """``[(vm, metric, ratio, floor)]``: each honest VM under ``kernel``.

    A serving VM is judged on its requests, a computing one on its
    instructions, a mixed one on both; an adversary not at all.
    """
    base = res['vanilla']['vms']
    out = []
    for vm in sorted(base):
        b = base[vm]
        if b.get('adversary'):
            continue
        kind = b['kind']
        metrics = {'io': ('requests_per_s',),
                   'cpu': ('instructions_per_s',)}.get(
            kind, ('requests_per_s', 'instructions_per_s'))
        for m in metrics:
            if b[m]:
                out.append((vm, m, res[kernel]['vms'][vm][m] / b[m],
                            FLOORS[m]))
    return out


def _direction(ratios):
    """'+' every VM above 1, '-' every VM below, '~' otherwise."""
    if not ratios:
        return 'n/a'
    if all(r > 1.0 + stats.NOISE for r in ratios):
        return '+'
    if all(r < 1.0 - stats.NOISE for r in ratios):
        return '-'
    return '~'


def judge(res):
    """The three conclusions at one point, each VM judged on its own.

    ``no_regression``: every honest VM at or above its floor under the
    product (``worst`` is the lowest ratio over floor); ``paper_io`` /
    ``paper_cpu``: the direction of the paper-literal kernel against
    vanilla for the serving / computing VMs; ``gain``: the product's
    largest gain over vanilla for any honest VM.
    """
    mine = vm_ratios(res, 'vsmtio')
    paper = vm_ratios(res, 'vsmtio-paper')
    worst = min((r / f for _vm, _m, r, f in mine), default=None)
    return {
        'no_regression': worst is None or worst >= 1.0 - stats.NOISE,
        'worst': worst,
        'paper_io': _direction([r for _v, m, r, _f in paper
                                if m == 'requests_per_s']),
        'paper_cpu': _direction([r for _v, m, r, _f in paper
                                 if m == 'instructions_per_s']),
        'gain': max((r - 1.0 for _v, _m, r, _f in mine), default=0.0),
    }


def conclusions(points, shipped):
    """Which conclusions hold across one input's values.

    ``points`` is ``[(value label, judge() of it)]`` in the row's order,
    ``shipped`` the label of the shipped value. Returns one cell per
    conclusion: whether it holds at every value, then its figure at each
    (the shipped one starred).
    """
    def figures(fmt):
        return ' '.join(fmt(j) + ('*' if v == shipped else '')
                        for v, j in points)

    fails = [v for v, j in points if not j['no_regression']]
    cells = {'no_regression': '%s: %s' % (
        'holds' if not fails else 'fails at ' + ', '.join(fails),
        figures(lambda j: document.figure(j['worst'], '%.3f')))}
    ref = dict(points).get(shipped) or points[0][1]
    for key in ('paper_io', 'paper_cpu'):
        flips = [v for v, j in points if j[key] != ref[key]]
        cells[key] = '%s: %s' % (
            'holds' if not flips else 'flips at ' + ', '.join(flips),
            figures(lambda j: j[key]))
    gains = [v for v, j in points if j['gain'] > stats.NOISE]
    cells['gain'] = '%s: %s' % (
        'holds' if len(gains) == len(points) else
        'none anywhere' if not gains else
        'only at ' + ', '.join(gains),
        figures(lambda j: '%+.1f%%' % (100.0 * j['gain'])))
    return cells


def sensitivity_rows(results, names):
    """The conclusions table: one row per scenario and input."""
    rows = []
    for name in names:
        for paths, values, _why in SWEEP:
            got = results.get(name, {}).get(paths)
            if not got:
                continue
            shipped = got['shipped']
            points = [(v, judge(got['points'][v])) for v in
                      (_label(x) for x in values) if v in got['points']]
            c = conclusions(points, shipped)
            rows.append([name, paths.replace(',', ', '), c['no_regression'],
                         c['paper_io'], c['paper_cpu'], c['gain']])
    return rows


def _shipped_label(doc, paths, values):
    """The label of the value that is the shipped one (or 'x1')."""
    tree = scenario.inputs(doc)
    first = paths.split(',')[0].split('.')
    if first[0] == 'workloads':
        return 'x1'
    node = tree
    for key in first:
        node = node[key]
    for v in values:
        if v == 'x1' or (_factor(v) is None and v == node
                         and isinstance(v, bool) == isinstance(node, bool)):
            return _label(v)
    return 'x1'


def _sens_job(args):
    key, text, kernel, duration = args
    c = time.process_time()
    fd, path = tempfile.mkstemp(suffix='.yaml')
    with os.fdopen(fd, 'w') as f:
        f.write(text)
    try:
        if duration:
            r = runner.run(path, kernel, duration=duration)
        else:
            r = runner.run(path, kernel, steady=True)
    finally:
        os.unlink(path)
    a = r.get('agent') or {}
    return key, kernel, {
        'vms': r['vms'], 'io_throughput': r['io_throughput'],
        'cpu_throughput': r['cpu_throughput'],
        'settled_at_s': a.get('settled_at_s'),
        'mechanisms': a.get('mechanisms'),
        'cpu_s': time.process_time() - c}


def run_sensitivity(names, rows, processes, duration=0.0):
    """Every point of every row on every scenario, each run once.

    Points that make the same scenario (the shipped value of every row)
    share one run. Returns ``({scenario: {paths: {'shipped': label,
    'points': {label: {kernel: result}}}}}, cpu seconds)``.
    """
    docs, where = {}, []
    for name in names:
        doc = scenario.load_doc(name)[0]
        for paths, values, _why in rows:
            shipped = _shipped_label(doc, paths, values)
            for v in values:
                text = yaml.safe_dump(point_doc(doc, paths, v),
                                      sort_keys=True)
                docs.setdefault(text, len(docs))
                where.append((name, paths, shipped, _label(v), docs[text]))
    jobs = [(key, text, k, duration) for text, key in docs.items()
            for k in SENSITIVITY_KERNELS]
    # the agent's kernels take longest: start them first
    jobs.sort(key=lambda j: j[2] == 'vanilla')
    got, cpu_s = {}, 0.0
    with concurrent.futures.ProcessPoolExecutor(processes) as pool:
        for i, (key, kernel, r) in enumerate(pool.map(_sens_job, jobs), 1):
            got.setdefault(key, {})[kernel] = r
            cpu_s += r['cpu_s']
            sys.stderr.write('[sensitivity %d/%d] point %d %s: %.0f CPU-s\n'
                             % (i, len(jobs), key, kernel, r['cpu_s']))
    out = {}
    for name, paths, shipped, label, key in where:
        row = out.setdefault(name, {}).setdefault(
            paths, {'shipped': shipped, 'points': {}})
        row['points'][label] = got[key]
    return out, cpu_s


def sensitivity_section(sens, names, cpu_s, duration):
    """The 'Sensitivity' section of the document."""
    if not sens:
        return ''
    table = document.rst_table
    inputs = table(['input', 'values (shipped \\*)', 'why this range'], [
        [p.replace(',', ', '), ' '.join(
            _label(v) + ('*' if _label(v) == next(iter(
                sens.values())).get(p, {}).get('shipped') else '')
            for v in vals), why] for p, vals, why in SWEEP])
    window = ('a fixed %g s run (warm-up as the scenario says): a '
              'transient, for trying the code only' % duration
              if duration else
              'at steady state like the main study (the agent settles, '
              'then one cycle of the guard\'s retests is measured)')
    return SENS_HEAD.format(
        scenarios=', '.join(names), n=len(sens), kernels=', '.join(
            SENSITIVITY_KERNELS), window=window, cpu=cpu_s / 60.0,
        wall=cpu_s / 120.0, noise=stats.NOISE) + inputs + '\n\n' + \
        SENS_TABLE + table(['scenario', 'input', '(a) no regression',
                            '(b) paper I/O', '(b) paper CPU',
                            '(c) product gain'],
                           sensitivity_rows(sens, names)) + '\n'


SENS_HEAD = """\
Sensitivity
===========

Every input of the model that is unsourced or disputed, swept over its
plausible range, and whether the three conclusions this benchmark draws
hold across it. Swept on {scenarios}, under {kernels}, every run
{window}; each
point a scenario of its own (``scenario.set_input``), the others at their
shipped values. {n} scenario(s); the study's runs used {cpu:.1f}
CPU-minutes ({wall:.1f} min on two idle cores).

The conclusions are judged per tenant, each honest VM against its own
vanilla figure (requests per second for a serving VM, instructions per
second for a computing one, both for a mixed one; an adversary not at
all), never by class totals:

(a) the product's no-regression: every honest VM under ``vsmtio`` at or
    above its floor (1.0 of vanilla serving, 0.97 computing); the
    figure is the worst VM's ratio over its floor;
(b) the direction of the paper-literal kernel (``vsmtio-paper``) against
    vanilla, for the serving and for the computing VMs: ``+`` every such
    VM above vanilla, ``-`` every one below, ``~`` neither;
(c) the product's gain: the largest gain over vanilla of any honest VM
    under ``vsmtio``.

A ratio within {noise} of its reference is a tie. "holds" means the
conclusion is the same at every value (for (a), met at every value; for
(c), a gain at every value). ``haltpoll.shrink`` is read by the
halt-polling baselines only, so its row can only hold: it is there to say
that the three conclusions do not rest on it (the baselines' columns above
use the shipped 0, Linux 5.3's reset). Not swept:
``host.remote_memory_latency_ratio``, read by two-socket hosts only. The
inputs and their ranges (``SWEEP`` in ``vsmtio-bench sim``; adding an
input is one line there):

"""

SENS_TABLE = """\
Each cell: whether the conclusion holds across the input's values, then
its figure at each value in the order above (the shipped value starred):

"""
