"""Busy vCPUs on distinct cores, guard or not, within the trust domains."""

import dataclasses

from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
import testtools

from vsmtio_agent import model
from vsmtio_agent.policy import engine
from vsmtio_agent.policy import search
from vsmtio_agent.policy import spread
from vsmtio_agent.policy import trust
from vsmtio_agent.policy import vocabulary
from vsmtio_agent.tests.unit.policy import helpers

R = helpers.ref
US = 1000
T = model.Tenancy


params = helpers.params


def spinner(core_id, utilisation=1.0, delay=0.0):
    return helpers.stats(0.0, core_id=core_id, utilisation=utilisation,
                         runqueue_delay_ratio=delay)


def light(core_id, retention=0.0):
    # sleeps and wakes every 2 ms: a little CPU, hundreds of idle entries
    return helpers.stats(retention, core_id=core_id,
                         utilisation=0.05 + retention, halt_rate=500.0)


def hold_split(eng, levels=vocabulary.HOST_WIDE, retaining=True):
    """``eng``'s guard keeping the split at ``levels`` for the periods run.

    A guard that probes first would try the split only now and then: the
    tests put what it keeps in force directly, as ``test_engine`` does,
    with no holdout and no tenant's change to end it.
    """
    kept = vocabulary.Config(
        timeouts=((vocabulary.ALL_VMS, 50 * US),) if retaining else (),
        mechanisms=frozenset(levels))
    eng.params = dataclasses.replace(eng.params, guard=dataclasses.replace(
        eng.params.guard, holdout_every=10 ** 6, confirm_periods=10 ** 6))
    eng.guard = dataclasses.replace(eng.guard, kept=kept, in_force=kept,
                                    held=0)


def cores_of(decision, refs):
    return [decision.placements[r].core_id for r in refs]


class TestBusy(testtools.TestCase):

    def test_computed_plus_waited_is_the_demand(self):
        self.assertEqual(frozenset({R(0), R(1)}), spread.busy({
            R(0): spinner(0),
            # contended: half computed, half waited for a hyperthread
            R(1): spinner(0, utilisation=0.42, delay=0.5),
            # retaining most of its run time: it computes little
            R(2): helpers.stats(0.7, core_id=0, utilisation=0.8),
            R(3): light(0),
            # its run time unmeasured: not known to be busy
            R(4): helpers.stats(0.0, core_id=0, runqueue_delay_ratio=0.9),
        }))


class TestNeverStack(testtools.TestCase):
    """The engine on two cores of two siblings (cores (0, 2) and (1, 3))."""

    def setUp(self):
        super().setUp()
        self.topo = model.Topology.uniform(2)
        self.spin = [model.VcpuRef('spin-%d' % i, 0) for i in (1, 2)]
        self.light = [model.VcpuRef('light-%d' % i, 0) for i in (1, 2)]

    def stats(self, spin_core=0, light_core=1, retention=0.0):
        out = {r: spinner(spin_core) for r in self.spin}
        out.update({r: light(light_core, retention) for r in self.light})
        return out

    def test_guard_off_light_guests_not_retaining(self):
        # the host started both spinners on core 0: without the rule the
        # engine pinned them to its siblings 0 and 2 for good, each at a
        # hyperthread's speed, the light guests alone on core 1
        eng = engine.PolicyEngine(self.topo, params())
        for period in range(100):
            d = eng.step(self.stats())
            self.assertTrue(d.split)
            self.assertEqual({0, 1}, set(cores_of(d, self.spin)), period)
            homes = {d.placements[r].core_id: d.placements[r].threads
                     for r in self.spin}
            self.assertEqual({0: (0, 2), 1: (1, 3)}, homes)
            # each core pairs a spinner with a light guest
            self.assertEqual({0, 1}, set(cores_of(d, self.light)))

    def test_guard_on_whatever_it_keeps(self):
        for levels in ((), (vocabulary.SPLIT,), vocabulary.HOST_WIDE):
            eng = engine.PolicyEngine(self.topo,
                                      params(guard=search.Params()))
            hold_split(eng, levels, retaining=False)
            for _ in range(20):
                d = eng.step(self.stats(retention=0.0))
                self.assertEqual(bool(levels), d.split)
                self.assertEqual({0, 1}, set(cores_of(d, self.spin)),
                                 levels)

    def test_light_guests_retaining(self):
        eng = engine.PolicyEngine(self.topo, params())
        for _ in range(20):
            d = eng.step(self.stats(retention=0.4))
            self.assertEqual({0, 1}, set(cores_of(d, self.spin)))
            for r in self.light:
                self.assertEqual(model.Role.IO, d.placements[r].role)

    def test_a_pinned_spinner_stays_the_newcomer_moves(self):
        eng = engine.PolicyEngine(self.topo, params())
        first = self.spin[1]
        d = eng.step({first: spinner(0), self.light[0]: light(1)})
        self.assertEqual([0], cores_of(d, [first]))
        # a new spinner the host ran on core 0 at the sample
        newcomer = model.VcpuRef('spin-0', 0)
        for _ in range(5):
            d = eng.step({first: spinner(0), newcomer: spinner(0),
                          self.light[0]: light(1)})
            self.assertEqual([0, 1], cores_of(d, [first, newcomer]))
            # moved alone: core 1 held fewer vCPUs than core 0
            self.assertEqual([1], cores_of(d, [self.light[0]]))

    def test_the_host_moving_spinners_back_changes_nothing(self):
        # pinned apart, a spinner's momentary core is the pin's: a known
        # vCPU keeps the engine's core, whatever the sample says
        eng = engine.PolicyEngine(self.topo, params())
        d = eng.step(self.stats())
        before = cores_of(d, self.spin)
        d = eng.step(self.stats(spin_core=1, light_core=0))
        self.assertEqual(before, cores_of(d, self.spin))

    def test_more_spinners_than_cores_one_on_each_first(self):
        topo = model.Topology.uniform(3)
        refs = [R(i) for i in range(4)]
        eng = engine.PolicyEngine(topo, params())
        d = eng.step({r: spinner(0) for r in refs})
        self.assertEqual([1, 1, 2], sorted(
            cores_of(d, refs).count(c) for c in range(3)))

    def test_the_adjuster_swaps_no_busy_vcpu_onto_another(self):
        # core 1 is homogeneous (a spinner, a light guest, neither
        # retains), core 0 mixed: the adjuster's middle pair would send
        # core 0's spinner beside core 1's; it swaps the next pair, and
        # the decision's swaps are what its placements carry out
        st_ = {R(0): spinner(0),
               R(1): helpers.stats(0.5, core_id=0, utilisation=0.6),
               R(2): spinner(1), R(3): light(1)}
        d = engine.PolicyEngine(self.topo, params()).step(st_)
        self.assertEqual({0, 1}, set(cores_of(d, [R(0), R(2)])))
        self.assertEqual(1, len(d.swaps))
        for s in d.swaps:
            self.assertEqual([s.core_b, s.core_a], cores_of(d, [s.a, s.b]))

    def test_trust_domains_bound_the_spreading(self):
        # project p's two spinners on core 0, project q's light guests on
        # core 1: any spreading would put p beside q, so they stay
        tenancy = {'spin-1': T('p'), 'spin-2': T('p'), 'light-1': T('q'),
                   'light-2': T('q')}
        eng = engine.PolicyEngine(self.topo,
                                  params(trust_domain=trust.PROJECT))
        for _ in range(10):
            d = eng.step(self.stats(), tenancy=tenancy)
            self.assertEqual([0, 0], cores_of(d, self.spin))
            self.assertEqual([1, 1], cores_of(d, self.light))
        # q's guests are p's too: the spinners part
        tenancy.update({'light-1': T('p'), 'light-2': T('p')})
        d = eng.step(self.stats(), tenancy=tenancy)
        self.assertEqual({0, 1}, set(cores_of(d, self.spin)))


class TestSpread(testtools.TestCase):
    """:func:`spread.spread` and the swap check on their own."""

    def test_exchanged_for_the_vcpu_that_retains_most(self):
        a = {R(0): 0, R(1): 0, R(2): 1, R(3): 1}
        rates = {R(0): 0.0, R(1): 0.0, R(2): 0.1, R(3): 0.6}
        got = spread.spread(a, frozenset({R(0), R(1)}), (0, 1), None, rates)
        self.assertEqual({R(0): 1, R(1): 0, R(2): 1, R(3): 0}, got)

    def test_moved_alone_to_an_emptier_core(self):
        a = {R(0): 0, R(1): 0, R(2): 0, R(3): 1}
        got = spread.spread(a, frozenset({R(0), R(1)}), (0, 1))
        self.assertEqual({R(0): 1, R(1): 0, R(2): 0, R(3): 1}, got)

    def test_an_exchange_only_the_domains_allow(self):
        a, b, c = R(0, 'a'), R(0, 'b'), R(0, 'c')
        busy = frozenset({a, b})
        where = {a: 0, b: 0, c: 1}
        # a and b of one domain, c of another: a may not join c on core
        # 1, nor may c come to core 0 beside b
        keys = {a: 'p', b: 'p', c: 'q'}
        self.assertIs(where, spread.spread(where, busy, (0, 1), keys))
        # b is of c's domain (core 0 is mixed): a and c change places,
        # which leaves neither core mixed
        keys = {a: 'p', b: 'q', c: 'q'}
        self.assertEqual({a: 1, b: 0, c: 0},
                         spread.spread(where, busy, (0, 1), keys))

    def test_unchanged_is_the_same_assignment(self):
        a = {R(0): 0, R(1): 1}
        self.assertIs(a, spread.spread(a, frozenset(a), (0, 1)))
        self.assertIs(a, spread.spread(a, frozenset({R(0)}), (0, 1)))

    def test_the_swap_check(self):
        a = {R(0): 0, R(1): 1, R(2): 0, R(3): 1}
        allowed = spread.swap_checker(a, frozenset({R(0), R(1)}))
        # a busy vCPU for a light one onto the other busy one's core
        self.assertFalse(allowed(model.Swap(R(0), 0, R(3), 1)))
        # two light ones, or two busy ones, change no count
        self.assertTrue(allowed(model.Swap(R(2), 0, R(3), 1)))
        self.assertTrue(allowed(model.Swap(R(0), 0, R(1), 1)))
        self.assertIsNone(spread.swap_checker(a, frozenset({R(0)})))


KINDS = ('busy', 'light', 'io')


@st.composite
def hosts(draw):
    """A random host: its cores, vCPUs, tenancy and the engine's params."""
    n_cores = draw(st.integers(1, 8))
    n_vms = draw(st.integers(1, 3 * n_cores + 2))
    projects = draw(st.lists(st.sampled_from('pqr'), min_size=n_vms,
                             max_size=n_vms))
    vms = {}
    for i, project in enumerate(projects):
        vcpus = draw(st.integers(1, 3))
        vms['vm%d' % i] = (project, [draw(st.sampled_from(KINDS))
                                     for _ in range(vcpus)])
    tenancy = {vm: T(project if draw(st.booleans()) or project != 'r'
                     else None)
               for vm, (project, _) in vms.items()}
    rule = draw(st.sampled_from(trust.RULES))
    core_scheduling = draw(st.sampled_from((None, False, True)))
    with_guard = draw(st.booleans())
    wide = vocabulary.HOST_WIDE
    levels = draw(st.sampled_from(((), wide[:2], wide[:3], wide)))
    p = params(
        guard=search.Params() if with_guard else None,
        trust_domain=rule,
        split_share=draw(st.sampled_from((1.0, 0.5, 0.25))),
        adjuster_min_mean_gap=draw(st.sampled_from((0.0, 0.1))),
        adjuster_max_swaps=draw(st.integers(0, 3)))
    return n_cores, vms, tenancy, core_scheduling, p, levels


def vcpu_stats(draw, kind, core):
    """One vCPU of ``kind``: busy wants at least half a hyperthread."""
    delay = draw(st.floats(0.0, 0.1))
    if kind == 'busy':
        used = draw(st.floats(0.2, 1.0))
        delay = max(delay, spread.BUSY_SHARE - used + 1e-9)
        return helpers.stats(0.0, core_id=core, utilisation=used,
                             runqueue_delay_ratio=delay)
    if kind == 'light':
        return helpers.stats(0.0, core_id=core,
                             utilisation=draw(st.floats(0.0, 0.3)),
                             runqueue_delay_ratio=delay,
                             halt_rate=draw(st.floats(0.0, 900.0)))
    retention = draw(st.floats(0.05, 0.8))
    return helpers.stats(retention, core_id=core,
                         utilisation=retention + draw(st.floats(0.0, 0.3)),
                         runqueue_delay_ratio=delay, halt_rate=300.0)


def movable(where, keys, x, c, d):
    """Whether busy ``x`` of core ``c`` could go to core ``d``.

    Alone (every vCPU on ``d`` shares its key) or exchanged for a vCPU
    ``y`` of ``d`` (every other vCPU there shares ``x``'s key, and every
    vCPU left on ``c`` shares ``y``'s).
    """
    if keys is None:
        return True
    on_c = [r for r, core in where.items() if core == c and r != x]
    on_d = [r for r, core in where.items() if core == d]
    if all(keys[r] == keys[x] for r in on_d):
        return True
    return any(all(keys[r] == keys[x] for r in on_d if r != y)
               and all(keys[r] == keys[y] for r in on_c)
               for y in on_d)


class TestProperties(testtools.TestCase):

    @settings(max_examples=300, deadline=None)
    @given(hosts(), st.integers(1, 4), st.data())
    def test_busy_vcpus_never_share_a_core_another_could_take(
            self, host, periods, data):
        """No two busy vCPUs share a core while a core holds none.

        Precisely, after every step of the engine, reading each vCPU's
        core from its placement: for every core C holding two busy
        vCPUs or more and every core D holding none, no busy vCPU of C
        could go to D, alone or exchanged for one of D's vCPUs, without
        putting a vCPU beside one of another trust domain. Where nothing
        is fenced (the ``any`` rule on a host without core scheduling)
        every move may be made, and the invariant is the plain one: a
        core holds two busy vCPUs only when every core holds one.

        Where it cannot hold: with more busy vCPUs than cores some must
        share (then every core holds one); a trust domain's busy vCPUs
        spread only over cores no other domain holds, so with every
        other core taken by another domain (two cores, project p's two
        spinners on one, project q's guests on the other) they share
        one; and a vCPU whose run time is not measured is not known to
        be busy. It is a property of the plan: the host applies it on
        the split cores (all of them with the guard off, those the guard
        keeps with it), elsewhere its scheduler places the vCPUs.

        Each period the host reports a random momentary core for every
        vCPU (or none, or one outside the topology), as it does for
        vCPUs it places; the guard, where on, holds a random split level.
        """
        n_cores, vms, tenancy, core_scheduling, p, levels = host
        topo = model.Topology.uniform(n_cores)
        eng = engine.PolicyEngine(topo, p)
        if p.guard is not None:
            hold_split(eng, levels)
        core_ids = st.one_of(st.none(), st.integers(0, n_cores))
        kinds = {model.VcpuRef(vm, i): kind
                 for vm, (_p, ks) in vms.items()
                 for i, kind in enumerate(ks)}
        busy = frozenset(r for r, kind in kinds.items() if kind == 'busy')
        for _ in range(periods):
            stats = {r: vcpu_stats(data.draw, kind, data.draw(core_ids))
                     for r, kind in kinds.items()}
            self.assertEqual(busy, spread.busy(stats))
            d = eng.step(stats, tenancy=tenancy,
                         core_scheduling=core_scheduling)
            where = {r: pl.core_id for r, pl in d.placements.items()}
            keys = trust.keys(p.trust_domain, stats, tenancy,
                              core_scheduling)
            count = {c: 0 for c in range(n_cores)}
            for r in busy:
                count[where[r]] += 1
            free = [c for c, n in count.items() if not n]
            for c, n in count.items():
                if n < 2:
                    continue
                for x in (r for r in busy if where[r] == c):
                    for dest in free:
                        self.assertFalse(
                            movable(where, keys, x, c, dest),
                            'busy %s stacked on core %d, core %d holds '
                            'none: %s' % (x, c, dest, where))
            if keys is None:
                self.assertFalse(free and max(count.values()) > 1, where)
