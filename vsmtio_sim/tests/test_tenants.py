"""Each honest VM against its floors (sim/tenants.py), and the windows a
run measures them over (simulate.run_conf)."""

import math
import random
import statistics

import fixtures
import testtools
import yaml

from vsmtio_agent import model
from vsmtio_sim import runner
from vsmtio_sim import tenants
from vsmtio_sim.tests import helpers as h


def vm(kind, requests=0.0, instructions=0.0, adversary=False):
    return {'kind': kind, 'adversary': adversary,
            'requests_per_s': requests, 'instructions_per_s': instructions}


def result(vms, windows):
    """A run's result: its VMs' means and their figures by window."""
    return {'vms': vms, 'windows': {'window_s': 0.5, 'vms': [
        {name: {'requests_per_s': w[name][0],
                'instructions_per_s': w[name][1]} for name in w}
        for w in windows]}}


def four(web=100.0, batch=10.0, db=50.0, gamer=10.0):
    """The four VMs of ``BASE`` with these means."""
    return {'web': vm('io', requests=web),
            'db': vm('mixed', requests=db, instructions=9.0),
            'batch': vm('cpu', instructions=batch),
            'gamer': vm('io', requests=gamer, adversary=True)}


BASE = result(four(),
              [{'web': (100, 0), 'db': (50, 4), 'batch': (0, 10),
                'gamer': (10, 0)}] * 2)


def noisy(n, spread, seed):
    """A run of one serving VM, ``web``, at 100 requests/s.

    Over ``n`` windows, each off by a normal ``spread`` (relative).
    """
    rng = random.Random(seed)
    rates = [100.0 * math.exp(rng.gauss(0.0, spread)) if spread else 100.0
             for _ in range(n)]
    return result({'web': vm('io', requests=statistics.fmean(rates))},
                  [{'web': (r, 0)} for r in rates])


def straddled(n, spread, rng, scale=1.0):
    """Like :func:`noisy`, each window's error a difference of two edges'.

    So the mean's error telescopes, as the model's does.
    """
    edges = [rng.gauss(0.0, spread / math.sqrt(2)) for _ in range(n + 1)]
    rates = [100.0 * scale * math.exp(edges[i + 1] - edges[i])
             for i in range(n)]
    return result({'web': vm('io', requests=statistics.fmean(rates))},
                  [{'web': (r, 0)} for r in rates])


class TestJudge(testtools.TestCase):

    def judged(self, vms, windows):
        return tenants.judge(result(vms, windows), BASE)

    def test_floors_by_role_as_mean_and_in_every_window(self):
        v = self.judged(
            {'web': vm('io', requests=100.0),
             'db': vm('mixed', requests=55.0, instructions=1.0),
             'batch': vm('cpu', instructions=9.6),
             'gamer': vm('io', requests=90.0, adversary=True)},
            [{'web': (110, 0), 'db': (55, 1), 'batch': (0, 9.6),
              'gamer': (90, 0)},
             {'web': (90, 0), 'db': (55, 1), 'batch': (0, 9.6),
              'gamer': (90, 0)}])
        # a serving VM at vanilla's mean, but one window at 0.90
        self.assertEqual((1.0, 0.9, False),
                         (v['web']['ratio'], v['web']['min_window'],
                          v['web']['ok']))
        # a VM that does I/O is judged on what it serves, not computes
        self.assertEqual(('serving', 'requests_per_s', True),
                         (v['db']['role'], v['db']['metric'], v['db']['ok']))
        # 0.96 of its instructions: below a computing VM's 0.97
        self.assertAlmostEqual(0.96, v['batch']['ratio'])
        self.assertFalse(v['batch']['ok'])
        # an adversary is reported, never judged
        self.assertIsNone(v['gamer']['ok'])
        self.assertEqual(9.0, v['gamer']['ratio'])

    def test_an_aa_run_gives_each_vm_its_noise(self):
        aa = result(BASE['vms'], [
            {'web': (95, 0), 'db': (52, 4), 'batch': (0, 10),
             'gamer': (10, 0)},
            {'web': (104, 0), 'db': (47, 4), 'batch': (0, 9.9),
             'gamer': (10, 0)}])
        v = tenants.judge(BASE, BASE, aa=aa)
        self.assertEqual(0.95, v['web']['aa_window'])
        self.assertEqual(0.94, v['db']['aa_window'])
        self.assertAlmostEqual(0.99, v['batch']['aa_window'])
        self.assertNotIn('aa_window', tenants.judge(BASE, BASE)['web'])
        # two windows make no batch: too few to tell, the bare floors
        self.assertEqual((1.0, 0.95), (v['web']['floor'],
                                       v['web']['window_floor']))
        # forty windows make four batches
        base, aa = noisy(40, 0.02, seed=1), noisy(40, 0.02, seed=2)
        got = tenants.noise(aa, base, 'web', 'requests_per_s')
        self.assertEqual((40, 3), (got.n, got.dof))
        self.assertGreater(got.sd, 0.01)
        v = tenants.judge(base, base, aa=aa)['web']
        self.assertEqual(tenants.floors('serving', got),
                         (v['floor'], v['window_floor']))

    def test_floors_are_net_of_the_aa_runs_noise(self):
        self.assertEqual((1.0, 0.95), tenants.floors('serving'))
        self.assertEqual((0.97, 0.95), tenants.floors('computing'))
        # no noise, no band
        self.assertEqual((0.97, 0.95), tenants.floors(
            'computing', tenants.Noise(0.0, 0.0, 100, 9)))
        # the mean floor goes down with the mean's standard error, the
        # window floor with one window's spread, never above the bare ones
        lo_mean, lo_win = tenants.floors(
            'serving', tenants.Noise(0.001, 0.01, 100, 9))
        hi_mean, hi_win = tenants.floors(
            'serving', tenants.Noise(0.002, 0.03, 100, 9))
        self.assertTrue(1.0 > lo_mean > hi_mean > 0.99)
        self.assertEqual(0.95, lo_win)
        self.assertLess(hi_win, 0.9)
        # t with 9 degrees of freedom at ALPHA: about 4.3 standard errors
        self.assertAlmostEqual(math.exp(-4.297 * 0.001), lo_mean, places=5)
        # the lowest of 100 windows at ALPHA, the spread known from 99
        # degrees of freedom: t, about 4.5 spreads
        self.assertAlmostEqual(math.exp(-4.481 * 0.03), hi_win, places=4)
        # from a handful of windows the spread is itself uncertain
        few = tenants.floors('serving', tenants.Noise(0.001, 0.03, 7, 6))[1]
        self.assertAlmostEqual(math.exp(-7.523 * 0.03), few, places=4)

    def test_a_count_is_not_known_finer_than_one_unit_per_batch(self):
        # the A/A run identical to vanilla: the band is one request per
        # batch (10 windows of 0.5 s at 100 requests/s: 500 requests)
        base = noisy(40, 0.0, seed=1)
        got = tenants.noise(base, base, 'web', 'requests_per_s')
        self.assertAlmostEqual(1.0 / 500 / 2, got.se)
        self.assertEqual(0.0, got.sd)

    def test_vanilla_run_again_rarely_falls_below_a_floor(self):
        # Under the null (every run a draw of the same noise: windows
        # whose log ratio is normal, consecutive ones anti-correlated as
        # a request straddling an edge makes them), the floors from one
        # A/A draw are crossed by another at about ALPHA per floor; a
        # true loss of 1% of the mean is caught nearly always.
        rng = random.Random(7)
        draws, false, caught = 2000, 0, 0
        base = noisy(134, 0.0, seed=0)
        for _ in range(draws):
            aa = straddled(134, 0.016, rng)
            again = straddled(134, 0.016, rng)
            lost = straddled(134, 0.016, rng, scale=0.99)
            false += not tenants.judge(again, base, aa=aa)['web']['ok']
            caught += not tenants.judge(lost, base, aa=aa)['web']['ok']
        self.assertLessEqual(false / draws, 3 * 2 * tenants.ALPHA)
        self.assertGreater(caught / draws, 0.95)

    def test_a_window_of_a_cycling_host_is_one_cycle(self):
        # 40 windows of 0.5 s, a 5 s cycle: four windows of ten
        base = noisy(40, 0.0, seed=1)
        self.assertEqual(10, tenants.span(base, 5.0))
        self.assertEqual(1, tenants.span(base, 0.0))
        # half a cycle lost in one window is a twentieth of the cycle's
        lost = noisy(40, 0.0, seed=1)
        lost['windows']['vms'][3]['web']['requests_per_s'] = 50.0
        short = tenants.judge(lost, base)['web']
        cyc = tenants.judge(lost, base, cycle_s=5.0)['web']
        self.assertEqual((0.5, 40, 0.5), (short['min_window'],
                                          short['windows'],
                                          short['window_s']))
        self.assertEqual((0.95, 4, 5.0), (cyc['min_window'], cyc['windows'],
                                          cyc['window_s']))
        # batches are whole cycles: one each, three degrees of freedom
        got = tenants.noise(noisy(40, 0.02, seed=2), base, 'web',
                            'requests_per_s', width=10)
        self.assertEqual((4, 3), (got.n, got.dof))

    def test_a_cycling_host_judged_by_cycles_keeps_its_false_alarms_rare(self):
        # A host whose phases change twice a cycle: at a change, two
        # histories put tens of times more requests on one side of a
        # window's edge than elsewhere. Judged by half seconds, vanilla
        # run again falls below the floors the A/A run gives in about
        # half the draws here; judged by cycles, in about ALPHA of them.
        rng = random.Random(11)
        cycles, per = 7, 20
        spreads = [0.3 if i % 10 == 0 else 0.01
                   for i in range(cycles * per + 1)]

        def run(scale=1.0):
            edges = [rng.gauss(0.0, s / math.sqrt(2)) for s in spreads]
            rates = [100.0 * scale * math.exp(edges[i + 1] - edges[i])
                     for i in range(cycles * per)]
            return result({'web': vm('io',
                                     requests=statistics.fmean(rates))},
                          [{'web': (r, 0)} for r in rates])
        base = noisy(cycles * per, 0.0, seed=0)
        draws, short, whole, caught = 300, 0, 0, 0
        for _ in range(draws):
            aa, again, lost = run(), run(), run(0.9)
            short += not tenants.judge(again, base, aa=aa)['web']['ok']
            whole += not tenants.judge(again, base, aa=aa,
                                       cycle_s=per * 0.5)['web']['ok']
            caught += not tenants.judge(lost, base, aa=aa,
                                        cycle_s=per * 0.5)['web']['ok']
        self.assertGreater(short / draws, 0.05)
        self.assertLessEqual(whole / draws, 0.01)
        # and a loss of 10% of every cycle is still caught
        self.assertGreater(caught / draws, 0.95)

    def test_a_run_out_of_step_is_judged_by_the_null_runs_spread(self):
        # vanilla's windows vary 3.4% (a Fig. 5 server's); the A/A run
        # stays in step with it (common random numbers: ratios within
        # 1.6%), a run that serves 2% more does not: its windows hold
        # other requests than vanilla's and are as independent of them as
        # another seed's (the null run). Judged by the A/A run alone it
        # falls below a window floor in most draws; judged with the null
        # run, in about ALPHA of them, and a loss of 30% in three of its
        # windows is still caught.
        rng = random.Random(5)
        n, cv = 134, 0.034

        def rates(scale=1.0):
            return [100.0 * scale * math.exp(rng.gauss(0.0, cv))
                    for _ in range(n)]

        def run(rs):
            return result({'web': vm('io', requests=statistics.fmean(rs))},
                          [{'web': (r, 0)} for r in rs])
        draws, alone, with_null, caught = 300, 0, 0, 0
        for _ in range(draws):
            b = rates()
            base = run(b)
            aa = run([x * math.exp(rng.gauss(0.0, 0.016)) for x in b])
            null, ahead = run(rates()), rates(1.02)
            lost = list(ahead)
            for i in (40, 41, 42):
                lost[i] *= 0.7
            alone += not tenants.judge(run(ahead), base, aa=aa)['web']['ok']
            with_null += not tenants.judge(run(ahead), base, aa=aa,
                                           null=null)['web']['ok']
            caught += not tenants.judge(run(lost), base, aa=aa,
                                        null=null)['web']['ok']
        self.assertGreater(alone / draws, 0.5)
        self.assertLessEqual(with_null / draws, 0.01)
        self.assertGreater(caught / draws, 0.95)
        v = tenants.judge(run(ahead), base, aa=aa, null=null)['web']
        self.assertAlmostEqual(math.sqrt(2) * cv, v['window_sd'], delta=0.01)

    def test_the_null_run_is_another_seeds(self):
        self.assertEqual(3, tenants.null_seed(2, (1, 2, 3)))
        self.assertEqual(1, tenants.null_seed(3, (3, 1, 2)))
        self.assertEqual(5, tenants.null_seed(4))
        self.assertEqual(5, tenants.null_seed(4, (4,)))

    def test_the_cycle_is_the_scenarios_phase_period(self):
        self.assertEqual(10.0, tenants.cycle_s(
            runner.load('phases_batch_server')))
        self.assertEqual(0.0, tenants.cycle_s(
            runner.load('fig5_hbase_pagerank')))

    def test_summary_is_per_tenant_not_class_totals(self):
        # the gamer's x9 lifts no figure; web's loss is not hidden by db
        v = self.judged(
            {'web': vm('io', requests=90.0),
             'db': vm('mixed', requests=90.0, instructions=9.0),
             'batch': vm('cpu', instructions=10.0),
             'gamer': vm('io', requests=90.0, adversary=True)}, [])
        s = tenants.summary(v)
        self.assertFalse(s['ok'])
        self.assertAlmostEqual((0.9 * 1.8) ** 0.5, s['io_gain'])
        self.assertEqual(1.0, s['cpu'])
        self.assertEqual('web', s['worst'][0])
        self.assertAlmostEqual(0.9, s['worst'][1])
        # no windows: the mean stands for the lowest window
        self.assertEqual(0.9, v['web']['min_window'])

    @staticmethod
    def rows(text):
        """``{(kernel, VM): mark}`` of a :func:`tenants.table`."""
        out = {}
        for line in text.splitlines():
            if line.startswith('| '):
                cells = [c.strip() for c in line.split('|')[1:-1]]
                out[tuple(cells[:2])] = cells[-1]
        return out

    def test_table_says_which_vm_is_below(self):
        low = result(four(web=99.0),
                     [{'web': (99, 0), 'db': (50, 4), 'batch': (0, 10),
                       'gamer': (10, 0)}] * 2)
        text = tenants.table({'vanilla': BASE, 'vsmtio': low})
        rows = self.rows(text)
        self.assertEqual('BELOW', rows[('vsmtio', 'web')])
        # a VM within its floors gets no mark
        self.assertEqual('', rows[('vsmtio', 'db')])
        self.assertEqual('adversary, not judged', rows[('vsmtio', 'gamer')])
        self.assertIn('0.5 s windows', text)
        self.assertIn('Bare floors (no A/A run)', text)

    def test_table_marks_only_outside_the_noise_aware_floors(self):
        # three draws of the same noise, and a loss of 10%
        base, aa, again = (noisy(40, 0.02, seed) for seed in (1, 2, 3))
        lost = noisy(40, 0.02, 3)
        lost['vms']['web']['requests_per_s'] *= 0.9
        for w in lost['windows']['vms']:
            w['web']['requests_per_s'] *= 0.9
        results = {'vanilla': base, 'vsmtio': again, 'polling': lost}
        bare = self.rows(tenants.table(results))
        # a window of the same host dips under 0.95 by chance
        self.assertEqual('BELOW', bare[('vsmtio', 'web')])
        text = tenants.table(results, aa=aa)
        rows = self.rows(text)
        self.assertEqual('', rows[('vsmtio', 'web')])
        self.assertEqual('BELOW', rows[('polling', 'web')])
        self.assertEqual('', rows[('vanilla', 'web')])
        # each row shows its floors and the A/A figures they came from
        v = tenants.judge(again, base, aa=aa)['web']
        line = next(line for line in text.splitlines()
                    if line.startswith('| vsmtio '))
        self.assertIn('%.3f / %.3f' % (v['floor'], v['window_floor']), line)
        self.assertIn('%.3f / %.3f' % (v['aa_ratio'], v['aa_window']), line)
        self.assertIn("net of the model's noise", text)
        self.assertIn('in %g of VMs' % tenants.ALPHA, text)

    def test_the_baseline_meets_every_floor(self):
        s = tenants.summary(tenants.judge(BASE, BASE))
        self.assertEqual((True, 1.0, 1.0), (s['ok'], s['io_gain'], s['cpu']))


def scenario_file(test, vms, duration, warmup):
    """A tiny scenario (helpers.tiny's) written where a run can load it."""
    doc = {'name': 'tiny', 'host': {'cores': 1}, 'duration_s': duration,
           'warmup_s': warmup, 'placement': 'explicit',
           'workloads': {'cpu': h.CPU_WL, 'io': h.io_wl()},
           'vms': [{'name': n, 'workload': w, 'vcpus': len(t),
                    'threads': list(t)} for n, w, t in vms]}
    path = test.useFixture(fixtures.TempDir()).join('tiny.yaml')
    with open(path, 'w') as f:
        yaml.safe_dump(doc, f)
    return path


class TestWindows(testtools.TestCase):

    def test_last_window_takes_the_remainder(self):
        self.assertEqual([1.5, 2.0], runner.sub_edges(1.0, 1.6, 0.5))
        self.assertEqual([], runner.sub_edges(1.0, 0.3, 0.5))

    def test_a_run_reports_each_vm_in_each_window(self):
        path = scenario_file(self, [('web', 'io', [0]),
                                    ('batch', 'cpu', [1])], 1.4, 0.2)
        runs = {k: runner.run(path, k) for k in ('vanilla', 'haltpoll')}
        r = runs['vanilla']
        wins = r['windows']['vms']
        # 1.2 s measured: 0.5 s and 0.7 s
        self.assertEqual(2, len(wins))
        self.assertEqual(0.5, r['windows']['window_s'])
        total = (wins[0]['web']['requests_per_s'] * 0.5
                 + wins[1]['web']['requests_per_s'] * 0.7)
        self.assertAlmostEqual(r['vms']['web']['requests_per_s'] * 1.2,
                               total, delta=1e-6 * total)
        judged = tenants.compare(runs)
        self.assertTrue(judged['vanilla']['ok'])
        self.assertEqual(2, judged['haltpoll']['vms']['web']['windows'])

    def test_a_static_setup_runs_without_the_agent(self):
        path = scenario_file(self, [('web', 'io', [0]),
                                    ('batch', 'cpu', [0])], 0.6, 0.1)

        def setup(sim):
            sim.apply(model.Decision(timeout_ns=0, placements={},
                                     split=False, timeouts={},
                                     weights={'web': 2}))
        r = runner.run_conf(runner.make_conf(path, 'vsmtio'), setup=setup)
        self.assertNotIn('agent', r)
        self.assertEqual(0.0, r['retention_pct'])
