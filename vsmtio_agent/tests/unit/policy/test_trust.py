"""Trust domains: which vCPUs may share a core, and the engine obeys."""

from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
import testtools

from vsmtio_agent import model
from vsmtio_agent.policy import adjuster
from vsmtio_agent.policy import engine
from vsmtio_agent.policy import search
from vsmtio_agent.policy import trust
from vsmtio_agent.tests.unit.policy import helpers

R = helpers.ref
US = 1000
T = model.Tenancy


params = helpers.params


class TestKey(testtools.TestCase):

    def test_any_fences_nothing_without_core_scheduling(self):
        tenancy = {'a': T('p'), 'b': T('q')}
        self.assertIsNone(trust.keys(trust.ANY, [R(0, 'a'), R(0, 'b')],
                                     tenancy))

    def test_project_pairs_a_tenants_vms_only(self):
        tenancy = {'a': T('p'), 'b': T('p'), 'c': T('q')}
        k = trust.keys(trust.PROJECT, [R(0, 'a'), R(0, 'b'), R(0, 'c')],
                       tenancy)
        self.assertTrue(trust.may_share(k, R(0, 'a'), R(0, 'b')))
        self.assertFalse(trust.may_share(k, R(0, 'a'), R(0, 'c')))

    def test_unknown_project_trusts_no_other_vm(self):
        k = trust.keys(trust.PROJECT, [R(0, 'a'), R(0, 'b'), R(1, 'b')],
                       {'a': T(None)})
        self.assertFalse(trust.may_share(k, R(0, 'a'), R(0, 'b')))
        self.assertTrue(trust.may_share(k, R(0, 'b'), R(1, 'b')))

    def test_vm_pairs_one_vms_vcpus_only(self):
        tenancy = {'a': T('p'), 'b': T('p')}
        k = trust.keys(trust.VM, [R(0, 'a'), R(1, 'a'), R(0, 'b')], tenancy)
        self.assertTrue(trust.may_share(k, R(0, 'a'), R(1, 'a')))
        self.assertFalse(trust.may_share(k, R(0, 'a'), R(0, 'b')))

    def test_core_scheduling_without_cookies_is_at_least_vm(self):
        tenancy = {'a': T('p'), 'b': T('p')}
        for rule in trust.RULES:
            k = trust.keys(rule, [R(0, 'a'), R(1, 'a'), R(0, 'b')],
                           tenancy, core_scheduling=True)
            self.assertFalse(trust.may_share(k, R(0, 'a'), R(0, 'b')), rule)
            self.assertTrue(trust.may_share(k, R(0, 'a'), R(1, 'a')), rule)

    def test_cookies_fence_even_under_any(self):
        tenancy = {'a': T('p', {0: 7, 1: 9}), 'b': T('q', {0: 7})}
        k = trust.keys(trust.ANY, [R(0, 'a'), R(1, 'a'), R(0, 'b')],
                       tenancy)
        # a shared cookie lets two VMs pair (the cookies say so) ...
        self.assertTrue(trust.may_share(k, R(0, 'a'), R(0, 'b')))
        # ... different cookies never, even within one VM
        self.assertFalse(trust.may_share(k, R(0, 'a'), R(1, 'a')))
        # and the rule still applies on top of the cookies
        k = trust.keys(trust.PROJECT, [R(0, 'a'), R(0, 'b')], tenancy)
        self.assertFalse(trust.may_share(k, R(0, 'a'), R(0, 'b')))

    def test_unknown_rule_is_refused(self):
        self.assertRaises(ValueError, trust.key, 'tenant', R(0))


class TestSeparate(testtools.TestCase):

    def test_minority_moves_to_an_empty_core(self):
        a0, a1, b0 = R(0, 'a'), R(1, 'a'), R(0, 'b')
        k = {a0: ('a', ''), a1: ('a', ''), b0: ('b', '')}
        out = trust.separate({a0: 0, a1: 0, b0: 0}, k, (0, 1),
                             dict.fromkeys(k, 1024))
        self.assertEqual({a0: 0, a1: 0, b0: 1}, out)
        self.assertEqual(frozenset(), trust.mixed(out, k))

    def test_joins_a_core_of_its_own_domain(self):
        a0, b0, b1 = R(0, 'a'), R(0, 'b'), R(1, 'b')
        k = {a0: 'a', b0: 'b', b1: 'b'}
        out = trust.separate({a0: 0, b0: 0, b1: 1}, k, (0, 1, 2),
                             {a0: 2048, b0: 1024, b1: 1024})
        # the heavier domain stays; b joins its own on core 1, not core 2
        self.assertEqual({a0: 0, b0: 1, b1: 1}, out)

    def test_no_room_leaves_the_core_mixed_and_named(self):
        a0, b0 = R(0, 'a'), R(0, 'b')
        k = {a0: 'a', b0: 'b'}
        out = trust.separate({a0: 0, b0: 0}, k, (0,), dict.fromkeys(k, 1))
        self.assertEqual({a0: 0, b0: 0}, out)
        self.assertEqual(frozenset([0]), trust.mixed(out, k))

    def test_pure_assignment_is_returned_itself(self):
        a0, b0 = R(0, 'a'), R(0, 'b')
        assignment = {a0: 0, b0: 1}
        self.assertIs(assignment, trust.separate(
            assignment, {a0: 'a', b0: 'b'}, (0, 1), dict.fromkeys(
                assignment, 1)))

    def test_without_trust_domains_the_assignment_is_returned_itself(self):
        assignment = {R(0, 'a'): 0, R(0, 'b'): 0}
        self.assertIs(assignment, trust.separate(
            assignment, None, (0, 1), dict.fromkeys(assignment, 1)))

    def test_a_domain_weighs_only_its_vcpus_in_the_assignment(self):
        # b1 has a key and a weight but no core: counted, it would make
        # b the heavier domain on core 0; uncounted, the tie goes to a
        a0, b0, b1 = R(0, 'a'), R(0, 'b'), R(1, 'b')
        k = {a0: 'a', b0: 'b', b1: 'b'}
        out = trust.separate({a0: 0, b0: 0}, k, (0, 1),
                             dict.fromkeys(k, 1024))
        self.assertEqual({a0: 0, b0: 1}, out)


class TestSwaps(testtools.TestCase):

    def test_swap_beside_another_domain_is_refused(self):
        a0, a1, b0, b1 = R(0, 'a'), R(1, 'a'), R(0, 'b'), R(1, 'b')
        k = {a0: 'a', a1: 'a', b0: 'b', b1: 'b'}
        assignment = {a0: 0, a1: 0, b0: 1, b1: 1}
        self.assertFalse(trust.swap_allowed(
            assignment, k, model.Swap(a0, 0, b0, 1)))
        k = dict.fromkeys(k, 'p')
        self.assertTrue(trust.swap_allowed(
            assignment, k, model.Swap(a0, 0, b0, 1)))

    @settings(max_examples=300, deadline=None)
    @given(st.dictionaries(
        st.tuples(st.sampled_from('abc'), st.integers(0, 3)).map(
            lambda t: R(t[1], t[0])),
        st.integers(0, 3), min_size=2, max_size=12), st.randoms())
    def test_the_checker_is_swap_allowed(self, assignment, rnd):
        k = {ref: ref.domain for ref in assignment}
        check = trust.swap_checker(assignment, k)
        refs = sorted(assignment)
        for _ in range(10):
            a, b = rnd.sample(refs, 2)
            if assignment[a] == assignment[b]:
                continue
            swap = model.Swap(a, assignment[a], b, assignment[b])
            self.assertEqual(trust.swap_allowed(assignment, k, swap),
                             check(swap), swap)

    def test_adjuster_picks_an_allowed_pair_off_the_middle(self):
        # core 0 all CPU-bound, core 1 all I/O-bound; only vm x's vCPUs
        # are on both, so the only allowed swap is x's pair
        x0, x1, y0, z0 = R(0, 'x'), R(1, 'x'), R(0, 'y'), R(0, 'z')
        assignment = {x0: 0, y0: 0, x1: 1, z0: 1}
        rates = {x0: 0.0, y0: 0.01, x1: 0.6, z0: 0.5}
        k = {x0: 'x', x1: 'x', y0: 'x', z0: 'x'}
        allowed = lambda s: trust.swap_allowed(assignment, k, s)  # noqa
        swaps = adjuster.plan_swaps(assignment, rates, 0.1, 0.1, 1, allowed)
        self.assertEqual(1, len(swaps))
        k = {x0: 'x', x1: 'x', y0: 'y', z0: 'z'}
        swaps = adjuster.plan_swaps(assignment, rates, 0.1, 0.1, 1, allowed)
        self.assertEqual((), swaps)


# -- the engine, on random hosts: no plan pairs two trust domains ----------

@st.composite
def hosts(draw):
    n_cores = draw(st.integers(1, 5))
    n_vms = draw(st.integers(1, 6))
    projects = [draw(st.sampled_from(['p', 'q', 'r', None]))
                for _ in range(n_vms)]
    vcpus = [draw(st.integers(1, 3)) for _ in range(n_vms)]
    periods = []
    for _ in range(draw(st.integers(1, 4))):
        periods.append({
            R(i, 'vm%d' % v): helpers.stats(
                retention_rate=draw(st.sampled_from([0.0, 0.01, 0.3, 0.7])),
                weight=draw(st.sampled_from([512, 1024, 2048])),
                core_id=draw(st.integers(0, n_cores)),
                utilisation=draw(st.sampled_from([0.2, 0.9])))
            for v in range(n_vms) for i in range(vcpus[v])})
    # some VMs' threads carry a core-scheduling cookie (two may share one)
    cookies = [draw(st.sampled_from([None, 0, 1, 2])) for _ in range(n_vms)]
    tenancy = {'vm%d' % v: T(projects[v], {} if cookies[v] is None else
                             dict.fromkeys(range(vcpus[v]), cookies[v]))
               for v in range(n_vms)}
    return n_cores, tenancy, periods, draw(st.sampled_from([None, False,
                                                            True]))


class TestEngineNeverPairsDomains(testtools.TestCase):

    def check(self, rule, n_cores, tenancy, periods, core_scheduling,
              **kw):
        eng = engine.PolicyEngine(model.Topology.uniform(n_cores),
                                  params(trust_domain=rule, **kw))
        for stats in periods:
            decision = eng.step(stats, tenancy=tenancy,
                                core_scheduling=core_scheduling)
            k = trust.keys(rule, stats, tenancy, core_scheduling)
            if k is None:
                continue        # any, and nothing fenced
            on_core = {}
            for ref, p in decision.placements.items():
                if decision.applies(p):
                    on_core.setdefault(p.core_id, set()).add(k[ref])
            for core, found in on_core.items():
                self.assertEqual(1, len(found), (core, found))
            for swap in decision.swaps:
                # each swapped vCPU has only its own domain beside it
                for ref, core in ((swap.a, swap.core_b),
                                  (swap.b, swap.core_a)):
                    self.assertEqual(core, eng.assignment[ref])
                    self.assertEqual({k[ref]}, {
                        k[other] for other, c in eng.assignment.items()
                        if c == core})

    @settings(max_examples=150, deadline=None)
    @given(hosts(), st.sampled_from(trust.RULES),
           st.sampled_from([1.0, 0.5]))
    def test_no_split_core_holds_two_domains(self, host, rule, share):
        # under every rule, with cookies and core scheduling drawn too
        self.check(rule, *host, split_share=share)

    @settings(max_examples=50, deadline=None)
    @given(hosts(), st.sampled_from(trust.RULES))
    def test_nor_with_the_guard(self, host, rule):
        self.check(rule, *host, guard=search.Params(pairs=2))

    def test_any_keeps_the_papers_pairing(self):
        # two tenants on core 0 of a host with a free core: paired
        stats = {R(0, 'a'): helpers.stats(0.6, core_id=0, utilisation=0.7),
                 R(0, 'b'): helpers.stats(0.0, core_id=0, utilisation=1.0)}
        tenancy = {'a': T('p'), 'b': T('q')}
        for rule, together in ((trust.ANY, True), (trust.PROJECT, False),
                               (trust.VM, False)):
            eng = engine.PolicyEngine(model.Topology.uniform(2),
                                      params(trust_domain=rule))
            d = eng.step(stats, tenancy=tenancy)
            cores = {p.core_id for p in d.placements.values()}
            self.assertEqual(together, len(cores) == 1, rule)

    def test_a_core_with_no_room_is_left_out_of_the_split(self):
        # one core, two tenants: no plan may pin them together
        stats = {R(0, 'a'): helpers.stats(0.6, core_id=0, utilisation=0.7),
                 R(0, 'b'): helpers.stats(0.0, core_id=0, utilisation=1.0)}
        eng = engine.PolicyEngine(model.Topology.uniform(1),
                                  params(trust_domain=trust.PROJECT))
        d = eng.step(stats, tenancy={'a': T('p'), 'b': T('q')})
        self.assertEqual(frozenset(), d.split_cores)
        self.assertFalse(any(d.applies(p) for p in d.placements.values()))


class TestSeparateCrossed(testtools.TestCase):

    def test_two_crossed_cores_are_untangled(self):
        # a and b each on cores 0 and 1, the other cores taken by c: a
        # owns core 0 and b core 1, each moving one vCPU
        a0, a1, b0, b1, c0, c1 = (R(0, 'a'), R(1, 'a'), R(0, 'b'),
                                  R(1, 'b'), R(0, 'c'), R(1, 'c'))
        k = {r: r.domain for r in (a0, a1, b0, b1, c0, c1)}
        out = trust.separate({a0: 0, b0: 0, a1: 1, b1: 1, c0: 2, c1: 3},
                             k, (0, 1, 2, 3), dict.fromkeys(k, 1024))
        self.assertEqual({a0: 0, a1: 0, b0: 1, b1: 1, c0: 2, c1: 3}, out)

    def test_cores_are_shared_out_by_weight(self):
        # every core pairs a's vCPU with b's: each tenant ends with two
        # cores of two vCPUs, none crowded onto one
        refs = [R(i, d) for d in 'ab' for i in range(4)]
        k = {r: r.domain for r in refs}
        start = {R(0, 'a'): 0, R(0, 'b'): 0, R(1, 'a'): 1, R(1, 'b'): 1,
                 R(2, 'a'): 2, R(2, 'b'): 2, R(3, 'a'): 3, R(3, 'b'): 3}
        out = trust.separate(start, k, (0, 1, 2, 3), dict.fromkeys(k, 1024))
        self.assertEqual(frozenset(), trust.mixed(out, k))
        per_core = {}
        for ref, core in out.items():
            per_core.setdefault(core, []).append(ref)
        self.assertEqual([2, 2, 2, 2], sorted(map(len, per_core.values())))

    def test_an_incumbent_keeps_its_core(self):
        # b (heavier) arrives on a's core 0: b moves, a's pins stay
        a0, b0, b1 = R(0, 'a'), R(0, 'b'), R(1, 'b')
        k = {r: r.domain for r in (a0, b0, b1)}
        start = {a0: 0, b0: 0, b1: 0}
        out = trust.separate(start, k, (0, 1), dict.fromkeys(k, 1024),
                             lambda: {0: 'a'})
        self.assertEqual({a0: 0, b0: 1, b1: 1}, out)
        # without the incumbent the heavier domain would take it
        out = trust.separate(start, k, (0, 1), dict.fromkeys(k, 1024))
        self.assertEqual({a0: 1, b0: 0, b1: 0}, out)

    def test_the_engine_keeps_a_split_core_for_its_holder(self):
        # a runs alone on core 0 and is split there; b's new vCPUs land
        # on core 0 too: they move, a's placement stays
        eng = engine.PolicyEngine(model.Topology.uniform(2),
                                  params(trust_domain=trust.PROJECT))
        a = {R(0, 'a'): helpers.stats(0.6, core_id=0, utilisation=0.7),
             R(1, 'a'): helpers.stats(0.0, core_id=0, utilisation=1.0)}
        tenancy = {'a': T('p'), 'b': T('q')}
        first = eng.step(a, tenancy=tenancy)
        self.assertEqual({0}, {p.core_id for p in first.placements.values()})
        both = dict(a)
        both.update({R(i, 'b'): helpers.stats(0.0, core_id=0,
                                              utilisation=1.0)
                     for i in range(3)})
        second = eng.step(both, tenancy=tenancy)
        self.assertEqual(first.placements[R(0, 'a')],
                         second.placements[R(0, 'a')])
        self.assertEqual({1}, {second.placements[R(i, 'b')].core_id
                               for i in range(3)})
