"""The policy step's C loops against their Python references.

``engine.PolicyEngine.step`` runs four loops over every vCPU: following
the host off the split (``engine._follow_host``), grouping by core
(``engine._group``), RASS's classification of each core
(``rass.classify``) and the placements (``engine._place``). Where
``_step`` was built they run in C. C must give the same answer, not a
close one: the same dict in the same order, or decline (NotImplemented)
where it cannot compute exactly, and then the Python answers; an error is
the Python's error.
"""

import random

import fixtures
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
import testtools

from vsmtio_agent import model
from vsmtio_agent.policy import engine
from vsmtio_agent.policy import guard
from vsmtio_agent.policy import ltcr
from vsmtio_agent.policy import rass
from vsmtio_agent.tests.unit.policy import helpers
from vsmtio_agent.tests.unit.policy import test_engine
from vsmtio_agent.tests.unit.policy import test_policy_shortcuts as shortcuts

NOT_BUILT = ('the C step (vsmtio_agent.policy._step) was not built: gcc '
             'and Python\'s headers are needed (python3-dev)')
IO, CPU = model.Role.IO, model.Role.CPU


def outcome(fn, *args):
    """What ``fn`` returns (its items, in order), or its error's type."""
    try:
        found = fn(*args)
    except Exception as exc:
        return type(exc)
    if isinstance(found, dict):
        return list(found.items())
    return found


def both(name, *args):
    """The loop ``name`` through the engine, in C and in Python."""
    out = []
    for native in (True, False):
        with fixtures.MockPatchObject(engine, 'native', native):
            out.append(outcome(engine._loop, name, *args))
    return out


@st.composite
def held_roles(draw, stats):
    if not draw(st.booleans()):
        return None
    return {ref: draw(st.sampled_from([IO, CPU]))
            for ref in stats if draw(st.booleans())}


# a core's vCPUs as a host gives them: float or no rates and uses, int
# weights (what C computes itself)
ordinary_rates = st.one_of(st.none(), shortcuts.common, st.floats(0.0, 1.0))


@st.composite
def ordinary_core(draw):
    out = {}
    for i in draw(st.permutations(range(draw(st.integers(0, 24))))):
        out[helpers.ref(i, draw(st.sampled_from(['a', 'b'])))] = (
            helpers.stats(
                draw(ordinary_rates),
                weight=draw(st.sampled_from([0, 2, 1024, 1024, 88761])),
                utilisation=draw(st.one_of(st.none(), shortcuts.common,
                                           st.floats(0.0, 2.0)))))
    return out


@st.composite
def assignments(draw):
    """``(assignment, stats, split, cores)``: vCPUs on cores 0..5."""
    cores = frozenset(range(draw(st.integers(1, 4))))
    assignment, stats = {}, {}
    for i in draw(st.permutations(range(draw(st.integers(0, 30))))):
        ref = helpers.ref(i, draw(st.sampled_from(['a', 'b', 'c'])))
        assignment[ref] = draw(st.integers(0, 5))
        if draw(st.integers(0, 30)):    # now and then a ref without stats
            stats[ref] = helpers.stats(core_id=draw(
                st.one_of(st.none(), st.integers(0, 5))))
    split = set(draw(st.lists(st.integers(0, 5), max_size=3)))
    return assignment, stats, split, cores


class TestBuilt(testtools.TestCase):

    def test_built(self):
        # The project's machines have gcc and Python's headers
        # (.ci/install-debian-packages); an install without them runs the
        # Python loops, which every test here compares against.
        self.assertIsNotNone(engine._step, NOT_BUILT)
        self.assertTrue(engine.native)


class TestCAgainstPython(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.assertIsNotNone(engine._step, NOT_BUILT)

    @settings(max_examples=500, deadline=None)
    @given(shortcuts.core(), st.one_of(shortcuts.common,
                                       st.just(float('nan'))),
           st.sampled_from([None, 0, 1, 2, 4]), st.data())
    def test_same_roles(self, stats, floor, threads, data):
        # every kind of input (NaN and infinite rates, float weights, no
        # weight): C's answer or Python's, always rass.classify's
        held = data.draw(held_roles(stats))
        c, py = both('classify', stats, floor, threads, held)
        self.assertEqual(py, c)
        self.assertEqual(
            outcome(rass.classify, stats, floor, threads, held), py)

    @settings(max_examples=300, deadline=None)
    @given(ordinary_core(), st.sampled_from([0.0, 0.005, 0.1]),
           st.sampled_from([None, 0, 1, 2]), st.data())
    def test_c_classifies_a_hosts_vcpus_itself(self, stats, floor, threads,
                                               data):
        held = data.draw(held_roles(stats))
        found = engine._step.classify(stats, floor, threads, held, IO, CPU)
        self.assertIsNot(NotImplemented, found)
        self.assertEqual(
            list(rass.classify(stats, floor, threads, held=held).items()),
            list(found.items()))

    def test_c_declines_what_it_cannot_compute_exactly(self):
        ok = {helpers.ref(0): helpers.stats(0.5, utilisation=0.5),
              helpers.ref(1): helpers.stats(0.0, utilisation=1.0)}
        self.assertIsNot(NotImplemented,
                         engine._step.classify(ok, 0.0, 2, None, IO, CPU))
        for stats, floor, threads, held in (
                # float weights, which sum differently in another order
                ({helpers.ref(0): helpers.stats(0.5, weight=2.5)},
                 0.0, 2, None),
                # a NaN rate, which has no rank
                ({helpers.ref(0): helpers.stats(float('nan'))},
                 0.0, 2, None),
                # a weight past 2**53, an int rate, an int floor
                ({helpers.ref(0): helpers.stats(0.5, weight=2 ** 60)},
                 0.0, 2, None),
                ({helpers.ref(0): helpers.stats(1)}, 0.0, 2, None),
                (ok, 0, 2, None),
                # held roles that are not a dict
                (ok, 0.0, 2, dict.fromkeys(ok, IO).items())):
            self.assertIs(NotImplemented, engine._step.classify(
                stats, floor, threads, held, IO, CPU))

    def test_c_declines_a_core_that_grows_while_read(self):
        # an attribute that adds a vCPU to the dict being read: C took
        # room for the vCPUs there were, and declines
        class Growing:
            weight, utilisation = 1024, 0.5

            def __init__(self, stats):
                self.stats = stats

            @property
            def retention_rate(self):
                self.stats.setdefault(helpers.ref(99), helpers.stats(0.5))
                return 0.5

        stats = {}
        stats[helpers.ref(0)] = Growing(stats)
        self.assertIs(NotImplemented, engine._step.classify(
            stats, 0.0, 2, None, IO, CPU))
        self.assertEqual(2, len(stats))

    @settings(max_examples=400, deadline=None)
    @given(assignments())
    def test_same_assignment_off_the_split(self, case):
        c, py = both('follow_host', *case)
        self.assertEqual(py, c)

    @settings(max_examples=400, deadline=None)
    @given(assignments())
    def test_same_groups(self, case):
        assignment, stats, _split, _cores = case
        c, py = both('group', assignment, stats)
        self.assertEqual(py, c)
        if isinstance(py, list):    # each core's members in order too
            self.assertEqual([list(m.items()) for _c, m in py],
                             [list(m.items()) for _c, m in c])

    @settings(max_examples=300, deadline=None)
    @given(assignments(), st.data())
    def test_same_placements(self, case, data):
        assignment, _stats, _split, cores = case
        topology = model.Topology.uniform(6)
        table = {core.core_id: {role: rass.placement(core, role)
                                for role in model.Role}
                 for core in topology.cores if core.core_id in cores}
        roles = {ref: data.draw(st.sampled_from([IO, CPU]))
                 for ref in assignment if data.draw(st.integers(0, 20))}
        order = data.draw(st.permutations(list(assignment)))
        c, py = both('place', order, assignment, roles, table)
        self.assertEqual(py, c)


class TestWholeSteps(testtools.TestCase):
    """Two engines, one with C loops and one without, agree every period."""

    def test_same_decisions(self):
        for seed in range(8):
            rng = random.Random(seed)
            topology = model.Topology.uniform(4)
            params = engine.Params(
                bounds=ltcr.Bounds(initial_ns=50_000, min_ns=10_000,
                                   max_ns=400_000,
                                   reschedule_cost_ns=10_000),
                split_share=rng.choice([1.0, 0.5]),
                # with the guard, periods without retention (held roles)
                guard=(guard.Params(pairs=2, retest_periods=6)
                       if seed % 2 else None))
            engines = {}
            for native in (True, False):
                with fixtures.MockPatchObject(engine, 'native', native):
                    engines[native] = engine.PolicyEngine(topology, params)
            for period in range(60):
                stats = {helpers.ref(i, 'vm%d' % (i % 3)): helpers.stats(
                    rng.choice([0.0, 0.0, 0.05, 0.3, rng.random()]),
                    weight=rng.choice([1024, 1024, 512]),
                    core_id=rng.choice([0, 1, 2, 3, None]),
                    utilisation=rng.random(),
                    halt_rate=rng.random() * 1000,
                    runqueue_delay_ratio=rng.random())
                    for i in range(rng.randint(10, 14))}
                decisions = []
                for native, eng in engines.items():
                    with fixtures.MockPatchObject(engine, 'native', native):
                        decisions.append(eng.step(stats))
                self.assertEqual(decisions[0], decisions[1],
                                 'seed %d period %d' % (seed, period))
                self.assertEqual(list(decisions[0].placements),
                                 list(decisions[1].placements))


class TestEnginePython(test_engine.TestPolicyEngine):
    """The engine's own tests, unchanged, on the Python loops."""

    def setUp(self):
        super().setUp()
        self.useFixture(fixtures.MockPatchObject(engine, 'native', False))
