"""``vsmtio-bench kernel``: its arithmetic, its scenarios, one real point."""

import os

import testtools

from vsmtio_bench import kernel
from vsmtio_bench import kernel_host
from vsmtio_bench import kernel_math
from vsmtio_bench import kernel_page
from vsmtio_bench import kernel_sim
from vsmtio_sim import scenario as scenario_mod


class ArithmeticTest(testtools.TestCase):

    def test_repetitions_run_up_down_then_shuffled(self):
        keys = [1, 2, 3, 4, 5]
        self.assertEqual(keys, kernel_math.order(keys, 0))
        self.assertEqual(keys[::-1], kernel_math.order(keys, 1))
        shuffled = kernel_math.order(keys, 2, seed=7)
        self.assertEqual(sorted(keys), sorted(shuffled))
        self.assertEqual(shuffled, kernel_math.order(keys, 2, seed=7))
        self.assertEqual(keys, kernel_math.order(keys, 3))

    def test_percentiles_are_nearest_rank(self):
        vals = list(range(1, 1001))
        self.assertEqual(990, kernel_math.percentile(vals, 99))
        self.assertEqual(999, kernel_math.percentile(vals, 99.9))
        self.assertEqual(1, kernel_math.percentile(vals, 0))
        self.assertIsNone(kernel_math.percentile([], 50))

    def test_delays_in_microseconds(self):
        d = kernel_math.delays([1000, 3000])
        self.assertEqual(2.0, d['mean_us'])
        self.assertEqual(3.0, d['p99_us'])
        self.assertIsNone(kernel_math.delays([])['mean_us'])

    def test_summary_is_median_and_relative_range(self):
        s = kernel_math.summary([1.0, 1.2, 0.9, None])
        self.assertEqual(1.0, s['median'])
        self.assertAlmostEqual(0.3, s['spread'])
        self.assertEqual(3, s['n'])
        self.assertIsNone(kernel_math.summary([None])['median'])

    def test_weights_in_either_version(self):
        self.assertEqual(1024, kernel_math.v1_shares(1))
        self.assertEqual(2816, kernel_math.v1_shares(2.75))
        self.assertEqual(275, kernel_math.v2_weight(2.75))
        self.assertEqual(10000, kernel_math.v2_weight(1000))
        self.assertEqual(2, kernel_math.v1_shares(0))

    def test_scheduler_from_release(self):
        self.assertEqual('EEVDF', kernel_math.scheduler_of('6.18.44-fc'))
        self.assertEqual('EEVDF', kernel_math.scheduler_of('6.6.0'))
        self.assertEqual('CFS', kernel_math.scheduler_of('6.1.0-18-amd64'))
        self.assertEqual('CFS', kernel_math.scheduler_of('5.15.0'))
        self.assertIsNone(kernel_math.scheduler_of('weird'))

    def test_hz_from_configuration(self):
        text = '# CONFIG_HZ_100 is not set\nCONFIG_HZ_250=y\nCONFIG_HZ=250\n'
        self.assertEqual('250', kernel_math.config_value(text, 'HZ'))
        self.assertIsNone(kernel_math.config_value(text, 'NO_SUCH'))

    def test_cfs_scale(self):
        self.assertEqual([1, 2, 3, 3, 4, 4],
                         [kernel_math.cfs_scale(n)
                          for n in (1, 2, 4, 7, 8, 96)])

    def test_fair_share(self):
        self.assertEqual(0.5, kernel_math.fair_share(1, 1.0))
        self.assertEqual(0.2, kernel_math.fair_share(3, 0.2))

    def test_verdicts(self):
        self.assertEqual((1.04, True), kernel_math.within(1.04, 1.0, 0.05))
        ratio, ok = kernel_math.within(0.9, 1.0, 0.05)
        self.assertFalse(ok)
        self.assertEqual((None, None), kernel_math.within(None, 1.0, 0.05))
        self.assertEqual((None, None), kernel_math.within(1.0, 0.0, 0.05))
        rows = kernel_math.compare(
            {'a': {'x': 1.0, 'y': 0.5}, 'b': {'x': 2.0}},
            {'a': {'x': 1.02, 'y': 0.6}}, ('x', 'y'), 0.05)
        self.assertEqual([True, False, None, None],
                         [r['ok'] for r in rows])
        self.assertEqual([('a', 'y')], [(r['point'], r['figure'])
                                        for r in kernel_math.outside(rows)])


class ScenarioTest(testtools.TestCase):

    def test_policies_today_and_with_an_enum(self):
        field, pols = kernel_sim.policies()
        self.assertIn(kernel_sim.DEFAULT_POLICY, [p.lower() for p in pols])
        if field is None:
            self.assertEqual([kernel_sim.DEFAULT_POLICY], pols)
        sched = kernel_sim.schema.SCHEMA['properties']['scheduler']
        props = dict(sched.get('properties', {}))
        props[kernel_sim.POLICY_FIELD] = {'enum': ['cfs', 'eevdf']}
        self._patch_properties(sched, props)
        self.assertEqual((kernel_sim.POLICY_FIELD, ['cfs', 'eevdf']),
                         kernel_sim.policies())

    def _patch_properties(self, sched, props):
        old = sched.get('properties')
        sched['properties'] = props
        self.addCleanup(sched.__setitem__, 'properties', old)

    def test_generated_scenarios_load(self):
        sched = kernel_sim.scheduler_inputs(2, 250)
        self.assertEqual({'latency_us': 12000, 'min_granularity_us': 1500,
                          'wakeup_granularity_us': 2000, 'tick_hz': 250},
                         sched)
        doc = kernel_sim.scenario_doc(50, 200, 4, sched=sched)
        sc = scenario_mod.from_dict(doc, source='test')
        self.assertEqual(1, sc.cores)
        self.assertEqual([0] * 5, [cpu for _vm, _i, _wl, cpu
                                   in sc.placement()])
        server = sc.workloads['kbench_server']
        self.assertEqual('io', server.kind)
        self.assertEqual(0, sc.costs['vm_exit_ns'])
        self.assertEqual(12000, sc.scheduler['latency_us'])
        alone = kernel_sim.scenario_doc(20, 900, 1, spinner=False,
                                        spin_us=100)
        sc = scenario_mod.from_dict(alone, source='test')
        self.assertEqual(['server'], [vm['name'] for vm in sc.vms])
        self.assertEqual(100000, sc.haltpoll['enhanced_max_ns'])

    def test_a_policy_lands_in_the_scheduler_section(self):
        doc = kernel_sim.scenario_doc(50, 200, 1, field='policy',
                                      policy='eevdf')
        self.assertEqual('eevdf', doc['scheduler']['policy'])
        doc = kernel_sim.scenario_doc(50, 200, 1, policy='eevdf')
        self.assertNotIn('policy', doc['scheduler'])

    def test_a_model_point_reports_the_real_figures(self):
        doc = kernel_sim.scenario_doc(500, 100, 1, duration_s=0.6,
                                      warmup_s=0.1)
        low = kernel_sim.run_point(doc, 1.0)
        high = kernel_sim.run_point(doc, 4.0)
        for r in (low, high):
            self.assertAlmostEqual(1.0, r['server_cpu'] + r['spinner_cpu'],
                                   delta=0.05)
        # the weight moves the CPU to the server
        self.assertGreater(high['requests_per_s'], low['requests_per_s'])
        self.assertLess(high['spinner_cpu'], low['spinner_cpu'])

    def test_the_page_renders_from_a_profile(self):
        prof = _profile()
        text = kernel_page.render(prof)
        self.assertIn('Measured with ``vsmtio-bench kernel`` at commit '
                      '``abc1234``.', text)
        self.assertIn('**1 of 2 figures are not**', text)
        self.assertIn('**out**', text)
        self.assertIn('model cfs: 1 of 2', kernel_page.table_text(prof))
        # the model run again later says when each half ran
        prof['measured_at'] = 'fedcba9'
        self.assertIn('Measured with ``vsmtio-bench kernel`` at commit '
                      '``fedcba9``; the model ran at commit ``abc1234``.',
                      kernel_page.render(prof))

    def test_the_model_of_this_host_pays_its_costs_but_no_ipi(self):
        costs = kernel_sim.host_costs({'context_switch_ns': 1500,
                                       'ipi_ns': 5000})
        self.assertEqual({'context_switch_ns': 1500, 'ipi_ns': 0}, costs)
        doc = kernel_sim.scenario_doc(20, 900, 1, spinner=False,
                                      costs=dict(costs, vm_exit_ns=700))
        sc = scenario_mod.from_dict(doc, source='test')
        self.assertEqual((1500, 0, 0), (sc.costs['context_switch_ns'],
                                        sc.costs['ipi_ns'],
                                        sc.costs['vm_exit_ns']))

    def test_this_host_s_profile_from_the_bench_s_own_points(self):
        prof = _profile()
        prof['real']['switches']['repetitions'] = {
            'round_trip_one_cpu_ns': [5000.0],
            'round_trip_two_cpus_ns': [25000.0],
            'pipe_baseline_ns': [2000.0]}
        hp = kernel.host_profile_of(dict(prof['host'], name='h',
                                         measured_at='now'),
                                    prof['real'], 'vsmtio-bench kernel')
        # the 50 us wait's wake-up of the server alone (7 us) is the
        # only one, so the median over waits
        self.assertEqual(1500, hp['costs']['context_switch_ns'])
        self.assertEqual(11500 - 7000, hp['costs']['ipi_ns'])
        self.assertEqual('eevdf', hp['scheduler']['policy'])

    def test_the_page_says_which_costs_came_from_the_host(self):
        prof = _profile()
        models = prof['model']['points']
        shipped = {'cfs': {'b50/w200 t1 r2': {'server_norm': 0.8,
                                              'spinner_cpu': 0.5}}}
        real = kernel.medians(prof['real']['weights'])
        prof.update({
            'comparison': kernel.comparisons(real, {'cfs': {
                'b50/w200 t1 r2': dict(models['cfs']['b50/w200 t1 r2'],
                                       spinner_cpu=0.7)}}, 0.05),
            'comparison_shipped': kernel.comparisons(real, shipped, 0.05),
            'host_profile': {
                'costs': {'context_switch_ns': 1500, 'ipi_ns': 4000},
                'sources': {'costs.context_switch_ns': 'measured on h',
                            'costs.ipi_ns': 'measured on h too',
                            'scheduler.policy': 'the release'}}})
        prof['model']['host_inputs'] = {
            'costs': {'context_switch_ns': 1500, 'ipi_ns': 0},
            'scheduler': {'tick_hz': 250}}
        text = kernel_page.render(prof)
        self.assertIn('The model of this host', text)
        self.assertIn('measured on h too', text)
        self.assertIn("0 (the profile's: 4000)", text)
        self.assertIn('(the policy of each table)', text)
        self.assertIn('**0 of 2 figures of the model of this host are '
                      'not**', text)
        self.assertIn('with the shipped costs (the last three columns) 2 '
                      'of 2 are not', text)
        self.assertIn('the model of this host charges the switch measured '
                      'here, ``1500`` ns', text)
        self.assertIn('model cfs: 0 of 2 figures outside +-5% with this '
                      'host\'s costs, 2 of 2 with the shipped costs',
                      kernel_page.table_text(prof))


def _profile():
    s = kernel_math.summary
    weights = {
        'b50/w200 t1 alone': {'requests_per_s': s([4000]),
                              'server_norm': s([1.0]),
                              'wake_mean_us': s([7.0]),
                              'wake_p99_us': s([20.0]),
                              'wake_p999_us': s([40.0])},
        'b50/w200 t1 r2': {'requests_per_s': s([3600]),
                           'server_norm': s([0.9]),
                           'spinner_cpu': s([0.7]),
                           'wake_mean_us': s([9.0]),
                           'wake_p99_us': s([30.0]),
                           'wake_p999_us': s([50.0])}}
    small = {'wake b20/w50 alone': {
        'wake_mean_us': s([7.0]), 'wake_p99_us': s([9.0]),
        'wake_p999_us': s([12.0]), 'server_cpu': s([0.3]),
        'spinner_cpu': s([None])}}
    models = {'cfs': {
        'b50/w200 t1 r2': {'server_norm': 0.91, 'spinner_cpu': 0.5,
                           'wake_mean_us': 3.0},
        'wake b20/w50 alone': {'wake_mean_us': 15.0}}}
    real = kernel.medians(weights)
    return {
        'command': 'vsmtio-bench kernel', 'commit': 'abc1234',
        'host': {'kernel_release': '6.18.0', 'scheduler': 'EEVDF',
                 'hz': 250, 'hz_source': '/proc/config.gz',
                 'cpu_model': 'a CPU', 'cpus': 2, 'smt_active': False,
                 'cgroup_version': 1, 'python': '3.11', 'cpu': 1,
                 'busy_before': {'0': 0.5, '1': 0.1},
                 'busy_after': {'0': 0.5, '1': 0.1},
                 'loadavg_before': '1 1 1', 'loadavg_after': '2 2 2',
                 'elapsed_s': 60.0},
        'settings': {'seconds': 2, 'small_seconds': 1, 'warmup_s': 0.2,
                     'repetitions': 1, 'tolerance': 0.05,
                     'profiles': [[50, 200]], 'model_seconds': 4,
                     'model_seeds': 1},
        'stand_ins': ['no SMT'], 'unmeasured': [],
        'real': {
            'calibration': {'ns_per_iteration': 15.0, 'bursts': {
                '20': {'target_us': 20, 'median_us': 20.5, 'min_us': 19.8,
                       'p99_us': 30.0}}},
            'weights': weights, 'small': small,
            'switches': {
                'round_trip_one_cpu_ns': s([5000.0]),
                'round_trip_two_cpus_ns': s([25000.0]),
                'pipe_baseline_ns': s([2000.0]),
                'context_switch_ns': 1500.0,
                'remote_wakeup_ns': 11500.0}},
        'model': {'policies': ['cfs'], 'points': models,
                  'scheduler_inputs': {'tick_hz': 250},
                  'working_set_kib': 32,
                  'costs': {'context_switch_ns': 3000, 'ipi_ns': 2000}},
        'comparison': kernel.comparisons(real, models, 0.05),
    }


class RealKernelTest(testtools.TestCase):
    """One weight point on this host's kernel, short (seconds)."""

    def groups(self):
        """The bench's cgroups, or a skip saying why the host has none."""
        if os.geteuid() != 0:
            self.skipTest('needs root to create cpu controller groups')
        try:
            return kernel_host.Groups()
        except kernel_host.Unavailable as exc:
            self.skipTest(str(exc))

    def test_one_weight_point(self):
        groups = self.groups()
        top = groups.top
        cpu = max(os.sched_getaffinity(0))
        with groups:
            nsi = kernel_host.calibrate(trials=5, n=50000)
            self.assertTrue(os.path.isdir(os.path.join(top, 'server')))
            r = kernel_host.run_point(groups, cpu, 50, 200, 1, 2.0, 0.3,
                                      0.05, nsi)
        self.assertFalse(os.path.exists(top))
        self.assertGreater(r['requests_per_s'], 100)
        self.assertGreater(r['spinner_cpu'], 0.05)
        self.assertLessEqual(r['server_cpu'] + r['spinner_cpu'], 1.1)
        self.assertTrue(r['delays'])
        self.assertTrue(all(d >= 0 for d in r['delays']))

    def test_groups_are_removed_whatever_happens(self):
        groups = self.groups()
        top = groups.top

        def boom():
            with groups:
                raise RuntimeError('boom')
        self.assertRaises(RuntimeError, boom)
        self.assertFalse(os.path.exists(top))
