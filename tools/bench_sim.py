#!/usr/bin/env python3
"""Benchmark the simulated SMT host on every shipped paper scenario.

Runs ``vsmtio-sim compare`` (every kernel model, the real agent driving
the ``vsmtio`` one) on each shipped scenario and writes
``doc/benchmarks/simulator.rst``: per scenario, each kernel's I/O and CPU
throughput normalised to vanilla and its vCPU switches per second, next to
the paper's published figures where the paper's text gives them; then the
simulator's own speed on the paper's 24-core / 96-vCPU setting.

This is a benchmark, not a test: it asserts nothing. The costs are the
shipped inputs; nothing here is tuned toward the paper's numbers.

    python tools/bench_sim.py [--out FILE] [--json FILE] [--only PREFIX]
"""

import argparse
import json
import os
import platform
import sys
import tempfile
import time

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from vsmtio_agent.sim import kernels  # noqa: E402
from vsmtio_agent.sim import report  # noqa: E402
from vsmtio_agent.sim import runner  # noqa: E402
from vsmtio_agent.sim import scenario  # noqa: E402

KERNELS = kernels.NAMES
SHORT = {'vanilla': 'van', 'polling': 'poll', 'haltpoll': 'hp',
         'haltpoll-enhanced': 'hp-enh', 'vsmtio': 'vsmtio'}
GROUPS = (
    ('table1', 'Table 1: two 48-vCPU VMs, 2 vCPUs per hyperthread',
     ('redis_pagerank', 'sockperf_matmul')),
    ('fig4', 'Fig. 4: one vCPU per hyperthread, Matmul beside each I/O '
             'benchmark (vanilla = the paper\'s Blocking)', ('fig4_',)),
    ('fig5', 'Fig. 5 / Table 5: the eight pairs, four VMs, 2 vCPUs per '
             'hyperthread', ('fig5_',)),
    ('fig8', 'Fig. 8: the mix sweep and the 0:96 all-CPU control',
     ('fig8_',)),
)

# Averages the paper's text gives (the per-benchmark bars are only drawn).
PAPER_AVERAGES = """\
Averages the paper states in its text:

- Fig. 4 (normalised to Blocking = ``vanilla``): Matmul with vSMT-IO is
  37.9%, 14.5% and 27.6% faster than with Polling, Blocking and
  HALT-Polling, i.e. Matmul at about 0.83 (polling), 1.00 (vanilla), 0.90
  (haltpoll), 1.145 (vsmtio); I/O benchmarks with vSMT-IO are on average
  2.3% slower than with Polling.
- Fig. 5: enhanced HALT-Polling raises I/O throughput by 36.9% on average
  over vanilla (1.369) with CPU throughput about unchanged; vSMT-IO's I/O
  throughput is 29.5% above enhanced HALT-Polling's (about 1.77 over
  vanilla) and its CPU throughput 18.4% above vanilla's (1.184).
- Table 5: vSMT-IO cuts vCPU switches by 80% on average (up to 95%);
  enhanced HALT-Polling by 32% on average (at most 51%).
- Fig. 8: vSMT-IO's gains are largest at the 48:48 mix; at 0:96 (all
  CPU-bound) it is within 2% of vanilla.
"""


def _f(v, fmt='%.2f'):
    return '-' if v is None else fmt % v


def _k(v):
    if v is None:
        return '-'
    return '%.1fk' % (v / 1000.0) if v >= 1000 else '%.0f' % v


def rst_table(header, rows):
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    line = '  '.join('=' * w for w in widths)
    out = [line, '  '.join(str(h).ljust(w) for h, w in zip(header, widths)),
           line]
    for r in rows:
        out.append('  '.join(str(x).ljust(w) for x, w in zip(r, widths)))
    out.append(line)
    return '\n'.join(out)


def scenario_rows(name, results):
    norm = report.normalise(results)
    paper = scenario.load(name).paper
    rows = []
    for k in KERNELS:
        n = norm[k]
        pio = (paper.get('io') or {}).get(k)
        pcpu = (paper.get('cpu') or {}).get(k)
        psw = (paper.get('switches_per_s') or {}).get(k)
        rows.append([name if k == KERNELS[0] else '', SHORT[k],
                     _f(n['io']), _f(pio), _f(n['cpu']), _f(pcpu),
                     _k(n['switches_per_s']), _k(psw),
                     _f(n['spinning_pct'], '%.1f'),
                     _f(n['retention_pct'], '%.1f')])
    return rows


HEADER = ['scenario', 'kernel', 'I/O', 'paper I/O', 'CPU', 'paper CPU',
          'switches/s', 'paper sw/s', 'spin %', 'retain %']


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--out', default=os.path.join(
        os.path.dirname(HERE), 'doc', 'benchmarks', 'simulator.rst'))
    p.add_argument('--json', default=None,
                   help='also write every result as JSON here')
    p.add_argument('--only', default='', help='scenario name prefix')
    p.add_argument('--processes', type=int, default=2)
    args = p.parse_args(argv)

    names = [n for n in scenario.shipped() if n.startswith(args.only)]
    all_results = {}
    t0 = time.time()
    for i, name in enumerate(names, 1):
        t = time.time()
        sys.stderr.write('[%d/%d] %s ...\n' % (i, len(names), name))
        all_results[name] = runner.compare(name, processes=args.processes,
                                           progress=False)
        norm = report.normalise(all_results[name])['vsmtio']
        sys.stderr.write('    vsmtio: I/O %s CPU %s (%.0f s)\n'
                         % (_f(norm['io']), _f(norm['cpu']),
                            time.time() - t))
    total_wall = time.time() - t0
    if args.json:
        with open(args.json, 'w') as f:
            json.dump(all_results, f, indent=1, sort_keys=True)

    out = [HEAD.format(date=time.strftime('%Y-%m-%d'),
                       python=platform.python_version(),
                       machine=platform.machine(),
                       cpus=os.cpu_count(), wall=total_wall / 60.0)]
    for _, title, prefixes in GROUPS:
        rows = []
        for name in names:
            if name.startswith(prefixes):
                rows.extend(scenario_rows(name, all_results[name]))
        if rows:
            out.append(title + '\n' + '-' * len(title) + '\n')
            out.append(rst_table(HEADER, rows) + '\n')
    out.append(table7(all_results))
    out.append(PAPER_AVERAGES)
    out.append(averages(all_results))
    if not args.only:
        out.append(sensitivity(args.processes))
    out.append(DISAGREE.format(speed=speed_summary(all_results)))
    out.append(speed(all_results))
    text = '\n'.join(out)
    with open(args.out, 'w') as f:
        f.write(text)
    sys.stdout.write(text)
    return 0


def averages(all_results):
    def mean(prefix, kernel, key):
        vals = [report.normalise(r)[kernel][key]
                for n, r in all_results.items() if n.startswith(prefix)]
        vals = [v for v in vals if v is not None]
        return sum(vals) / len(vals) if vals else None

    rows = []
    for prefix, label in (('fig4_', 'Fig. 4 (8 scenarios)'),
                          ('fig5_', 'Fig. 5 (8 pairs)')):
        if not any(n.startswith(prefix) for n in all_results):
            continue
        for k in KERNELS:
            rows.append([label if k == KERNELS[0] else '', SHORT[k],
                         _f(mean(prefix, k, 'io')),
                         _f(mean(prefix, k, 'cpu'))])
    sw = []
    for n, r in all_results.items():
        if n.startswith('fig5_'):
            base = r['vanilla']['vcpu_switches_per_s']
            sw.append({k: r[k]['vcpu_switches_per_s'] / base
                       for k in KERNELS})
    if not rows:
        return ''
    lines = ['The simulator\'s averages over the same scenarios:\n',
             rst_table(['figure', 'kernel', 'mean I/O', 'mean CPU'], rows),
             '']
    if sw:
        means = ['%s %.2f' % (SHORT[k], sum(s[k] for s in sw) / len(sw))
                 for k in KERNELS]
        lines.append('Fig. 5 pairs, mean vCPU switches relative to '
                     'vanilla: ' + ', '.join(means) + '.\n')
    return '\n'.join(lines)


# Paper Table 7: ms per request (run, ready, wait) under vanilla KVM,
# enhanced HALT-Polling and vSMT-IO, for the I/O side of the Fig. 5 pairs.
TABLE7 = {
    'fig5_rocksdb_nginx': ('rocksdb', ((116.2, 132.6, 378.1),
                                       (131.7, 88.0, 305.4),
                                       (129.8, 69.0, 237.2))),
    'fig5_clamav_binaryclassify': ('clamav', ((15.2, 45.7, 10.9),
                                              (12.9, 29.7, 10.5),
                                              (11.0, 21.1, 9.5))),
    'fig5_postgresql_regression': ('postgresql', ((14.7, 37.6, 10.1),
                                                  (12.3, 27.1, 9.4),
                                                  (13.5, 19.7, 8.7))),
    'fig5_mysql_prediction': ('mysql', ((111.4, 319.7, 88.9),
                                        (90.7, 167.9, 89.5),
                                        (87.5, 136.7, 80.6))),
    'fig5_dbt1_multipleclassify': ('dbt1', ((346.2, 1831.4, 1390.2),
                                            (361.6, 842.9, 1035.8),
                                            (306.9, 643.2, 641.6))),
    'fig5_hbase_pagerank': ('hbase', ((266.2, 655.0, 901.8),
                                      (237.8, 323.3, 795.9),
                                      (241.6, 315.0, 654.3))),
    'fig5_mongodb_kmeans': ('mongodb', ((376.1, 528.6, 1444.1),
                                        (365.3, 345.2, 1276.6),
                                        (351.7, 256.0, 897.9))),
}


def table7(all_results):
    rows = []
    for name, (wl, paper) in sorted(TABLE7.items()):
        if name not in all_results:
            continue
        for k, pv in zip(('vanilla', 'haltpoll-enhanced', 'vsmtio'), paper):
            t = all_results[name][k]['workloads'][wl]['per_request_us']
            rows.append([wl if k == 'vanilla' else '', SHORT[k],
                         '%.0f / %.0f / %.0f' % (t['run'], t['ready'],
                                                 t['wait']),
                         '%.1f / %.1f / %.1f' % pv])
    if not rows:
        return ''
    return ('Table 7: time per request\n-------------------------\n\n'
            'Run (retention and polling included) / ready / wait per '
            'served request of the I/O side of each Fig. 5 pair: the model '
            'in microseconds, the paper\'s Table 7 in milliseconds as '
            'printed. The model\'s "request" is one compute burst and one '
            'device wait; the paper\'s is a benchmark request, so only the '
            'ratios between kernels compare.\n\n'
            + rst_table(['workload', 'kernel', 'model us', 'paper ms'],
                        rows) + '\n')


SENSITIVITY = (
    ('shipped inputs', {}),
    ('retention_yields: false', {'vsmtio': {'retention_yields': False}}),
    ('switch costs x3 (vm_exit, context_switch, l1d_flush, ipi, '
     'cache_refill)', 'x3'),
    ('wakeup_granularity 24 ms (no wake-up boost)',
     {'scheduler': {'wakeup_granularity_us': 24000}}),
    ('each VM in its own cgroup, shares 1024 (libvirt, nova)',
     {'scheduler': {'vm_cgroup_shares': 1024}}),
)


def sensitivity(processes):
    """Redis+PageRank with one input changed at a time (not shipped)."""
    path = os.path.join(scenario.SCENARIO_DIR, 'redis_pagerank.yaml')
    with open(path) as f:
        base = yaml.safe_load(f)
    rows = []
    for label, change in SENSITIVITY:
        doc = dict(base, duration_s=1.5)
        if change == 'x3':
            costs = scenario.load('redis_pagerank').costs
            doc['costs'] = {k: 3 * costs[k] for k in (
                'vm_exit_ns', 'context_switch_ns', 'l1d_flush_ns', 'ipi_ns',
                'cache_refill_ns')}
        else:
            doc.update(change)
        fd, tmp = tempfile.mkstemp(suffix='.yaml')
        with os.fdopen(fd, 'w') as f:
            yaml.safe_dump(doc, f)
        try:
            sys.stderr.write('sensitivity: %s ...\n' % label)
            res = runner.compare(tmp, processes=processes, progress=False,
                                 kernel_names=('vanilla',
                                               'haltpoll-enhanced',
                                               'vsmtio'))
        finally:
            os.unlink(tmp)
        norm = report.normalise(res)
        for k in ('haltpoll-enhanced', 'vsmtio'):
            first = k == 'haltpoll-enhanced'
            rows.append([label if first else '',
                         _k(res['vanilla']['vcpu_switches_per_s'])
                         if first else '',
                         SHORT[k], _f(norm[k]['io']), _f(norm[k]['cpu']),
                         _f(norm[k]['switches_per_s']
                            / norm['vanilla']['switches_per_s'])])
    return ('Sensitivity (not shipped, not tuned)\n'
            '------------------------------------\n\n'
            'Redis + PageRank, 1.5 s, one input changed at a time, each row '
            'normalised to vanilla under the same inputs. This shows which '
            'inputs the disagreements below hinge on; the shipped inputs '
            'stay as documented.\n\n'
            + rst_table(['inputs', 'vanilla sw/s', 'kernel', 'I/O', 'CPU',
                         'switches vs vanilla'], rows) + '\n')


DISAGREE = """\
Where the model and the paper disagree, and why
-----------------------------------------------

- **Switches.** vSMT-IO cuts vCPU switches in every heterogeneous
  scenario (to roughly 0.15-0.75 of vanilla's), as in Table 5, but by
  less than the paper's 80% average: every retention that outlives the
  LTCR timeout still ends in a switch, and with ``retention_yields`` a
  retention gives way whenever another I/O vCPU wakes on the same
  sibling. The model's absolute switch rates are higher than Table 5's
  because its I/O vCPUs each run a closed request loop with
  sub-millisecond waits; the paper does not say how requests spread over
  its VMs' 24-48 vCPUs.
- **I/O throughput.** The paper reports 30-90% more I/O throughput with
  vSMT-IO over vanilla KVM in the 2-vCPUs-per-hyperthread settings; the
  model gives about the same as vanilla. In the model vanilla CFS's
  sleeper credit lets every woken I/O vCPU preempt within one switch
  (~20 us), so there is little latency for retention to remove (Table 7
  above: ready times of ~20-30 us per request against the paper's tens to
  hundreds of ms). The model now has the mechanism §6.3 names: the network
  servers' completion interrupts land on the vCPU of the receive queue the
  flow hash picks ((N-1)/N of them on another vCPU), which must be
  scheduled and run its handler before its IPI wakes the requester
  (``irq`` in ``data/workloads.yaml``). It raises vanilla's switches by
  20-70% and its ready time per request by ~13 us, but the handler
  vCPU is woken by the same wake-up preemption, so the hop costs vanilla
  and vSMT-IO about alike and the I/O ratio stays at 0.91-1.0.
- **VM cgroups.** One mechanism does make vanilla's ready times large:
  libvirt puts each VM in its own cgroup (as on every nova host), and
  CFS then decides a wake-up from another VM between the two VMs' group
  entities, with a granularity scaled by the woken VM's per-CPU weight.
  A 48-vCPU VM's shares are split across the CPUs it loads, so its
  woken vCPUs cannot preempt and wait for the tick (3-4 ms). With
  ``vm_cgroup_shares: 1024`` (sensitivity table) vanilla's switch rate
  on Redis + PageRank falls from 446k/s to 16k/s, the order of the
  paper's Table 5 (9.5k-61k/s), enhanced halt polling gains I/O (1.18 of
  vanilla; the paper: 1.08), and raising the scheduling delay changes
  little, as in the paper's Fig. 1(b). But vSMT-IO's I/O throughput then
  comes out about 20 times vanilla's (the paper: 1.88) with CPU at 0.50
  and 11 times vanilla's switches per second, because the model's I/O
  vCPUs run closed request loops of a few hundred microseconds that a
  4 ms wait for the tick throttles twentyfold. Those loop lengths are
  estimates (``workloads.yaml``) made before this mechanism existed, so
  it ships off; turning it on belongs with revisiting them against the
  paper's per-second switch rates.
- **CPU throughput.** Retention holds a third to a half of each I/O
  sibling (the paper's Table 6 says 28-54%, in line). CPU-bound vCPUs lose
  that time; the switches saved are worth more than it only where
  switches are very frequent (Sockperf + Matmul: CPU up, as in the
  paper) and less elsewhere (Redis + PageRank: down, where the paper
  reports +123%). The sensitivity table shows the outcome turning with
  the per-switch cost (x3: CPU 1.22): an input the paper does not give,
  left at its documented estimate.
- **Fig. 8.** Across the mix sweep the model's vSMT-IO keeps I/O
  throughput at vanilla's and loses some CPU throughput, least at the
  CPU-heavy 24:72 end; it shows no peak at 48:48.
- **Scheduling delay.** The paper's Fig. 1(b) finds the average barely
  changes with the scheduling delay. In the flat model a wake-up
  granularity above CFS's sleeper credit (half of ``sched_latency``,
  12 ms) disables wake-up preemption altogether, woken vCPUs wait for the
  tick, and vanilla's I/O throughput collapses (sensitivity table: vSMT-IO
  then serves about 20 times more requests), as with VM cgroups.
- **Enhanced halt polling** loses I/O throughput in the flat model where
  the paper reports gains: with 1 ms polls (our choice; the paper gives
  no maximum) a polling vCPU spends its CFS share spinning and then waits
  behind the CPU-bound vCPU until a tick lets it back, and with the
  completion-IPI model a request needs two vCPUs scheduled, either of
  which can be the one waiting. With VM cgroups it gains, as in the
  paper (above).
- **Fig. 4.** With one vCPU per hyperthread the model reproduces the
  ordering the paper reports for Matmul (polling lowest, vSMT-IO highest)
  and vSMT-IO's I/O throughput close to polling's, but all the
  differences are a few percent, not the paper's 14-38%: each switch
  costs the sibling only ~20 us at 32% speed.
- **The 0:96 control** is within 1% of vanilla, as in the paper (under
  2%). It used to differ by 4%: the simulated host started every vCPU
  and every slice at the same instant, so under vanilla two siblings
  that each alternate PageRank and Kmeans paired like with like for the
  whole run, while RASS's symbiotic choice (§4.3.2) paired them across.
  The host now starts out of phase, as VMs that did not boot together do.
- **Speed.** {speed}
"""


def speed_summary(all_results):
    runs = [r[k]['sim'] for n, r in all_results.items()
            if n in ('redis_pagerank', 'sockperf_matmul') for k in KERNELS]
    if not runs:
        return 'not measured in this run.'
    eps = [s['events_per_s'] for s in runs]
    rt = [s['sim_s_per_wall_s'] for s in runs]
    per_sim_s = [e / r for e, r in zip(eps, rt)]
    return ('On the two Table 1 settings (96 vCPUs, %.0f k to %.0f k events '
            'per simulated second) the event loop ran %.0f-%.0f k events/s '
            'in CPython here: %.2f-%.2f simulated seconds per wall second, '
            '%s. The cost is per event, so the kernels that switch most '
            '(vanilla, halt polling) are the slowest, and the Fig. 5 pairs, '
            'with fewer switches, run faster; see the table below.'
            % (min(per_sim_s) / 1e3, max(per_sim_s) / 1e3, min(eps) / 1e3,
               max(eps) / 1e3, min(rt), max(rt),
               'below the real-time aim for every kernel' if max(rt) < 1
               else 'real time or better only for the kernels that switch '
                    'least'))


def speed(all_results):
    rows = []
    for name in ('redis_pagerank', 'sockperf_matmul', 'fig5_hbase_pagerank'):
        if name not in all_results:
            continue
        for k in KERNELS:
            s = all_results[name][k]['sim']
            rows.append([name if k == KERNELS[0] else '', SHORT[k],
                         '%d' % s['events'], '%.1f' % s['wall_s'],
                         '%.0f' % s['events_per_s'],
                         '%.2f' % s['sim_s_per_wall_s']])
    return ('Simulator speed\n---------------\n\nThe paper\'s 24-core / '
            '48-hyperthread / 96-vCPU setting, one process per run (two '
            'runs at a time on this 2-core machine, shared with other '
            'work), the agent\'s policy engine included under vsmtio:\n\n'
            + rst_table(['scenario', 'kernel', 'events', 'wall s',
                         'events/s', 'sim s / wall s'], rows) + '\n')


HEAD = """\
=============================
Simulated SMT host: benchmark
=============================

Written by ``tools/bench_sim.py`` (``tox -e bench``) on {date}, Python
{python} on {machine} with {cpus} CPUs; the whole run took {wall:.1f}
minutes. Every scenario ran under every kernel model with seed 1, the
shipped costs (``vsmtio_agent/sim/data/costs.yaml``) and the real agent
driving the ``vsmtio`` kernel. Throughputs are normalised to ``vanilla``;
"paper" columns hold the figures the paper prints (Table 1, Table 5), "-"
where it gives none. Kernels: van = vanilla (the paper's Blocking / vanilla
KVM), poll = guest idle=poll, hp = KVM halt polling, hp-enh = the paper's
enhanced halt polling, vsmtio = context retention + RASS + agent.

Read ``doc/source/simulator.rst`` ("Where the model and the paper
disagree") before quoting these numbers: they are what the model's inputs
produce, not a reproduction of the paper's testbed.

"""


if __name__ == '__main__':
    sys.exit(main())
