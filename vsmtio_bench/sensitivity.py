"""The simulator bench's sensitivity study: its sweep, runs and records.

Every unsourced or disputed input of the model (``SWEEP``, one row per
input) is swept over its plausible range on ``SENSITIVITY_SCENARIOS``
under the kernels the conclusions are about (vanilla, KVM's halt polling,
the paper-literal vSMT-IO and the product), each point a scenario of its
own (``scenario.set_input``) run on every seed of ``SENS_SEEDS``, under
one host scheduler (``vsmtio-bench sim --scheduler``; by default each
scenario's own) but in the ``scheduler.policy`` row, which runs both. One
seed is one draw of the guard's path and of the model's noise, so a
conclusion counts as holding at a point only if it holds in every seed,
and every figure is a mean over the seeds with its 95% t interval
(:mod:`vsmtio_sim.intervals`).

Each seed is judged per honest VM against its own vanilla figure on that
seed (:func:`vsmtio_sim.tenants.judge`), never by class totals, with
floors net of the model's noise from the A/A run of the same point and
seed. Its page (:mod:`vsmtio_bench.sensitivity_page`) says which of the
benchmark's conclusions hold across each input's range, and which survive
every row, per scheduler.

The product's main lever, a serving VM's CPU weight, sits on a modelled
cliff on ``CLIFF_SCENARIO``; :func:`run_cliff` sweeps the static weight
factor there across the wake-up granularity and both schedulers, so the
page shows whether the cliff is the model's CFS wake-up rule and how far
it moves.

The study is hundreds of steady runs, more than one machine's sitting.
Every run is cached by the version of the code it ran
(:mod:`vsmtio_bench.cache`), and every point, and every curve of the
cliff, is judged per VM as soon as its runs are done and recorded in the
repository (``sensitivity.json``, :mod:`vsmtio_bench.records`), a few
figures per VM rather than its runs: a point recorded for this code is
taken on any machine, not run again, and the study's page
(``sensitivity.rst``) names what is not yet measured.
"""

import collections
import concurrent.futures
import functools
import hashlib
import os
import sys
import tempfile
import time

import yaml

from vsmtio_bench import cache
from vsmtio_bench import documents
from vsmtio_bench import oracle
from vsmtio_bench import records
from vsmtio_bench import space
from vsmtio_bench import stats
from vsmtio_sim import intervals
from vsmtio_sim import runner
from vsmtio_sim import scenario
from vsmtio_sim import tenants

# The CFS wake-up granularity the rows and the cliff sweep: Linux's
# normalized 1 ms unscaled (sched_tunable_scaling 0, none), the shipped
# 4 ms (1 ms scaled by 1 + ilog2(8), the default logarithmic scaling on 8
# or more CPUs; also what vSMT-IO's own scripts set), and 15 ms, what
# tuned's throughput-performance profile (and virtual-host, built on it)
# sets on RHEL and CentOS hosts.
WAKEUP_US = (1000, 4000, 15000)

# A swept value that sets several inputs at once, by dotted path: its
# label names it on the page.
Named = collections.namedtuple('Named', 'label inputs')

# Linux's intel_idle tables (drivers/idle/intel_idle.c), exit latency and
# target residency in us: Skylake-SP's, shipped in vsmtio_sim/data/
# costs.yaml, and Sapphire Rapids' (C1E's exit 2 us, C6's 290 us).
SKX_CSTATES = [
    {'name': 'C1', 'exit_latency_us': 2, 'target_residency_us': 2},
    {'name': 'C1E', 'exit_latency_us': 10, 'target_residency_us': 20},
    {'name': 'C6', 'exit_latency_us': 133, 'target_residency_us': 600}]
SPR_CSTATES = [
    {'name': 'C1', 'exit_latency_us': 1, 'target_residency_us': 1},
    {'name': 'C1E', 'exit_latency_us': 2, 'target_residency_us': 4},
    {'name': 'C6', 'exit_latency_us': 290, 'target_residency_us': 800}]

# The sensitivity study: every unsourced or disputed input, swept over its
# plausible range on SENSITIVITY_SCENARIOS under SENSITIVITY_KERNELS.
# DATA: one row per input, adding an input is one line. A row is (dotted
# path into scenario.inputs(), several paths joined by ',' move together;
# the values, each the input's value or 'xF' for F times the shipped one,
# the shipped value among them; why the range).
# The input that names the host scheduler: its row runs each scheduler
# whatever the study's (point_scheduler).
POLICY = 'scheduler.policy'
SWEEP = (
    (POLICY, ('cfs', 'eevdf'),
     'Linux 5.3\'s CFS (the paper\'s host) or EEVDF (shipped), the fair '
     'scheduler since Linux 6.6 (Debian 13, Ubuntu 24.04)'),
    ('scheduler.wakeup_granularity_us', WAKEUP_US,
     'CFS\'s wake-up preemption lag: 1 ms unscaled (tunable scaling '
     'none), 4 ms shipped (1 ms x (1 + ilog2(8)), the default scaling), '
     '15 ms as tuned\'s throughput-performance and virtual-host profiles '
     'set it; EEVDF does not read it'),
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
     'thread its own deep exit, an upper bound on the wake-up cost. It '
     'matters where threads halt beside busy siblings: halt polling\'s '
     'expired polls on the Fig. 4 pair'),
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
    ('costs.host_idle.governor,costs.host_idle.states', (
        Named('c1-only', {'costs.host_idle.governor': 'shallowest'}),
        Named('skx', {'costs.host_idle.governor': 'menu',
                      'costs.host_idle.states': SKX_CSTATES}),
        Named('spr', {'costs.host_idle.governor': 'menu',
                      'costs.host_idle.states': SPR_CSTATES})),
     'the C-state an idle hyperthread leaves: c1-only is a host booted with '
     'intel_idle.max_cstate=1 (the governor always takes C1); skx the '
     'shipped Skylake-SP table, C6 exit 133 us; spr Sapphire Rapids\', C6 '
     'exit 290 us (intel_idle.c, skx_cstates and spr_cstates)'),
)
# The rows a host scheduler reads only some of: under another, every value
# of the row is the same run, its shipped point's (the model's EEVDF has
# no wake-up granularity: vsmtio_sim/eevdf.py overrides CFS's wake-up
# preemption, which alone reads it).
READ_BY = {'scheduler.wakeup_granularity_us': ('cfs',)}
SENSITIVITY_SCENARIOS = ('fig5_hbase_pagerank', 'fig4_hbase_matmul')
SENSITIVITY_KERNELS = ('vanilla', 'haltpoll', 'vsmtio-paper', 'vsmtio')
# the kernels the agent drives: their runs read the whole agent
AGENT_KERNELS = ('vsmtio-paper', 'vsmtio')
SENS_SEEDS = (1, 2, 3)
# a point's A/A run (vanilla after another history) among its kernels
AA = 'aa'
# (prefix, kernel): the kernels whose direction against vanilla is a
# conclusion, for the serving and for the computing VMs
DIRECTIONS = (('paper', 'vsmtio-paper'), ('haltpoll', 'haltpoll'))
CONCLUSIONS = (
    ('no_regression', '(a) the product\'s no-regression'),
    ('paper_io', '(b) the paper-literal kernel\'s I/O direction'),
    ('paper_cpu', '(b) its CPU direction'),
    ('gain', '(c) the product\'s gain'),
    ('haltpoll_io', '(d) halt polling\'s I/O direction'),
    ('haltpoll_cpu', '(d) its CPU direction'),
)

# The lever's cliff: the static weight factor on both serving VMs of
# CLIFF_SCENARIO, no agent, under each scheduler and CFS wake-up
# granularity (EEVDF reads none: one column).
CLIFF_SCENARIO = 'fig5_dbt1_multipleclassify'
CLIFF_FACTORS = (2.0, 2.25, 2.5, 2.75, 3.0)
CLIFF_SCHEDULERS = ('cfs', 'eevdf')
NOT_READ = 'not read'


def value_label(value):
    """How a swept value is named on the page (``true``, ``x0.5``)."""
    if isinstance(value, Named):
        return value.label
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
    """``doc`` with every one of ``paths`` (',' joined) set to ``value``.

    A :class:`Named` value sets each of its own inputs instead.
    """
    if isinstance(value, Named):
        for path, v in sorted(value.inputs.items()):
            doc = scenario.set_input(doc, path, v)
        return doc
    factor = _factor(value)
    if factor is not None:
        value = (lambda old: type(old)(old * factor))
    for path in paths.split(','):
        doc = scenario.set_input(doc, path, value)
    return doc


def _honest(verdicts, role=None):
    return [v for _vm, v in sorted(verdicts.items())
            if v['ok'] is not None and role in (None, v['role'])]


def _band(verdict):
    """How far from 1 a VM's ratio must be to be no tie.

    The bench's noise band, or where the A/A run shows the VM's mean
    moving further from noise alone, that band (the floors' own,
    :func:`vsmtio_sim.tenants.band`): no smaller difference can be told
    from the model's noise.
    """
    return max(stats.NOISE, verdict.get('band') or 0.0)


def _direction(verdicts):
    """'+' every VM above 1, '-' every VM below, '~' otherwise."""
    if not verdicts:
        return 'n/a'
    if all(v['ratio'] > 1.0 + _band(v) for v in verdicts):
        return '+'
    if all(v['ratio'] < 1.0 - _band(v) for v in verdicts):
        return '-'
    return '~'


# What the conclusions read of a VM's verdict (vsmtio_sim.tenants.judge):
# all a point keeps of its runs once judged.
VERDICT = ('role', 'ratio', 'min_window', 'floor', 'window_floor', 'ok',
           'band')


def verdicts(runs, cycle_s=0.0, null=None):
    """One seed's runs judged per VM: ``{kernel: {vm: verdict}}``.

    ``runs`` is ``{kernel: result}`` of one seed, with the A/A run under
    ``AA`` where there is one (floors and ties net of it); ``cycle_s`` the
    period of the scenario's phases and ``null`` the null run, vanilla of
    another seed (:func:`vsmtio_sim.tenants.judge`). The product and each
    kernel of ``DIRECTIONS`` that ran, each verdict cut to ``VERDICT``:
    what a point records, and all :func:`conclude` reads.
    """
    base, aa = runs['vanilla'], runs.get(AA)
    out = {}
    for kernel in ('vsmtio',) + tuple(k for _p, k in DIRECTIONS):
        if kernel in runs:
            out[kernel] = {
                vm: {k: v.get(k) for k in VERDICT}
                for vm, v in tenants.judge(runs[kernel], base, aa, cycle_s,
                                           null).items()}
    return out


def conclude(judged_runs):
    """The conclusions at one point on one seed, from its :func:`verdicts`.

    Returns
    ``no_regression``: every honest VM under the product at its floors
    (:func:`vsmtio_sim.tenants.judge`), ``worst`` the lowest VM's ratio
    over its floor; ``gain``: the product's largest gain over vanilla for
    any honest VM, ``gains`` whether it is beyond the noise; and for each
    of ``DIRECTIONS`` the direction of that kernel against vanilla for the
    serving (``_io``) and the computing (``_cpu``) VMs.
    """
    product = judged_runs['vsmtio']
    mine, summary = _honest(product), tenants.summary(product)
    out = {
        'no_regression': summary['ok'],
        'worst': summary['worst'][1] if summary['worst'] else None,
        'gain': max((v['ratio'] - 1.0 for v in mine), default=0.0),
        'gains': any(v['ratio'] - 1.0 > _band(v) for v in mine)}
    for prefix, kernel in DIRECTIONS:
        got = judged_runs.get(kernel, {})
        out[prefix + '_io'] = _direction(_honest(got, 'serving'))
        out[prefix + '_cpu'] = _direction(_honest(got, 'computing'))
    return out


def judge(runs, cycle_s=0.0, null=None):
    """:func:`conclude` of one seed's runs (see :func:`verdicts`)."""
    return conclude(verdicts(runs, cycle_s, null))


def judge_point(point, cycle_s=0.0):
    """``{seed: verdicts()}`` of a point's runs, ``{seed: {kernel: run}}``.

    Each seed takes the next seed's vanilla run as its null run
    (:func:`nulls`).
    """
    null = nulls(point)
    return {s: verdicts(runs, cycle_s, null.get(s))
            for s, runs in point.items()}


def over_seeds(per_seed):
    """One point's conclusions over its seeds.

    ``per_seed`` is ``{seed: judge()}``. A yes-or-no conclusion holds at
    the point only if it holds in every seed (one seed's luck is no
    conclusion); a direction is the seeds' common one, ``'?'`` where
    they disagree; ``worst`` and ``gain`` become ``(mean, low, high)``
    over the seeds (:func:`vsmtio_sim.intervals.interval`).
    """
    js = [per_seed[s] for s in sorted(per_seed)]
    out = {'seeds': len(js),
           'no_regression': all(j['no_regression'] for j in js),
           'gains': bool(js) and all(j['gains'] for j in js),
           'worst': intervals.interval([j['worst'] for j in js]),
           'gain': intervals.interval([j['gain'] for j in js])}
    for prefix, _kernel in DIRECTIONS:
        for key in (prefix + '_io', prefix + '_cpu'):
            got = {j[key] for j in js}
            out[key] = got.pop() if len(got) == 1 else '?'
    return out


def judged(point):
    """:func:`over_seeds` of a point, ``{seed: verdicts()}``."""
    return over_seeds({s: conclude(v) for s, v in point.items()})


def nulls(per_seed):
    """``{seed: null run}``: each seed's, the next seed's vanilla run.

    ``per_seed`` is ``{seed: {kernel: result}}``; empty with one seed.
    """
    return tenants.nulls({s: runs['vanilla'] for s, runs in per_seed.items()})


def _shipped_label(doc, paths, values):
    """The label of the value that is the shipped one (or 'x1')."""
    tree = scenario.inputs(doc)

    def at(path):
        out = tree
        for key in path.split('.'):
            out = out[key]
        return out
    for v in values:
        if isinstance(v, Named) and all(
                at(p) == x for p, x in v.inputs.items()):
            return v.label
    first = paths.split(',')[0]
    if first.startswith('workloads.'):
        return 'x1'
    node = at(first)
    for v in values:
        if v == 'x1' or (_factor(v) is None and v == node
                         and isinstance(v, bool) == isinstance(node, bool)):
            return value_label(v)
    return 'x1'


@functools.lru_cache(maxsize=None)
def _store(kind, parts):
    # one hash of the sources per process
    return cache.Store(kind, parts)


def _trim(r):
    """What the judgement and the section read of a run (as cached)."""
    a = r.get('agent') or {}
    return dict(oracle.trim(r), settled_at_s=a.get('settled_at_s'),
                mechanisms=a.get('mechanisms'))


def _run_text(text, kernel, seed, duration, scheduler=None):
    """One run of a point (its scenario YAML ``text``), trimmed.

    ``kernel`` ``AA`` is the point's A/A run: vanilla measured after
    another history, ``runner.AA_SHIFT_S`` later at steady state, half the
    window later in a fixed-duration run. Under the host ``scheduler``
    (None: the point's own ``scheduler.policy``).
    """
    fd, path = tempfile.mkstemp(suffix='.yaml')
    with os.fdopen(fd, 'w') as f:
        f.write(text)
    ov = oracle.scheduler_overrides(scheduler)
    try:
        if kernel != AA:
            r = (runner.run(path, kernel, seed, duration=duration,
                            overrides=ov)
                 if duration else
                 runner.run(path, kernel, seed, steady=True, overrides=ov))
        elif duration:
            warmup = scenario.load(path).warmup_s
            warmup = warmup if warmup < duration else duration / 4.0
            shift = duration / 2.0
            r = runner.run(path, 'vanilla', seed, duration=duration + shift,
                           warmup_s=warmup + shift, overrides=ov)
        else:
            r = runner.run(path, 'vanilla', seed, steady=True,
                           warmup_s=runner.shifted_warmup(
                               scenario.load(path), runner.AA_SHIFT_S),
                           overrides=ov)
    finally:
        os.unlink(path)
    return _trim(r)


def _sens_job(args):
    """One cached run of the rows' study: ``(key, seed, kernel, result)``.

    A run under another scheduler than its scenario's is cached under
    that scheduler too; one under its scenario's own under the key it
    always had.
    """
    key, text, kernel, seed, duration, scheduler = args
    c = time.process_time()
    store = _store('sensitivity', cache.PRODUCT if kernel in AGENT_KERNELS
                   else cache.MODEL)

    def compute():
        r = _run_text(text, kernel, seed, duration, scheduler)
        r['cpu_s'] = time.process_time() - c
        return r
    memo_key = {'scenario': text, 'kernel': kernel, 'seed': seed,
                'duration': duration}
    if scheduler:
        memo_key['scheduler'] = scheduler
    r = store.memo(memo_key, compute)
    return key, seed, kernel, r


def _groups(fn, groups, processes, what):
    """``(group, [fn(job)])`` as each group's last job completes.

    ``groups`` is ``{group: [job]}`` in the order to run them. One queue
    over them all, ``processes`` at a time: a group is whole, and can be
    judged and recorded, as soon as its own jobs are, so a study cut short
    loses only the groups under way. Progress on stderr.
    """
    total = sum(len(jobs) for jobs in groups.values())
    if not total:
        return
    left = {g: len(jobs) for g, jobs in groups.items()}
    got = {g: [] for g in groups}
    with concurrent.futures.ProcessPoolExecutor(processes) as pool:
        futures = {pool.submit(fn, job): g
                   for g, jobs in groups.items() for job in jobs}
        for i, f in enumerate(concurrent.futures.as_completed(futures), 1):
            g, r = futures[f], f.result()
            sys.stderr.write('[%s %d/%d] %s\n' % (
                what, i, total, ' '.join(str(x) for x in r[1:-1])))
            got[g].append(r)
            left[g] -= 1
            if not left[g]:
                yield g, got.pop(g)


def point_scheduler(paths, policy, scheduler):
    """The scheduler override of a point of the row ``paths``, or None.

    ``policy`` is the point's own ``scheduler.policy``, ``scheduler`` the
    study's (None: every point's own). A row that sets the policy itself
    compares the schedulers on purpose, and is never overridden; nor is a
    point whose own policy is the study's (its run is the same, and stays
    cached under the same key).
    """
    if (scheduler is None or scheduler == policy
            or POLICY in paths.split(',')):
        return None
    return scheduler


def identity():
    """What ``sensitivity.json``'s points were made and judged under.

    The product's code (the agent and the model every run reads), the
    floors that judged them, and the procedure: the seeds (each seed's
    null run is another seed's vanilla), the kernels and the A/A run's
    shift. A point is recorded only at steady state on ``SENS_SEEDS``.
    """
    return {'product_version': cache.version(cache.PRODUCT),
            'judge_version': cache.version(cache.JUDGE),
            'seeds': list(SENS_SEEDS), 'kernels': list(SENSITIVITY_KERNELS),
            'aa_shift_s': runner.AA_SHIFT_S, 'commit': documents.commit()}


def canonical(doc):
    """Scenario ``doc`` as it runs: every input resolved, as YAML.

    A row's value sets its input in the scenario even where it is the
    shipped one, so two rows' shipped points are different documents of
    one host; resolved (:func:`vsmtio_sim.scenario.inputs`), they are the
    same text, and share their runs.
    """
    tree = scenario.inputs(doc)
    return yaml.safe_dump({'inputs': tree, 'scenario': {
        k: v for k, v in doc.items() if k not in tree}}, sort_keys=True)


def point_key(text, scheduler):
    """A point's record key: its :func:`canonical` text and scheduler.

    The points that make one host share the key, and a row's value that
    comes to mean another host (a shipped input changed) does not find
    the old record.
    """
    return hashlib.sha256(('%s\0%s' % (text, scheduler)).encode()
                          ).hexdigest()[:16]


def recordable(duration, seeds):
    # the recorded procedure: steady state on the study's seeds
    return not duration and tuple(seeds) == tuple(SENS_SEEDS)


class _Record(object):
    """One kind of result in ``sensitivity.json`` for one study's run.

    ``kind`` is ``points`` or ``cliff``. ``done`` holds what is recorded
    for this code, read and written only for the recorded procedure
    (:func:`recordable`), under the identity taken when the run starts:
    the code that runs is the code loaded then, whatever the files become.
    """

    def __init__(self, kind, duration, seeds, path=None):
        self.kind, self.keep = kind, recordable(duration, seeds)
        self.path = path or documents.SENSITIVITY_JSON
        self.made_by = identity()
        self.done = (dict(records.read(self.path, self.made_by).get(kind, {}))
                     if self.keep else {})

    def put(self, key, entry):
        self.done[key] = entry
        if self.keep:
            records.put(self.path, self.made_by, (self.kind, key), entry)


def run_sensitivity(names, rows, processes, duration=0.0, seeds=SENS_SEEDS,
                    scheduler=None, only_recorded=False, path=None):
    """Every point of every row on every scenario, on every seed.

    Each point runs under ``SENSITIVITY_KERNELS`` and its A/A run
    (``AA``) on each seed, under the host ``scheduler`` (None: the
    point's own; :func:`point_scheduler`: the ``scheduler.policy`` row
    runs each of its values); points that make the same scenario under
    the same scheduler (the shipped value of every row) share their
    runs, and run first. A point is judged per VM (:func:`judge_point`)
    as soon as its runs are done, and at steady state on ``SENS_SEEDS``
    recorded in ``path`` (``sensitivity.json``), so the study is measured
    in parts, on any machine: a point recorded for this code is taken,
    not run again. ``only_recorded``: run nothing, the records alone.
    Returns
    ``({scenario: {paths: {'shipped': label, 'schedulers': {label:
    policy}, 'points': {label: {seed: verdicts()}}, 'missing': [label
    not measured]}}}, CPU seconds)``; seeds are strings, as JSON keeps
    them. The CPU seconds are what the points' runs cost, a cached or
    recorded one what it cost when it ran.
    """
    record = _Record('points', duration, seeds, path)
    done = record.done
    docs, where, first = {}, [], set()
    for name in names:
        doc = scenario.load_doc(name)[0]
        for paths, values, _why in rows:
            shipped = _shipped_label(doc, paths, values)
            at_shipped = next(v for v in values if value_label(v) == shipped)
            for v in values:
                pdoc = point_doc(doc, paths, v)
                policy = scenario.inputs(pdoc)['scheduler']['policy']
                sched = point_scheduler(paths, policy, scheduler)
                if (sched or policy) not in READ_BY.get(paths,
                                                        (sched or policy,)):
                    # not read under this scheduler: the shipped point
                    pdoc = point_doc(doc, paths, at_shipped)
                text = yaml.safe_dump(pdoc, sort_keys=True)
                key = point_key(canonical(pdoc), sched or policy)
                docs.setdefault(key, (name, text, sched, sched or policy))
                if value_label(v) == shipped:
                    first.add(key)
                where.append((name, paths, shipped, value_label(v), key,
                              sched or policy))
    # the shipped points first: every row's directions are read from it;
    # within a point the agent's kernels, which take longest
    order = sorted((k for k in docs if k not in done),
                   key=lambda k: k not in first)
    groups = {k: sorted(((k, docs[k][1], kern, seed, duration, docs[k][2])
                         for seed in seeds
                         for kern in SENSITIVITY_KERNELS + (AA,)),
                        key=lambda j: j[2] not in AGENT_KERNELS)
              for k in order}
    for key, got in ([] if only_recorded else
                     _groups(_sens_job, groups, processes, 'sensitivity')):
        name, _text, _sched, policy = docs[key]
        point = {}
        for _k, seed, kernel, r in got:
            point.setdefault(str(seed), {})[kernel] = r
        record.put(key, {'scenario': name, 'scheduler': policy,
                         'cpu_s': sum(r.get('cpu_s', 0.0) for *_x, r in got),
                         'seeds': judge_point(point, tenants.cycle_s(
                             scenario.load(name)))})
    out = {}
    for name, paths, shipped, label, key, policy in where:
        row = out.setdefault(name, {}).setdefault(
            paths, {'shipped': shipped, 'points': {}, 'schedulers': {},
                    'missing': []})
        if key in done:
            row['points'][label] = done[key]['seeds']
            row['schedulers'][label] = policy
        else:
            row['missing'].append(label)
    return out, sum(done[k].get('cpu_s', 0.0) for k in docs if k in done)


def serving_vms(name):
    """The honest serving VMs of scenario ``name``: the lever's VMs."""
    sc = scenario.load(name)
    return [vm['name'] for vm in sc.vms if sc.vm_kind(vm['name']) != 'cpu'
            and vm['name'] not in sc.adversaries]


def _cliff_job(args):
    """One cached static run of the cliff sweep."""
    where, text, label, cfg, seed, sched, measure_s, shift_s = args
    c = time.process_time()

    def compute():
        fd, path = tempfile.mkstemp(suffix='.yaml')
        with os.fdopen(fd, 'w') as f:
            f.write(text)
        try:
            r = oracle.run(path, cfg['family'] if cfg else 'vanilla', cfg,
                           measure_s, seed, sched, shift_s)
        finally:
            os.unlink(path)
        r['cpu_s'] = time.process_time() - c
        return r
    r = _store('sensitivity-cliff', cache.MODEL).memo(
        {'scenario': text, 'config': cfg, 'seed': seed, 'scheduler': sched,
         'measure_s': measure_s, 'shift_s': shift_s}, compute)
    return where, seed, label, r


def cliff_factor(factor):
    return 'x%g' % factor


def run_cliff(name=CLIFF_SCENARIO, seeds=SENS_SEEDS, processes=1,
              duration=0.0, factors=CLIFF_FACTORS, wakeups=WAKEUP_US,
              schedulers=CLIFF_SCHEDULERS, only_recorded=False, path=None):
    """The static weight factor on every serving VM of ``name``, swept.

    No agent: each factor applied once (:func:`space.setup_for`), with
    vanilla and its A/A run of the same scheduler, granularity and seed as
    the reference. Under CFS every one of ``wakeups``; EEVDF reads no
    wake-up granularity, so it runs the scenario's own (its label
    ``NOT_READ``). ``duration`` > 0 measures that many seconds after
    the warm-up instead of the steady window (to try the code). Each
    curve (a scheduler and granularity) is judged per VM as soon as its
    runs are done and recorded as :func:`run_sensitivity`'s points are.
    Returns ``({'scenario', 'serving', 'factors', 'points': {scheduler:
    {granularity label: {seed: {factor label: verdicts}}}}, 'missing':
    [(scheduler, granularity label)]}, CPU seconds)``.
    """
    record = _Record('cliff', duration, seeds, path)
    done = record.done
    doc = scenario.load_doc(name)[0]
    serving = serving_vms(name)
    labels = [cliff_factor(f) for f in factors]
    measure_s = duration or None
    shift_s = duration / 2.0 if duration else runner.AA_SHIFT_S
    curves, groups = {}, {}
    for sched in schedulers:
        for w in (wakeups if sched == 'cfs' else (None,)):
            wdoc = doc if w is None else scenario.set_input(
                doc, 'scheduler.wakeup_granularity_us', w)
            text = yaml.safe_dump(wdoc, sort_keys=True)
            where = (sched, NOT_READ if w is None else str(w))
            key = point_key(canonical(wdoc), sched)
            curves[key] = where
            got = done.get(key, {}).get('seeds', {})
            if all(set(labels) <= set(got.get(str(s), ())) for s in seeds):
                continue
            jobs = groups[key] = []
            for seed in seeds:
                jobs.append((where, text, 'vanilla', None, seed, sched,
                             measure_s, 0.0))
                jobs.append((where, text, AA, None, seed, sched,
                             measure_s, shift_s))
                jobs.extend((where, text, cliff_factor(f), dict(
                    space.all_off('vsmtio'),
                    weights={vm: f for vm in serving}),
                    seed, sched, measure_s, 0.0) for f in factors)
    cycle = tenants.cycle_s(scenario.load(name))
    for key, got in ([] if only_recorded else
                     _groups(_cliff_job, groups, processes, 'cliff')):
        per_seed = {}
        for _where, seed, label, r in got:
            per_seed.setdefault(str(seed), {})[label] = r
        null = nulls(per_seed)
        record.put(key, {'scenario': name, 'scheduler': curves[key][0],
                         'wakeup_granularity_us': curves[key][1],
                         'cpu_s': sum(r.get('cpu_s', 0.0) for *_x, r in got),
                         'seeds': {s: cliff_verdicts(runs, labels, cycle,
                                                     null.get(s))
                                   for s, runs in per_seed.items()}})
    points, missing = {}, []
    for key, (sched, w) in curves.items():
        if key in done:
            points.setdefault(sched, {})[w] = done[key]['seeds']
        else:
            missing.append((sched, w))
    return {'scenario': name, 'serving': serving, 'factors': labels,
            'points': points, 'missing': missing}, sum(
                done[k].get('cpu_s', 0.0) for k in curves if k in done)


def cliff_verdicts(runs, factors, cycle_s=0.0, null=None):
    """One seed of a curve judged per VM: ``{factor: {vm: verdict}}``.

    ``runs`` holds vanilla, its A/A run (``AA``) and each of ``factors``
    of one seed; ``cycle_s`` and ``null`` as for :func:`verdicts`.
    """
    return {f: {vm: {k: v.get(k) for k in VERDICT}
                for vm, v in tenants.judge(runs[f], runs['vanilla'],
                                           runs.get(AA), cycle_s,
                                           null).items()}
            for f in factors if f in runs}


def cliff_judge(judged_runs):
    """One seed's figures at one factor, from its verdicts.

    ``io_gain`` is the geometric mean of the honest serving VMs' ratios,
    ``cpu_low`` the lowest honest computing VM's ratio (what the weight
    takes from), ``ok`` every honest VM at its floors net of the A/A run.
    """
    s = tenants.summary(judged_runs)
    computing = _honest(judged_runs, 'computing')
    return {'io_gain': s['io_gain'], 'ok': s['ok'],
            'cpu_low': min((v['ratio'] for v in computing), default=None)}
