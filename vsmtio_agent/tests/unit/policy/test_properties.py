"""Property-based tests of the policy engine's invariants."""

from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
import testtools

from vsmtio_agent import model
from vsmtio_agent.policy import adjuster
from vsmtio_agent.policy import engine
from vsmtio_agent.policy import ltcr
from vsmtio_agent.policy import rass
from vsmtio_agent.tests.unit.policy import helpers

rates = st.one_of(st.none(), st.floats(0.0, 1.0))
weights = st.integers(2, 88761)   # CFS's weight range
metrics = st.one_of(st.none(), st.floats(0.0, 1e6))


@st.composite
def bounds(draw):
    lo = draw(st.integers(1, 10 ** 6))
    hi = draw(st.integers(lo, 10 ** 7))
    return ltcr.Bounds(initial_ns=draw(st.integers(1, 10 ** 7)), min_ns=lo,
                       max_ns=hi,
                       reschedule_cost_ns=draw(st.integers(1, 10 ** 7)))


@st.composite
def perf_maps(draw):
    n = draw(st.integers(0, 6))
    return {helpers.ref(i): (draw(st.sampled_from(list(model.Role))),
                             draw(metrics)) for i in range(n)}


@st.composite
def core_stats(draw):
    n = draw(st.integers(1, 12))
    return {helpers.ref(i): helpers.stats(draw(rates), weight=draw(weights))
            for i in range(n)}


@st.composite
def host_stats(draw):
    n_cores = draw(st.integers(1, 6))
    n = draw(st.integers(1, 4 * n_cores))
    return n_cores, {
        helpers.ref(i): helpers.stats(
            draw(rates), weight=draw(weights),
            core_id=draw(st.one_of(st.none(), st.integers(0, n_cores))),
            ipc=draw(metrics), retention_frequency=draw(metrics))
        for i in range(n)}


class TestInvariants(testtools.TestCase):

    @settings(max_examples=200, deadline=None)
    @given(bounds(), st.lists(perf_maps(), max_size=30))
    def test_timeout_always_within_bounds(self, b, periods):
        state = ltcr.start(b)
        self.assertTrue(b.min_ns <= state.effective_ns <= b.max_ns)
        for perf in periods:
            state = ltcr.step(state, b, perf)
            for t in (state.desired_ns, state.effective_ns):
                self.assertTrue(b.min_ns <= t <= b.max_ns)

    @settings(max_examples=300, deadline=None)
    @given(core_stats(), st.floats(0.0, 0.5))
    def test_classes_balance_within_one_vcpus_weight(self, stats, floor):
        roles = rass.classify(stats, floor)
        self.assertEqual(set(stats), set(roles))
        io = sum(stats[r].weight for r, c in roles.items()
                 if c is model.Role.IO)
        cpu = sum(stats[r].weight for r, c in roles.items()
                  if c is model.Role.CPU)
        retaining = {r for r, s in stats.items()
                     if s.retention_rate and s.retention_rate >= floor}
        io_class = {r for r, c in roles.items() if c is model.Role.IO}
        self.assertLessEqual(io_class, retaining)
        if io_class != retaining or io >= cpu:
            # Enough vCPUs retain: the weights balance.
            self.assertLessEqual(abs(io - cpu),
                                 max(s.weight for s in stats.values()))
        # Every I/O-bound vCPU retains at least as much as every measured
        # CPU-bound one.
        io_rates = [stats[r].retention_rate for r, c in roles.items()
                    if c is model.Role.IO]
        cpu_rates = [stats[r].retention_rate for r, c in roles.items()
                     if c is model.Role.CPU
                     and stats[r].retention_rate is not None]
        if cpu_rates and io_rates:
            self.assertNotIn(None, io_rates)
            self.assertGreaterEqual(min(io_rates), max(cpu_rates))

    @settings(max_examples=300, deadline=None)
    @given(st.dictionaries(st.integers(0, 40).map(helpers.ref),
                           st.integers(0, 7), max_size=40),
           st.data(), st.integers(0, 8))
    def test_swaps_never_stay_inside_one_core(self, assignment, data, n):
        r = {ref: data.draw(rates) for ref in assignment}
        swaps = adjuster.plan_swaps(assignment, r, 0.1, 0.0, n)
        self.assertLessEqual(len(swaps), n)
        moved = []
        for s in swaps:
            self.assertNotEqual(s.core_a, s.core_b)
            self.assertEqual(assignment[s.a], s.core_a)
            self.assertEqual(assignment[s.b], s.core_b)
            self.assertIsNotNone(r[s.a])
            self.assertIsNotNone(r[s.b])
            moved += [s.a, s.b]
        self.assertEqual(len(moved), len(set(moved)))
        after = adjuster.apply_swaps(assignment, swaps)
        self.assertEqual(sorted(assignment.values()), sorted(after.values()))

    @settings(max_examples=100, deadline=None)
    @given(bounds(), st.lists(host_stats(), min_size=1, max_size=6))
    def test_same_inputs_same_decisions(self, b, periods):
        n_cores = max(n for n, _ in periods)
        topo = model.Topology.uniform(n_cores)
        params = engine.Params(bounds=b, adjuster_min_mean_gap=0.0)
        one = engine.PolicyEngine(topo, params)
        two = engine.PolicyEngine(topo, params)
        for _, stats in periods:
            d1 = one.step(stats)
            d2 = two.step(dict(reversed(list(stats.items()))))
            self.assertEqual(d1, d2)
            cores = {c.core_id for c in topo.cores}
            for ref, p in d1.placements.items():
                self.assertIn(p.core_id, cores)
                self.assertIn(p.home, p.threads)
                self.assertEqual(topo.core(p.core_id),
                                 topo.core_of(p.home))
