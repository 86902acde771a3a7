"""The yardstick (``vsmtio-bench yardstick``): its headline and table."""

import argparse
import concurrent.futures
import json
import os
from unittest import mock

import fixtures
import testtools

from vsmtio_bench import yardstick


def run(name, seed, io, below=(), scheduler='cfs', null=()):
    return {'scenario': name, 'scheduler': scheduler, 'seed': seed,
            'io': io, 'cpu': 0.99, 'ok': not below, 'below': list(below),
            'null_below': list(null), 'kept': {'mechanisms': []}}


def oracle(by_seed, margin=None, label='vsmtio: web x2'):
    return {'label': label,
            'io_by_seed': {str(k): v for k, v in by_seed.items()},
            'margin': {'label': label, 'io_by_seed': {
                str(k): v for k, v in (margin or by_seed).items()}}}


class TestHeadline(testtools.TestCase):

    def rows(self):
        runs = [run('big', 1, 1.10), run('big', 2, 1.20),
                run('small', 1, 1.20), run('small', 2, 1.00),
                run('tiny', 1, 1.00), run('tiny', 2, 1.00)]
        oracles = {'cfs': {'big': oracle({1: 1.20, 2: 1.40}),
                           'small': oracle({1: 1.10, 2: 1.00}),
                           'tiny': oracle({1: 1.02, 2: 1.02})}}
        return yardstick.by_scenario(runs, oracles)

    def test_gain_weighted_over_scenarios_that_gain_five_percent(self):
        m, lo, hi, chosen = yardstick.headline(self.rows())
        # big 1.3 and small 1.05 count; tiny's 2% is no-harm only
        self.assertEqual([('cfs', 'big'), ('cfs', 'small')], chosen)
        # seed 1: (0.1 + 0.2) / (0.2 + 0.1); seed 2: (0.2 + 0) / (0.4 + 0)
        self.assertAlmostEqual((1.0 + 0.5) / 2, m)
        self.assertLess(lo, m)
        self.assertGreater(hi, m)

    def test_a_small_gain_weighs_little(self):
        runs = [run('big', s, 1.30) for s in (1, 2)] + [
            run('small', s, 1.0) for s in (1, 2)]
        oracles = {'cfs': {'big': oracle({1: 1.3, 2: 1.3}),
                           'small': oracle({1: 1.06, 2: 1.06})}}
        m, *_ = yardstick.headline(yardstick.by_scenario(runs, oracles))
        # unweighted it would be 50%
        self.assertAlmostEqual(0.3 / 0.36, m)

    def test_table_counts_and_names_each_vm_below(self):
        runs = [run('a', 1, 1.0, [('web', 0.97, 0.99, 0.96, 0.94)]),
                run('a', 2, 1.0, [('db', 1.0, 0.99, 0.90, 0.94)]),
                run('a', 3, 1.0)]
        by = yardstick.by_scenario(runs, {})
        rows = yardstick.table_rows(by)
        self.assertEqual(1, len(rows))
        row = dict(zip(yardstick.HEADER, rows[0]))
        self.assertEqual('not searched', row['oracle (best static)'])
        self.assertEqual('2 / 3', row['seeds with a VM below'])
        self.assertEqual(['a (cfs) seed 1: web mean 0.9700 < 0.9900',
                          'a (cfs) seed 2: db window 0.9000 < 0.9400'],
                         yardstick.below_lines(by))

    def test_when_the_search_ended_over_the_seeds_that_settled(self):
        runs = [run('a', seed, 1.0) for seed in (1, 2, 3)]
        for r, at in zip(runs, (100.0, 140.0, None)):
            r['kept']['settled_at_s'] = at
        row, = yardstick.table_rows(yardstick.by_scenario(runs, {}))
        got = dict(zip(yardstick.HEADER, row))['search ends, s']
        self.assertTrue(got.startswith('120 ['), got)
        row, = yardstick.table_rows(yardstick.by_scenario(
            [run('a', 1, 1.0)], {}))
        self.assertEqual('-', dict(zip(yardstick.HEADER, row))[
            'search ends, s'])

    def test_an_oracle_recorded_for_the_seeds_is_not_searched_again(self):
        _records_in(self)
        known = dict(oracle({1: 1.2, 2: 1.3}), seed_list=[1, 2, 3])
        self.useFixture(fixtures.MockPatch(
            'vsmtio_bench.oracle.recorded',
            return_value={'cfs': {'a': known}}))
        job = self.useFixture(fixtures.MockPatch(
            'vsmtio_bench.oracle._job', side_effect=lambda j: dict(
                oracle({1: 1.1}), scenario=j[0], scheduler=j[1],
                io_gain=1.1))).mock
        self.useFixture(fixtures.MockPatch(
            'concurrent.futures.ProcessPoolExecutor',
            concurrent.futures.ThreadPoolExecutor))
        self.useFixture(fixtures.MockPatch(
            'vsmtio_bench.yardstick.one', side_effect=lambda j: run(
                j[0], j[2], 1.1, scheduler=j[1])))
        self.useFixture(fixtures.MockPatch('sys.stderr'))
        args = _args(seeds=[1, 2])
        oracles, runs = yardstick.measure(args, ['a', 'b'], ())
        self.assertIs(known, oracles['cfs']['a'])
        self.assertEqual(['b'], [j[0][0][0] for j in job.call_args_list])
        self.assertEqual(4, len(runs))
        args.seeds = [1, 4]         # a seed it does not cover: searched
        yardstick.measure(args, ['a'], ())
        self.assertEqual('a', job.call_args_list[-1][0][0][0])

    def test_a_mean_below_by_less_than_the_digits_shown_says_so(self):
        by = yardstick.by_scenario(
            [run('a', 1, 1.0, [('web', 0.99975, 0.99976, 0.96, 0.94)])], {})
        self.assertEqual(['a (cfs) seed 1: web mean 0.999750 < 0.999760'],
                         yardstick.below_lines(by))

    def test_no_harm_only_and_paired_difference(self):
        rows = yardstick.table_rows(self.rows())
        by = {r[0]: dict(zip(yardstick.HEADER, r)) for r in rows}
        self.assertEqual('no-harm only', by['tiny']['counted as'])
        self.assertEqual('gain', by['big']['counted as'])
        # product - oracle: -0.1 and -0.2
        self.assertTrue(by['big']['product - oracle'].startswith('-0.150'))

    def test_a_product_above_its_oracle_is_named(self):
        dyn = ((1, 1.31), (2, 1.33), (3, 1.32))
        tie = ((1, 1.31), (2, 1.29), (3, 1.30))
        runs = ([run('dyn', s, io) for s, io in dyn]
                + [run('tie', s, io) for s, io in tie])
        oracles = {'cfs': {'dyn': oracle({1: 1.20, 2: 1.21, 3: 1.20}),
                           'tie': oracle({1: 1.30, 2: 1.30, 3: 1.30})}}
        by = yardstick.by_scenario(runs, oracles)
        lines = yardstick.above_oracle(by)
        # 'tie' is above on one seed, below on another: inside the noise
        self.assertEqual(1, len(lines))
        self.assertTrue(lines[0].startswith(
            'dyn (cfs): product - oracle 0.117 ['), lines[0])
        self.assertEqual([], yardstick.above_oracle(self.rows()))

    def test_each_scheduler_has_its_own_headline(self):
        # one scheduler's gain must not hide the other's harm
        runs = [run('big', s, 1.30) for s in (1, 2)] + [
            run('big', s, 1.0, [('web', 0.9, 1.0, 0.9, 0.95)]
                if s == 1 else (), scheduler='eevdf') for s in (1, 2)]
        oracles = {'cfs': {'big': oracle({1: 1.3, 2: 1.3})},
                   'eevdf': {'big': oracle({1: 1.0, 2: 1.0})}}
        lines = yardstick.summary_lines(yardstick.by_scenario(runs, oracles))
        self.assertEqual(6, len(lines))
        self.assertTrue(lines[0].startswith(
            'Under cfs: share of the oracle\'s I/O gain, gain-weighted '
            'over the 1 scenarios'))
        self.assertIn('100%', lines[0])
        self.assertEqual('Under cfs: honest VMs below a floor net of '
                         'noise: 0 in 2 runs (vanilla run again: 0 in as '
                         'many)', lines[2])
        self.assertTrue(lines[3].endswith('over the 0 scenarios where it '
                                          'gains 5% or more: -'))
        self.assertEqual('Under eevdf: honest VMs below a floor net of '
                         'noise: 1 in 2 runs (vanilla run again: 0 in as '
                         'many)', lines[5])
        one = yardstick.summary_lines(yardstick.by_scenario(runs[:2],
                                                            oracles))
        self.assertTrue(one[0].startswith('Share of the oracle'))

    def test_vanilla_again_is_counted_beside_the_product(self):
        # the floors' own false alarms, per seed and in the summary
        low = ('web', 0.99, 0.995, 0.9, 0.95)
        runs = [run('a', 1, 1.0, [low], null=[low, low]),
                run('a', 2, 1.0, null=[low]), run('a', 3, 1.0)]
        by = yardstick.by_scenario(runs, {})
        row, = yardstick.table_rows(by)
        self.assertEqual(['1 / 3', '2 / 3'], row[-2:])
        self.assertIn('1 in 3 runs (vanilla run again: 3 in as many)',
                      yardstick.summary_lines(by)[2])

    def test_two_runs_compared_by_seed(self):
        mine = yardstick.by_scenario([run('a', 1, 1.1), run('a', 2, 1.2)],
                                     {})
        other = yardstick.by_scenario([run('a', 1, 1.0), run('a', 2, 1.1),
                                       run('a', 3, 2.0)], {})
        line, = yardstick.compare(mine, other)
        self.assertIn('0.100 [0.100, 0.100] over 2 seeds', line)

    def test_the_headline_compared_on_the_same_scenarios(self):
        mine = self.rows()
        runs = [run('big', 1, 1.05), run('big', 2, 1.10),
                run('small', 1, 1.20), run('small', 2, 1.00)]
        other = yardstick.by_scenario(runs, {'cfs': {
            'big': oracle({1: 1.20, 2: 1.40}),
            'small': oracle({1: 1.10, 2: 1.00})}})
        last = yardstick.compare(mine, other)[-1]
        # shares per seed 1.0, 0.5 against 0.25/0.3, 0.1/0.4
        self.assertIn('cfs: headline share', last)
        self.assertIn('over the same 2 scenarios: 21% [-32%, 74%] over 2 '
                      'seeds', last)


class TestMain(testtools.TestCase):

    def test_bad_input_is_refused_before_any_run(self):
        self.useFixture(fixtures.MockPatch('sys.stderr'))
        one = self.useFixture(fixtures.MockPatchObject(yardstick,
                                                       'one')).mock
        for argv in (['--seeds', 'a'], ['--schedulers', 'cfs,o1'],
                     ['--names', 'nope'], ['--processes', '0'],
                     ['--set', 'vsmtio_agent.guard_settle_periods=99'],
                     ['--set', 'no_dot=1']):
            self.assertRaises(SystemExit, yardstick.main, argv)
        one.assert_not_called()

    def test_a_run_writes_its_page_and_runs_and_compares(self):
        tmp = self.useFixture(fixtures.TempDir()).path
        self.useFixture(fixtures.MockPatch('sys.stderr'))
        out = self.useFixture(fixtures.StringStream('stdout'))
        self.useFixture(fixtures.MonkeyPatch('sys.stdout', out.stream))
        runs = [run('io_only', 1, 1.2), run('io_only', 2, 1.1)]
        oracles = {'cfs': {'io_only': dict(oracle({1: 1.3, 2: 1.2}),
                                           why='x')}}
        self.useFixture(fixtures.MockPatchObject(
            yardstick, 'measure', lambda *a: (oracles, runs)))
        other = [run('io_only', 1, 1.1), run('io_only', 2, 1.0)]
        with open(tmp + '/other.json', 'w') as f:
            json.dump(other, f)
        rc = yardstick.main(['--names', 'io_only', '--schedulers', 'cfs',
                             '--seeds', '1,2', '--out', tmp + '/page.rst',
                             '--json', tmp + '/runs.json',
                             '--against', tmp + '/other.json'])
        self.assertEqual(0, rc)
        with open(tmp + '/runs.json') as f:
            self.assertEqual(runs, json.load(f))
        with open(tmp + '/page.rst') as f:
            page = f.read()
        self.assertIn('``vsmtio-bench yardstick --names io_only --schedulers '
                      'cfs --seeds 1,2``', page)
        self.assertIn('io_only', page)
        self.assertIn('this invocation took under a minute of wall time',
                      page)
        out.stream.flush()
        self.assertIn('io_only/cfs: product I/O gain this - other 0.100 '
                      '[0.100, 0.100] over 2 seeds',
                      out.getDetails()['stdout'].as_text())

    def test_no_oracle_judges_the_product_and_searches_nothing(self):
        _records_in(self)
        self.useFixture(fixtures.MockPatch('sys.stderr'))
        out = self.useFixture(fixtures.StringStream('stdout'))
        self.useFixture(fixtures.MonkeyPatch('sys.stdout', out.stream))
        searched = []
        self.useFixture(fixtures.MockPatchObject(
            yardstick.bench_oracle, '_job', searched.append))
        self.useFixture(fixtures.MockPatchObject(
            yardstick, 'one', lambda job: run(job[0], job[2], 1.0,
                                              below=[('vm', 0.9, 0.97,
                                                      0.9, 0.94)])))
        self.useFixture(fixtures.MockPatchObject(
            yardstick.concurrent.futures, 'ProcessPoolExecutor',
            lambda n: _Serial()))
        page = self.useFixture(fixtures.TempDir()).path + '/page.rst'
        self.useFixture(fixtures.MonkeyPatch(
            'vsmtio_bench.yardstick.DOCUMENT', page))
        rc = yardstick.main(['--names', 'io_only', '--schedulers', 'cfs',
                             '--seeds', '1,2', '--no-oracle'])
        self.assertEqual(0, rc)
        self.assertEqual([], searched)
        self.assertFalse(os.path.exists(page))
        rows = yardstick.by_scenario([run('io_only', 1, 1.0)], {})
        self.assertEqual('not searched',
                         yardstick.table_rows(rows)[0][2])


class TestRecorded(testtools.TestCase):
    """What is found is recorded; what is recorded is not run again."""

    def setUp(self):
        super().setUp()
        self.oracle_json, self.runs_json = _records_in(self)
        self.useFixture(fixtures.MockPatch('sys.stderr'))
        out = self.useFixture(fixtures.StringStream('stdout'))
        self.useFixture(fixtures.MonkeyPatch('sys.stdout', out.stream))
        self.searched, self.ran = [], []
        self.useFixture(fixtures.MockPatchObject(
            yardstick.bench_oracle, '_job', self.search))
        self.useFixture(fixtures.MockPatchObject(yardstick, 'one', self.one))
        self.useFixture(fixtures.MockPatchObject(
            yardstick.concurrent.futures, 'ProcessPoolExecutor',
            lambda n: _Serial()))

    def search(self, job):
        self.searched.append(job[:2])
        return dict(oracle({s: 1.2 for s in job[2]}), scenario=job[0],
                    scheduler=job[1], io_gain=1.2, seed_list=list(job[2]))

    def one(self, job):
        self.ran.append(job[:3])
        return run(job[0], job[2], 1.1, scheduler=job[1])

    def test_a_second_bench_runs_only_what_the_first_did_not(self):
        yardstick.measure(_args(seeds=[1, 2]), ['a'], ())
        self.assertEqual([('a', 'cfs')], self.searched)
        self.assertEqual([('a', 'cfs', 1), ('a', 'cfs', 2)], self.ran)
        del self.searched[:], self.ran[:]
        oracles, runs = yardstick.measure(_args(seeds=[1, 2, 3]),
                                          ['a', 'b'], ())
        # a's oracle covers seeds 1 and 2 only: searched again
        self.assertEqual([('a', 'cfs'), ('b', 'cfs')], self.searched)
        self.assertEqual([('a', 'cfs', 3), ('b', 'cfs', 1), ('b', 'cfs', 2),
                          ('b', 'cfs', 3)], self.ran)
        self.assertEqual(6, len(runs))
        self.assertEqual({'a': {'1', '2', '3'}, 'b': {'1', '2', '3'}},
                         {n: set(v) for n, v in
                          yardstick.recorded()['cfs'].items()})

    def test_recorded_runs_nothing_and_the_page_names_what_lacks(self):
        yardstick.measure(_args(seeds=[1]), ['a'], ())
        del self.searched[:], self.ran[:]
        page = os.path.join(os.path.dirname(self.runs_json), 'page.rst')
        rc = yardstick.main(['--names', 'io_only,cpu_only', '--schedulers',
                             'cfs', '--seeds', '1,2', '--recorded',
                             '--out', page])
        self.assertEqual(0, rc)
        self.assertEqual([], self.searched + self.ran)
        with open(page) as f:
            text = f.read()
        self.assertIn('- cpu_only (cfs): oracle not searched, product run '
                      'on 0 of 2 seeds.', text)
        self.assertIn('- io_only (cfs): oracle not searched, product run '
                      'on 0 of 2 seeds.', text)

    def test_a_scenario_that_is_anothers_host_is_named_not_run(self):
        page = os.path.join(os.path.dirname(self.runs_json), 'page.rst')
        rc = yardstick.main(['--names', 'fig8_hbase_pagerank_48_48,'
                             'fig5_hbase_pagerank', '--schedulers', 'cfs',
                             '--seeds', '1', '--out', page])
        self.assertEqual(0, rc)
        self.assertEqual([('fig5_hbase_pagerank', 'cfs')], self.searched)
        self.assertEqual([('fig5_hbase_pagerank', 'cfs', 1)], self.ran)
        with open(page) as f:
            self.assertIn('- fig8_hbase_pagerank_48_48: as '
                          'fig5_hbase_pagerank.', f.read())

    def test_a_partly_measured_scenario_is_named_and_left_out(self):
        lacking = yardstick.pending(
            ['a', 'b', 'c'], ['cfs'], [1, 2], {'cfs': {'a': {}, 'b': {}}},
            [run('a', 1, 1.0), run('a', 2, 1.0), run('b', 1, 1.0)])
        self.assertEqual({('cfs', 'b'): 'product run on 1 of 2 seeds',
                          ('cfs', 'c'): 'oracle not searched, product run '
                                        'on 0 of 2 seeds'}, lacking)

    def test_a_development_run_and_another_product_record_nothing(self):
        yardstick.measure(_args(seeds=[1], quick=True), ['a'], ())
        yardstick.measure(_args(seeds=[1]), ['a'],
                          ((('vsmtio_agent', 'x'), '1'),))
        self.assertEqual(4, len(self.searched + self.ran))
        self.assertFalse(os.path.exists(self.oracle_json))
        self.assertFalse(os.path.exists(self.runs_json))

    def test_recorded_is_refused_with_another_product(self):
        self.assertRaises(SystemExit, yardstick.main, [
            '--recorded', '--set', 'vsmtio_agent.guard_settle_periods=3'])

    def test_runs_are_recorded_under_the_code_that_started(self):
        # the checkout's files change under a bench that runs for hours;
        # the code its processes loaded does not
        changed = mock.patch('vsmtio_bench.cache.version',
                             return_value='changed')
        self.addCleanup(changed.stop)

        def one(job):
            if not self.ran:
                changed.start()
            return self.one(job)
        self.useFixture(fixtures.MockPatchObject(yardstick, 'one', one))
        yardstick.measure(_args(seeds=[1, 2]), ['a'], ())
        changed.stop()
        self.assertEqual({'1', '2'}, set(yardstick.recorded()['cfs']['a']))
        self.assertEqual({'a'}, set(yardstick.bench_oracle.recorded()['cfs']))

    def test_another_agents_runs_are_run_again(self):
        yardstick.measure(_args(seeds=[1]), ['a'], ())
        self.useFixture(fixtures.MockPatch(
            'vsmtio_bench.cache.version', return_value='another'))
        del self.ran[:]
        yardstick.measure(_args(seeds=[1]), ['a'], ())
        self.assertEqual([('a', 'cfs', 1)], self.ran)


def _args(**kw):
    base = dict(schedulers=['cfs'], seeds=[1, 2], no_oracle=False,
                processes=1, quick=False, recorded=False)
    base.update(kw)
    return argparse.Namespace(**base)


def _records_in(test):
    """The records in a temporary folder, not the checkout's."""
    tmp = test.useFixture(fixtures.TempDir()).path
    paths = os.path.join(tmp, 'oracle.json'), os.path.join(tmp, 'y.json')
    test.useFixture(fixtures.MonkeyPatch(
        'vsmtio_bench.oracle.DEFAULT_JSON', paths[0]))
    test.useFixture(fixtures.MonkeyPatch(
        'vsmtio_bench.yardstick.RUNS_JSON', paths[1]))
    return paths


class _Serial(object):
    """A process pool that runs its jobs in this process, in order."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def map(self, fn, jobs):
        return [fn(j) for j in jobs]

    def submit(self, fn, job):
        f = concurrent.futures.Future()
        f.set_result(fn(job))
        return f
