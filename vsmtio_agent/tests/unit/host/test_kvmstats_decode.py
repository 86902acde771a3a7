"""KVM's vCPU records decoded in C give what the Python path gives.

On a kvm host the sampler builds each vCPU's counters from one BPF read
per QEMU, decoded in C (``_taskiter.vcpus``, in ``_records.c``). The
Python path is the reference: ``kvmstats._decode`` then
``sampling._with_kvm``, which applies ``sampling._retention``'s rule (the
patched kernel's counters, or halt polling on a stock one). These tests
hand both the same records, made up field by field (every flag, the
largest values, vCPUs missing or without a thread, out of order, twice),
and want the same lists, the same tuples and the same types. The real
kernel's records are compared in ``test_kvmstats_threads`` (one read
against two).
"""

from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
import testtools

from vsmtio_agent.drivers.libvirt import sampling
from vsmtio_agent.linux import kvmstats
from vsmtio_agent import model
from vsmtio_agent.tests.unit.host import test_taskiter

U32 = st.integers(0, 2 ** 32 - 1)
U64 = st.one_of(st.integers(0, 2 ** 64 - 1), st.sampled_from(
    (0, 1, 2 ** 63, 2 ** 64 - 1)))
RECORD = st.tuples(
    st.integers(0, 40),                     # index
    st.integers(0, 63),                     # flags: every combination
    *([U64] * 8),                           # KVM's statistics
    U32, U32,                               # tid, cpu
    *([U64] * 4))                           # run, delay, switches


def reference(raw, patched):
    """The Python path's (tids, counters) of ``raw``."""
    stats, tids, threads = kvmstats._decode(raw)
    return tids, [None if thread is None
                  else sampling._with_kvm(thread, stats[index], patched)
                  for index, thread in enumerate(threads)]


class TestDecodedInC(testtools.TestCase):

    def setUp(self):
        super().setUp()
        if kvmstats._taskiter is None:
            if test_taskiter.can_build():
                self.fail('clang and libbpf are installed but _taskiter '
                          'is not built')
            self.skipTest('_taskiter is not built here')
        self.vcpus = kvmstats._taskiter.vcpus

    @settings(max_examples=300, deadline=None)
    @given(st.lists(RECORD, max_size=12), st.booleans())
    def test_the_same_as_the_python_path(self, records, patched):
        raw = b''.join(kvmstats._RECORD.pack(*r) for r in records)
        tids, vcpus = self.vcpus(raw, model.VcpuCounters, patched)
        self.assertEqual(reference(raw, patched), (tids, vcpus))
        for counters in vcpus:
            if counters is not None:
                self.assertIs(model.VcpuCounters, type(counters))

    def test_a_stock_and_a_patched_kernel(self):
        # vCPU 1 has a thread, vCPU 0 no record, vCPU 2 never ran
        raw = b''.join(kvmstats._RECORD.pack(*r) for r in (
            (2, kvmstats.NO_THREAD, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0,
             0),
            (1, kvmstats.NO_RETENTION_TIMEOUTS, 10, 4, 300, 200, 7, 5, 50,
             9, 1234, 1, 1000, 20, 3, 2)))
        stock = model.VcpuCounters(
            cpu=1, run_ns=1000, retention_ns=500, retentions=10,
            retention_timeouts=6, voluntary_switches=3,
            involuntary_switches=2, runqueue_delay_ns=20, halts=7)
        self.assertEqual(([None, 1234, None], [None, stock, None]),
                         self.vcpus(raw, model.VcpuCounters, False))
        patched = stock._replace(retention_ns=50, retentions=5,
                                 retention_timeouts=None)
        self.assertEqual(([None, 1234, None], [None, patched, None]),
                         self.vcpus(raw, model.VcpuCounters, True))
        self.assertEqual(([], []), self.vcpus(b'', model.VcpuCounters, 0))

    def test_what_it_cannot_decode_raises(self):
        one = kvmstats._RECORD.pack(0, 0, *[0] * 14)
        self.assertRaises(ValueError, self.vcpus, one[:-1],
                          model.VcpuCounters, False)
        self.assertRaises(ValueError, self.vcpus, kvmstats._RECORD.pack(
            2 ** 16, 0, *[0] * 14), model.VcpuCounters, False)
        self.assertRaises(TypeError, self.vcpus, one, dict, False)
        self.assertRaises(TypeError, self.vcpus, 'text',
                          model.VcpuCounters, False)

    @settings(max_examples=200, deadline=None)
    @given(st.lists(RECORD, max_size=12), st.booleans(),
           st.lists(st.one_of(st.none(), st.integers(0, 2 ** 32 + 1),
                              st.integers(-5, 5), st.text(max_size=1)),
                    max_size=14))
    def test_known_tids_change_nothing_but_the_ints(self, records, patched,
                                                    known):
        # The sampler's tids of last period: an int the same as a
        # record's tid is lent (the same object), anything else ignored.
        raw = b''.join(kvmstats._RECORD.pack(*r) for r in records)
        tids, vcpus = self.vcpus(raw, model.VcpuCounters, patched, known)
        self.assertEqual(reference(raw, patched), (tids, vcpus))
        for index, tid in enumerate(tids):
            if (index < len(known) and type(known[index]) is int
                    and known[index] == tid):
                self.assertIs(known[index], tid)

    def test_known_tids_lent(self):
        raw = b''.join(kvmstats._RECORD.pack(*r) for r in (
            (0, 0, *[0] * 8, 70001, 0, 0, 0, 0, 0),
            (1, 0, *[0] * 8, 70002, 0, 0, 0, 0, 0)))
        known = [int('70001'), int('70003')]
        tids, _vcpus = self.vcpus(raw, model.VcpuCounters, False, known)
        self.assertEqual([70001, 70002], tids)
        self.assertIs(known[0], tids[0])
        # not a list: nothing lent, the same tids
        self.assertEqual((tids, _vcpus), self.vcpus(
            raw, model.VcpuCounters, False, tuple(known)))
