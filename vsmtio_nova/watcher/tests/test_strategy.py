"""The Watcher strategy on Watcher's own compute model (no services).

Watcher's ``ModelRoot`` and elements are the real ones; the strategy is
given the model and its audit parameters as Watcher's decision engine
gives them, and its solution is read back.
"""

import time

import testtools
from watcher.common import utils
from watcher.decision_engine.model import element
from watcher.decision_engine.model import model_root

from vsmtio_contract import workload
from vsmtio_nova import mix
from vsmtio_nova.watcher import strategy

SECRET = 'test-secret'


class Config:
    measured_class_secret = SECRET


def params(**kw):
    defaults = {name: spec['default'] for name, spec in
                strategy.WorkloadMixRepair.get_schema()[
                    'properties'].items()}
    defaults.update(min_classified_vcpus=1)
    defaults.update(kw)
    return utils.Struct(defaults)


class StrategyTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.model = model_root.ModelRoot()
        self.nodes = {}

    def node(self, name, vcpus=10, status='enabled'):
        node = element.ComputeNode(
            uuid=utils.generate_uuid(), hostname=name, vcpus=vcpus,
            vcpu_reserved=0, vcpu_ratio=1.0, memory=8192,
            memory_mb_reserved=0, memory_ratio=1.0, disk=100,
            disk_gb_reserved=0, disk_ratio=1.0, status=status)
        self.model.add_node(node)
        self.nodes[name] = node
        return node

    def instance(self, host, cls=None, state='active', metadata=None,
                 locked=False, vcpus=1):
        specs = {} if cls is None else {workload.EXTRA_SPEC_WORKLOAD: cls}
        inst = element.Instance(
            uuid=utils.generate_uuid(), name='%s-%s' % (host, cls),
            vcpus=vcpus, memory=128, disk=1, state=state, locked=locked,
            metadata=metadata or {}, flavor_extra_specs=specs, host=host)
        self.model.add_instance(inst)
        self.model.map_instance(inst, self.nodes[host])
        return inst

    def strategy(self, **kw):
        s = strategy.WorkloadMixRepair(Config(), osc=object())
        s._compute_model = self.model
        s.input_parameters = params(**kw)
        return s

    def fleet(self):
        for name in ('a', 'b', 'c'):
            self.node(name)
        for name in ('a', 'b', 'c'):
            for _ in range(2):
                self.instance(name, 'io')
        for name in ('b', 'c'):
            for _ in range(2):
                self.instance(name, 'cpu')

    def test_entry_point_names(self):
        self.assertEqual('vsmtio_workload_mix',
                         strategy.WorkloadMixRepair.get_goal_name())
        self.assertEqual('vsmtio_workload_mix',
                         strategy.WorkloadMixGoal.get_name())

    def test_counts_hosts_as_their_computes_do(self):
        self.fleet()
        hosts = {h.name: h for h in self.strategy().hosts()}
        self.assertEqual(mix.Mix(2, 0), hosts['a'].mix)
        self.assertEqual(mix.Mix(2, 2), hosts['b'].mix)
        self.assertEqual(6.0, hosts['b'].free_vcpus)

    def test_solution_live_migrates_onto_the_stranded_host(self):
        self.fleet()
        s = self.strategy()
        s.execute()
        actions = s.solution.actions
        self.assertEqual(1, len(actions))
        action = actions[0]
        self.assertEqual('migrate', action['action_type'])
        p = action['input_parameters']
        self.assertEqual(('live', 'a'), (p['migration_type'],
                                         p['destination_node']))
        moved = self.model.get_instance_by_uuid(p['resource_id'])
        self.assertEqual('cpu', moved.flavor_extra_specs[
            workload.EXTRA_SPEC_WORKLOAD])

    def test_nothing_to_do_on_a_mixed_fleet(self):
        self.node('a')
        self.instance('a', 'io')
        self.instance('a', 'cpu')
        s = self.strategy()
        s.execute()
        self.assertEqual([], s.solution.actions)

    def test_moves_only_active_unlocked_instances_to_enabled_hosts(self):
        self.node('a')
        self.node('b', status='disabled')
        self.node('c')
        for _ in range(2):
            self.instance('a', 'io')
        self.instance('b', 'io')
        self.instance('b', 'cpu')
        self.instance('c', 'io')
        self.instance('c', 'cpu', locked=True)
        self.instance('c', 'cpu', state='stopped')
        hosts = {h.name: h for h in self.strategy().hosts()}
        self.assertFalse(hosts['b'].accepts)
        self.assertEqual([workload.WorkloadClass.IO],
                         [g.cls for g in hosts['c'].guests])
        # the stopped and the locked instance still count in c's mix
        self.assertEqual(mix.Mix(1, 2), hosts['c'].mix)

    def test_auto_instance_counts_only_with_a_signed_class_for_its_host(self):
        self.node('a')
        self.node('b')
        now = int(time.time())
        good = self.instance('a')
        good.metadata = {workload.MEASURED_CLASS_KEY: workload.sign_measured(
            SECRET, good.uuid, workload.WorkloadClass.IO, 'a', now + 600)}
        other_host = self.instance('a')
        other_host.metadata = {
            workload.MEASURED_CLASS_KEY: workload.sign_measured(
                SECRET, other_host.uuid, workload.WorkloadClass.IO, 'b',
                now + 600)}
        forged = self.instance('a')
        forged.metadata = {workload.MEASURED_CLASS_KEY: 'io:%d:a:00' % (
            now + 600)}
        hosts = {h.name: h for h in self.strategy().hosts()}
        self.assertEqual(mix.Mix(1, 0), hosts['a'].mix)

    def test_bad_band_fails_the_audit_with_its_reason(self):
        self.fleet()
        s = self.strategy(min_io_fraction=0.8, max_io_fraction=0.2)
        e = self.assertRaises(ValueError, s.execute)
        self.assertIn('exceeds', str(e))
