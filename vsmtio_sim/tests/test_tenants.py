"""Each honest VM against its floors (sim/tenants.py), and the windows a
run measures them over (simulate.run_conf)."""

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

    def test_an_aa_run_gives_each_vm_its_noise_window(self):
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
        # db dips to 0.94 against itself: its window floor is 0.93
        self.assertAlmostEqual(0.93, v['db']['window_floor'])
        # web's lowest is 0.95 against itself: a window of 0.945 is noise
        self.assertAlmostEqual(0.94, v['web']['window_floor'])
        # batch's A/A mean is vanilla's: its mean floor stays 0.97
        self.assertAlmostEqual(0.97, v['batch']['floor'])
        aa['vms'] = dict(aa['vms'], batch=vm('cpu', instructions=9.95))
        v = tenants.judge(BASE, BASE, aa=aa)
        self.assertAlmostEqual(0.965, v['batch']['floor'])

    def test_floors_are_net_of_the_aa_run(self):
        self.assertEqual((1.0, 0.95), tenants.floors('serving'))
        self.assertEqual((0.97, 0.95), tenants.floors('computing'))
        # a difference either way lowers the mean floor by its size
        for aa in (0.98, 1.02):
            mean, window = tenants.floors('serving', aa, 0.99)
            self.assertAlmostEqual(0.98, mean)
            self.assertEqual(0.95, window)
        # the window floor only ever goes down, to the margin under the
        # A/A run's lowest window
        self.assertAlmostEqual(0.92, tenants.floors('computing', 1.0,
                                                    0.93)[1])

    def test_a_window_inside_the_noise_is_not_held_against_a_vm(self):
        dip = [{'web': (93, 0), 'db': (50, 4), 'batch': (0, 10),
                'gamer': (10, 0)},
               {'web': (107, 0), 'db': (50, 4), 'batch': (0, 10),
                'gamer': (10, 0)}]
        run = result(BASE['vms'], dip)
        aa = result(BASE['vms'], dip)
        self.assertFalse(tenants.judge(run, BASE)['web']['ok'])
        v = tenants.judge(run, BASE, aa=aa)['web']
        self.assertTrue(v['ok'])
        # 0.01 lower than vanilla against itself is the product's
        lower = result(BASE['vms'], [dict(dip[0], web=(91.9, 0)), dip[1]])
        self.assertFalse(tenants.judge(lower, BASE, aa=aa)['web']['ok'])

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
        # vanilla against itself: web dips to 0.93 in a window, batch's
        # mean is 0.98 of the baseline's
        aa = result(four(batch=9.8),
                    [{'web': (93, 0), 'db': (50, 4), 'batch': (0, 9.8),
                      'gamer': (10, 0)},
                     {'web': (107, 0), 'db': (50, 4), 'batch': (0, 9.8),
                      'gamer': (10, 0)}])
        # web's lowest window 0.925 (floor 0.92), batch 0.955 (floor
        # 0.97 - 0.02), db 0.94 in a window (floor 0.95: no A/A dip)
        prod = result(four(batch=9.55),
                      [{'web': (92.5, 0), 'db': (47, 4), 'batch': (0, 9.55),
                        'gamer': (10, 0)},
                       {'web': (107.5, 0), 'db': (53, 4),
                        'batch': (0, 9.55), 'gamer': (10, 0)}])
        results = {'vanilla': BASE, 'vsmtio': prod}
        bare = self.rows(tenants.table(results))
        self.assertEqual('BELOW', bare[('vsmtio', 'web')])
        self.assertEqual('BELOW', bare[('vsmtio', 'batch')])
        text = tenants.table(results, aa=aa)
        rows = self.rows(text)
        self.assertEqual('', rows[('vsmtio', 'web')])
        self.assertEqual('', rows[('vsmtio', 'batch')])
        self.assertEqual('BELOW', rows[('vsmtio', 'db')])
        self.assertEqual('', rows[('vanilla', 'db')])
        # each row shows its floors and the A/A figures they came from
        web = next(line for line in text.splitlines()
                   if line.startswith('| vsmtio ') and '| web ' in line)
        self.assertIn('1.000 / 0.920', web)
        self.assertIn('1.000 / 0.930', web)
        self.assertIn("net of the model's noise", text)
        self.assertIn('A/A lowest window - 0.01', text)
        judged = tenants.compare(results, aa=aa)
        self.assertFalse(judged['vsmtio']['ok'])
        self.assertAlmostEqual(0.95, judged['vsmtio']['vms']['batch']['floor'])

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
