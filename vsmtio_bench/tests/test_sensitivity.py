"""The benchmark's sensitivity table: its logic, on fabricated results.

The benchmark itself runs for minutes and asserts nothing; what it
concludes from its runs is code, tested here on per-VM results made up to
exercise each case (not numbers any run printed).
"""

import testtools

from vsmtio_bench import sensitivity as bench
from vsmtio_sim import scenario


def vm(kind, req=0.0, instr=0.0, adversary=False):
    return {'kind': kind, 'adversary': adversary, 'requests_per_s': req,
            'instructions_per_s': instr}


def point(product, paper=None):
    """Vanilla's VMs at 100 each; ``product``/``paper``: {vm: ratio}."""
    base = {'kv': vm('io', req=100.0), 'web': vm('io', req=100.0),
            'batch': vm('cpu', instr=100.0),
            'gamer': vm('mixed', 100.0, 100.0, adversary=True)}

    def scaled(ratios):
        out = {}
        for name, b in base.items():
            r = ratios.get(name, 1.0)
            out[name] = dict(b, requests_per_s=b['requests_per_s'] * r,
                             instructions_per_s=b['instructions_per_s'] * r)
        return {'vms': out}
    return {'vanilla': {'vms': base}, 'vsmtio': scaled(product),
            'vsmtio-paper': scaled(paper or {})}


class TestJudge(testtools.TestCase):

    def test_each_vm_is_judged_not_the_class_total(self):
        # the serving class gains in total (1.3 + 0.9) while one VM loses
        j = bench.judge(point({'kv': 1.3, 'web': 0.9}))
        self.assertFalse(j['no_regression'])
        self.assertAlmostEqual(0.9, j['worst'])
        self.assertAlmostEqual(0.3, j['gain'])

    def test_floors_by_what_a_vm_does(self):
        self.assertTrue(bench.judge(point({'batch': 0.971}))[
            'no_regression'])
        self.assertFalse(bench.judge(point({'batch': 0.95}))[
            'no_regression'])
        # a serving VM's floor is vanilla itself
        self.assertFalse(bench.judge(point({'kv': 0.97}))['no_regression'])

    def test_the_adversary_is_not_judged(self):
        j = bench.judge(point({'gamer': 0.1}, {'gamer': 5.0}))
        self.assertTrue(j['no_regression'])
        self.assertEqual(0.0, j['gain'])
        names = {v for v, *_ in bench.vm_ratios(point({}), 'vsmtio')}
        self.assertEqual({'kv', 'web', 'batch'}, names)

    def test_paper_direction_per_class(self):
        j = bench.judge(point({}, {'kv': 1.2, 'web': 1.1, 'batch': 0.9}))
        self.assertEqual(('+', '-'), (j['paper_io'], j['paper_cpu']))
        j = bench.judge(point({}, {'kv': 1.2, 'web': 0.9}))
        self.assertEqual('~', j['paper_io'])
        # within the noise is no direction
        j = bench.judge(point({}, {'batch': 1.001}))
        self.assertEqual('~', j['paper_cpu'])


class TestConclusions(testtools.TestCase):

    def points(self, *products_and_papers):
        return [(label, bench.judge(point(prod, paper)))
                for label, prod, paper in products_and_papers]

    def test_all_hold(self):
        c = bench.conclusions(self.points(
            ('0', {'kv': 1.1}, {'kv': 1.2, 'web': 1.2, 'batch': 0.9}),
            ('1024', {'kv': 1.05}, {'kv': 1.3, 'web': 1.2, 'batch': 0.8})),
            '1024')
        self.assertTrue(c['no_regression'].startswith('holds: '))
        self.assertIn('1.000*', c['no_regression'])
        self.assertEqual('holds: + +*', c['paper_io'])
        self.assertEqual('holds: - -*', c['paper_cpu'])
        self.assertEqual('holds: +10.0% +5.0%*', c['gain'])

    def test_what_fails_and_flips_is_named_by_value(self):
        c = bench.conclusions(self.points(
            ('0', {'batch': 0.9}, {'kv': 0.8, 'web': 0.8, 'batch': 1.1}),
            ('1024', {}, {'kv': 1.3, 'web': 1.2, 'batch': 0.8}),
            ('8192', {'kv': 1.2}, {'kv': 1.3, 'web': 1.2, 'batch': 0.8})),
            '1024')
        self.assertTrue(c['no_regression'].startswith('fails at 0: '))
        self.assertTrue(c['paper_io'].startswith('flips at 0: - +* +'))
        self.assertTrue(c['paper_cpu'].startswith('flips at 0: '))
        self.assertTrue(c['gain'].startswith('only at 8192: '))

    def test_no_gain_anywhere(self):
        c = bench.conclusions(self.points(('a', {}, {}), ('b', {}, {})),
                              'a')
        self.assertTrue(c['gain'].startswith('none anywhere'))


class TestSweepRows(testtools.TestCase):

    def test_every_row_names_inputs_of_every_swept_scenario(self):
        for name in bench.SENSITIVITY_SCENARIOS:
            doc = scenario.load_doc(name)[0]
            for paths, values, why in bench.SWEEP:
                self.assertTrue(why)
                self.assertGreater(len(values), 1)
                # the shipped value is one of the points
                shipped = bench._shipped_label(doc, paths, values)
                self.assertIn(shipped, [bench._label(v) for v in values])
                for v in values:
                    scenario.from_dict(bench.point_doc(doc, paths, v))

    def test_scaled_values_move_every_path_of_a_row(self):
        doc = scenario.load_doc('fig4_hbase_matmul')[0]
        paths = 'costs.vm_exit_ns,costs.ipi_ns'
        sc = scenario.from_dict(bench.point_doc(doc, paths, 'x2'))
        base = scenario.from_dict(doc)
        for key in ('vm_exit_ns', 'ipi_ns'):
            self.assertEqual(2 * base.costs[key], sc.costs[key])
        self.assertEqual(base.costs['l1d_flush_ns'],
                         sc.costs['l1d_flush_ns'])

    def test_table_rows_come_from_the_results(self):
        sens = {'s': {'scheduler.vm_cgroup_shares': {
            'shipped': '1024', 'points': {
                '0': point({'kv': 0.9}), '1024': point({}),
                '8192': point({})}}}}
        rows = bench.sensitivity_rows(sens, ['s'])
        self.assertEqual(1, len(rows))
        self.assertEqual(['s', 'scheduler.vm_cgroup_shares'], rows[0][:2])
        self.assertTrue(rows[0][2].startswith('fails at 0'))
        text = bench.sensitivity_section(sens, ['s'], 60.0, 0.0)
        self.assertIn('Sensitivity\n===========', text)
        self.assertIn('fails at 0', text)
