import testtools

from vsmtio_agent import model
from vsmtio_agent.policy import monitor

MS = 10 ** 6


def snap(t_ms, **vcpus):
    return model.Snapshot(
        time_ns=t_ms * MS,
        vcpus={model.VcpuRef('vm', int(k[1:])): v for k, v in vcpus.items()})


class TestDerive(testtools.TestCase):

    def test_rates_over_one_period(self):
        before = model.VcpuCounters(
            cpu=3, run_ns=0, retention_ns=0, retentions=0,
            instructions=0, cycles=0, base_cycles=0, miss_cycles=0,
            voluntary_switches=0, involuntary_switches=0,
            runqueue_delay_ns=0)
        after = model.VcpuCounters(
            cpu=3, run_ns=80 * MS, retention_ns=25 * MS, retentions=500,
            retention_timeouts=7 - 7, instructions=2000, cycles=4000,
            base_cycles=1000, miss_cycles=1500, voluntary_switches=400,
            involuntary_switches=100, runqueue_delay_ns=10 * MS)
        topo = model.Topology.uniform(4)
        st = monitor.derive(snap(0, v0=before), snap(100, v0=after),
                            idle_switch_threshold=10, topology=topo)
        s = st[model.VcpuRef('vm', 0)]
        self.assertEqual(100 * MS, s.period_ns)
        self.assertAlmostEqual(0.8, s.utilisation)
        self.assertAlmostEqual(0.25, s.retention_rate)
        self.assertAlmostEqual(5000.0, s.retention_frequency)
        self.assertAlmostEqual(0.5, s.ipc)
        self.assertAlmostEqual(0.5, s.cpi_stack.base)
        self.assertAlmostEqual(0.75, s.cpi_stack.miss)
        self.assertAlmostEqual(0.75, s.cpi_stack.waiting)
        self.assertAlmostEqual(2.0, s.cpi_stack.cpi)
        self.assertAlmostEqual(0.25, s.i_cpu)
        self.assertAlmostEqual(0.1, s.runqueue_delay_ratio)
        self.assertEqual(3, s.core_id)  # cpu 3 is core 3 of 4 (siblings 3, 7)

    def test_missing_counters_stay_missing(self):
        # No PMU and no retention counters: every rate built on them is
        # None, never zero.
        c0 = model.VcpuCounters(run_ns=0)
        c1 = model.VcpuCounters(run_ns=50 * MS)
        s = monitor.derive(snap(0, v1=c0), snap(100, v1=c1), 10)[
            model.VcpuRef('vm', 1)]
        self.assertAlmostEqual(0.5, s.utilisation)
        for field in ('retention_rate', 'retention_frequency', 'ipc',
                      'cpi_stack', 'i_cpu', 'runqueue_delay_ratio',
                      'core_id'):
            self.assertIsNone(getattr(s, field), field)

    def test_counter_reset_is_missing_not_negative(self):
        c0 = model.VcpuCounters(run_ns=90 * MS, retention_ns=40 * MS)
        c1 = model.VcpuCounters(run_ns=10 * MS, retention_ns=1 * MS)
        s = monitor.derive(snap(0, v0=c0), snap(100, v0=c1), 10)[
            model.VcpuRef('vm', 0)]
        self.assertIsNone(s.utilisation)
        self.assertIsNone(s.retention_rate)

    def test_nearly_idle_vcpu_has_no_interference_ratio(self):
        c0 = model.VcpuCounters(voluntary_switches=0, involuntary_switches=0)
        c1 = model.VcpuCounters(voluntary_switches=0, involuntary_switches=1)
        s = monitor.derive(snap(0, v0=c0), snap(1000, v0=c1), 10)[
            model.VcpuRef('vm', 0)]
        self.assertIsNone(s.i_cpu)

    def test_never_blocking_vcpu_divides_by_one(self):
        c0 = model.VcpuCounters(voluntary_switches=0, involuntary_switches=0)
        c1 = model.VcpuCounters(voluntary_switches=0,
                                involuntary_switches=50)
        s = monitor.derive(snap(0, v0=c0), snap(1000, v0=c1), 10)[
            model.VcpuRef('vm', 0)]
        self.assertEqual(50.0, s.i_cpu)

    def test_only_vcpus_seen_twice_have_stats(self):
        c = model.VcpuCounters(run_ns=0)
        st = monitor.derive(snap(0, v0=c), snap(100, v0=c, v1=c), 10)
        self.assertEqual([model.VcpuRef('vm', 0)], list(st))

    def test_time_must_advance(self):
        c = model.VcpuCounters()
        self.assertRaises(ValueError, monitor.derive, snap(5, v0=c),
                          snap(5, v0=c), 10)

    def test_cpi_stack_needs_every_component(self):
        self.assertIsNone(monitor.cpi_stack(100, 200, None, 50))
        self.assertIsNone(monitor.cpi_stack(0, 200, 10, 50))
        # Waiting is never negative even if counters disagree.
        st = monitor.cpi_stack(100, 100, 80, 60)
        self.assertEqual(0.0, st.waiting)
