"""The README's demo: ``vsmtio-sim compare --steady`` over seeds.

The runs are fabricated (``runner.compare_seeds`` replaced), so these
tests take milliseconds: what is under test is what the command makes
of the runs, the figures over the seeds (sim/seeds.py) and its refusal
of bad input.
"""

import json

import fixtures
import testtools

from vsmtio_sim import cmd as sim_cmd
from vsmtio_sim import runner
from vsmtio_sim import seeds
from vsmtio_sim.tests import test_tenants as tt


def fake(kernel, web, batch, agent=None):
    """A steady result of ``kernel`` with two VMs, web and batch.

    ``web`` and ``batch`` are their requests and billions of
    instructions per second in two windows, repeated over the 40 windows
    of the run (four batches of the A/A run's noise); their means are the
    VMs'.
    """
    batch = [b * 1e9 for b in batch]
    r = tt.result({'web': tt.vm('io', requests=sum(web) / 2.0),
                   'batch': tt.vm('cpu', instructions=sum(batch) / 2.0)},
                  [{'web': (w, 0), 'batch': (0, b)}
                   for w, b in zip(web, batch)] * 20)
    r.update(kernel=kernel, scenario='pair', title='a pair', cores=1,
             vcpus=2, seed=1, io_throughput=sum(web) / 2.0,
             cpu_throughput=sum(batch) / 2.0, vcpu_switches_per_s=1.0,
             spinning_pct=0.0, retention_pct=0.0,
             workloads={'io': {'kind': 'io', 'requests_per_s': 1.0,
                               'per_request_us': {'run': 1.0, 'ready': 1.0,
                                                  'wait': 1.0}},
                        'cpu': {'kind': 'cpu', 'instructions_per_s': 1.0}},
             sim={'events': 1, 'wall_s': 1.0, 'events_per_s': 1.0,
                  'sim_s_per_wall_s': 1.0})
    if agent is not None:
        r['agent'] = dict(decisions=10, swaps=0, period_s=0.1,
                          timeout_us=50.0, settled_at_s=3.0,
                          trajectory=[], verdicts=[], **agent)
    return r


VANILLA = fake('vanilla', (100, 100), (10, 10))
# vanilla against itself: web dips to 0.93 in a window
AA = fake('vanilla', (93, 107), (10, 10))


def seed_run(web, batch, agent, every_kernel=False):
    """One seed of compare_seeds: vanilla, its A/A run and the product."""
    results = {'vanilla': VANILLA}
    if every_kernel:
        results['polling'] = fake('polling', (100, 100), (9, 9))
    results['vsmtio'] = fake('vsmtio', web, batch, agent)
    return {'results': results, 'aa': AA}


KEPT = {'mechanisms': ['weight'], 'weights': {'web': 2.0, 'batch': 1.0},
        'timeouts_us': {'web': 100.0}}
NONE = {'mechanisms': [], 'weights': {'web': 1.0, 'batch': 1.0},
        'timeouts_us': {}}


def three_seeds():
    return {1: seed_run((92.5, 107.5), (10, 10), NONE, every_kernel=True),
            2: seed_run((110, 110), (9.8, 9.8), KEPT),
            # batch loses 10% of its instructions: below its floor
            3: seed_run((120, 120), (9, 9), KEPT)}


class TestOverSeeds(testtools.TestCase):

    def test_each_vm_over_the_seeds(self):
        agg = seeds.aggregate(three_seeds())
        self.assertEqual([1, 2, 3], agg['seeds'])
        web = agg['vms']['web']
        self.assertEqual({1: 1.0, 2: 1.1, 3: 1.2},
                         {s: round(r, 6) for s, r in web['ratios'].items()})
        self.assertAlmostEqual(1.1, web['mean'])
        # three values 0.1 apart: t(0.975, 2) * 0.1 / sqrt(3)
        self.assertAlmostEqual(1.1 - 0.2484, web['low'], places=3)
        self.assertAlmostEqual(1.1 + 0.2484, web['high'], places=3)
        self.assertEqual((1.0, 1.2), (web['min'], web['max']))
        # seed 1's window of 0.925 is inside the noise (A/A 0.93)
        self.assertEqual((3, 3), (web['kept'], web['judged']))
        batch = agg['vms']['batch']
        self.assertEqual((2, 3), (batch['kept'], batch['judged']))

    def test_each_seeds_null_run_is_the_next_seeds_vanilla(self):
        runs = three_seeds()
        for run in runs.values():      # each seed its own vanilla run
            run['results'] = dict(run['results'], vanilla=dict(VANILLA))
        got = seeds.nulls(runs)
        self.assertEqual([1, 2, 3], sorted(got))
        for seed, nxt in ((1, 2), (2, 3), (3, 1)):
            self.assertIs(runs[nxt]['results']['vanilla'], got[seed])
        self.assertEqual({}, seeds.nulls({1: runs[1]}))

    def test_io_gain_seed_by_seed_and_its_mean(self):
        agg = seeds.aggregate(three_seeds())
        g = agg['io_gain']
        self.assertEqual([1, 2, 3], list(g['by_seed']))
        self.assertAlmostEqual(1.2, g['by_seed'][3])
        self.assertAlmostEqual(1.1, g['mean'])
        self.assertLess(g['low'], 1.1)
        text = seeds.gain_line(agg)
        self.assertIn('seed 1 1.000, seed 2 1.100, seed 3 1.200', text)
        self.assertIn('mean 1.100 [', text)

    def test_one_line_per_seed_of_what_was_kept(self):
        agg = seeds.aggregate(three_seeds())
        self.assertEqual(
            'seed 2: kept weight; weights batch x1, web x2; retention '
            'web 100 us', seeds.kept_line(2, agg['agent'][2]))
        self.assertEqual(
            'seed 1: kept none; weights batch x1, web x1; retention no VM',
            seeds.kept_line(1, agg['agent'][1]))
        # no weight set, one timeout for the whole host
        self.assertEqual(
            'seed 4: kept retention; weights every VM x1; retention one '
            'host-wide timeout 75 us', seeds.kept_line(4, {
                'mechanisms': ['retention'], 'weights': {},
                'timeouts_us': None, 'timeout_us': 75.0}))
        text = seeds.report(agg)
        self.assertEqual(3, sum(1 for line in text.splitlines()
                                if line.startswith('  seed ')))
        self.assertIn('every kernel ran on seed 1', text)
        self.assertNotIn('One seed of several', text)

    def test_one_seed_has_no_interval_and_says_so(self):
        agg = seeds.aggregate({4: seed_run((110, 110), (10, 10), KEPT)})
        web = agg['vms']['web']
        self.assertIsNone(web['low'])
        self.assertIn('One seed of several: results differ between seeds',
                      seeds.report(agg))


class TestCli(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.calls = []

        def compare_seeds(scenario, seed_list, processes=2, **kw):
            self.calls.append((scenario, list(seed_list), processes))
            runs = three_seeds()
            return {s: runs[s] for s in seed_list}
        self.useFixture(fixtures.MonkeyPatch(
            'vsmtio_sim.runner.compare_seeds', compare_seeds))
        self.useFixture(fixtures.MonkeyPatch(
            'vsmtio_sim.runner.compare', self.no_run))
        self.useFixture(fixtures.MonkeyPatch(
            'vsmtio_sim.runner.run', self.no_run))

    def no_run(self, *args, **kwargs):
        self.fail('ran a kernel: %r' % (args,))

    def main(self, *argv):
        out = self.useFixture(fixtures.StringStream('stdout')).stream
        err = self.useFixture(fixtures.StringStream('stderr')).stream
        self.useFixture(fixtures.MonkeyPatch('sys.stdout', out))
        self.useFixture(fixtures.MonkeyPatch('sys.stderr', err))
        rc = sim_cmd.main(['compare', '--scenario', 'fig5_hbase_pagerank']
                          + list(argv))
        out.seek(0)
        err.seek(0)
        return rc, out.read(), err.read()

    def test_bad_seeds_are_one_line_and_exit_2(self):
        for argv, needle in (
                (['--seeds', '1,x'], 'not a comma-separated list of '
                                     'integers'),
                (['--seeds', '1.5'], 'integers'),
                (['--seeds=-1,2'], 'seed -1 out of range'),
                (['--seeds', '2,3,2'], 'seed 2 given twice'),
                (['--seeds', ''], 'no seed given'),
                (['--seeds', '1,,2'], 'integers'),
                (['--seeds', '1,2', '--seed', '3'], 'not allowed with')):
            rc, out, err = self.main('--steady', *argv)
            self.assertEqual(2, rc, argv)
            self.assertEqual('', out)
            lines = err.splitlines()
            self.assertEqual(1, len(lines), err)
            self.assertTrue(lines[0].startswith('vsmtio-sim: error: '))
            self.assertIn(needle, lines[0])
        self.assertEqual([], self.calls)

    def test_seeds_need_steady(self):
        for argv in (['--seeds', '1,2'],
                     ['--seeds', '1,2', '--duration', '2']):
            rc, out, err = self.main(*argv)
            self.assertEqual(2, rc)
            self.assertEqual(1, len(err.splitlines()), err)
            self.assertIn('--seeds', err)
        self.assertEqual([], self.calls)

    def test_steady_over_seeds(self):
        rc, out, _ = self.main('--steady', '--seeds', '1,2,3',
                               '--processes', '1')
        self.assertEqual(0, rc)
        self.assertEqual([('fig5_hbase_pagerank', [1, 2, 3], 1)],
                         self.calls)
        # the per-VM table: seed 1's web is inside its noise, the
        # polling row's batch is outside its floor
        rows = tt.TestJudge.rows(out)
        self.assertEqual('', rows[('vsmtio', 'web')])
        self.assertEqual('BELOW', rows[('polling', 'batch')])
        self.assertIn("net of the model's noise", out)
        self.assertIn('seed 1 1.000, seed 2 1.100, seed 3 1.200', out)
        self.assertIn('  seed 3: kept weight;', out)
        self.assertIn('2 of 3 seeds', out)

    def test_one_seed_says_it_is_one(self):
        rc, out, _ = self.main('--steady', '--seed', '2')
        self.assertEqual(0, rc)
        self.assertEqual([2], self.calls[0][1])
        self.assertIn('One seed of several', out)

    def test_json_carries_the_aa_run_and_every_seed(self):
        rc, out, _ = self.main('--steady', '--seeds', '1,3', '--json')
        self.assertEqual(0, rc)
        doc = json.loads(out)
        self.assertEqual(['polling', 'vanilla', 'vsmtio'],
                         sorted(doc['results']))
        self.assertEqual(AA['vms'], doc['aa']['vms'])
        self.assertEqual(['1', '3'], sorted(doc['seeds']))
        self.assertEqual(['vanilla', 'vsmtio'],
                         sorted(doc['seeds']['3']['results']))
        self.assertIn('aa', doc['seeds']['3'])
        self.assertFalse(doc['seeds']['3']['tenants']['vsmtio']['ok'])
        self.assertAlmostEqual(0.93, doc['tenants']['vsmtio']['vms']['web'][
            'aa_window'])
        self.assertEqual([1, 3], doc['over_seeds']['seeds'])


class TestPlan(testtools.TestCase):

    def test_every_kernel_on_the_first_seed_the_product_on_the_rest(self):
        jobs = []

        def pool(js, processes):
            jobs.extend((j[1], j[2]) for j in js)
            return [{'job': (j[1], j[2])} for j in js]
        self.useFixture(fixtures.MonkeyPatch('vsmtio_sim.runner._pool',
                                             pool))
        runs = runner.compare_seeds('fig5_hbase_pagerank', [5, 6],
                                    kernel_names=('vanilla', 'polling',
                                                  'vsmtio'))
        self.assertEqual([('vanilla', 5), ('polling', 5), ('vsmtio', 5),
                          ('aa', 5), ('vanilla', 6), ('vsmtio', 6),
                          ('aa', 6)], jobs)
        self.assertEqual(['vanilla', 'polling', 'vsmtio'],
                         list(runs[5]['results']))
        self.assertEqual({'job': ('aa', 6)}, runs[6]['aa'])
