"""A VM's group entity on a hyperthread, under each scheduler.

Libvirt makes each VM a cgroup, so where several of its vCPUs are queued
on one hyperthread the kernel queues them under one group entity there,
weighted by the VM's shares split by load (``calc_group_shares``), and
the VM competes as one: CFS (5.3) and EEVDF (6.6 and later) alike. The
same cases run under both (:class:`GroupCases`); each scheduler's own
invariants at both levels follow.
"""

import fixtures
import testtools

from vsmtio_sim import eevdf
from vsmtio_sim import engine
from vsmtio_sim.tests import helpers as h
from vsmtio_sim.tests import test_eevdf


class GroupCases(object):
    """The cases of both schedulers; ``SCHEDULER``, ``CLASS`` per policy."""

    SCHEDULER = None
    CLASS = None

    def sim(self, vms, weights=None, cores=1, **extra):
        extra.setdefault('scheduler', self.SCHEDULER)
        sc = h.tiny(vms, cores=cores, duration=2.0, **extra)
        sim = engine.Simulation(sc, 'vanilla', 1)
        self.assertIsInstance(sim, self.CLASS)
        sim.set_vm_weights(weights or {})
        return sim

    def server_group(self, vcpus, weight, burst_us, wait_us):
        """A server's ``vcpus`` and a spinner on one hyperthread.

        The simulation, the hyperthread and the server's group there.
        """
        sim = self.sim([('srv', 'srv', [0] * vcpus), ('spin', 'cpu', [0])],
                       {'srv': weight},
                       workloads={'srv': h.io_wl(burst_us=burst_us,
                                                 wait_us=wait_us)})
        th = sim.threads[0]
        return sim, th, th.groups['srv']

    def ran(self, sim, until=2.0, start=0.2):
        """CPU time per VM per hyperthread, {(vm, cpu): ns}, over a window."""
        sim.advance_to(start * 1e9)
        before = {v: v.run_ns for v in sim.vcpus}
        sim.advance_to(until * 1e9)
        out = {}
        for v in sim.vcpus:
            key = (v.vm, v.th.cpu)
            out[key] = out.get(key, 0.0) + v.run_ns - before[v]
        return out

    def test_two_vcpus_of_a_vm_share_its_one_entity(self):
        # two CPU-bound vCPUs of 'a' beside one of 'b', equal weights:
        # half each (the group's), not two thirds to 'a'; the two share
        # the group's half alike; weights scale the group's share
        for ratio in (1, 0.5, 3):
            sim = self.sim([('a', 'cpu', [0, 0]), ('b', 'cpu', [0])],
                           {'a': ratio})
            th = sim.threads[0]
            self.assertEqual(['a'], list(th.groups))
            a0, a1 = sim.peers['a']
            before = a0.run_ns, a1.run_ns
            ran = self.ran(sim)
            share = ran['a', 0] / (ran['a', 0] + ran['b', 0])
            want = ratio / (1.0 + ratio)
            self.assertLess(abs(share / want - 1.0), 0.01, (ratio, share))
            r0, r1 = a0.run_ns - before[0], a1.run_ns - before[1]
            self.assertLess(abs(r0 / (r0 + r1) - 0.5), 0.02, ratio)

    def test_the_group_weighs_the_vms_whole_shares_when_all_are_there(self):
        # a server's four vCPUs come and go, yet their VM weighs its whole
        # shares on the hyperthread (calc_group_shares: all its load is
        # there), and each of its vCPUs its own cgroup's default weight
        sim = self.sim([('srv', 'srv', [0] * 4), ('spin', 'cpu', [0])],
                       {'srv': 2.5},
                       workloads={'srv': h.io_wl(burst_us=50, wait_us=200)})
        g = sim.threads[0].groups['srv']
        for k in range(1, 200):
            sim.advance_to(k * 4.1e6)
            self.assertAlmostEqual(1.0 / 2.5, g.vr_scale)
            for v in sim.peers['srv']:
                self.assertEqual(1.0, v.vr_scale)
        self.assertEqual(1 / 1.0, h.vcpu(sim, 'spin').vr_scale)

    def test_a_group_weighs_its_share_of_the_vms_load(self):
        # 'a' has two vCPUs on hyperthread 0 and one on 1, all CPU-bound,
        # each beside a spinner: its shares split by load, two thirds as
        # one group on 0, a third as its lone vCPU on 1
        sim = self.sim([('a', 'cpu', [0, 0, 1]), ('b', 'cpu', [0]),
                        ('c', 'cpu', [1])])
        ran = self.ran(sim, until=3.0, start=1.0)
        for cpu, w in ((0, 2.0 / 3), (1, 1.0 / 3)):
            other = 'b' if cpu == 0 else 'c'
            share = ran['a', cpu] / (ran['a', cpu] + ran[other, cpu])
            self.assertLess(abs(share - w / (1.0 + w)), 0.02, (cpu, share))

    def test_no_group_where_no_two_vcpus_of_a_vm_meet(self):
        # one vCPU of a VM per hyperthread stands for its group itself, so
        # such hosts run as before; without VM cgroups there is none
        sim = self.sim([('a', 'cpu', [0, 1]), ('b', 'io', [0, 1])],
                       cores=1)
        sim.advance_to(0.5e9)
        self.assertEqual([{}, {}], [th.groups for th in sim.threads])
        sim = self.sim([('a', 'cpu', [0, 0]), ('b', 'cpu', [0])],
                       scheduler=dict(self.SCHEDULER, vm_cgroup_shares=0))
        sim.advance_to(0.5e9)
        self.assertEqual({}, sim.threads[0].groups)

    def test_vcpus_the_agent_moves_together_join_one_group(self):
        # the vSMT-IO kernel re-homes vCPUs by class: two of one VM may
        # meet on a hyperthread and queue in one group there
        made = []
        make = self.CLASS._make_group

        def counted(sim, th, y):
            made.append(y.vm)
            return make(sim, th, y)
        self.useFixture(fixtures.MonkeyPatch(
            'vsmtio_sim.engine.%s._make_group' % self.CLASS.__name__,
            counted))
        got = test_eevdf.agent_pair(self, 'vsmtio-paper', 1.5,
                                    self.SCHEDULER['policy'])
        self.assertTrue(made)
        self.assertGreater(got['io_throughput'], 0)
        self.assertGreater(got['cpu_throughput'], 0)


class TestCfs(GroupCases, testtools.TestCase):
    """CFS's two levels (5.3), and the server the guest checked."""

    SCHEDULER = {'policy': 'cfs'}
    CLASS = engine.Simulation

    def test_a_server_that_waits_often_weighs_as_one_vm(self):
        # four vCPUs of a server, each 500 us of work then a 2000 us wait,
        # beside a spinner: each vCPU wakes often, yet the VM as a whole
        # wants 80% of the hyperthread and gets r / (1 + r) of it, as the
        # real CFS gives it (in a guest, kernel_guest.rst: the spinner
        # keeps 0.501, 0.335, 0.200 at x1, x2, x4)
        for ratio in (1, 2, 4):
            share = test_eevdf.pair('cfs', 500, 2000, 4, ratio)[2]
            want = ratio / (1.0 + ratio)
            self.assertLess(abs(share - want), 0.03, (ratio, share))

    def test_each_level_picks_its_lowest_vruntime(self):
        # the hyperthread's queue (the group, the spinner) and the group's
        # (its vCPUs): an entity counts once, each queue's min_vruntime
        # never goes back, and a pick of the whole queue takes the lowest
        # vruntime at each level
        sim, th, g = self.server_group(3, 2, 300, 900)
        picks = []
        first = sim._first

        def checked(t, vcpus):
            v = first(t, vcpus)
            if vcpus is t.rq and v is not None:
                tops = {x.grp or x for x in t.rq}
                e = v.grp or v
                inner = [x for x in t.rq if x.grp is e] or [v]
                picks.append(e.vruntime == min(x.vruntime for x in tops)
                             and v.vruntime == min(x.vruntime
                                                   for x in inner))
            return v
        sim._first = checked
        lows = []
        for k in range(1, 600):
            sim.advance_to(k * 1.7e6)
            queued = list(th.rq) + ([th.curr] if th.curr else [])
            self.assertEqual(len(queued), len(set(queued)))
            for x in queued:
                self.assertIn(x.grp, (None, g))
                self.assertEqual(x.vm == 'srv', x.grp is g)
            lows.append((sim._min_vr(th), sim._group_min(g)))
        for level in zip(*lows):
            self.assertEqual(sorted(level), list(level))
        self.assertGreater(len(picks), 300)
        self.assertTrue(all(picks))


class TestEevdf(GroupCases, testtools.TestCase):
    """EEVDF's two levels (6.6 and later) keep its invariants."""

    SCHEDULER = test_eevdf.EEVDF
    CLASS = engine.EevdfSimulation

    def test_each_queue_keeps_eevdfs_invariants(self):
        # the hyperthread's queue (the group, the spinner) and the group's
        # (its vCPUs): weighted lags sum to zero, an entity counts once, a
        # delayed group holds no vCPU, the buddy is queued; each pick runs
        # an eligible entity at both levels
        # (a light weight: the group often sleeps in debt, delayed)
        sim, th, g = self.server_group(2, 0.5, 1000, 3000)
        taken = []
        take = sim._take

        def checked(t, v):
            e = v.grp if v.grp is not None else v
            taken.append(e.vruntime <= sim._avg(t) + eevdf.EPS and (
                v.grp is None or v.vruntime <= sim._avg(v.grp) + eevdf.EPS))
            take(t, v)
        sim._take = checked
        delayed = 0
        for k in range(1, 600):
            sim.advance_to(k * 1.7e6)
            for q in (th, g):
                c, waiting, held = sim._level(q)
                queued = ([c] if c is not None else []) + waiting + held
                self.assertEqual(len(queued), len(set(queued)))
                if len(queued) > 1:
                    avg = sim._avg(q)
                    self.assertLess(abs(sum((avg - x.vruntime) / x.vr_scale
                                            for x in queued)), 1e-3, k)
            if g.delayed:
                delayed += 1
                self.assertIn(g, th.delayed)
                self.assertFalse(sim._busy(g))
            if th.buddy is not None:
                self.assertFalse(th.buddy.delayed)
                self.assertTrue(sim._busy(th.buddy))
        self.assertGreater(len(taken), 300)
        self.assertTrue(all(taken))
        self.assertGreater(delayed, 0)
