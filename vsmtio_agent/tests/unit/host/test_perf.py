"""Per-thread counters through perf_event_open(2), on this host for real.

These machines have no hardware PMU: the ``instructions`` event is refused
and must come back as missing, with the reason. The syscall path itself is
exercised with the software ``task-clock`` event, which every Linux counts;
the scaling of multiplexed counters is checked on recorded reads.
"""

import struct
import threading

import testtools

from vsmtio_agent.linux import perf


class TestScaling(testtools.TestCase):

    def test_a_counter_that_ran_throughout_is_exact(self):
        self.assertEqual(1000, perf.scaled(struct.pack('=QQQ', 1000, 50,
                                                       50)))

    def test_a_multiplexed_counter_is_scaled(self):
        # recorded from a host whose PMU multiplexed the event: it ran a
        # quarter of the time it was enabled
        raw = struct.pack('=QQQ', 2500000, 4000000, 1000000)
        self.assertEqual(10000000, perf.scaled(raw))

    def test_a_counter_that_never_ran_is_missing(self):
        self.assertIsNone(perf.scaled(struct.pack('=QQQ', 0, 100, 0)))

    def test_attr_is_the_stable_prefix(self):
        packed = perf.attr('instructions')
        self.assertEqual(perf.ATTR_SIZE_VER0, len(packed))
        type_, size, config = struct.unpack_from('=IIQ', packed)
        self.assertEqual((perf.PERF_TYPE_HARDWARE, 64,
                          perf.PERF_COUNT_HW_INSTRUCTIONS),
                         (type_, size, config))
        self.assertRaises(ValueError, perf.attr, 'cycles-of-doom')


class TestOnThisHost(testtools.TestCase):

    def test_a_real_thread_is_counted(self):
        counters = perf.ThreadCounters('task-clock', exclude_kernel=False)
        self.addCleanup(counters.close)
        tid = threading.get_native_id()
        before = counters.read(tid)
        if counters.unavailable:
            self.skipTest(counters.unavailable)
        sum(range(200000))
        after = counters.read(tid)
        self.assertGreater(after, before)
        counters.retain(set())
        self.assertEqual({}, counters._fds)

    def test_instructions_are_missing_not_zero_without_a_pmu(self):
        counters = perf.ThreadCounters('instructions')
        self.addCleanup(counters.close)
        got = counters.read(threading.get_native_id())
        if got is None:
            # no PMU (these machines): said once, every read missing
            self.assertIn('perf_event_open(instructions)',
                          counters.unavailable)
            self.assertIsNone(counters.read(threading.get_native_id()))
        else:
            self.assertGreater(got, 0)

    def test_a_gone_thread_is_missing(self):
        counters = perf.ThreadCounters('task-clock', exclude_kernel=False)
        self.addCleanup(counters.close)
        t = threading.Thread(target=lambda: None)
        t.start()
        tid = t.native_id
        t.join()
        self.assertIsNone(counters.read(tid))
        self.assertIsNone(counters.unavailable)
