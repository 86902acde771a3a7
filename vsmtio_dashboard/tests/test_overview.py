import unittest

from vsmtio_dashboard.api import prometheus
from vsmtio_dashboard import charts
from vsmtio_dashboard import overview
from vsmtio_dashboard.tests import answers


def _answer(payloads, queries):
    return {name: prometheus.parse(payloads[q]) for name, q in queries.items()}


class HostsTest(unittest.TestCase):
    def setUp(self):
        self.payloads = answers.load()
        self.rows = {h.instance: h for h in overview.hosts(
            _answer(self.payloads, overview.HOST_QUERIES))}

    def test_running_host(self):
        host = self.rows[answers.HOST]
        self.assertEqual('compute-1', host.name)
        self.assertEqual('stock', host.mode)
        self.assertEqual({'io': 3, 'cpu': 1}, host.vcpus)
        self.assertEqual(0.0002, host.timeout)
        self.assertEqual({answers.VM1: 0.0001, answers.VM2: 0.0004},
                         host.vm_timeouts)
        self.assertEqual('running', host.health)
        self.assertEqual(1234, host.periods)
        self.assertEqual(2, host.recent_failures)
        self.assertEqual((1, 1), (host.protected, host.reserved))

    def test_guard_kept_and_why(self):
        retention = self.rows[answers.HOST].mechanisms['retention']
        self.assertEqual((1, 2), (retention.kept, retention.judged))
        self.assertEqual({'every floor held': 1, 'tenant below floor': 1},
                         dict(retention.reasons))
        self.assertEqual('1 of 2 VMs (every floor held: 1, tenant below '
                         'floor: 1)', str(retention))

    def test_what_is_not_tried_says_why(self):
        host = self.rows[answers.HOST]
        self.assertEqual({}, host.refused)
        self.assertEqual({'split': 'no VM serves I/O: there is no I/O '
                                   'class to split off',
                          'borrow': 'borrowing comes with the split'},
                         host.untried)

    def test_a_refused_timeout_is_never_a_value(self):
        labels = {'instance': 'h:1', 'fqdn': 'h'}
        why = 'halt_poll_ns is read-only (mode 444)'
        rows = overview.hosts({
            'timeout': [prometheus.Sample(labels, 0.00005)],
            'vm_timeout': [prometheus.Sample(dict(labels, domain='d'),
                                             0.00005)],
            'refused': [prometheus.Sample(
                dict(labels, mechanism='retention', reason=why), 1.0)]})
        self.assertEqual(1, len(rows))
        self.assertEqual({'retention': why}, rows[0].refused)
        self.assertIsNone(rows[0].timeout)
        self.assertEqual({}, rows[0].vm_timeouts)

    def test_down_host_reports_nothing_it_does_not_have(self):
        host = self.rows[answers.DOWN_HOST]
        self.assertEqual('down', host.health)
        self.assertEqual('compute-2', host.name)
        self.assertIsNone(host.mode)
        self.assertIsNone(host.timeout)
        self.assertIsNone(host.reserved)
        self.assertEqual({}, host.mechanisms)

    def test_no_answers_no_hosts(self):
        self.assertEqual([], overview.hosts({}))

    def test_stalled_agent(self):
        host = overview.Host('x', up=True, recent_periods=0.0)
        self.assertEqual('stalled', host.health)
        self.assertIsNone(overview.Host('x').health)


class InstancesTest(unittest.TestCase):
    def setUp(self):
        payloads = answers.load()
        self.rows = {i.domain: i for i in overview.instances(
            _answer(payloads, overview.instance_queries(answers.HOST)),
            names={answers.VM1: 'web'})}

    def test_measured_class_and_decisions(self):
        vm1, vm2 = self.rows[answers.VM1], self.rows[answers.VM2]
        self.assertEqual('web', vm1.name)
        self.assertIsNone(vm2.name)
        self.assertEqual('io', vm1.measured_class)
        self.assertEqual({'io': 1, 'cpu': 1}, vm2.vcpus)
        self.assertEqual('io', vm2.measured_class)   # the agent's tie rule
        self.assertEqual({'retention': True}, vm1.kept)
        self.assertEqual({'retention': 'tenant below floor'}, vm2.reasons)
        self.assertTrue(vm1.protected)
        self.assertIsNone(vm2.protected)
        self.assertEqual(0.25, vm1.i_cpu)
        self.assertEqual(1500, vm1.served)
        self.assertIsNone(vm2.served)    # NaN is not reported, not zero

    def test_cpu_majority(self):
        self.assertEqual('cpu', overview.Instance(
            'd', vcpus={'io': 1, 'cpu': 2}).measured_class)
        self.assertIsNone(overview.Instance('d').measured_class)


class QueriesTest(unittest.TestCase):
    def test_selector_quotes_the_target(self):
        self.assertEqual(r'instance="a\"b\\c"', overview.selector('a"b\\c'))

    def test_chart_is_a_subquery(self):
        q = overview.chart_query(overview.CHARTS[0], 'h:1')
        self.assertEqual('(sum by (class) (vsmtio_host_vcpus{instance='
                         '"h:1"}))[30m:15s]', q)


class ChartTest(unittest.TestCase):
    def test_lines_drop_missing_points(self):
        chart = [c for c in overview.CHARTS if c.slug == 'served'][0]
        series = [prometheus.Series({'domain': 'd'},
                                    [(1.0, 2.0), (2.0, None), (3.0, 4.0)]),
                  prometheus.Series({'domain': 'e'}, [(1.0, None)])]
        self.assertEqual([('d', [(1.0, 2.0), (3.0, 4.0)])],
                         overview.lines(chart, series))

    def test_svg(self):
        out = charts.svg([('io', [(0.0, 1.0), (60.0, 3.0)]),
                          ('<cpu>', [(0.0, 2.0), (60.0, 1.0)])], 'vCPUs')
        self.assertEqual(2, out.count('<polyline'))
        self.assertIn('&lt;cpu&gt;: 1', out)   # escaped, last value
        self.assertIn('io: 3', out)
        self.assertNotIn('<cpu>', out)

    def test_empty_chart_is_empty(self):
        self.assertEqual('', charts.svg([], 's'))
