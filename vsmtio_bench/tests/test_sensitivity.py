"""The benchmark's sensitivity study: its logic, on fabricated results.

The study itself runs for hours and asserts nothing; what it concludes
from its runs is code, tested here on per-VM results made up to exercise
each case (not numbers any run printed): the judgement of one seed, the
verdict over seeds, the rows' conclusions and which survive every row,
the cliff's arithmetic, and that the section is valid RST.
"""

import io
import json
import os

import fixtures
import testtools
import yaml

from vsmtio_bench import oracle
from vsmtio_bench import records
from vsmtio_bench import sensitivity as bench
from vsmtio_bench import sensitivity_page as page
from vsmtio_bench import sim
from vsmtio_bench.tests import test_document as rst
from vsmtio_bench.tests import test_sim
from vsmtio_sim import intervals
from vsmtio_sim import runner
from vsmtio_sim import scenario


def vm(kind, req=0.0, instr=0.0, adversary=False):
    return {'kind': kind, 'adversary': adversary, 'requests_per_s': req,
            'instructions_per_s': instr}


BASE = {'kv': vm('io', req=100.0), 'web': vm('io', req=100.0),
        'batch': vm('cpu', instr=100.0),
        'gamer': vm('mixed', 100.0, 100.0, adversary=True)}


def scaled(ratios):
    """Vanilla's VMs (100 each) with each VM of ``ratios`` scaled."""
    out = {}
    for name, b in BASE.items():
        r = ratios.get(name, 1.0)
        out[name] = dict(b, requests_per_s=b['requests_per_s'] * r,
                         instructions_per_s=b['instructions_per_s'] * r)
    return {'vms': out}


def swinging(ratios, swing):
    """:func:`scaled` over 80 windows of 0.5 s.

    Each VM of ``ratios`` swings ``swing`` up and down from one 5 s batch
    to the next.
    """
    out = scaled(ratios)
    steady = scaled({})['vms']
    out['windows'] = {'window_s': 0.5, 'vms': [
        {name: {m: v[m] * (1 + swing * (-1) ** (i // 10)
                           if name in ratios else v[m])
                for m in ('requests_per_s', 'instructions_per_s')}
         for name, v in steady.items()} for i in range(80)]}
    return out


def point(product, paper=None, haltpoll=None, aa=None):
    """One seed's runs; ``product``, ``paper``...: {vm: ratio}."""
    runs = {'vanilla': {'vms': BASE}, 'vsmtio': scaled(product),
            'vsmtio-paper': scaled(paper or {}),
            'haltpoll': scaled(haltpoll or {})}
    if aa is not None:
        runs[bench.AA] = scaled(aa)
    return runs


def seeded(*points):
    """A point over seeds '1', '2', ...: one seed per run of ``points``."""
    return {str(i): p for i, p in enumerate(points, 1)}


def judged(runs, cycle_s=0.0):
    """A point's runs judged per VM, as recorded, then over its seeds."""
    return bench.judged(bench.judge_point(runs, cycle_s))


def recorded_rows(raw):
    """The study's results with each point's runs judged, as recorded."""
    return {name: {paths: dict(got, points={
        label: bench.judge_point(point)
        for label, point in got['points'].items()})
        for paths, got in rows.items()} for name, rows in raw.items()}


def recorded_cliff(raw):
    """A cliff sweep's runs judged per seed and factor, as recorded."""
    return dict(raw, points={
        sched: {w: {s: bench.cliff_verdicts(runs, raw['factors'], 0.0,
                                            bench.nulls(per_seed).get(s))
                    for s, runs in per_seed.items()}
                for w, per_seed in grans.items()}
        for sched, grans in raw['points'].items()})


class TestJudge(testtools.TestCase):

    def test_each_vm_is_judged_not_the_class_total(self):
        # the serving class gains in total (1.3 + 0.9) while one VM loses
        j = bench.judge(point({'kv': 1.3, 'web': 0.9}))
        self.assertFalse(j['no_regression'])
        self.assertAlmostEqual(0.9, j['worst'])
        self.assertAlmostEqual(0.3, j['gain'])
        self.assertTrue(j['gains'])

    def test_floors_by_what_a_vm_does(self):
        self.assertTrue(bench.judge(point({'batch': 0.971}))[
            'no_regression'])
        self.assertFalse(bench.judge(point({'batch': 0.95}))[
            'no_regression'])
        # a serving VM's floor is vanilla itself
        self.assertFalse(bench.judge(point({'kv': 0.97}))['no_regression'])

    def test_the_aa_run_lowers_the_floor_and_widens_the_tie(self):
        # vanilla against itself swings kv 2% from one batch of windows
        # to the next: 0.985 is within that noise
        runs = point({'kv': 0.985})
        vanilla = swinging({}, 0.0)
        runs.update(vanilla=vanilla, aa=swinging({'kv': 1.0}, 0.02))
        self.assertTrue(bench.judge(runs)['no_regression'])
        self.assertFalse(bench.judge(point({'kv': 0.985}))['no_regression'])
        paper = {'kv': 1.015, 'web': 1.015}
        self.assertEqual('+', bench.judge(point({}, paper))['paper_io'])
        swung = point({}, paper)
        swung.update(vanilla=vanilla, aa=swinging({'kv': 1.0}, 0.02))
        self.assertEqual('~', bench.judge(swung)['paper_io'])
        # a 1.5% gain inside that noise is no gain
        swung = point({'kv': 1.015})
        swung.update(vanilla=vanilla, aa=swinging({'kv': 1.0}, 0.02))
        self.assertFalse(bench.judge(swung)['gains'])
        # one A/A draw 2% from 1 with no spread is no noise band
        self.assertTrue(bench.judge(point({'kv': 1.015}, aa={
            'kv': 1.02}))['gains'])

    def test_the_adversary_is_not_judged(self):
        j = bench.judge(point({'gamer': 0.1}, {'gamer': 5.0}))
        self.assertTrue(j['no_regression'])
        self.assertEqual(0.0, j['gain'])

    def test_a_cycling_host_is_judged_by_cycles(self):
        # kv moves half a window's requests to the next at a phase change
        # of a 5 s cycle: no loss over the cycle, or on the whole
        def windows(r):
            rate = {0: 0.5, 1: 1.5}
            r['windows'] = {'window_s': 0.5, 'vms': [
                {name: {m: v[m] * (rate.get(i % 10, 1.0)
                                   if name == 'kv' else 1.0)
                        for m in ('requests_per_s', 'instructions_per_s')}
                 for name, v in BASE.items()} for i in range(80)]}
            return r
        runs = point({})
        runs['vanilla'] = windows(scaled({}))
        runs['vsmtio'] = windows(scaled({}))
        for w in runs['vanilla']['windows']['vms']:
            w['kv'] = w['web']
        self.assertFalse(bench.judge(runs)['no_regression'])
        self.assertTrue(bench.judge(runs, cycle_s=5.0)['no_regression'])
        self.assertTrue(judged(seeded(runs), 5.0)['no_regression'])

    def test_directions_per_class_and_kernel(self):
        j = bench.judge(point({}, {'kv': 1.2, 'web': 1.1, 'batch': 0.9},
                              {'kv': 1.1, 'web': 1.1}))
        self.assertEqual(('+', '-'), (j['paper_io'], j['paper_cpu']))
        self.assertEqual(('+', '~'), (j['haltpoll_io'], j['haltpoll_cpu']))
        j = bench.judge(point({}, {'kv': 1.2, 'web': 0.9}))
        self.assertEqual('~', j['paper_io'])
        # within the noise is no direction
        j = bench.judge(point({}, {'batch': 1.001}))
        self.assertEqual('~', j['paper_cpu'])


class TestOverSeeds(testtools.TestCase):

    def test_a_conclusion_holds_only_in_every_seed(self):
        j = judged(seeded(point({'kv': 1.1}), point({'kv': 0.9})))
        self.assertFalse(j['no_regression'])
        self.assertEqual(2, j['seeds'])
        j = judged(seeded(point({'kv': 1.1}), point({'kv': 1.001})))
        self.assertTrue(j['no_regression'])
        # a gain in one seed only is no gain
        self.assertFalse(j['gains'])

    def test_figures_are_means_with_their_interval(self):
        j = judged(seeded(point({'kv': 1.10}), point({'kv': 1.20}),
                          point({'kv': 1.30})))
        m, lo, hi = j['gain']
        self.assertAlmostEqual(0.2, m)
        for want, got in zip(intervals.interval([0.1, 0.2, 0.3]),
                             (m, lo, hi)):
            self.assertAlmostEqual(want, got)
        self.assertEqual('+20.0±24.8', page.pm(j['gain'], '%+.1f', 100.0))
        self.assertEqual('1.000', page.pm((1.0, None, None)))
        self.assertEqual('-', page.pm((None, None, None)))

    def test_each_seed_takes_the_next_seeds_vanilla_as_its_null_run(self):
        pts = seeded(point({}), point({}), point({}))
        got = bench.nulls(pts)
        for seed, nxt in (('1', '2'), ('2', '3'), ('3', '1')):
            self.assertIs(pts[nxt]['vanilla'], got[seed])
        self.assertEqual({}, bench.nulls(seeded(point({}))))

    def test_seeds_that_disagree_on_a_direction(self):
        j = judged(seeded(point({}, {'kv': 1.2, 'web': 1.2}),
                          point({}, {'kv': 0.8, 'web': 0.8})))
        self.assertEqual('?', j['paper_io'])
        j = judged(seeded(point({}, {'kv': 1.2, 'web': 1.2}),
                          point({}, {'kv': 1.1, 'web': 1.3})))
        self.assertEqual('+', j['paper_io'])


class TestConclusions(testtools.TestCase):

    def points(self, *rows):
        return [(label, judged(seeded(*(point(*p) for p in per))))
                for label, per in rows]

    def test_all_hold(self):
        good = {'kv': 1.2, 'web': 1.2, 'batch': 0.9}
        c = page.conclusions(self.points(
            ('0', [({'kv': 1.1}, good), ({'kv': 1.1}, good)]),
            ('1024', [({'kv': 1.04}, good), ({'kv': 1.06}, good)])),
            '1024')
        self.assertTrue(c['no_regression'].startswith('holds: '))
        self.assertIn('1.000±0.000*', c['no_regression'])
        self.assertEqual('holds: + +*', c['paper_io'])
        self.assertEqual('holds: - -*', c['paper_cpu'])
        self.assertEqual('holds: +10.0±0.0% +5.0±12.7%*', c['gain'])
        self.assertEqual('holds: ~ ~*', c['haltpoll_io'])

    def test_what_fails_and_flips_is_named_by_value(self):
        good = {'kv': 1.3, 'web': 1.2, 'batch': 0.8}
        c = page.conclusions(self.points(
            ('0', [({'batch': 0.9}, {'kv': 0.8, 'web': 0.8, 'batch': 1.1})]),
            ('1024', [({}, good)]),
            ('8192', [({'kv': 1.2}, good)])), '1024')
        self.assertTrue(c['no_regression'].startswith('fails at 0: '))
        self.assertTrue(c['paper_io'].startswith('flips at 0: - +* +'))
        self.assertTrue(c['paper_cpu'].startswith('flips at 0: '))
        self.assertTrue(c['gain'].startswith('only at 8192: '))

    def test_one_bad_seed_fails_the_value(self):
        c = page.conclusions(self.points(
            ('a', [({'kv': 1.1}, {}), ({'kv': 0.9}, {})]),
            ('b', [({'kv': 1.1}, {}), ({'kv': 1.1}, {})])), 'a')
        self.assertTrue(c['no_regression'].startswith('fails at a: '))

    def test_no_gain_anywhere(self):
        c = page.conclusions(self.points(('a', [({}, {})]),
                                         ('b', [({}, {})])), 'a')
        self.assertTrue(c['gain'].startswith('none anywhere'))


def results():
    """:func:`raw_results` judged, as the study records them."""
    return recorded_rows(raw_results())


def raw_results():
    """Two rows of one scenario; EEVDF breaks the floors, CFS does not."""
    ok, bad = point({'kv': 1.1}), point({'kv': 0.9})
    return {'s': {
        'scheduler.policy': {
            'shipped': 'cfs', 'schedulers': {'cfs': 'cfs', 'eevdf': 'eevdf'},
            'points': {'cfs': seeded(ok, ok), 'eevdf': seeded(bad, ok)}},
        'scheduler.vm_cgroup_shares': {
            'shipped': '1024', 'schedulers': {'0': 'cfs', '1024': 'cfs'},
            'points': {'0': seeded(ok, point({'kv': 1.2})),
                       '1024': seeded(ok, ok)}}}}


class TestSurvival(testtools.TestCase):

    def test_per_scheduler_and_where_they_differ(self):
        text = page.survival(results(), ['s'])
        cfs, eevdf, differ = text.strip().split('\n')
        self.assertTrue(cfs.startswith('- Under CFS (3 point(s)): holding '
                                       'at every point: (a) '))
        self.assertIn('Nothing fails', cfs)
        self.assertIn('(a) the product\'s no-regression fails at s '
                      '``scheduler.policy=eevdf``', eevdf)
        # the bad seed under EEVDF also has no gain: (c) needs every seed
        self.assertEqual('- Differing by scheduler: (a) the product\'s '
                         'no-regression; (c) the product\'s gain.', differ)

    def test_a_conclusion_failing_everywhere_is_said_so(self):
        res = raw_results()
        for got in res['s'].values():
            for point in got['points'].values():
                for runs in point.values():
                    runs['vsmtio'] = scaled({'batch': 0.5})
        cfs = page.survival(recorded_rows(res), ['s']).split('\n')[0]
        self.assertIn('no-regression fails at every point', cfs)

    def test_one_scheduler_has_no_comparison(self):
        res = results()
        del res['s']['scheduler.policy']
        text = page.survival(res, ['s'])
        self.assertEqual(1, len(text.strip().split('\n')))
        self.assertEqual('', page.survival({}, ['s']))


def cliff():
    """:func:`raw_cliff` judged, as the study records it."""
    return recorded_cliff(raw_cliff())


def raw_cliff():
    """Two seeds; x2.5 keeps the floors, x2.75 breaks them in one seed."""
    def seed(cpu_275):
        runs = {'vanilla': {'vms': BASE}, bench.AA: scaled({})}
        runs['x2.5'] = scaled({'kv': 1.5, 'web': 1.6, 'batch': 0.99})
        runs['x2.75'] = scaled({'kv': 4.0, 'web': 4.0, 'batch': cpu_275})
        return runs
    return {'scenario': 'fig5_x', 'serving': ['kv', 'web'],
            'factors': ['x2.5', 'x2.75'],
            'points': {'cfs': {'4000': {'1': seed(0.8), '2': seed(0.98)}},
                       'eevdf': {bench.NOT_READ: {'1': seed(0.98),
                                                  '2': seed(0.98)}}}}


class TestCliff(testtools.TestCase):

    def test_each_factor_over_the_seeds(self):
        rows = page.cliff_rows(cliff())
        self.assertEqual(4, len(rows))
        sched, gran, factor, io, cpu, kept = rows[1]
        self.assertEqual(('cfs', '4000', 'x2.75'), (sched, gran, factor))
        self.assertEqual('4.000±0.000', io)
        # 0.8 and 0.98: mean 0.89, half-interval t(0.975, 1) * 0.09
        self.assertEqual(page.pm(intervals.interval([0.8, 0.98])), cpu)
        self.assertTrue(cpu.startswith('0.890±1.14'))
        self.assertEqual('1/2', kept)
        # the geometric mean of the serving VMs, not their sum
        self.assertEqual('1.549±0.000', rows[0][3])
        self.assertEqual('2/2', rows[0][5])
        self.assertEqual(['eevdf', bench.NOT_READ, 'x2.75', '4.000±0.000',
                          '0.980±0.000', '2/2'], rows[3])

    def test_the_text_says_where_the_floors_end_and_the_step(self):
        text = page.cliff_text(cliff())
        cfs, eevdf = text.strip().split('\n')
        self.assertIn('CFS, wake-up granularity 4000 us: floors kept in '
                      'every seed at x2.5 only (the best I/O gain among '
                      'them 1.549±0.000 at x2.5)', cfs)
        self.assertIn('falls most from x2.5 to x2.75', cfs)
        self.assertIn('EEVDF, wake-up granularity not read: floors kept in '
                      'every seed at every factor (the best I/O gain among '
                      'them 4.000±0.000 at x2.75)', eevdf)
        # 0.99 to 0.98 is a step, 0.99 to 0.988 within the noise is not
        self.assertIn('falls most', eevdf)
        flat = raw_cliff()
        for runs in flat['points']['eevdf'][bench.NOT_READ].values():
            runs['x2.75'] = scaled({'batch': 0.988})
        self.assertIn('no step of the computing VMs\' lowest ratio beyond',
                      page.cliff_text(recorded_cliff(flat)).strip().split(
                          '\n')[1])


class TestSection(testtools.TestCase):

    def test_the_section_is_valid_rst(self):
        text = page.sensitivity_section(results(), ['s'], 60.0, 1.0,
                                        cliff())
        self.assertEqual([], rst.warnings(rst.parse(text)))
        self.assertIn('Sensitivity\n===========', text)
        self.assertIn('seeds 1, 2', text)
        self.assertIn('Every point runs under CFS, but the '
                      '``scheduler.policy`` row\'s, one under each '
                      'scheduler.', ' '.join(text.split()))
        self.assertIn('The weight lever\'s cliff\n---', text)
        self.assertIn('fails at eevdf', text)

    def test_the_cliff_alone(self):
        text = page.sensitivity_section({}, [], 0.0, 0.0, cliff())
        self.assertEqual([], rst.warnings(rst.parse(text)))
        self.assertNotIn('(a) no regression', text)

    def test_a_study_left_out_says_so(self):
        text = page.sensitivity_section({}, [], 0.0, 0.0, None)
        self.assertEqual([], rst.warnings(rst.parse(text)))
        self.assertIn('Not run with these runs', text)
        self.assertIn('--sensitivity-only', text)

    def test_table_rows_come_from_the_results(self):
        rows = page.sensitivity_rows(results(), ['s'])
        self.assertEqual([['s', 'scheduler.policy'],
                          ['s', 'scheduler.vm_cgroup_shares']],
                         [r[:2] for r in rows])
        self.assertTrue(rows[0][2].startswith('fails at eevdf'))
        self.assertEqual(2 + len(bench.CONCLUSIONS), len(rows[0]))


class TestSweepRows(testtools.TestCase):

    def test_every_row_names_inputs_of_every_swept_scenario(self):
        for name in bench.SENSITIVITY_SCENARIOS:
            doc = scenario.load_doc(name)[0]
            for paths, values, why in bench.SWEEP:
                self.assertTrue(why)
                self.assertGreater(len(values), 1)
                # the shipped value is one of the points
                shipped = bench._shipped_label(doc, paths, values)
                self.assertIn(shipped, [bench.value_label(v) for v in values])
                for v in values:
                    scenario.from_dict(bench.point_doc(doc, paths, v))

    def test_the_scheduler_rows_reach_the_model(self):
        doc = scenario.load_doc('fig4_hbase_matmul')[0]
        shipped = scenario.inputs(doc)['scheduler']
        self.assertIn(shipped['wakeup_granularity_us'], bench.WAKEUP_US)
        for w in bench.WAKEUP_US:
            sc = scenario.from_dict(bench.point_doc(
                doc, 'scheduler.wakeup_granularity_us', w))
            self.assertEqual(w, sc.scheduler['wakeup_granularity_us'])
        sc = scenario.from_dict(bench.point_doc(doc, 'scheduler.policy',
                                                'cfs'))
        self.assertEqual('cfs', sc.scheduler['policy'])
        self.assertEqual('eevdf', bench._shipped_label(
            doc, 'scheduler.policy', ('cfs', 'eevdf')))

    def test_halt_polling_and_the_product_are_both_studied(self):
        self.assertIn('haltpoll', bench.SENSITIVITY_KERNELS)
        self.assertIn('vsmtio', bench.SENSITIVITY_KERNELS)
        # per_core is swept on a Fig. 4 scenario
        self.assertTrue(any(n.startswith('fig4_')
                            for n in bench.SENSITIVITY_SCENARIOS))
        self.assertIn('costs.host_idle.per_core',
                      [p for p, _v, _w in bench.SWEEP])

    def test_the_cliff_scenario_and_its_lever(self):
        self.assertEqual(['dbt1-1', 'dbt1-2'],
                         bench.serving_vms(bench.CLIFF_SCENARIO))
        doc = scenario.load_doc(bench.CLIFF_SCENARIO)[0]
        for w in bench.WAKEUP_US:
            scenario.from_dict(scenario.set_input(
                doc, 'scheduler.wakeup_granularity_us', w))

    def test_the_shipped_points_of_all_rows_are_one_host(self):
        for name in bench.SENSITIVITY_SCENARIOS:
            doc = scenario.load_doc(name)[0]
            shipped = {bench.canonical(bench.point_doc(doc, paths, v))
                       for paths, values, _why in bench.SWEEP for v in values
                       if bench.value_label(v) == bench._shipped_label(
                           doc, paths, values)}
            self.assertEqual({bench.canonical(doc)}, shipped)
        # and one host runs as one: two rows' shipped documents, which
        # differ as text, give the same run
        doc = scenario.load_doc('fig4_hbase_matmul')[0]
        a, b = (yaml.safe_dump(bench.point_doc(doc, paths, v))
                for paths, v in (('costs.cache_refill_gbps', 16),
                                 ('vsmtio.retention_yields', False)))
        self.assertNotEqual(a, b)
        self.assertEqual(bench._run_text(a, 'vsmtio', 1, 0.3),
                         bench._run_text(b, 'vsmtio', 1, 0.3))

    def test_real_runs_judged_keep_through_the_record(self):
        # the simulator's own results, judged per VM, survive JSON: what
        # a point records is what the page reads back
        doc = scenario.load_doc('fig4_hbase_matmul')[0]
        text = yaml.safe_dump(doc, sort_keys=True)
        point = {str(seed): {k: bench._run_text(text, k, seed, 0.3)
                             for k in bench.SENSITIVITY_KERNELS + (bench.AA,)}
                 for seed in (1, 2)}
        judged = bench.judge_point(point)
        self.assertEqual({'vsmtio', 'vsmtio-paper', 'haltpoll'},
                         set(judged['1']))
        self.assertEqual({'hbase', 'matmul'}, set(judged['1']['vsmtio']))
        path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            'sensitivity.json')
        records.put(path, {'v': 1}, ('points', 'k'), judged)
        back = records.read(path, {'v': 1})['points']['k']
        self.assertEqual(judged, back)
        self.assertEqual(bench.judged(judged), bench.judged(back))

    def test_a_named_value_sets_each_of_its_inputs(self):
        doc = scenario.load_doc('fig4_hbase_matmul')[0]
        paths, values, _why = next(r for r in bench.SWEEP
                                   if 'host_idle.states' in r[0])
        self.assertEqual('skx', bench._shipped_label(doc, paths, values))
        got = {bench.value_label(v): scenario.from_dict(
            bench.point_doc(doc, paths, v)).costs['host_idle']
            for v in values}
        self.assertEqual('shallowest', got['c1-only']['governor'])
        self.assertEqual(('menu', 290), (got['spr']['governor'],
                                         got['spr']['states'][-1][
                                             'exit_latency_us']))
        # the shipped value is the shipped host, one point with the others'
        self.assertEqual(bench.canonical(doc), bench.canonical(
            bench.point_doc(doc, paths, values[1])))
        # per_core, another row's input, is left as shipped
        self.assertEqual({True}, {h['per_core'] for h in got.values()})

    def test_scaled_values_move_every_path_of_a_row(self):
        doc = scenario.load_doc('fig4_hbase_matmul')[0]
        paths = 'costs.vm_exit_ns,costs.ipi_ns'
        sc = scenario.from_dict(bench.point_doc(doc, paths, 'x2'))
        base = scenario.from_dict(doc)
        for key in ('vm_exit_ns', 'ipi_ns'):
            self.assertEqual(2 * base.costs[key], sc.costs[key])
        self.assertEqual(base.costs['l1d_flush_ns'],
                         sc.costs['l1d_flush_ns'])


class TestScheduler(testtools.TestCase):
    """``--scheduler`` reaches the rows' runs; the policy row runs both."""

    NAME = 'fig4_hbase_matmul'
    WAKEUP = 'scheduler.wakeup_granularity_us'

    def setUp(self):
        super().setUp()
        test_sim.in_process(self)
        self.keys, self.runs = [], []

        class Store(object):
            def memo(store, key, compute):
                self.keys.append(key)
                return compute()
        self.useFixture(fixtures.MockPatchObject(bench, '_store',
                                                 return_value=Store()))

        def run(path, kernel, seed=1, **kw):
            sched = scenario.load(path).scheduler
            self.runs.append((sched['policy'],
                              sched['wakeup_granularity_us'],
                              kw.get('overrides')))
            return test_sim.result()
        self.useFixture(fixtures.MockPatchObject(runner, 'run',
                                                 side_effect=run))
        doc = scenario.load_doc(self.NAME)[0]
        self.shipped = scenario.inputs(doc)['scheduler']

    def study(self, scheduler):
        rows = [r for r in bench.SWEEP if r[0] in (bench.POLICY,
                                                   self.WAKEUP)]
        return bench.run_sensitivity([self.NAME], rows, 1, 1.0, (1,),
                                     scheduler)[0][self.NAME]

    def test_every_row_under_the_scheduler_but_the_policy_row(self):
        self.assertEqual('eevdf', self.shipped['policy'])
        got = self.study('cfs')
        w = self.shipped['wakeup_granularity_us']
        runs = len(bench.SENSITIVITY_KERNELS) + 1
        self.assertEqual(sorted(
            [('cfs', w, None), ('eevdf', w, None)] * runs +
            [('eevdf', x, test_sim.CFS) for x in bench.WAKEUP_US] * runs,
            key=str), sorted(self.runs, key=str))
        self.assertEqual({'cfs': 'cfs', 'eevdf': 'eevdf'},
                         got[bench.POLICY]['schedulers'])
        self.assertEqual({str(x): 'cfs' for x in bench.WAKEUP_US},
                         got[self.WAKEUP]['schedulers'])
        # cached apart from the same scenario's runs under its own
        self.assertEqual(len(bench.WAKEUP_US) * runs, sum(
            k.get('scheduler') == 'cfs' for k in self.keys))
        self.assertEqual(['cfs'], page.rows_schedulers({self.NAME: got}))

    def test_the_scenarios_own_scheduler_is_no_override(self):
        got = self.study('eevdf')
        self.assertEqual({None}, {ov for _p, _w, ov in self.runs})
        # EEVDF reads no wake-up granularity: each of the row's values is
        # the shipped point, run once, beside the policy row's CFS point
        runs = len(bench.SENSITIVITY_KERNELS) + 1
        w = self.shipped['wakeup_granularity_us']
        self.assertEqual(sorted([('cfs', w, None), ('eevdf', w, None)] *
                                runs, key=str), sorted(self.runs, key=str))
        point = got[self.WAKEUP]['points']
        self.assertEqual(1, len({str(p) for p in point.values()}))
        self.assertEqual({str(x): 'eevdf' for x in bench.WAKEUP_US},
                         got[self.WAKEUP]['schedulers'])
        # the same runs, under the same cache keys, as no --scheduler
        keys = list(self.keys)
        del self.keys[:]
        again = self.study(None)
        self.assertEqual(keys, self.keys)
        self.assertEqual(
            {p: (g['shipped'], g['schedulers']) for p, g in got.items()},
            {p: (g['shipped'], g['schedulers']) for p, g in again.items()})
        self.assertFalse(any('scheduler' in k for k in keys))

    def test_point_scheduler(self):
        self.assertIsNone(bench.point_scheduler(self.WAKEUP, 'eevdf', None))
        self.assertIsNone(bench.point_scheduler(self.WAKEUP, 'cfs', 'cfs'))
        self.assertEqual('cfs', bench.point_scheduler(self.WAKEUP, 'eevdf',
                                                      'cfs'))
        self.assertIsNone(bench.point_scheduler(bench.POLICY, 'eevdf',
                                                'cfs'))
        self.assertIsNone(bench.point_scheduler(
            'costs.x,' + bench.POLICY, 'eevdf', 'cfs'))


class TestRecords(testtools.TestCase):
    """Each point is judged and recorded as its runs complete.

    A point recorded for this code is taken, not run again, so the study
    is measured in parts, on any machine; a development run (a transient,
    other seeds) records nothing.
    """

    NAME = 'fig4_hbase_matmul'
    ROWS = [r for r in bench.SWEEP if r[0] == 'scheduler.vm_cgroup_shares']

    def setUp(self):
        super().setUp()
        test_sim.in_process(self)
        self.path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                                 'sensitivity.json')
        self.runs = []

        class Store(object):
            def memo(store, key, compute):
                return compute()
        self.useFixture(fixtures.MockPatchObject(bench, '_store',
                                                 return_value=Store()))

        def run(path, kernel, seed=1, **kw):
            self.runs.append((kernel, seed))
            gain = {'vsmtio': {'kv': 1.1}}.get(kernel, {})
            return test_sim.result(vms=scaled(gain)['vms'])
        self.useFixture(fixtures.MockPatchObject(runner, 'run',
                                                 side_effect=run))

        def static(path, kernel, cfg, measure_s, seed, sched, shift_s):
            self.runs.append((kernel, seed, sched))
            return test_sim.result(vms=scaled({'kv': 1.2} if cfg else {})[
                'vms'])
        self.useFixture(fixtures.MockPatchObject(oracle, 'run',
                                                 side_effect=static))

    def study(self, **kw):
        kw.setdefault('path', self.path)
        return bench.run_sensitivity([self.NAME], self.ROWS, 1, **kw)

    def per_run(self):
        return len(bench.SENS_SEEDS) * (len(bench.SENSITIVITY_KERNELS) + 1)

    def test_a_recorded_point_is_taken_not_run_again(self):
        first, cpu = self.study()
        # three values, the shipped one among them: three points
        self.assertEqual(3 * self.per_run(), len(self.runs))
        with open(self.path) as f:
            doc = json.load(f)
        self.assertEqual(3, len(doc['results']['points']))
        self.assertEqual(bench.cache.version(bench.cache.PRODUCT),
                         doc['product_version'])
        del self.runs[:]
        again, cpu_again = self.study()
        self.assertEqual([], self.runs)
        self.assertEqual(first, again)
        self.assertEqual(cpu, cpu_again)
        got = first[self.NAME]['scheduler.vm_cgroup_shares']
        self.assertEqual([], got['missing'])
        self.assertTrue(bench.judged(got['points']['1024'])['gains'])
        # a point lost from the record is the only one run again
        key = sorted(doc['results']['points'])[0]
        del doc['results']['points'][key]
        with open(self.path, 'w') as f:
            json.dump(doc, f)
        self.study()
        self.assertEqual(self.per_run(), len(self.runs))

    def test_recorded_alone_runs_nothing_and_names_what_is_missing(self):
        got, cpu = self.study(only_recorded=True)
        self.assertEqual([], self.runs)
        self.assertEqual(0.0, cpu)
        row = got[self.NAME]['scheduler.vm_cgroup_shares']
        self.assertEqual({}, row['points'])
        self.assertEqual(['0', '1024', '8192'], row['missing'])
        cliff, _cpu = bench.run_cliff(
            bench.CLIFF_SCENARIO, factors=(2.0,), wakeups=(1000,),
            only_recorded=True, path=self.path)
        self.assertEqual([], self.runs)
        self.assertEqual([('cfs', '1000'), ('eevdf', bench.NOT_READ)],
                         cliff['missing'])
        text = page.page(got, [self.NAME], cpu, 0.0, cliff,
                         'vsmtio-bench sim --sensitivity-only --recorded',
                         'abc1234')
        self.assertEqual([], rst.warnings(rst.parse(text)))
        self.assertIn('Not yet measured, and left out of every verdict and '
                      'table below:\n\n- fig4_hbase_matmul '
                      '``scheduler.vm_cgroup_shares``: 0, 1024, 8192\n', text)
        self.assertIn('at commit ``abc1234``', ' '.join(text.split()))
        self.assertIn('- the weight lever\'s cliff on %s: CFS at wake-up '
                      'granularity 1000, EEVDF at wake-up granularity not '
                      'read\n' % bench.CLIFF_SCENARIO, text)
        # nothing measured: no verdict, no table of nothing
        self.assertNotIn('Which conclusions survive', text)

    def test_a_development_run_records_nothing(self):
        self.study(duration=1.0)
        self.study(seeds=(1, 2))
        self.assertFalse(os.path.exists(self.path))
        # and takes nothing recorded: its runs are not the record's
        self.study()
        del self.runs[:]
        self.study(seeds=(1, 2))
        self.assertEqual(3 * 2 * (len(bench.SENSITIVITY_KERNELS) + 1),
                         len(self.runs))

    def test_another_products_points_are_run_again(self):
        self.study()
        del self.runs[:]
        self.useFixture(fixtures.MockPatchObject(
            bench.cache, 'version', return_value='another'))
        self.study()
        self.assertEqual(3 * self.per_run(), len(self.runs))

    def test_the_cliff_is_recorded_per_curve(self):
        sweep = dict(factors=(2.0, 2.5), wakeups=(1000, 4000),
                     schedulers=('cfs', 'eevdf'), path=self.path)
        first, _cpu = bench.run_cliff(bench.CLIFF_SCENARIO, **sweep)
        # three curves: CFS at each granularity, EEVDF reading none
        per_curve = len(bench.SENS_SEEDS) * (2 + 2)
        self.assertEqual(3 * per_curve, len(self.runs))
        self.assertEqual([], first['missing'])
        del self.runs[:]
        again, _cpu = bench.run_cliff(bench.CLIFF_SCENARIO, **sweep)
        self.assertEqual([], self.runs)
        self.assertEqual(page.cliff_rows(first), page.cliff_rows(again))
        # kv at x1.2 beside web at x1: their geometric mean
        self.assertEqual('1.095±0.000', page.cliff_rows(again)[0][3])
        # a factor the record lacks runs its curves again
        bench.run_cliff(bench.CLIFF_SCENARIO, **dict(sweep, factors=(
            2.0, 2.5, 3.0)))
        self.assertEqual(3 * len(bench.SENS_SEEDS) * (2 + 3),
                         len(self.runs))
        # the rows' points and the curves share the document
        self.study()
        with open(self.path) as f:
            self.assertEqual({'cliff', 'points'},
                             set(json.load(f)['results']))

    def test_recorded_needs_the_study_alone(self):
        self.useFixture(fixtures.MonkeyPatch('sys.stderr', io.StringIO()))
        e = self.assertRaises(SystemExit, sim.main, ['--recorded'])
        self.assertEqual(2, e.code)

    def test_a_part_of_the_study_writes_no_page(self):
        out = self.useFixture(fixtures.MonkeyPatch(
            'sys.stdout', io.StringIO())).new_value
        written = os.path.join(os.path.dirname(self.path), 'sensitivity.rst')
        self.useFixture(fixtures.MockPatchObject(
            bench.documents, 'SENSITIVITY_RST', written))
        self.useFixture(fixtures.MockPatchObject(
            bench.documents, 'SENSITIVITY_JSON', self.path))
        self.assertEqual(0, sim.main([
            '--sensitivity-only', '--recorded', '--sensitivity-rows',
            'vm_cgroup_shares', '--processes', '1']))
        self.assertFalse(os.path.exists(written))
        self.assertIn('``scheduler.vm_cgroup_shares``: 0, 1024, 8192',
                      out.getvalue())
        self.assertEqual(0, sim.main(['--sensitivity-only', '--recorded']))
        with open(written) as f:
            self.assertIn('vsmtio-bench sim --sensitivity-only --recorded',
                          f.read())
        self.assertEqual([], self.runs)
