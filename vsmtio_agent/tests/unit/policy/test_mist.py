"""MIST's detector: I_cpu per VM, shortfall, debouncing, IRQ plan."""

import dataclasses

from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
import testtools

from vsmtio_agent import model
from vsmtio_agent.policy import engine
from vsmtio_agent.policy import ltcr
from vsmtio_agent.policy import mist
from vsmtio_agent.tests.unit.policy import helpers

RES = model.Reservation(iops=100)
P = mist.Params(threshold=0.05, act_periods=3, clear_periods=4,
                max_clear_periods=16, idle_switch_threshold=10.0)

# a VM trying to do I/O: one request in flight on average
HOLD = mist.VmPeriod(i_cpu=0.5, iops=40.0, bytes_per_s=None,
                     reservation=RES, queue_depth=1.0)
# each way the conditions can fail to hold together
CALM = [dataclasses.replace(HOLD, **change) for change in (
    {'i_cpu': 0.01}, {'iops': 150.0}, {'i_cpu': None}, {'iops': None},
    # no evidence of demand: a reserved VM that computes
    {'queue_depth': 0.0, 'iops': 0.0}, {'queue_depth': 0.01},
    {'queue_depth': None})]


def vcpu(vol, invol, period_ns=10 ** 9):
    return dataclasses.replace(helpers.stats(period_ns=period_ns),
                               voluntary_switches=vol,
                               involuntary_switches=invol)


def run(params, periods):
    """Feed one VM's periods; the list of protect flags after each."""
    states, out = {}, []
    for vm in periods:
        states, verdicts = mist.step(params, states, {'vm': vm})
        out.append(verdicts['vm'].protect)
    return out, states


class TestICpu(testtools.TestCase):

    def test_summed_over_the_vms_vcpu_threads(self):
        got = mist.vm_i_cpu([vcpu(100, 5), vcpu(300, 35)], 10.0)
        self.assertAlmostEqual(40 / 400, got)

    def test_nearly_idle_vm_has_none(self):
        self.assertIsNone(mist.vm_i_cpu([vcpu(3, 2), vcpu(2, 1)], 10.0))

    def test_missing_counter_has_none(self):
        self.assertIsNone(mist.vm_i_cpu([vcpu(None, 5), vcpu(30, 1)], 1.0))
        self.assertIsNone(mist.vm_i_cpu([], 1.0))

    def test_observe_rates_and_reserved_only(self):
        reserved = model.Reservation(iops=500, bytes_per_s=10 ** 6)
        prev = model.Snapshot(time_ns=0, vcpus={}, domains={
            'a': model.DomainCounters(100, 4096, reserved),
            'b': model.DomainCounters(0, 0)})
        cur = model.Snapshot(time_ns=2 * 10 ** 9, vcpus={}, domains={
            'a': model.DomainCounters(700, 4096 + 2 * 10 ** 6, reserved),
            'b': model.DomainCounters(50, 50)})
        stats = {helpers.ref(0, 'a'): vcpu(100, 20, 2 * 10 ** 9),
                 helpers.ref(1, 'a'): vcpu(100, 0, 2 * 10 ** 9),
                 helpers.ref(0, 'b'): vcpu(100, 90, 2 * 10 ** 9)}
        vms = mist.observe(prev, cur, stats, 10.0)
        self.assertEqual(['a'], sorted(vms))   # b reserved nothing
        self.assertEqual(300.0, vms['a'].iops)
        self.assertEqual(10 ** 6, vms['a'].bytes_per_s)
        self.assertAlmostEqual(0.1, vms['a'].i_cpu)

    def test_counter_going_backwards_is_unmeasured(self):
        prev = model.Snapshot(0, {}, {'a': model.DomainCounters(900, 0, RES)})
        cur = model.Snapshot(10 ** 9, {}, {
            'a': model.DomainCounters(10, 0, RES)})
        self.assertIsNone(mist.observe(prev, cur, {}, 1.0)['a'].iops)


class TestDemand(testtools.TestCase):
    """A reservation alone never protects: the VM must be asking for I/O."""

    def test_a_reserved_vm_that_only_computes_is_never_protected(self):
        # preempted often (high I_cpu) and serving nothing: short of its
        # reservation by every count, yet it asks for no I/O
        computing = dataclasses.replace(HOLD, iops=0.0, queue_depth=0.0)
        flags, _ = run(P, [computing] * 50)
        self.assertEqual([False] * 50, flags)
        _, verdicts = mist.step(P, {}, {'vm': computing})
        self.assertIn('no I/O demand', verdicts['vm'].reason)

    def test_unmeasured_demand_is_no_evidence(self):
        flags, states = run(P, [dataclasses.replace(HOLD, queue_depth=None)]
                            * 10)
        self.assertEqual([False] * 10, flags)

    def test_a_vm_with_requests_in_flight_is_protected(self):
        # served 40 of its 100 IOPS, its requests waiting: demand shown
        busy = dataclasses.replace(HOLD, queue_depth=4.0)
        flags, _ = run(P, [busy] * 3)
        self.assertEqual([False, False, True], flags)

    def test_observe_derives_the_mean_requests_in_flight(self):
        reserved = model.Reservation(iops=500)
        prev = model.Snapshot(time_ns=0, vcpus={}, domains={
            'a': model.DomainCounters(io_requests=0, io_bytes=0,
                                      io_busy_ns=0, reservation=reserved)})
        cur = model.Snapshot(time_ns=2 * 10 ** 9, vcpus={}, domains={
            'a': model.DomainCounters(io_requests=10, io_bytes=0,
                                      io_busy_ns=3 * 10 ** 9,
                                      reservation=reserved)})
        self.assertAlmostEqual(1.5, mist.observe(prev, cur, {}, 1.0)
                               ['a'].queue_depth)

    def test_params_refuse_a_non_positive_depth(self):
        self.assertRaises(ValueError, mist.Params, min_queue_depth=0)
        self.assertRaises(ValueError, mist.Params,
                          min_queue_depth=float('nan'))


class TestDemandItsReservationExplains(testtools.TestCase):
    """Protection needs a shortfall the VM's reservation explains.

    The VM must be served at least ``min_demand_fraction`` of what it
    reserved (0.25 by default): a trickle of I/O beside computing vCPUs
    is no claim on a reservation, however preempted the vCPUs are.
    """

    RES = model.Reservation(iops=500)
    # 20 IOPS, a request in flight 6% of the time, I_cpu 0.3: it passes
    # every other condition (in flight above 0.05, I_cpu above 0.05,
    # below its reservation)
    TRICKLE = mist.VmPeriod(i_cpu=0.3, iops=20.0, bytes_per_s=None,
                            reservation=RES, queue_depth=0.06)

    def test_a_trickle_is_never_protected(self):
        flags, _ = run(mist.Params(), [self.TRICKLE] * 50)
        self.assertEqual([False] * 50, flags)
        _, verdicts = mist.step(mist.Params(), {}, {'vm': self.TRICKLE})
        self.assertIn('too little I/O for its reservation to explain '
                      '(20 IOPS < 25% of 500 reserved)',
                      verdicts['vm'].reason)

    def test_the_stated_fraction_of_the_reservation_is_protected(self):
        params = mist.Params()
        at = dataclasses.replace(self.TRICKLE, iops=125.0)     # 25%
        flags, _ = run(params, [at] * 3)
        self.assertEqual([False, False, True], flags)
        _, verdicts = mist.step(params, {}, {'vm': at})
        self.assertIn('I_cpu 0.300 > 0.050 and 125 IOPS < 500 reserved',
                      verdicts['vm'].reason)
        below = dataclasses.replace(self.TRICKLE, iops=124.0)
        self.assertFalse(any(run(params, [below] * 10)[0]))
        # the operator states the fraction
        half = mist.Params(min_demand_fraction=0.5)
        self.assertFalse(any(run(half, [at] * 10)[0]))
        self.assertTrue(run(half, [dataclasses.replace(
            at, iops=250.0)] * 3)[0][-1])

    def test_a_starved_vm_below_the_fraction_is_not_protected(self):
        # the fraction's price: served 1 of 100 IOPS with four requests
        # waiting cannot be told from a VM that asks for 1
        starved = dataclasses.replace(HOLD, iops=1.0, queue_depth=4.0)
        self.assertFalse(any(run(P, [starved] * 10)[0]))

    def test_each_dimension_on_its_own(self):
        # bandwidth reserved too: small requests serve 40% of the IOPS and
        # 1% of the bytes; the IOPS explain the shortfall, the bytes do not
        res = model.Reservation(iops=100, bytes_per_s=10 ** 8)
        vm = mist.VmPeriod(0.5, 40.0, 10 ** 6, res, queue_depth=1.0)
        _, verdicts = mist.step(P, {}, {'vm': vm})
        self.assertTrue(verdicts['vm'].reason.startswith(
            'I_cpu 0.500 > 0.050 and 40 IOPS < 100 reserved ('),
            verdicts['vm'].reason)
        # a trickle on both dimensions
        vm = mist.VmPeriod(0.5, 4.0, 10 ** 6, res, queue_depth=1.0)
        _, verdicts = mist.step(P, {}, {'vm': vm})
        self.assertIn('4 IOPS < 25% of 100 reserved, 1000000 B/s < 25% of '
                      '100000000 reserved', verdicts['vm'].reason)
        # the IOPS met, the bytes a trickle: nothing the reservation
        # explains is short
        vm = mist.VmPeriod(0.5, 150.0, 10 ** 6, res, queue_depth=1.0)
        _, verdicts = mist.step(P, {}, {'vm': vm})
        self.assertFalse(verdicts['vm'].protect)
        self.assertIn('I/O meets its reservation', verdicts['vm'].reason)

    def test_params_refuse_a_fraction_outside_zero_to_one(self):
        for bad in (0, 1, -0.5, 1.5, float('nan')):
            self.assertRaises(ValueError, mist.Params,
                              min_demand_fraction=bad)


class TestShortfall(testtools.TestCase):

    def test_each_reserved_dimension(self):
        vm = mist.VmPeriod(0.5, 50.0, 2e6, model.Reservation(100, 10 ** 6))
        self.assertEqual('50 IOPS < 100 reserved', mist.shortfall(vm))
        vm = mist.VmPeriod(0.5, 150.0, 5e5, model.Reservation(100, 10 ** 6))
        self.assertEqual('500000 B/s < 1000000 reserved', mist.shortfall(vm))
        vm = mist.VmPeriod(0.5, 150.0, None, model.Reservation(100, 10 ** 6))
        self.assertIsNone(mist.shortfall(vm))

    def test_only_what_the_fraction_explains(self):
        vm = mist.VmPeriod(0.5, 20.0, 5e5, model.Reservation(100, 10 ** 6))
        self.assertEqual('500000 B/s < 1000000 reserved',
                         mist.shortfall(vm, 0.25))
        self.assertIsNone(mist.shortfall(vm, 0.6))


class TestDebounce(testtools.TestCase):

    def test_acts_after_act_periods_and_says_why(self):
        flags, _ = run(P, [HOLD] * 3)
        self.assertEqual([False, False, True], flags)
        _, verdicts = mist.step(P, {}, {'vm': HOLD})
        self.assertIn('I_cpu 0.500 > 0.050 and 40 IOPS < 100 reserved',
                      verdicts['vm'].reason)

    def test_a_transient_spike_does_not_act(self):
        flags, _ = run(P, [HOLD, HOLD, CALM[0], HOLD, HOLD, CALM[2]])
        self.assertFalse(any(flags))

    def test_every_calm_kind_resets_the_count(self):
        for calm in CALM:
            flags, _ = run(P, [HOLD, HOLD, calm, HOLD, HOLD])
            self.assertFalse(any(flags), calm)

    def test_releases_after_clear_periods(self):
        flags, _ = run(P, [HOLD] * 3 + [CALM[1]] * 4)
        self.assertEqual([False, False, True, True, True, True, False],
                         flags)

    def test_interference_during_calm_restarts_the_release_count(self):
        flags, _ = run(P, [HOLD] * 3 + [CALM[0]] * 3 + [HOLD]
                       + [CALM[0]] * 3)
        self.assertTrue(all(flags[2:]))

    def test_needed_again_soon_after_release_holds_longer(self):
        periods = [HOLD] * 3 + [CALM[0]] * 4 + [HOLD] * 3
        flags, states = run(P, periods)
        self.assertTrue(flags[-1])
        self.assertEqual(8, states['vm'].clear_after)
        flags, states = run(P, periods + [CALM[0]] * 7)
        self.assertTrue(flags[-1])      # 7 < 8 calm periods: still held

    def test_a_late_return_starts_from_clear_periods(self):
        periods = [HOLD] * 3 + [CALM[0]] * 4 + [CALM[2]] * 10 + [HOLD] * 3
        flags, states = run(P, periods)
        self.assertTrue(flags[-1])
        self.assertEqual(4, states['vm'].clear_after)

    def test_vanished_vm_is_forgotten(self):
        states, _ = mist.step(P, {}, {'vm': HOLD})
        states, verdicts = mist.step(P, states, {})
        self.assertEqual({}, states)
        self.assertEqual({}, verdicts)

    def test_bad_params_refused(self):
        self.assertRaises(ValueError, mist.Params, act_periods=0)
        self.assertRaises(ValueError, mist.Params, threshold=-1)
        self.assertRaises(ValueError, mist.Params, clear_periods=9,
                          max_clear_periods=3)


hold_flags = st.lists(st.booleans(), max_size=120)


def periods_of(flags, calm_kind):
    return [HOLD if f else CALM[calm_kind % len(CALM)] for f in flags]


def longest_run(flags, value):
    best = cur = 0
    for f in flags:
        cur = cur + 1 if f == value else 0
        best = max(best, cur)
    return best


class TestDebounceProperties(testtools.TestCase):

    @settings(max_examples=300, deadline=None)
    @given(hold_flags, st.integers(0, 3), st.integers(1, 6),
           st.integers(1, 8))
    def test_never_acts_without_act_periods_in_a_row(self, flags, kind, n,
                                                     m):
        params = mist.Params(act_periods=n, clear_periods=m,
                             max_clear_periods=4 * m)
        got, _ = run(params, periods_of(flags, kind))
        if longest_run(flags, True) < n:
            self.assertFalse(any(got))

    @settings(max_examples=300, deadline=None)
    @given(hold_flags, st.integers(0, 3), st.integers(1, 6),
           st.integers(1, 8))
    def test_every_change_is_earned(self, flags, kind, n, m):
        # Protection starts only at the n-th held period in a row, and
        # ends only after at least m calm periods in a row.
        params = mist.Params(act_periods=n, clear_periods=m,
                             max_clear_periods=4 * m)
        got, _ = run(params, periods_of(flags, kind))
        before = False
        for i, now in enumerate(got):
            if now and not before:
                self.assertGreaterEqual(i + 1, n)
                self.assertTrue(all(flags[i + 1 - n:i + 1]))
            if before and not now:
                self.assertGreaterEqual(i + 1, m)
                self.assertFalse(any(flags[i + 1 - m:i + 1]))
            before = now

    @settings(max_examples=300, deadline=None)
    @given(hold_flags, st.integers(0, 3), st.integers(1, 6),
           st.integers(1, 8), st.integers(1, 4))
    def test_release_time_stays_bounded(self, flags, kind, n, m, k):
        params = mist.Params(act_periods=n, clear_periods=m,
                             max_clear_periods=k * m)
        states = {}
        for vm in periods_of(flags, kind):
            states, _ = mist.step(params, states, {'vm': vm})
            self.assertLessEqual(m, states['vm'].clear_after)
            self.assertLessEqual(states['vm'].clear_after, k * m)

    @settings(max_examples=200, deadline=None)
    @given(hold_flags, st.integers(1, 6), st.integers(1, 8))
    def test_sustained_interference_is_always_answered(self, flags, n, m):
        params = mist.Params(act_periods=n, clear_periods=m,
                             max_clear_periods=4 * m)
        got, _ = run(params, periods_of(flags, 0) + [HOLD] * n)
        self.assertTrue(got[-1])


class TestIrqPlan(testtools.TestCase):

    IRQS = {36: 'virtio1-req.0', 38: 'virtio2-input.0',
            39: 'virtio2-output.0', 26: 'ttyS0', 50: 'nvme0q1',
            51: 'eth0-TxRx-0', 52: 'weird, virtio3-req.0, eth1-rx'}

    def plan(self, cpus, block_cpus=None, banned=()):
        from vsmtio_agent.conf import mist as mist_conf
        block, net = mist.irq_classes(self.IRQS, mist_conf.BLOCK_IRQ_PATTERN,
                                      mist_conf.NET_IRQ_PATTERN)
        return mist.irq_plan(block, net, cpus, block_cpus, banned)

    def test_disjoint_cpus_and_others_left_alone(self):
        plan = self.plan([0, 1, 2, 3])
        self.assertEqual({36, 38, 39, 50, 51}, set(plan))
        self.assertEqual(frozenset([0]), plan[36])
        self.assertEqual(frozenset([0]), plan[50])
        self.assertEqual(frozenset([1, 2, 3]), plan[38])
        self.assertEqual(frozenset([1, 2, 3]), plan[51])

    def test_explicit_block_cpus(self):
        plan = self.plan([0, 1, 2, 3], block_cpus={2, 3, 9})
        self.assertEqual(frozenset([2, 3]), plan[36])
        self.assertEqual(frozenset([0, 1]), plan[39])

    def test_one_cpu_cannot_be_split(self):
        self.assertEqual({}, self.plan([0]))
        self.assertEqual({}, self.plan([0, 1], block_cpus={0, 1}))

    def test_a_banned_irq_is_never_planned(self):
        # the operator's ban list is honoured
        plan = self.plan([0, 1, 2, 3], banned={36, 51})
        self.assertEqual({38, 39, 50}, set(plan))

    def test_only_the_given_devices_irqs(self):
        # a domain's own devices, not every matching IRQ
        plan = mist.irq_plan({36}, {38, 39}, [0, 1])
        self.assertEqual({36: frozenset([0]), 38: frozenset([1]),
                          39: frozenset([1])}, plan)
        # a device whose role cannot be told (both) is left alone
        self.assertEqual({38: frozenset([1])},
                         mist.irq_plan({36}, {36, 38}, [0, 1]))


class TestEngine(testtools.TestCase):

    def test_engine_outputs_the_protection_set(self):
        topo = model.Topology.uniform(2)
        params = engine.Params(
            bounds=ltcr.Bounds(initial_ns=200000, min_ns=10000,
                               max_ns=5000000, reschedule_cost_ns=50000),
            mist=P)
        eng = engine.PolicyEngine(topo, params)
        stats = {helpers.ref(0): helpers.stats(0.1, core_id=0)}
        for _ in range(2):
            self.assertEqual({}, eng.step(stats, {'vm': HOLD}).protect)
        decision = eng.step(stats, {'vm': HOLD})
        self.assertEqual(['vm'], sorted(decision.protect))
        self.assertTrue(decision.protect['vm'].protect)

    def test_without_mist_nothing_is_protected(self):
        topo = model.Topology.uniform(2)
        params = engine.Params(bounds=ltcr.Bounds(
            initial_ns=200000, min_ns=10000, max_ns=5000000,
            reschedule_cost_ns=50000))
        eng = engine.PolicyEngine(topo, params)
        stats = {helpers.ref(0): helpers.stats(0.1, core_id=0)}
        for _ in range(5):
            self.assertEqual({}, eng.step(stats, {'vm': HOLD}).protect)
