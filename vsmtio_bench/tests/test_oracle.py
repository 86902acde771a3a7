"""The oracle's search (``vsmtio-bench oracle``) and its column in the
bench document (``vsmtio-bench sim``)."""

import itertools
import json
import os

import fixtures
import testtools
import yaml

from vsmtio_bench import document as bench_document
from vsmtio_bench import oracle as bench_oracle
from vsmtio_bench import seeds as bench_seeds
from vsmtio_sim.tests import helpers as h

SMALL = {'timeouts_us': (50, 400), 'weights': (1, 2),
         'haltpoll_max_us': (50, 400)}


def every_config(oracle, vms):
    """The whole (small) space of both families, enumerated."""
    serving = [vm for vm in sorted(vms) if vms[vm]['kind'] != 'cpu']
    retain = (0,) + oracle.SPACE['timeouts_us']
    for family in oracle.FAMILIES:
        off = oracle.all_off(family)
        for weights in itertools.product(oracle.SPACE['weights'],
                                         repeat=len(serving)):
            w = {vm: f for vm, f in zip(serving, weights) if f != 1}
            if family == 'haltpoll':
                for hp in (0,) + oracle.SPACE['haltpoll_max_us']:
                    yield dict(off, weights=w, haltpoll_max_us=hp)
                continue
            for split in (False, True):
                for ts in itertools.product(retain, repeat=len(vms)):
                    yield dict(off, weights=w, split=split, retain={
                        vm: t for vm, t in zip(sorted(vms), ts) if t})


def tiny_scenario(test):
    """The tiny host's scenario file (a serving web VM, a batch VM)."""
    io = h.io_wl(burst_us=20, wait_us=60, dist='exponential')
    doc = {'name': 'tiny', 'host': {'cores': 1}, 'duration_s': 2.0,
           'warmup_s': 0.2, 'placement': 'explicit',
           'workloads': {'cpu': h.CPU_WL, 'io': io},
           'vms': [{'name': 'web', 'workload': 'io', 'vcpus': 1,
                    'threads': [0]},
                   {'name': 'batch', 'workload': 'cpu', 'vcpus': 1,
                    'threads': [1]}]}
    path = test.useFixture(fixtures.TempDir()).join('tiny.yaml')
    with open(path, 'w') as f:
        yaml.safe_dump(doc, f)
    return path


class TestSearchOnATinyHost(testtools.TestCase):
    """A serving VM with short waits beside a batch VM on its sibling."""

    def setUp(self):
        super().setUp()
        self.useFixture(fixtures.MockPatchObject(bench_oracle, 'SPACE',
                                                 SMALL))
        self.path = tiny_scenario(self)

    def test_finds_the_best_of_the_whole_space(self):
        ev = bench_oracle.Evaluator(self.path, 0.5)
        vms = ev.base['vms']
        best = max(bench_oracle.score(ev(c)) for c in every_config(
            bench_oracle, vms))
        self.assertEqual(1, best[0])            # all off is feasible
        self.assertGreater(best[1], 1.0)        # and something gains
        ends = bench_oracle.search(ev, vms)
        self.assertEqual(best, max(bench_oracle.score(ev(c))
                                   for c in ends))

    def test_the_oracle_keeps_every_floor_over_the_full_window(self):
        r = bench_oracle.oracle(self.path, search_s=0.5, confirm=2)
        for vm, v in r['vms'].items():
            self.assertTrue(v['ok'], vm)
        self.assertGreaterEqual(r['io_gain'], 1.0)
        self.assertGreater(r['search']['evaluated'], 10)
        self.assertEqual(r['label'], bench_oracle.label(r['config']))


def fake_run(gains):
    """A stand-in for a run: each VM's ratio by configuration label."""
    def run(name, kernel, setup, measure_s):
        cfg = setup.cfg if setup is not None else None
        off = cfg is None or cfg == bench_oracle.all_off(cfg['family'])
        # all off is vanilla itself, as on the simulated host
        web, batch = (1.0, 1.0) if off else gains(cfg)
        return {'measured_s': 1.0, 'cpu_throughput': 10.0 * batch,
                'vms': {'web': {'kind': 'io', 'adversary': False,
                                'requests_per_s': 100.0 * web,
                                'instructions_per_s': 0.0},
                        'batch': {'kind': 'cpu', 'adversary': False,
                                  'requests_per_s': 0.0,
                                  'instructions_per_s': 10.0 * batch}}}
    return run


def tag_setups(test):
    """Each setup carries its configuration, for :func:`fake_run`."""
    real = bench_oracle.setup_for

    def tagged(cfg):
        fn = real(cfg)
        fn.cfg = cfg
        return fn
    test.useFixture(fixtures.MockPatchObject(bench_oracle, 'setup_for',
                                             tagged))


class TestSearchLogic(testtools.TestCase):
    """Coordinate descent over made-up outcomes, where the best is known."""

    def setUp(self):
        super().setUp()
        tag_setups(self)

    def test_never_returns_a_configuration_that_breaks_a_floor(self):
        def gains(cfg):
            t = cfg['retain'].get('web', 0)
            # the longer the web VM retains, the more it serves, but past
            # 200 us the batch VM falls below its 0.97
            return 1.0 + t / 1000.0, (0.99 if t <= 200 else 0.9)
        r = bench_oracle.oracle('tiny', search_s=0, run=fake_run(gains))
        self.assertEqual({'web': 200}, r['config']['retain'])
        self.assertAlmostEqual(1.2, r['io_gain'])
        self.assertTrue(all(v['ok'] for v in r['vms'].values()))

    def test_nothing_gains_gives_all_off(self):
        r = bench_oracle.oracle('tiny', search_s=0,
                                run=fake_run(lambda cfg: (0.99, 1.0)))
        self.assertEqual(bench_oracle.all_off('vsmtio'), r['config'])
        self.assertEqual(1.0, r['io_gain'])

    def test_the_weight_and_a_timeout_together(self):
        # x2 on the web VM pays only with retention at 100 us
        def gains(cfg):
            t = cfg['retain'].get('web', 0)
            w = cfg['weights'].get('web', 1)
            if cfg['family'] != 'vsmtio':
                return 1.0, 1.0
            return (1.0 + (0.05 if t == 100 else 0.0)
                    + (0.1 if (w == 2 and t == 100) else 0.0)
                    - (0.02 if w == 4 else 0.0), 1.0)
        r = bench_oracle.oracle('tiny', search_s=0, run=fake_run(gains))
        self.assertEqual(({'web': 100}, {'web': 2}),
                         (r['config']['retain'], r['config']['weights']))

    def test_remeasure_falls_back_where_a_floor_breaks(self):
        def gains(cfg):
            t = cfg['retain'].get('web', 0)
            return 1.0 + t / 1000.0, 0.99 if t <= 200 else 0.9
        found = bench_oracle.oracle('tiny', search_s=0, run=fake_run(gains))
        self.assertEqual({'web': 200}, found['config']['retain'])

        def later(cfg):
            # over the longer window, 200 us breaks the batch VM's floor
            t = cfg['retain'].get('web', 0)
            return 1.0 + t / 1000.0, 0.99 if t < 200 else 0.9
        r = bench_oracle.remeasure(found, run=fake_run(later))
        # the next configuration the search confirmed
        self.assertEqual({'web': 100}, r['config']['retain'])
        self.assertAlmostEqual(1.1, r['io_gain'])
        self.assertEqual([False, True],
                         [t['ok'] for t in r['remeasured']['tried']])


class TestStaticConfig(testtools.TestCase):
    """--config: one configuration measured, nothing searched or written."""

    def setUp(self):
        super().setUp()
        tag_setups(self)
        self.path = tiny_scenario(self)

    def test_fields_left_out_are_off(self):
        self.assertEqual(
            dict(bench_oracle.all_off('vsmtio'), retain={'web': 25}),
            bench_oracle.parse_config('{"retain": {"web": 25}}'))
        self.assertEqual(
            dict(bench_oracle.all_off('haltpoll'), haltpoll_max_us=200),
            bench_oracle.parse_config(
                '{"family": "haltpoll", "haltpoll_max_us": 200}'))

    def test_bad_configurations_are_refused(self):
        for bad in ('not json', '[1]', '{"family": "paper"}',
                    '{"retian": {}}', '{"retain": {"web": NaN}}',
                    '{"retain": {"web": Infinity}}',
                    '{"retain": {"web": 0}}', '{"retain": [25]}',
                    '{"weights": {"web": true}}', '{"split": "yes"}',
                    '{"haltpoll_max_us": 200}',
                    '{"family": "haltpoll", "split": true}'):
            self.assertRaises(ValueError, bench_oracle.parse_config, bad)

    def _main(self, *argv):
        out = self.useFixture(fixtures.StringStream('stdout'))
        self.useFixture(fixtures.MonkeyPatch('sys.stdout', out.stream))
        self.useFixture(fixtures.MockPatch('sys.stderr'))
        json_path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                                 'oracle.json')
        rc = bench_oracle.main(list(argv) + ['--json', json_path])
        self.assertFalse(os.path.exists(json_path))
        out.stream.flush()
        return rc, out.getDetails()['stdout'].as_text()

    def test_prints_each_vm_against_its_floor(self):
        runs = []

        def run(name, kernel, setup, measure_s):
            runs.append(kernel)
            return fake_run(lambda cfg: (1.2, 0.96))(name, kernel, setup,
                                                     measure_s)
        self.useFixture(fixtures.MockPatchObject(
            bench_oracle.Evaluator, '_run', staticmethod(run)))
        rc, text = self._main('--names', self.path,
                              '--config', '{"retain": {"web": 100}}')
        self.assertEqual(0, rc)
        self.assertEqual(['vanilla', 'vsmtio'], runs)
        self.assertIn('vsmtio: web 100us: I/O gain 1.200, CPU 0.960, '
                      'every floor kept: NO', text)
        self.assertRegex(text, r'batch +\| +0\.960 .*BELOW')

    def test_a_vm_the_scenario_lacks_is_refused_before_any_run(self):
        run = self.useFixture(fixtures.MockPatchObject(
            bench_oracle.Evaluator, '_run')).mock
        self.useFixture(fixtures.MockPatch('sys.stderr'))
        for argv in (['--names', self.path, '--config',
                      '{"weights": {"db": 2}}'],
                     ['--config', '{}'],
                     ['--names', self.path, '--config', '{"split": 1}']):
            self.assertRaises(SystemExit, bench_oracle.main, argv)
        run.assert_not_called()


class TestShareColumn(testtools.TestCase):

    def test_share_of_the_oracles_gain(self):
        self.assertAlmostEqual(0.5, bench_oracle.oracle_share(1.1, 1.2))
        self.assertAlmostEqual(-0.5, bench_oracle.oracle_share(0.9, 1.2))
        self.assertIsNone(bench_oracle.oracle_share(1.1, 1.0))
        self.assertIsNone(bench_oracle.oracle_share(None, 1.2))

    def test_rows_and_mean(self):
        def res(web):
            vms = {'web': {'kind': 'io', 'adversary': False,
                           'requests_per_s': web,
                           'instructions_per_s': 0.0}}
            return {'vms': vms}
        results = {'a': {'vanilla': res(100.0), 'vsmtio': res(110.0)},
                   'b': {'vanilla': res(100.0), 'vsmtio': res(100.0)}}
        oracle = {'results': {
            'a': {'label': 'x', 'io_gain': 1.2, 'cpu': 0.98},
            'b': {'label': 'y', 'io_gain': 1.0, 'cpu': 1.0}}}
        rows, shares = bench_document.oracle_rows(results, oracle)
        self.assertEqual(['50%', '-'], [r[-1] for r in rows])
        self.assertEqual(1, len(shares))
        self.assertAlmostEqual(0.5, shares[0])


class TestSeedsReport(testtools.TestCase):

    def test_shares_are_capped_per_scenario_and_misses_beyond_tolerance(self):
        def run(name, seed, io, misses=()):
            return {'scenario': name, 'seed': seed, 'io': io, 'cpu': 0.98,
                    'misses': list(misses)}
        results = [run('a', 1, 1.3), run('a', 2, 1.1),
                   run('b', 1, 1.05, [('web', 0.999, 1.0)]),
                   run('b', 2, 1.0, [('web', 0.99, 1.0)]),
                   run('c', 1, 1.2)]
        oracle = {'a': {'io_gain': 1.2}, 'b': {'io_gain': 1.1},
                  'c': {'io_gain': 1.0}}
        out = bench_seeds.report(results, oracle, 0.002)
        # a: (100% capped + 50%) / 2; b: (50% + 0%) / 2; c: no gain
        self.assertIn('mean 50% over 2 scenarios', out)
        self.assertIn('150%', out)
        # 0.999 is within the tolerance, 0.99 is not
        self.assertIn('by more than 0.002: 1 in 5 runs', out)
        self.assertIn('web 0.9900', out)
        self.assertNotIn('web 0.9990', out)

    def test_low_windows_are_read_against_the_aa_run(self):
        def run(seed, lows):
            return {'scenario': 'a', 'seed': seed, 'io': 1.1, 'cpu': 0.98,
                    'misses': [], 'low_windows': lows}
        results = [run(1, [('web', 0.93, 0.935), ('db', 0.90, 0.95)]),
                   run(2, [('web', 0.94, None)])]
        out = bench_seeds.report(results, {}, 0.002)
        # web at 0.93 is within the A/A run's 0.935; db is 0.05 below its
        # A/A run's; without an A/A run a low window counts
        self.assertIn('web 0.930 (0.935)', out)
        self.assertIn('*db 0.900 (0.950)', out)
        self.assertIn('*web 0.940', out)
        self.assertIn('with a window below 0.95: 3, of them (*)', out)
        self.assertIn("A/A run's lowest, or with no A/A run: 2", out)

    def test_overrides_are_checked_before_any_run(self):
        self.assertEqual(
            ((('vsmtio_agent', 'guard_settle_periods'), '2'),),
            bench_seeds.parse_overrides(
                ['vsmtio_agent.guard_settle_periods=2']))
        for bad in ('vsmtio_agent.guard_settle_periods=9',   # above max
                    'vsmtio_agent.guard_settle_periods=one',
                    'vsmtio_agent.no_such_option=1',
                    'guard_settle_periods=1',                # no group
                    'vsmtio_agent.guard_settle_periods'):    # no value
            self.assertRaises(ValueError, bench_seeds.parse_overrides,
                              [bad])

    def test_a_partial_search_keeps_the_results_of_another(self):
        # a partial run over a file of another search is refused before it
        # searches anything, and the file is left as it was
        path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            'oracle.json')
        other = {'confirm_s': 16.6, 'results': {'io_only': {'label': 'x'}}}
        with open(path, 'w') as f:
            json.dump(other, f)
        self.useFixture(fixtures.MockPatch('sys.stderr'))
        self.assertRaises(SystemExit, bench_oracle.main,
                          ['--names', 'io_only', '--json', path])
        with open(path) as f:
            self.assertEqual(other, json.load(f))
