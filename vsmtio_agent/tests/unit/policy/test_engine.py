import dataclasses
import random

import testtools

from vsmtio_agent import model
from vsmtio_agent.policy import engine
from vsmtio_agent.policy import ltcr
from vsmtio_agent.policy import rass
from vsmtio_agent.policy import search
from vsmtio_agent.policy import vocabulary
from vsmtio_agent.tests.unit.policy import helpers

R = helpers.ref
US = 1000


params = helpers.params


class TestPolicyEngine(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.topo = model.Topology.uniform(2)  # cores (0, 2) and (1, 3)

    def test_homogeneous_cores_are_mixed_then_planned(self):
        # Both I/O vCPUs start on core 0 and both CPU vCPUs on core 1.
        st = {R(0): helpers.stats(0.6, core_id=0, retention_frequency=900),
              R(1): helpers.stats(0.5, core_id=0, retention_frequency=800),
              R(2): helpers.stats(0.0, core_id=1, ipc=1.0),
              R(3): helpers.stats(0.01, core_id=1, ipc=1.1)}
        # the paper's measures: these stats carry IPC and retention counts
        eng = engine.PolicyEngine(self.topo, params(ltcr_measure=ltcr.PAPER))
        d = eng.step(st)
        self.assertEqual(1, len(d.swaps))
        by_core = {}
        for ref, p in d.placements.items():
            by_core.setdefault(p.core_id, {})[p.role] = ref
        # Each core now has one I/O-bound and one CPU-bound vCPU, the I/O
        # one on the core's I/O sibling.
        self.assertEqual({0, 1}, set(by_core))
        for core_id, roles in by_core.items():
            self.assertEqual({model.Role.IO, model.Role.CPU}, set(roles))
            io = d.placements[roles[model.Role.IO]]
            self.assertEqual(self.topo.core(core_id).io_thread, io.home)
        # LTCR measured its baseline and now tries a 10% longer timeout.
        self.assertEqual(220 * US, d.timeout_ns)

    def test_a_partial_split_takes_the_cores_whose_io_waits_longest(self):
        topo = model.Topology.uniform(4)
        # one I/O and one CPU vCPU per core; the I/O vCPU of core 2 waits
        # longest for a hyperthread, then core 0's
        waits = {0: 0.2, 1: 0.05, 2: 0.4, 3: 0.1}
        st = {}
        for core, wait in waits.items():
            st[R(2 * core)] = helpers.stats(0.5, core_id=core,
                                            runqueue_delay_ratio=wait)
            st[R(2 * core + 1)] = helpers.stats(0.0, core_id=core)
        eng = engine.PolicyEngine(topo, params(split_share=0.5))
        d = eng.step(st)
        self.assertEqual((2, 0), eng.split_cores)
        self.assertEqual(frozenset({0, 2}), d.split_cores)
        # the plan still classes every vCPU; the split applies on two cores
        self.assertEqual(8, len(d.placements))
        self.assertEqual({0, 2}, {p.core_id for p in d.placements.values()
                                  if d.applies(p)})
        self.assertTrue(d.split)
        # the order changes; the cores taken stay split (no pin churn)
        waits = {0: 0.0, 1: 0.9, 2: 0.0, 3: 0.8}
        for core, wait in waits.items():
            st[R(2 * core)] = helpers.stats(0.5, core_id=core,
                                            runqueue_delay_ratio=wait)
        eng.step(st)
        self.assertEqual((2, 0), eng.split_cores)

    def test_roles_hold_through_a_period_without_retention(self):
        # a probe's B arm runs the bare host: every retention rate is zero,
        # which says nothing of a class; RASS keeps the roles it planned,
        # or the next split would pin every I/O-bound vCPU as CPU-bound
        eng = engine.PolicyEngine(self.topo, params(guard=search.Params()))

        retaining = vocabulary.Config(timeouts=(('vm', 50 * US),))

        def run_with(in_force, io_rate, io_util=0.3):
            eng.guard = dataclasses.replace(
                eng.guard, kept=retaining,
                in_force=retaining if in_force else vocabulary.BARE,
                held=0, changed=0)
            return eng.step({
                R(0): helpers.stats(io_rate, core_id=0,
                                    utilisation=io_util),
                R(1): helpers.stats(0.0, core_id=0, utilisation=1.0)})
        d = run_with({vocabulary.RETENTION}, 0.5)
        self.assertEqual(model.Role.IO, d.placements[R(0)].role)
        d = run_with((), 0.0)
        self.assertEqual(model.Role.IO, d.placements[R(0)].role)
        self.assertEqual(model.Role.CPU, d.placements[R(1)].role)
        # measured with retention, a zero rate is evidence: it reclasses
        d = run_with({vocabulary.RETENTION}, 0.0)
        self.assertEqual(model.Role.CPU, d.placements[R(0)].role)

    def test_a_split_without_retention_classes_by_idle_entries(self):
        # the guard keeps the split on a host where no retention pays:
        # the vCPU that idles hundreds of times a second gets the I/O
        # sibling, whatever roles were held before
        eng = engine.PolicyEngine(self.topo, params(guard=search.Params()))
        eng.roles = {R(0): model.Role.CPU, R(1): model.Role.IO}
        split = vocabulary.Config(mechanisms=frozenset({vocabulary.SPLIT}))
        eng.guard = dataclasses.replace(eng.guard, kept=split,
                                        in_force=split, held=0, changed=0)
        d = eng.step({
            R(0): helpers.stats(0.0, core_id=0, utilisation=0.3,
                                halt_rate=800.0),
            R(1): helpers.stats(0.0, core_id=0, utilisation=1.0,
                                halt_rate=1.0)})
        self.assertTrue(d.split)
        self.assertEqual(model.Role.IO, d.placements[R(0)].role)
        self.assertEqual(model.Role.CPU, d.placements[R(1)].role)

    def test_held_roles_keep_the_fairness_invariant(self):
        # one core of two siblings: three busy vCPUs have no other core
        # to be spread to, so each is over its share of this one
        eng = engine.PolicyEngine(model.Topology.uniform(1),
                                  params(guard=search.Params()))
        eng.roles = {R(0): model.Role.IO, R(1): model.Role.CPU}
        eng.guard = dataclasses.replace(eng.guard, held=0, changed=0)
        # computing beyond its share of the core (one of two threads)
        d = eng.step({R(0): helpers.stats(0.0, core_id=0, utilisation=1.0),
                      R(1): helpers.stats(0.0, core_id=0, utilisation=1.0),
                      R(2): helpers.stats(0.0, core_id=0, utilisation=1.0)})
        self.assertEqual(model.Role.CPU, d.placements[R(0)].role)

    def test_the_guard_decides_each_vms_retention(self):
        # per VM: only the VMs the guard keeps retain, each at its own
        eng = engine.PolicyEngine(self.topo, params(
            guard=search.Params(per_vm=True)))
        kept = vocabulary.Config(timeouts=(('a', 25 * US), ('b', 100 * US)))
        eng.guard = dataclasses.replace(eng.guard, kept=kept, in_force=kept,
                                        held=0, changed=0)
        d = eng.step({model.VcpuRef('a', 0): helpers.stats(0.2, core_id=0),
                      model.VcpuRef('c', 0): helpers.stats(0.0, core_id=1)})
        self.assertEqual({'a': 25 * US, 'b': 100 * US}, d.timeouts)
        self.assertEqual((25 * US, 0), (d.retains('a'), d.retains('c')))
        self.assertEqual(100 * US, d.timeout_ns)
        # a host whose timeout is host-wide: one setting for every VM
        eng = engine.PolicyEngine(self.topo, params(
            guard=search.Params(per_vm=False)))
        kept = vocabulary.Config(timeouts=((vocabulary.ALL_VMS, 200 * US),))
        eng.guard = dataclasses.replace(eng.guard, kept=kept, in_force=kept,
                                        held=0, changed=0)
        d = eng.step({R(0): helpers.stats(0.2, core_id=0)})
        self.assertIsNone(d.timeouts)
        self.assertEqual((200 * US, True), (d.timeout_ns, d.retention))

    def test_no_split_without_smt_siblings(self):
        # the paper's split on two single-thread cores would pin both busy
        # guests to one CPU while the other idles
        flat = model.Topology(tuple(model.Core(i, (i,)) for i in (0, 1)))
        st = {R(0): helpers.stats(0.5, core_id=0, utilisation=0.3),
              R(1): helpers.stats(0.0, core_id=0, utilisation=1.0),
              R(2): helpers.stats(0.0, core_id=1, utilisation=1.0)}
        for p in (params(), params(guard=search.Params())):
            eng = engine.PolicyEngine(flat, p)
            for _ in range(50):
                d = eng.step(st)
                self.assertFalse(d.split)
                self.assertFalse(d.borrow)
                self.assertEqual(frozenset(), d.split_cores)
                self.assertNotIn(vocabulary.SPLIT, eng.mechanisms)
        self.assertTrue(engine.PolicyEngine(self.topo, params()).smt)

    def test_no_split_share_applies_nothing(self):
        st = {R(0): helpers.stats(0.5, core_id=0),
              R(1): helpers.stats(0.0, core_id=1)}
        d = engine.PolicyEngine(self.topo, params(split_share=0.0)).step(st)
        self.assertEqual(frozenset(), d.split_cores)
        self.assertFalse(any(d.applies(p) for p in d.placements.values()))

    def test_new_vcpus_without_a_core_go_to_the_least_loaded(self):
        st = {R(0): helpers.stats(0.1, core_id=0, weight=2048),
              R(1): helpers.stats(0.2)}
        d = engine.PolicyEngine(self.topo, params()).step(st)
        self.assertEqual(1, d.placements[R(1)].core_id)

    def test_vanished_vcpus_are_forgotten(self):
        eng = engine.PolicyEngine(self.topo, params())
        eng.step({R(0): helpers.stats(0.1, core_id=0),
                  R(1): helpers.stats(0.2, core_id=1)})
        d = eng.step({R(1): helpers.stats(0.2, core_id=1)})
        self.assertEqual([R(1)], list(d.placements))
        self.assertEqual({R(1): 1}, eng.assignment)

    def test_placements_follow_every_move(self):
        # Placements are kept from period to period and placed again only
        # where a vCPU's core or role moved: whatever moves, each decision
        # places every vCPU where its core and role say, in ref order.
        topo = model.Topology.uniform(4)
        rng = random.Random(7)
        eng = engine.PolicyEngine(topo, params(split_share=0.5))
        refs = [R(i) for i in range(12)]
        for period in range(60):
            if period % 15 == 14:       # a vCPU comes or goes
                refs = refs[1:] if len(refs) > 10 else refs + [R(period)]
            st = {ref: helpers.stats(
                rng.choice((0.0, 0.2, 0.6)), core_id=rng.randrange(4),
                utilisation=0.5) for ref in refs}
            d = eng.step(st)
            self.assertEqual(
                [(ref, rass.placement(topo.core(eng.assignment[ref]),
                                      eng.roles[ref]))
                 for ref in sorted(st)],
                list(d.placements.items()))

    def test_empty_topology_is_refused(self):
        self.assertRaises(ValueError, engine.PolicyEngine,
                          model.Topology(()), params())

    def test_params_from_conf(self):
        from oslo_config import fixture as config_fixture

        from vsmtio_agent import conf
        cfg = self.useFixture(config_fixture.Config(conf.CONF))
        cfg.config(group='vsmtio_agent', initial_timeout_us=30,
                   reschedule_cost_us=70, adjuster_max_swaps=3)
        p = engine.Params.from_conf(conf.CONF)
        self.assertEqual(70 * US, p.bounds.start_ns)
        self.assertEqual(3, p.adjuster_max_swaps)
