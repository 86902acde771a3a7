"""The repair plan: from hosts' mixes to the live migrations that fix them."""

import itertools
import math

import hypothesis
from hypothesis import strategies as st
import testtools

from vsmtio_contract import workload
from vsmtio_nova import mix
from vsmtio_nova.watcher import repair

IO = workload.WorkloadClass.IO
CPU = workload.WorkloadClass.CPU
AUTO = workload.WorkloadClass.AUTO
BAND = repair.Band(low=0.1, high=0.9, min_classified=1)


def host(name, io=0, cpu=0, free=8, size=1, accepts=True, auto=0):
    """A host of 1-vCPU (or ``size``-vCPU) guests, all movable."""
    guests = tuple(
        repair.Guest('%s-%s%d' % (name, cls.value, i), cls, size)
        for cls, n in ((IO, io), (CPU, cpu), (AUTO, auto))
        for i in range(n))
    return repair.Host(name, mix.Mix(io * size, cpu * size), free, guests,
                       accepts)


class OutsideTest(testtools.TestCase):

    def test_vcpus_beyond_the_band(self):
        self.assertAlmostEqual(0.2, repair.outside(mix.Mix(2, 0), BAND))
        self.assertAlmostEqual(0.3, repair.outside(mix.Mix(0, 3), BAND))
        self.assertEqual(0, repair.outside(mix.Mix(1, 1), BAND))
        self.assertEqual(0, repair.outside(mix.Mix(), BAND))

    def test_a_host_is_judged_from_min_classified(self):
        # As the filter: fewer classified vCPUs, not judged.
        band = BAND._replace(min_classified=16)
        self.assertEqual(0, repair.outside(mix.Mix(10, 0), band))
        self.assertGreater(repair.outside(mix.Mix(16, 0), band), 0)

    def test_stranded_worst_first(self):
        hosts = [host('a', 2, 0), host('b', 6, 0), host('c', 2, 2)]
        self.assertEqual(('b', 'a'), repair.stranded(hosts, BAND))


class PlanTest(testtools.TestCase):

    def test_nothing_stranded_nothing_moves(self):
        plan = repair.plan([host('a', 2, 2), host('b', 1, 3)], BAND)
        self.assertEqual((), plan.moves)
        self.assertEqual((), plan.stranded)

    def test_brings_the_missing_class_to_a_stranded_host(self):
        # The tempest scenario: a's CPU guests left.
        plan = repair.plan([host('a', 2, 0), host('b', 2, 2),
                            host('c', 2, 2)], BAND)
        self.assertEqual(1, len(plan.moves))
        move = plan.moves[0]
        self.assertEqual(('a', CPU), (move.destination, move.cls))
        self.assertEqual((), plan.stranded)
        self.assertEqual(mix.Mix(2, 1), plan.mixes['a'])

    def test_never_pushes_another_host_out(self):
        # b and c hold one CPU guest beside one I/O guest: giving it away
        # would leave them I/O only, so a gets no CPU guest from them.
        hosts = [host('a', 4, 0), host('b', 1, 1), host('c', 1, 1)]
        plan = repair.plan(hosts, BAND)
        for name, m in plan.mixes.items():
            before = {h.name: h.mix for h in hosts}[name]
            if repair.outside(before, BAND) == 0:
                self.assertEqual(0, repair.outside(m, BAND), (name, m))

    def test_moves_the_excess_class_away_when_nothing_can_come(self):
        # b's guests may not move (locked, say): a's I/O guests go to b,
        # where they fit the band.
        hosts = [host('a', 3, 0), repair.Host('b', mix.Mix(1, 8), 8)]
        plan = repair.plan(hosts, BAND)
        self.assertEqual([('a', 'b', IO)] * 3,
                         [(m.source, m.destination, m.cls)
                          for m in plan.moves])
        self.assertEqual((), plan.stranded)
        self.assertEqual(mix.Mix(4, 8), plan.mixes['b'])

    def test_respects_room_and_refusing_hosts(self):
        hosts = [host('a', 2, 0), host('b', 2, 2, free=0),
                 host('c', 2, 2, accepts=False)]
        # nothing can go to b or c, and a's guests could only go there;
        # a CPU guest may still come to a.
        plan = repair.plan(hosts, BAND)
        self.assertTrue(plan.moves)
        self.assertTrue(all(m.destination == 'a' for m in plan.moves))
        full = [host('a', 2, 0, free=0), host('b', 2, 2, free=0)]
        self.assertEqual(('a',), repair.plan(full, BAND).stranded)

    def test_unclassified_guests_never_move(self):
        plan = repair.plan([host('a', 2, 0), host('b', 0, 0, auto=3)], BAND)
        self.assertFalse([m for m in plan.moves if m.cls is AUTO])

    def test_max_moves(self):
        hosts = [host('a', 8, 0)] + [host(n, 1, 8) for n in 'bcdefg']
        self.assertEqual(1, len(repair.plan(hosts, BAND, 1).moves))

    def test_large_guest_counts_its_vcpus(self):
        # one 4-vCPU CPU guest balances four 1-vCPU I/O guests
        hosts = [host('a', 4, 0), host('b', 0, 2, size=4), host('c', 4, 0)]
        band = BAND._replace(low=0.3, high=0.7)
        plan = repair.plan(hosts, band)
        self.assertEqual((), plan.stranded)
        self.assertEqual({CPU}, {m.cls for m in plan.moves})

    def test_bad_band_is_refused(self):
        for band in (BAND._replace(low=0.8, high=0.2),
                     BAND._replace(high=float('nan')),
                     BAND._replace(low=-0.1),
                     BAND._replace(min_classified=-1)):
            self.assertRaises(ValueError, repair.plan, [host('a', 1)], band)

    def test_deterministic(self):
        hosts = [host('a', 3, 0), host('b', 2, 2), host('c', 2, 2),
                 host('d', 0, 3)]
        plans = {repair.plan(list(p), BAND).moves
                 for p in itertools.permutations(hosts)}
        self.assertEqual(1, len(plans))


@st.composite
def fleets(draw):
    n = draw(st.integers(2, 6))
    out = []
    for i in range(n):
        io, cpu = draw(st.integers(0, 8)), draw(st.integers(0, 8))
        free = draw(st.integers(0, 10))
        out.append(host('h%d' % i, io, cpu, free=free))
    band = draw(st.sampled_from([BAND, BAND._replace(low=0.3, high=0.7),
                                 BAND._replace(min_classified=4)]))
    return out, band


class PlanPropertyTest(testtools.TestCase):

    @hypothesis.settings(max_examples=300, deadline=None)
    @hypothesis.given(fleets())
    def test_no_host_ends_further_out_and_room_holds(self, fleet):
        """Whatever the fleet: a plan only helps, and fits the room."""
        hosts, band = fleet
        plan = repair.plan(hosts, band)
        before = {h.name: h for h in hosts}
        total_before = sum(repair.outside(h.mix, band) for h in hosts)
        total_after = sum(repair.outside(m, band)
                          for m in plan.mixes.values())
        if plan.moves:
            self.assertLess(total_after, total_before)
        for name, m in plan.mixes.items():
            self.assertLessEqual(repair.outside(m, band),
                                 repair.outside(before[name].mix, band)
                                 + 1e-9, name)
            net_in = m.classified - before[name].mix.classified
            self.assertLessEqual(net_in, before[name].free_vcpus)
        # guests move at most once, and only those that exist
        uuids = [m.uuid for m in plan.moves]
        self.assertEqual(len(uuids), len(set(uuids)))
        self.assertTrue(math.isfinite(total_after))
