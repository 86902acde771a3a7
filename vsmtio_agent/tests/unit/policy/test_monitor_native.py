"""The Workload Monitor's C loop against its Python reference.

``monitor.derive`` runs its per-vCPU loop in C where ``_monitor`` was
built, and ``monitor._derive`` (Python) otherwise. The two must give the
same answer, not a close one: the same dict in the same order, equal
:class:`VcpuStats` with the same repr, every float the same bits, on any
snapshots, including those C leaves to Python (ints past 2**63, floats,
bools, tuples of the wrong length).
"""

import dataclasses
import math
import struct
import sys
import types

import fixtures
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
import testtools

from vsmtio_agent import model
from vsmtio_agent.policy import monitor
from vsmtio_agent.tests.unit.policy import test_monitor

NOT_BUILT = ('the C monitor (vsmtio_agent.policy._monitor) was not built: '
             'gcc and Python\'s headers are needed (python3-dev)')
COUNTERS = model.VcpuCounters._fields[2:14]
PERIOD = 10 ** 8


def python_path(test):
    test.useFixture(fixtures.MockPatchObject(monitor, 'native', False))


def derive_both(test, *args, **kwargs):
    """``derive`` in C, then in Python; both results (or both errors)."""
    out = []
    for native in (True, False):
        with fixtures.MockPatchObject(monitor, 'native', native):
            try:
                out.append(monitor.derive(*args, **kwargs))
            except Exception as exc:
                out.append(exc)
    return out


def bits(value):
    """A value with every float replaced by its bytes, recursively."""
    if type(value) is float:
        return ('float', struct.pack('d', value))
    if dataclasses.is_dataclass(value):
        return (type(value).__name__,
                tuple((k, bits(v)) for k, v in value.__dict__.items()))
    return (type(value).__name__, value)


def has_nan(value):
    """Whether a value is or holds (as a CpiStack does) a NaN."""
    if dataclasses.is_dataclass(value):
        return any(has_nan(v) for v in value.__dict__.values())
    return type(value) is float and math.isnan(value)


class TestSame(testtools.TestCase):
    """Helpers asserting that two results are the same, bit for bit."""

    def assert_same(self, c, py):
        if isinstance(py, Exception):
            self.assertIsInstance(c, type(py))
            self.assertEqual(str(py), str(c))
            return
        self.assertIsInstance(c, dict)
        self.assertEqual(list(py), list(c))         # the same order
        self.assertEqual(repr(py), repr(c))
        for ref, s in py.items():
            t = c[ref]
            self.assertIs(type(s), type(t))
            # the fields in the same order in the same kind of dict
            self.assertEqual(list(s.__dict__), list(t.__dict__))
            self.assertEqual(sys.getsizeof(s.__dict__),
                             sys.getsizeof(t.__dict__))
            self.assertEqual(bits(s), bits(t))     # every float's bits
            nan = False
            for f in dataclasses.fields(s):
                a, b = getattr(s, f.name), getattr(t, f.name)
                if has_nan(a):      # bits(): the same NaN
                    self.assertTrue(has_nan(b), f.name)
                    nan = True
                else:
                    self.assertEqual(a, b, f.name)
            if not nan:     # NaN is equal to nothing, itself included
                self.assertEqual(s, t)
                self.assertEqual(s, dataclasses.replace(t))


# Counters: small ints, the edges of C's exact range and past int64 (which
# C leaves to Python), None, and now and then what only Python takes.
small = st.integers(0, 10 ** 6)
edges = st.sampled_from([0, 1, 2 ** 53 - 1, 2 ** 53, 2 ** 53 + 1,
                         2 ** 62, 2 ** 63 - 1, 2 ** 63, 2 ** 64 + 3,
                         -2 ** 63, -2 ** 63 - 1, -5])
odd = st.sampled_from([0.5, 3.0, True, False, float('nan')])


def counter_pairs(mode):
    """(before, after) of one counter: forward, backwards, None, huge.

    ``ordinary``: ints of 64 bits whose deltas C computes (at most 2**53);
    ``any``: ints past 2**63 too; ``weird``: floats and bools as well;
    ``host``: every counter present and going forward.
    """
    if mode == 'host':      # as a host's counters go: forward, present
        return st.tuples(st.integers(0, 2 ** 50), small).map(
            lambda p: (p[0], p[0] + p[1]))
    if mode == 'ordinary':
        base = st.one_of(small, st.integers(0, 2 ** 62))
        steps = st.one_of(small, st.sampled_from([0, 1, 2 ** 53]))
    else:
        base = st.one_of(small, st.integers(0, 2 ** 40), edges)
        steps = st.one_of(small, edges)
    value = st.one_of(st.none(), base, odd) if mode == 'weird' else (
        st.one_of(st.none(), base))

    @st.composite
    def pair(draw):
        kind = draw(st.sampled_from(['fwd', 'fwd', 'fwd', 'back', 'same',
                                     'any']))
        a = draw(value)
        if kind == 'any' or a is None or not isinstance(a, int) \
                or isinstance(a, bool):
            if mode == 'ordinary':  # a delta within 2**53
                a = draw(st.one_of(st.none(), small))
                return a, draw(st.one_of(st.none(), small))
            return a, draw(value)
        step = draw(steps)
        if kind == 'back':
            step = -step
        elif kind == 'same':
            step = 0
        return a, a + step
    return pair()


@st.composite
def switch_times(draw, prev_ns, cur_ns, mode):
    """When each side's switch counts were read (None: at its snapshot)."""
    def near(t):
        times = st.one_of(st.none(), st.just(t), st.integers(
            t - 3 * PERIOD, t + PERIOD))
        if mode in ('ordinary', 'host'):
            return times
        return st.one_of(times, st.sampled_from([2 ** 63, 0.5]))
    t0 = draw(near(prev_ns))
    t1 = draw(st.one_of(near(cur_ns), st.just(t0), near(prev_ns)))
    return t0, t1


@st.composite
def cases(draw, mode='any'):
    """Arguments of derive: snapshots, threshold, topology, last.

    The topology and the last period's stats may be None; some vCPUs are
    in one snapshot only.
    """
    prev_ns = draw(st.integers(0, 2 ** 50))
    period = draw(st.one_of(st.just(PERIOD), st.integers(1, 10 ** 10)))
    cur_ns = prev_ns + period
    n_cores = draw(st.integers(1, 4))
    topology = draw(st.one_of(st.none(),
                              st.just(model.Topology.uniform(n_cores))))
    refs = [model.VcpuRef('vm%d' % (i % 3), i)
            for i in range(draw(st.integers(0, 12)))]
    prev, cur = {}, {}
    weird = mode == 'weird'
    pairs = counter_pairs(mode)
    for ref in refs:
        where = draw(st.sampled_from(['both', 'both', 'both', 'prev',
                                      'cur']))
        fields0, fields1 = [], []
        for _ in COUNTERS:
            a, b = draw(pairs)
            fields0.append(a)
            fields1.append(b)
        cpu = draw(st.one_of(st.none(), st.integers(0, 2 * n_cores + 2)))
        if weird and draw(st.booleans()):
            cpu = draw(st.sampled_from([1.0, True, 'x', 2 ** 64]))
        weight = draw(st.sampled_from([1024, 2, 88761]))
        t0, t1 = draw(switch_times(prev_ns, cur_ns, mode))
        before = model.VcpuCounters(weight, cpu, *fields0, t0)
        after = model.VcpuCounters(weight, cpu, *fields1, t1)
        if weird and draw(st.integers(0, 9)) == 0:
            after = tuple(after)[:draw(st.integers(13, 14))]
        if where != 'cur':
            prev[ref] = before
        if where != 'prev':
            cur[ref] = after
    # the snapshot before in another order, or keyed by equal refs that are
    # other objects (C walks the two snapshots together where they agree)
    how = draw(st.sampled_from(['same', 'same', 'shuffled', 'copies']))
    if how == 'shuffled':
        prev = dict(draw(st.permutations(list(prev.items()))))
    elif how == 'copies':
        prev = {model.VcpuRef(*ref): c for ref, c in prev.items()}
    last = None
    if draw(st.booleans()):
        last = {}
        for ref in refs:
            if draw(st.booleans()):
                last[ref] = dataclasses.replace(
                    held_stats(),
                    period_ns=draw(st.sampled_from([PERIOD, period, 7])),
                    voluntary_switches=draw(st.one_of(st.none(), small)),
                    involuntary_switches=draw(st.one_of(st.none(), small)),
                    i_cpu=draw(st.one_of(st.none(), st.floats(0, 100))),
                    switch_window_ns=draw(st.one_of(
                        st.none(), st.sampled_from([0, period, PERIOD]),
                        st.integers(1, 10 ** 10))))
        if draw(st.booleans()):     # as the agent's period records hold it
            last = types.MappingProxyType(last)
    threshold = draw(st.one_of(
        st.sampled_from([0, 0.0, 10, 10.0, 1e-9, 2 ** 53, float('inf')]
                        + ([2 ** 53 + 1, 2 ** 60]
                           if mode not in ('ordinary', 'host') else [])),
        st.floats(0, 1e6), st.integers(0, 10 ** 6)))
    # the idle threshold's edge: one vCPU's rate exactly
    if draw(st.booleans()):
        for ref, now in cur.items():
            b = prev.get(ref)
            if b is None or len(now) != 15:
                continue
            vol0, vol1 = b[10], now[10]
            inv0, inv1 = b[11], now[11]
            if all(type(x) is int for x in (vol0, vol1, inv0, inv1)) \
                    and vol1 >= vol0 and inv1 >= inv0:
                threshold = (vol1 - vol0 + inv1 - inv0) / (period / 1e9)
                break
    return (model.Snapshot(prev_ns, prev), model.Snapshot(cur_ns, cur),
            threshold, topology, last)


def held_stats():
    return model.VcpuStats(
        period_ns=PERIOD, weight=1024, core_id=None, utilisation=None,
        retention_rate=None, retention_frequency=None,
        retention_timeouts=None, ipc=None, cpi_stack=None,
        voluntary_switches=None, involuntary_switches=None, i_cpu=None,
        runqueue_delay_ratio=None)


def counters(t=None, **kw):
    kw.setdefault('weight', 1024)
    return model.VcpuCounters(switches_ns=t, **kw)


class TestBuilt(testtools.TestCase):

    def test_built(self):
        # The project's machines have gcc and Python's headers
        # (.ci/install-debian-packages); an install without them runs the
        # Python loop, which every test here compares against.
        self.assertIsNotNone(monitor._monitor, NOT_BUILT)
        self.assertTrue(monitor.native)


class TestCAgainstPython(TestSame):

    def setUp(self):
        super().setUp()
        self.assertIsNotNone(monitor._monitor, NOT_BUILT)

    @settings(max_examples=400, deadline=None)
    @given(cases())
    def test_same_stats(self, case):
        prev, cur, threshold, topology, last = case
        c, py = derive_both(self, prev, cur, threshold, topology, last)
        self.assert_same(c, py)

    @settings(max_examples=300, deadline=None)
    @given(cases('weird'))
    def test_same_stats_or_error_where_c_declines(self, case):
        prev, cur, threshold, topology, last = case
        c, py = derive_both(self, prev, cur, threshold, topology, last)
        self.assert_same(c, py)

    @settings(max_examples=300, deadline=None)
    @given(cases('host'))
    def test_same_stats_from_a_hosts_counters(self, case):
        # every rate computed (the CPI stack's floats above all)
        prev, cur, threshold, topology, last = case
        c, py = derive_both(self, prev, cur, threshold, topology, last)
        self.assert_same(c, py)

    @settings(max_examples=200, deadline=None)
    @given(st.lists(st.tuples(st.integers(1, 10 ** 9),
                              st.integers(0, 3 * 10 ** 9),
                              st.integers(0, 10 ** 9),
                              st.integers(0, 10 ** 9)), min_size=1,
                    max_size=20))
    def test_same_cpi_stacks(self, pmu):
        # instructions, cycles, base and miss cycles: the waiting share
        # is the stack's last float, (cycles/ins - base) - miss
        prev = model.Snapshot(0, {i: counters(
            instructions=0, cycles=0, base_cycles=0, miss_cycles=0)
            for i in range(len(pmu))})
        cur = model.Snapshot(PERIOD, {i: counters(
            instructions=ins, cycles=cyc, base_cycles=base, miss_cycles=miss)
            for i, (ins, cyc, base, miss) in enumerate(pmu)})
        c, py = derive_both(self, prev, cur, 10)
        self.assert_same(c, py)
        for i, (ins, cyc, base, miss) in enumerate(pmu):
            self.assertEqual(monitor.cpi_stack(ins, cyc, base, miss),
                             c[i].cpi_stack)

    @settings(max_examples=200, deadline=None)
    @given(cases('ordinary'))
    def test_c_computes_ordinary_counters_itself(self, case):
        # Counters as a host gives them (ints of 64 bits, deltas within
        # 2**53): C computes every vCPU, none is left to Python.
        prev, cur, threshold, topology, last = case
        period = cur.time_ns - prev.time_ns
        stats, todo = monitor._monitor.derive(
            prev.vcpus, cur.vcpus, prev.time_ns, cur.time_ns, period,
            period / monitor.NS_PER_S, threshold,
            None if topology is None else topology.core_ids,
            last if last else None, model.VcpuStats, model.CpiStack)
        self.assertIsNone(todo)
        self.assert_same(stats, monitor._derive(
            prev, cur, threshold, topology, last, cur.vcpus.items(), {}))


class TestWhatCLeavesToPython(TestSame):
    """C declines what it cannot compute exactly; Python computes it."""

    def setUp(self):
        super().setUp()
        self.assertIsNotNone(monitor._monitor, NOT_BUILT)

    def c_derive(self, prev, cur, threshold=10, topology=None, last=None):
        period = cur.time_ns - prev.time_ns
        return monitor._monitor.derive(
            prev.vcpus, cur.vcpus, prev.time_ns, cur.time_ns, period,
            period / monitor.NS_PER_S, threshold,
            None if topology is None else topology.core_ids, last,
            model.VcpuStats, model.CpiStack)

    def test_huge_and_non_int_counters_are_computed_in_python(self):
        refs = [model.VcpuRef('vm', i) for i in range(5)]
        before = [counters(run_ns=2 ** 64), counters(run_ns=0),
                  counters(instructions=0.0, cycles=1),
                  counters(run_ns=1, voluntary_switches=True),
                  counters(run_ns=0, cycles=2 ** 63 - 2 ** 54)]
        after = [counters(run_ns=2 ** 64 + 5), counters(run_ns=10 ** 7),
                 counters(instructions=7.0, cycles=3),
                 counters(run_ns=2, voluntary_switches=True),
                 counters(run_ns=5, cycles=2 ** 63 - 1)]
        prev = model.Snapshot(0, dict(zip(refs, before)))
        cur = model.Snapshot(PERIOD, dict(zip(refs, after)))
        stats, todo = self.c_derive(prev, cur)
        self.assertEqual([refs[0], refs[2], refs[3], refs[4]], todo)
        self.assertEqual(refs, list(stats))     # places kept, in order
        self.assertEqual([None, None, None, None],
                         [stats[r] for r in todo])
        self.assertEqual(0.1, stats[refs[1]].utilisation)
        c, py = derive_both(self, prev, cur, 10)
        self.assert_same(c, py)
        self.assertEqual(5 / PERIOD, c[refs[0]].utilisation)
        self.assertEqual(7.0 / 2, c[refs[2]].ipc)

    def test_arguments_only_python_takes_are_the_whole_call(self):
        c = counters(run_ns=0)
        prev = model.Snapshot(0, {1: c})
        cur = model.Snapshot(PERIOD, {1: c})
        self.assertIsNot(NotImplemented, self.c_derive(prev, cur))
        for args in [
                (model.Snapshot(0, {1: c}.items().mapping), cur),
                (model.Snapshot(0.0, {1: c}), cur),
                (prev, model.Snapshot(2 ** 64, {1: c})),
                (model.Snapshot(0, {1: c}), model.Snapshot(2 ** 54, {1: c})),
        ]:
            self.assertIs(NotImplemented, self.c_derive(*args))
            self.assert_same(*derive_both(self, *args, 10))
        self.assertIs(NotImplemented, self.c_derive(prev, cur, 2 ** 54))
        self.assertIs(NotImplemented, self.c_derive(prev, cur, 1.5j))
        # last: a dict, or a mapping whose get is called, as Python does
        self.assertRaises(AttributeError, self.c_derive, prev, cur,
                          last=[(1, None)])

    def test_an_error_is_pythons_error(self):
        # A held stat without the fields (C raises AttributeError, and
        # the Python loop is asked instead: it raises its own error).
        c0, c1 = counters(run_ns=0, t=5), counters(run_ns=9, t=5)
        prev, cur = model.Snapshot(0, {1: c0}), model.Snapshot(PERIOD, {1: c1})
        self.assertRaises(AttributeError, self.c_derive, prev, cur,
                          last={1: object()})
        c, py = derive_both(self, prev, cur, 10, None, {1: object()})
        self.assertIsInstance(py, AttributeError)
        self.assert_same(c, py)
        # a tuple too short: Python's ValueError from either path
        short = model.Snapshot(PERIOD, {1: tuple(c1)[:14]})
        c, py = derive_both(self, prev, short, 10)
        self.assertIsInstance(py, ValueError)
        self.assert_same(c, py)


class TestSwitchWindows(TestSame):
    """Each branch of the switch window, C against Python, by hand."""

    def test_windows(self):
        def vc(t, vol, invol):
            return counters(t=t, voluntary_switches=vol,
                            involuntary_switches=invol, run_ns=vol)
        refs = [model.VcpuRef('vm', i) for i in range(7)]
        prev = model.Snapshot(10 ** 9, dict(zip(refs, [
            vc(None, 0, 0), vc(10 ** 9, 0, 0), vc(10 ** 9 - 5 * PERIOD, 0, 0),
            vc(10 ** 9, 5, 5), vc(10 ** 9, 5, 5), vc(None, 1, 2),
            vc(10 ** 9, 0, 0)])))
        cur = model.Snapshot(10 ** 9 + PERIOD, dict(zip(refs, [
            vc(None, 30, 10), vc(None, 30, 10), vc(None, 30, 10),
            vc(10 ** 9, 9, 9), vc(10 ** 9 - 1, 9, 9), vc(10 ** 9, 1, 2),
            vc(10 ** 9 + PERIOD, 1, 0)])))
        held = dataclasses.replace(
            held_stats(), voluntary_switches=3,
            involuntary_switches=4, i_cpu=1.25, switch_window_ns=0)
        last = {refs[3]: held,
                refs[5]: dataclasses.replace(held, switch_window_ns=7)}
        for threshold in (0, 10, 10.0, 400.0, 400, 2 ** 53):
            for args in ((None,), (last,), (types.MappingProxyType(last),)):
                c, py = derive_both(self, prev, cur, threshold, None, *args)
                self.assert_same(c, py)
        c = derive_both(self, prev, cur, 10, None, last)[0]
        self.assertIsNone(c[refs[0]].switch_window_ns)      # the period
        self.assertIsNone(c[refs[1]].switch_window_ns)      # == period
        self.assertEqual(6 * PERIOD, c[refs[2]].switch_window_ns)
        self.assertEqual(1.25, c[refs[3]].i_cpu)             # held
        self.assertIsNone(c[refs[3]].switch_window_ns)      # its period
        self.assertIsNone(c[refs[4]].i_cpu)                  # no last
        self.assertEqual(7, c[refs[5]].switch_window_ns)
        # 1 switch in 0.1 s is 10 a second: not below 10, so a ratio
        self.assertEqual(0.0, c[refs[6]].i_cpu)
        self.assertIsNone(derive_both(self, prev, cur, 10.000001)[0][
            refs[6]].i_cpu)


class TestDerivePython(test_monitor.TestDerive):
    """The monitor's own tests, unchanged, on the Python loop."""

    def setUp(self):
        super().setUp()
        python_path(self)
        self.assertFalse(monitor.native)
