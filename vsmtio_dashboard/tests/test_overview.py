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

    def test_a_ratio_axis_spans_its_values(self):
        lines = [('floor', [(0.0, 0.97), (60.0, 0.97)]),
                 ('matmul', [(0.0, 0.967), (60.0, 0.975)])]
        from_zero = charts.svg(lines, 'ratio')
        self.assertIn('>0</text>', from_zero)
        spanned = charts.svg(lines, 'ratio', zero=False)
        self.assertNotIn('>0</text>', spanned)
        # the floor's line and the VM's are apart by more than a pixel
        self.assertIn('points="48.0,', spanned)
        ys = [float(p.split(',')[1]) for line in spanned.split('points="')[1:]
              for p in line.split('"')[0].split()]
        self.assertGreater(max(ys) - min(ys), 50)

    def test_empty_chart_is_empty(self):
        self.assertEqual('', charts.svg([], 's'))


class NamesTest(unittest.TestCase):
    def test_reasons_name_vms(self):
        names = {answers.VM1: 'web', answers.VM2: 'batch'}
        self.assertEqual(
            'a VM loses: batch 0.950 < 0.97, web 1.020',
            overview.named('a VM loses: %s 0.950 < 0.97, %s 1.020'
                           % (answers.VM2, answers.VM1), names))
        # whole domains only: one that merely contains a known one stays
        self.assertEqual('x-%s' % answers.VM1,
                         overview.named('x-%s' % answers.VM1, names))
        self.assertEqual('no names', overview.named('no names', {}))
        self.assertIsNone(overview.named(None, names))

    def test_hosts_reasons_name_vms(self):
        rows = overview.hosts({'verdict': [prometheus.Sample(
            {'instance': 'h:1', 'mechanism': 'split', 'domain': '',
             'reason': 'a VM loses: %s 0.9 < 0.97' % answers.VM2}, 1.0)]})
        overview.name_reasons(rows, {answers.VM2: 'batch'})
        self.assertEqual({'a VM loses: batch 0.9 < 0.97': 1},
                         dict(rows[0].mechanisms['split'].reasons))

    def test_instance_reasons_and_ratios_name_vms(self):
        rows = {i.domain: i for i in overview.instances(
            _answer(answers.load(),
                    overview.instance_queries(answers.HOST)),
            names={answers.VM1: 'web'})}
        vm2 = rows[answers.VM2]
        # its lowest ratio, under retention tried for VM1 (named)
        self.assertEqual(('retention for web', 0.955), vm2.worst)
        self.assertEqual(0.97, vm2.floor)
        self.assertIsNone(rows[answers.VM1].worst)


class EveryVmAtOnceTest(unittest.TestCase):
    """A per-VM mechanism tried on every VM at once is not one more VM."""

    def test_host_counts_vms_and_says_it_apart(self):
        labels = {'instance': 'h:1', 'mechanism': 'weight'}
        rows = overview.hosts({'kept': [
            prometheus.Sample(dict(labels, domain='a'), 1.0),
            prometheus.Sample(dict(labels, domain=overview.ALL_VMS), 0.0)]})
        weight = rows[0].mechanisms['weight']
        self.assertEqual((1, 1, False),
                         (weight.kept, weight.judged, weight.together))
        self.assertEqual('1 of 1 VMs, not kept for every VM at once',
                         str(weight))

    def test_no_instance_row(self):
        rows = overview.instances({'kept': [prometheus.Sample(
            {'domain': overview.ALL_VMS, 'mechanism': 'weight'}, 0.0)]})
        self.assertEqual([], rows)


class UnitsTest(unittest.TestCase):
    def chart(self, slug):
        return [c for c in overview.CHARTS if c.slug == slug][0]

    def test_timeouts_in_microseconds(self):
        series = [prometheus.Series({'fqdn': 'h'}, [(1.0, 0.0002)])]
        [(legend, points)] = overview.lines(self.chart('timeout'), series)
        self.assertEqual('h', legend)
        self.assertAlmostEqual(200.0, points[0][1])
        self.assertEqual('µs', str(self.chart('timeout').unit))
        self.assertEqual('µs', str(self.chart('vm_timeout').unit))

    def test_served_per_vm_by_name(self):
        series = [prometheus.Series({'domain': answers.VM1}, [(1.0, 5.0)]),
                  prometheus.Series({'domain': 'sim-vm'}, [(1.0, 7.0)])]
        legends = [legend for legend, _p in overview.lines(
            self.chart('served'), series, {answers.VM1: 'web'})]
        # a domain nova does not know (the simulated host's) stays
        self.assertEqual(['sim-vm', 'web'], legends)
        self.assertEqual('requests/s', str(self.chart('served').unit))

    def test_a_floor_alone_is_not_reported(self):
        floors = self.chart('floors')
        alone = [prometheus.Series({'vm': overview.FLOOR}, [(1.0, 0.97)])]
        self.assertEqual([], overview.lines(floors, alone))
        with_vm = alone + [prometheus.Series({'vm': 'matmul'},
                                             [(1.0, 0.96)])]
        self.assertEqual(['floor', 'matmul'], [
            legend for legend, _p in overview.lines(floors, with_vm)])

    def test_large_numbers_are_whole(self):
        out = charts.svg([('web', [(0.0, 11780.0), (60.0, 11780.0)])],
                         'requests/s')
        self.assertIn('web: 11,780', out)
        self.assertNotIn('e+04', out)


class SimulatedHostTest(unittest.TestCase):
    """Real answers about an agent on the embedded simulated SMT host."""

    def setUp(self):
        self.payloads = answers.load(answers.SIMULATED_PATH)
        [self.host] = overview.hosts(_answer(self.payloads,
                                             overview.HOST_QUERIES))
        self.vms = {i.domain: i for i in overview.instances(
            _answer(self.payloads,
                    overview.instance_queries(answers.SIM_HOST)))}

    def raw(self, query):
        return self.payloads[query]['data']['result']

    def test_marked_simulated(self):
        self.assertEqual(answers.SIM_HOST, self.host.instance)
        self.assertTrue(self.host.simulated)
        self.assertEqual('%s (simulated SMT host)' % self.host.name,
                         str(self.host.label))
        self.assertFalse(overview.Host('h', name='h', mode='stock').simulated)
        self.assertEqual('h', overview.Host('h', name='h').label)

    def test_kept_and_dropped_with_reasons(self):
        # (Prometheus drops an empty label: a host-wide one has none)
        kept = {(r['metric']['mechanism'], r['metric'].get('domain', '')):
                float(r['value'][1])
                for r in self.raw('vsmtio_guard_kept')}
        self.assertIn(1.0, kept.values())     # the guard acts here
        self.assertIn(0.0, kept.values())
        for (mechanism, domain), value in kept.items():
            if domain:
                self.assertEqual(bool(value),
                                 self.vms[domain].kept[mechanism])
        for mechanism, mech in self.host.mechanisms.items():
            self.assertEqual(
                sum(v for (m, _d), v in kept.items() if m == mechanism),
                mech.kept)
        reasons = {r['metric']['reason']
                   for r in self.raw('vsmtio_guard_verdict')}
        self.assertEqual(reasons, {reason for m in
                                   self.host.mechanisms.values()
                                   for reason in m.reasons})

    def test_served_io_and_floors(self):
        sel = {'sel': overview.selector(answers.SIM_HOST)}
        served = {r['metric']['domain']: float(r['value'][1]) for r in
                  self.raw(overview.INSTANCE_QUERIES['served'] % sel)}
        self.assertTrue(any(served.values()))
        self.assertEqual(served, {d: vm.served for d, vm in self.vms.items()
                                  if vm.served is not None})
        ratios = self.raw(overview.INSTANCE_QUERIES['ratio'] % sel)
        computing = {r['metric']['vm'] for r in ratios}
        self.assertTrue(computing)
        for domain in computing:
            mechanism, ratio = self.vms[domain].worst
            self.assertEqual(min(float(r['value'][1]) for r in ratios
                                 if r['metric']['vm'] == domain), ratio)
            self.assertEqual(0.97, self.vms[domain].floor)

    def test_charts_have_lines(self):
        legends = {}
        for chart in overview.CHARTS:
            series = prometheus.parse(self.payloads[overview.chart_query(
                chart, answers.SIM_HOST)])
            legends[chart.slug] = [legend for legend, points in
                                   overview.lines(chart, series)
                                   if len(points) >= 2]
        for slug in ('mix', 'timeout', 'kept', 'floors', 'served'):
            self.assertTrue(legends[slug], slug)
        self.assertIn('floor', legends['floors'])
        self.assertIn('matmul', legends['floors'])
        self.assertEqual(['matmul', 'sockperf'], sorted(legends['served']))
