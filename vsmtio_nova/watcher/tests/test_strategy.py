"""The Watcher strategy on Watcher's own compute model (no services).

Watcher's ``ModelRoot`` and elements are the real ones; the strategy is
given the model and its audit parameters as Watcher's decision engine
gives them, and its solution is read back.
"""

import time

import fixtures
import jsonschema
import testtools
from watcher.common import exception
from watcher.common import utils
from watcher.decision_engine.model import element
from watcher.decision_engine.model import model_root

from vsmtio_contract import workload
from vsmtio_nova import mix
from vsmtio_nova.watcher import strategy
from vsmtio_nova.watcher.tests import measured_steps

SECRET = 'test-secret'


def signed(inst, cls, host, expires, key=None):
    """What the agent of ``host`` writes (its key derives from SECRET)."""
    return {workload.MEASURED_CLASS_KEY: workload.sign_measured(
        key or workload.derive_host_key(SECRET, host), inst.uuid, cls,
        host, expires)}


class Config:
    measured_class_secret = SECRET
    measured_class_previous_secret = None


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
        # [compute_model] enable_extended_attributes = true, as the
        # strategy needs (the devstack plugin sets it)
        self.model.extended_attributes_enabled = True
        self.nodes = {}
        # the decision engine's memory, as a fresh process has it
        strategy.MEMORY.clear()
        self.addCleanup(strategy.MEMORY.clear)

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
        good.metadata = signed(good, 'io', 'a', now + 600)
        other_host = self.instance('a')
        other_host.metadata = signed(other_host, 'io', 'b', now + 600)
        forged = self.instance('a')
        forged.metadata = {workload.MEASURED_CLASS_KEY: 'io:%d:a:00' % (
            now + 600)}
        hosts = {h.name: h for h in self.strategy().hosts()}
        self.assertEqual(mix.Mix(1, 0), hosts['a'].mix)

    def mixed_fleet_with_a_measured_guest(self):
        """a, b, c each 2 I/O + 2 CPU vCPUs; a's CPU ones are measured.

        Every host is within the band: a plan has nothing to do. Were the
        measured guest not counted, a would be all I/O (stranded) and a
        plan would move a neighbour's CPU guest onto it.
        """
        for name in ('a', 'b', 'c'):
            self.node(name)
        self.measured = self.instance('a', vcpus=2)
        self.measured.metadata = signed(self.measured, 'cpu', 'a',
                                        int(time.time()) + 600)
        self.instance('a', 'io', vcpus=2)
        for name in ('b', 'c'):
            self.instance(name, 'io', vcpus=2)
            self.instance(name, 'cpu', vcpus=2)

    def audit(self):
        s = self.strategy()
        s.execute()
        mixes = {h.name: h.mix for h in s.hosts()}
        return mixes, [a['input_parameters'] for a in s.solution.actions]

    def test_a_deleted_or_forged_key_moves_no_neighbour(self):
        self.mixed_fleet_with_a_measured_guest()
        before = self.audit()
        self.assertEqual(({n: mix.Mix(2, 2) for n in 'abc'}, []), before)
        now = int(time.time())
        for meta in ({},                                   # deleted
                     {workload.MEASURED_CLASS_KEY: 'io'},  # made up
                     signed(self.measured, 'io', 'a', now + 600,
                            key='a-guess'),
                     signed(self.measured, 'io', 'a', now + 600,
                            key=workload.derive_host_key(SECRET, 'b')),
                     signed(self.measured, 'io', 'b', now + 600)):
            self.measured.metadata = meta
            # the same mixes and the same (empty) plan as before
            self.assertEqual(before, self.audit(), meta)

    def test_a_key_gone_before_any_audit_saw_it_freezes_its_host(self):
        # A decision engine started after the owner deleted the key has
        # nothing to remember: a counts as 2 I/O + 0, stranded, but is
        # neither given a neighbour nor gives one away.
        self.mixed_fleet_with_a_measured_guest()
        self.measured.metadata = {}
        s = self.strategy()
        hosts = {h.name: h for h in s.hosts()}
        self.assertEqual(mix.Mix(2, 0), hosts['a'].mix)
        self.assertEqual(((), False), (hosts['a'].guests, hosts['a'].accepts))
        s.execute()
        self.assertEqual([], s.solution.actions)

    def test_the_previous_root_counts_during_a_rotation(self):
        self.node('a')
        inst = self.instance('a')
        inst.metadata = signed(inst, 'io', 'a', int(time.time()) + 600,
                               key=workload.derive_host_key('old', 'a'))
        Config.measured_class_previous_secret = 'old'
        self.addCleanup(setattr, Config, 'measured_class_previous_secret',
                        None)
        self.assertEqual(mix.Mix(1, 0), self.strategy().hosts()[0].mix)

    def indicators(self, s):
        return {i.name: i.value for i in s.solution.efficacy_indicators}

    def test_the_solution_says_what_it_repairs(self):
        self.fleet()
        s = self.strategy()
        s.execute()
        self.assertEqual({'stranded_hosts_before': 1,
                          'stranded_hosts_after': 0, 'unjudged_hosts': 0,
                          'vcpus_moved': 1, 'instance_migrations_count': 1},
                         self.indicators(s))
        self.assertEqual([('stranded_hosts_repaired', '%', 100.0)],
                         [(i.name, i.unit, i.value)
                          for i in s.solution.global_efficacy])

    def test_a_plan_short_of_the_band_says_so(self):
        # a (2 I/O) is stranded, and no other host can take or give one
        self.node('a')
        for _ in range(2):
            self.instance('a', 'io')
        s = self.strategy()
        s.execute()
        self.assertEqual([], s.solution.actions)
        got = self.indicators(s)
        self.assertEqual((1, 1, 0), (got['stranded_hosts_before'],
                                     got['stranded_hosts_after'],
                                     got['vcpus_moved']))
        self.assertEqual(0.0, s.solution.global_efficacy[0].value)

    def test_an_empty_plan_on_unjudged_hosts_says_why(self):
        self.fleet()
        logger = self.useFixture(fixtures.FakeLogger(
            name='vsmtio_nova.watcher.strategy'))
        s = self.strategy(min_classified_vcpus=16)
        s.execute()
        self.assertEqual([], s.solution.actions)
        self.assertEqual(3, self.indicators(s)['unjudged_hosts'])
        self.assertEqual(0, self.indicators(s)['stranded_hosts_before'])
        self.assertIn('no host holds 16 classified vCPUs', logger.output)

    def test_no_extended_attributes_fails_the_audit(self):
        # Watcher's default: the model holds no flavor extra specs
        self.fleet()
        self.model.extended_attributes_enabled = False
        s = self.strategy()
        e = self.assertRaises(strategy.ExtendedAttributesDisabled,
                              s.execute)
        self.assertIsInstance(e, exception.WatcherException)
        self.assertIn('[compute_model] enable_extended_attributes = true',
                      str(e))
        self.assertEqual([], s.solution.actions)

    def test_the_goal_declares_its_indicators(self):
        spec = strategy.WorkloadMixGoal.get_efficacy_specification()
        self.assertEqual(
            ['stranded_hosts_before', 'stranded_hosts_after',
             'unjudged_hosts', 'vcpus_moved', 'instance_migrations_count'],
            [i['name'] for i in spec.get_indicators_specs_dicts()])
        # Watcher validates a solution's indicators against it
        self.assertRaises(jsonschema.ValidationError,
                          spec.validate_efficacy_indicators,
                          {'stranded_hosts_before': -1})

    def test_bad_band_fails_the_audit_with_its_reason(self):
        self.fleet()
        s = self.strategy(min_io_fraction=0.8, max_io_fraction=0.2)
        e = self.assertRaises(ValueError, s.execute)
        self.assertIn('exceeds', str(e))


class SameRuleAsTheComputeTest(testtools.TestCase):
    """Each step of :mod:`.measured_steps` counts as nova-compute counts it.

    nova-compute's side of the same steps is
    ``vsmtio_nova/tests/unit/test_compute_stats.py``.
    """

    def test_every_step_counts_as_written(self):
        strategy.MEMORY.clear()
        self.addCleanup(strategy.MEMORY.clear)
        model = model_root.ModelRoot()
        model.extended_attributes_enabled = True
        node = element.ComputeNode(
            uuid=utils.generate_uuid(), hostname=measured_steps.HOST,
            vcpus=8, vcpu_reserved=0, vcpu_ratio=1.0, memory=8192,
            memory_mb_reserved=0, memory_ratio=1.0, disk=100,
            disk_gb_reserved=0, disk_ratio=1.0, status='enabled')
        model.add_node(node)
        inst = element.Instance(
            uuid=utils.generate_uuid(), name='auto',
            vcpus=measured_steps.VCPUS, memory=128, disk=1, state='active',
            metadata={}, flavor_extra_specs={}, host=measured_steps.HOST)
        model.add_instance(inst)
        model.map_instance(inst, node)

        class Root:
            measured_class_secret = measured_steps.ROOT

        now = measured_steps.NOW
        for what, metadata, later, want in measured_steps.steps(inst.uuid):
            now += later
            inst.metadata = metadata
            s = strategy.WorkloadMixRepair(Root(), osc=object())
            s._compute_model = model
            s.clock = lambda: now
            self.assertEqual(mix.Mix(*want), s.hosts()[0].mix, what)
