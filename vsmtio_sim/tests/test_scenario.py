"""Scenario files: validation errors are one line naming the field."""

import os
import tempfile

import testtools

from vsmtio_sim import kernels
from vsmtio_sim import scenario
from vsmtio_sim.tests import helpers as h


def doc(**over):
    d = {'name': 'x', 'host': {'cores': 2},
         'vms': [{'name': 'a', 'workload': 'matmul', 'vcpus': 2}]}
    d.update(over)
    return d


class TestValidation(testtools.TestCase):

    def error(self, d):
        e = self.assertRaises(scenario.ScenarioError, scenario.from_dict, d,
                              'f.yaml')
        msg = str(e)
        self.assertNotIn('\n', msg)
        self.assertTrue(msg.startswith('f.yaml: '), msg)
        return msg

    def test_missing_host(self):
        d = doc()
        del d['host']
        self.assertIn("'host' is a required property", self.error(d))

    def test_bad_core_count_names_the_field(self):
        self.assertIn('host.cores', self.error(doc(host={'cores': 0})))

    def test_bad_vcpu_count_names_the_field(self):
        msg = self.error(doc(vms=[{'name': 'a', 'workload': 'matmul',
                                   'vcpus': -1}]))
        self.assertIn('vms.0.vcpus', msg)

    def test_cgroup_shares_outside_cpu_shares_range(self):
        for bad in (1, 262145):
            msg = self.error(doc(scheduler={'vm_cgroup_shares': bad}))
            self.assertIn('scheduler.vm_cgroup_shares', msg)
        for good in (0, 2, 1024):
            scenario.from_dict(doc(scheduler={'vm_cgroup_shares': good}))

    def test_adversary_is_a_flag(self):
        msg = self.error(doc(vms=[{'name': 'a', 'workload': 'matmul',
                                   'vcpus': 1, 'adversary': 'yes'}]))
        self.assertIn('vms.0.adversary', msg)

    def test_unknown_workload(self):
        msg = self.error(doc(vms=[{'name': 'a', 'workload': 'nope',
                                   'vcpus': 1}]))
        self.assertIn("vms.0.workload: unknown workload 'nope'", msg)

    def test_unknown_key(self):
        self.assertIn('colour', self.error(doc(colour='red')))

    def test_bad_distribution(self):
        wl = h.io_wl()
        wl['device'] = {'dist': 'lognormal'}
        msg = self.error(doc(workloads={'w': wl}))
        self.assertIn('workloads.w.device', msg)
        self.assertIn('mean_us', msg)

    def test_io_workload_needs_a_device(self):
        wl = h.io_wl()
        del wl['device']
        self.assertIn('workloads.w', self.error(doc(workloads={'w': wl})))

    def test_bad_irq_steering(self):
        wl = h.io_wl()
        wl['irq'] = {'steering': 'nearest',
                     'handler': {'dist': 'const', 'mean_us': 5}}
        self.assertIn('workloads.w.irq.steering',
                      self.error(doc(workloads={'w': wl})))

    def test_bad_cost(self):
        msg = self.error(doc(costs={'sibling_switching_speed': 1.5}))
        self.assertIn('costs.sibling_switching_speed', msg)

    def test_warmup_longer_than_run(self):
        msg = self.error(doc(duration_s=1, warmup_s=2))
        self.assertIn('warmup_s', msg)

    def test_explicit_placement_on_missing_hyperthread(self):
        msg = self.error(doc(placement='explicit', vms=[
            {'name': 'a', 'workload': 'matmul', 'vcpus': 1,
             'threads': [4]}]))
        self.assertIn('vms.0.threads: hyperthread 4 does not exist', msg)

    def test_duplicate_vm(self):
        vm = {'name': 'a', 'workload': 'matmul', 'vcpus': 1}
        self.assertIn('duplicate VM name', self.error(doc(vms=[vm, vm])))

    def test_not_a_mapping(self):
        self.assertIn('mapping', self.error(['a']))

    def test_unknown_shipped_name(self):
        e = self.assertRaises(scenario.ScenarioError, scenario.load, 'nope')
        self.assertIn("unknown scenario 'nope'", str(e))

    def test_broken_yaml_file(self):
        with tempfile.NamedTemporaryFile('w', suffix='.yaml',
                                         delete=False) as f:
            f.write('name: [unclosed\n')
        self.addCleanup(os.unlink, f.name)
        e = self.assertRaises(scenario.ScenarioError, scenario.load, f.name)
        self.assertIn('not valid YAML', str(e))
        self.assertNotIn('\n', str(e))


class TestShipped(testtools.TestCase):

    def test_every_shipped_scenario_loads(self):
        names = scenario.shipped()
        self.assertIn('redis_pagerank', names)
        self.assertIn('fig8_all_cpu_0_96', names)
        self.assertEqual(36, len(names))
        for name in names:
            sc = scenario.load(name)
            self.assertEqual(name, sc.name)
            # the paper's host for the paper's settings
            if name.startswith(('fig', 'redis_', 'sockperf_')):
                self.assertEqual(24, sc.cores)

    def test_every_shipped_scenario_runs_under_every_kernel(self):
        # briefly: that each starts and its events run, phases included
        for name in scenario.shipped():
            sc = scenario.load(name)
            for kernel in kernels.NAMES:
                sim = h.run(sc, kernel, until_s=0.02)
                self.assertGreater(sim.events, 0, (name, kernel))

    def test_shipped_scenarios_say_what_they_are_for(self):
        for name in scenario.shipped():
            with open(os.path.join(scenario.SCENARIO_DIR,
                                   name + '.yaml')) as f:
                self.assertTrue(f.readline().startswith('#'), name)

    def test_balanced_placement_pairs_one_vcpu_of_each_kind(self):
        sc = scenario.load('redis_pagerank')
        per_thread = {}
        for vm, _, wl, cpu in sc.placement():
            per_thread.setdefault(cpu, []).append(wl.kind)
        self.assertEqual(48, len(per_thread))
        for kinds in per_thread.values():
            self.assertEqual(['cpu', 'io'], sorted(kinds))

    def test_fig4_puts_the_two_vms_on_opposite_siblings(self):
        sc = scenario.load('fig4_hbase_matmul')
        for vm, _, wl, cpu in sc.placement():
            self.assertEqual(wl.kind == 'io', cpu >= 24)
