"""KVM's per-vCPU halt and retention statistics, from a BPF iterator.

On a kvm host the agent needs KVM's per-vCPU statistics: halt exits, and
the retention counters (the patched kernel's, or halt polling on a stock
one: :func:`vsmtio_agent.drivers.libvirt.sampling._retention`). libvirt
gives them only with ``getAllDomainStats``'s vCPU group, for which libvirtd
reads three procfs files per vCPU thread and asks every QEMU for
``query-stats`` over QMP, every call: ~65 us of libvirtd per vCPU and
~0.6 ms per domain, plus ~1.5 ms of QEMU per domain (``tox -e
bench-libvirtd``, ``doc/benchmarks/agent_tick.rst``), every period.

``kvmstats.bpf.c`` walks one QEMU's open files in the kernel (a
``task_file`` iterator attached to that process), finds its vCPU files and
copies the statistics from each ``struct kvm_vcpu``: one read per QEMU,
the values KVM's binary statistics (``KVM_GET_STATS_FD``) give. With them
it copies the scheduler counters of the thread that runs each vCPU (KVM's
``kvm_vcpu.pid``, set at the vCPU's first ``KVM_RUN``), those the task
iterator reads (:mod:`vsmtio_agent.linux.taskiter`): on a kvm host this
one read per QEMU gives the sampler all it reads of each vCPU
(:meth:`KvmStatsReader.read_vcpus`), without the task iterator's read of the
same QEMU, and the C extension builds each vCPU's counters from its record.
Measured (``tools/bench_tick.py --kvm --phases``, 200 vCPUs in 10 QEMUs,
``doc/benchmarks/agent_tick.rst``): the one read alone saved about 3 % of
the period (in the period the reading's cost is mostly per thread, cold
cache lines, and reaching each thread through its vCPU costs about what
the task iterator's walk did); with the records decoded in C the period
went from 2.05-2.28 to 1.51 ms. :meth:`KvmStatsReader.read` and
:meth:`KvmStatsReader.read_all` decode in Python: the reference the tests
hold the C to, and what the sampler falls back to (:meth:`Reading.stats`).

Where the task reader has its threads program (Linux >= 6.13:
:meth:`taskiter.TaskIterReader.begin`), that program's one run a period
reads every QEMU's vCPU files too, with the same record (``bpf_kvm.h``),
walking each QEMU's open-fd bitmap instead of an iterator per QEMU, and
loading the files' fields and the threads' counters directly rather than
through a helper call each: the sampling of the ``--kvm`` benchmark went
from 0.82-0.92 to 0.59 ms (``--phases``, the code before and after in one
run, twice). This reader takes a QEMU's records from that run
and reads through its own link a QEMU the run did not read.

It needs what the task iterator needs (``vsmtio_agent.linux.taskiter``:
the extension built with clang and libbpf, Linux >= 6.1, ``CAP_BPF`` and
``CAP_PERFMON``), and KVM with its BTF (``/sys/kernel/btf/vmlinux`` where
KVM is built in, ``/sys/kernel/btf/kvm`` where it is a module: the module
must be loaded). :class:`Unavailable` says which is missing.
"""

import os
import struct
import typing

from vsmtio_agent.linux import procfs
from vsmtio_agent.linux import taskiter

try:
    from vsmtio_agent.linux import _taskiter
except ImportError as exc:      # not built: libvirt's vCPU group does it
    _taskiter = None
    _NOT_BUILT = str(exc)

# struct kvm_record of bpf_kvm.h: KVM's statistics, then its thread's
# (struct thread_counters of bpf_common.h: tid, cpu, run_ns, delay_ns,
# voluntary, involuntary)
_RECORD = struct.Struct('=II8QII4Q')
NO_HALT_EXITS, NO_RETENTIONS, NO_RETENTION_NS, NO_RETENTION_TIMEOUTS = (
    1, 2, 4, 8)
NO_THREAD, NO_DELAY = 16, 32


class Unavailable(Exception):
    """KVM's statistics cannot be read with BPF; the message says why."""


class VcpuStats(typing.NamedTuple):
    """One vCPU's KVM statistics (cumulative; None: not in this kernel).

    The names are KVM's (``vcpu->stat``, as ``KVM_GET_STATS_FD`` and
    libvirt's ``vcpu.N.<name>.sum`` name them).
    """

    halt_attempted_poll: int
    halt_successful_poll: int
    halt_poll_success_ns: int
    halt_poll_fail_ns: int
    halt_exits: typing.Optional[int]           # x86 only
    retentions: typing.Optional[int]           # the patched kernel's
    retention_ns: typing.Optional[int]
    retention_timeouts: typing.Optional[int]


_new = tuple.__new__     # VcpuStats._make without its length check
_COUNTERS = procfs.ThreadCounters


def _decode(raw):
    """``({vcpu_idx: VcpuStats}, tids, counters)`` of one iteration.

    ``tids`` and ``counters`` are lists by vCPU index (up to the highest
    read): the id of the thread that runs each vCPU and its
    :class:`~vsmtio_agent.linux.procfs.ThreadCounters` as the task
    iterator gives them (every counter read now, so ``switches_ns``
    None); None for a vCPU whose record carries no thread (NO_THREAD) or
    that has no record. Lists, not dicts: the sampler compares the tids
    with those it found and takes the counters as they are, without a
    loop of its own; records come in vCPU order (QEMU opens the vCPU files
    in order, the iterator visits them by descriptor), so they are
    appended, and placed by index otherwise.
    """
    out, tids, counters = {}, [], []
    for (index, flags, attempted, successful, success_ns, fail_ns, exits,
         retentions, retention_ns, timeouts, tid, cpu, run_ns, delay_ns,
         voluntary, involuntary) in _RECORD.iter_unpack(raw):
        out[index] = _new(VcpuStats, (    # VcpuStats(...), built faster
            attempted, successful, success_ns, fail_ns,
            None if flags & NO_HALT_EXITS else exits,
            None if flags & NO_RETENTIONS else retentions,
            None if flags & NO_RETENTION_NS else retention_ns,
            None if flags & NO_RETENTION_TIMEOUTS else timeouts))
        if flags & NO_THREAD:
            tid = thread = None
        else:
            thread = _new(_COUNTERS, (
                run_ns, None if flags & NO_DELAY else delay_ns,
                voluntary, involuntary, cpu, None))
        if index == len(tids):
            tids.append(tid)
            counters.append(thread)
        else:
            if index > len(tids):
                missing = index + 1 - len(tids)
                tids.extend([None] * missing)
                counters.extend([None] * missing)
            tids[index], counters[index] = tid, thread
    return out, tids, counters


class Reading(typing.NamedTuple):
    """One reading of a QEMU's vCPU files (``read_vcpus``).

    ``tids`` and ``vcpus`` by vCPU index, up to the highest read: the id
    of the thread that runs the vCPU and its counters; None in both for a
    vCPU without a record or whose record has no thread.
    """

    tids: list
    vcpus: list
    raw: bytes

    def stats(self):
        """``{vcpu_idx: VcpuStats}`` of these records (:meth:`read`'s)."""
        return _decode(self.raw)[0]


class KvmStatsReader(taskiter.HeldLinks):
    """Reads each QEMU's vCPUs' :class:`VcpuStats` with BPF.

    One iterator link per QEMU process, made at its first reading and held
    until :meth:`forget`, :meth:`retain` or :meth:`close` releases it (as
    :class:`~vsmtio_agent.linux.taskiter.TaskIterReader` holds its own).
    Raises :class:`Unavailable` if the program does not load (no KVM or no
    BTF for it, no BPF) or cannot be attached to a process (this one is
    tried).
    """

    def __init__(self, threads=None):
        """Load the iterator, and try it on this process.

        ``threads``: the :class:`~vsmtio_agent.linux.taskiter.TaskIterReader`
        whose ``begin`` reads each period's vCPU files in its run (where
        it can); a process it did not read is read here.
        """
        self._threads = threads
        if _taskiter is None:
            raise Unavailable('the BPF extension (vsmtio_agent.linux.'
                              '_taskiter) was not built: it needs clang and '
                              'libbpf (libbpf-dev) at install time (%s)'
                              % _NOT_BUILT)
        try:
            self._program = _taskiter.Program('kvm')
        except OSError as exc:
            raise Unavailable(
                'the BPF iterator of KVM\'s vCPU files does not load: %s '
                '(it needs CAP_BPF and CAP_PERFMON, and KVM with its BTF: '
                '/sys/kernel/btf/vmlinux or, with KVM a module, the kvm '
                'module loaded and /sys/kernel/btf/kvm)' % exc)
        except TypeError as exc:    # an extension built before kvmstats
            raise Unavailable('the BPF extension was built without the '
                              'KVM statistics\' iterator (%s): rebuild it'
                              % exc)
        self._links = {}    # pid -> link
        try:
            link = self._program.attach(os.getpid())
            try:
                self._program.read_raw(link)
            finally:
                self._program.detach(link)
        except OSError as exc:
            self.close()
            raise Unavailable('a BPF task_file iterator cannot be attached '
                              'to a process: %s (it needs Linux >= 6.1)'
                              % exc)

    def read(self, pid):
        """``{vcpu_idx: VcpuStats}`` of process ``pid``'s vCPU files.

        ``vcpu_idx`` is KVM's creation order, QEMU's vCPU index. ``{}``
        for a process without vCPU files or that is gone (the kernel takes
        a link to any pid and then finds no such process), or for ``pid``
        None (a domain whose QEMU was not found).
        """
        return self.read_all(pid)[0]

    def read_all(self, pid):
        """:meth:`read`'s statistics and each vCPU's thread's counters.

        ``({vcpu_idx: VcpuStats}, tids, counters)`` from one iteration:
        ``tids[i]`` is the id of the thread that runs vCPU ``i`` (as procfs
        gives it in the agent's pid namespace) and ``counters[i]`` its
        :class:`~vsmtio_agent.linux.procfs.ThreadCounters`, those
        :class:`~vsmtio_agent.linux.taskiter.TaskIterReader` gives for that
        thread (the same kernel fields, read the same way); both None for
        a vCPU whose thread is not known or visible: KVM knows it from the
        vCPU's first ``KVM_RUN`` on, and it must be alive and in the
        agent's pid namespace.
        """
        return _decode(self._raw(pid))

    def read_vcpus(self, pid, counters, patched, known=None):
        """One iteration, decoded in C for the libvirt driver's sampler.

        A :class:`Reading`: the tids of :meth:`read_all`, and each vCPU's
        counters as a ``counters`` tuple (``model.VcpuCounters``) that the
        sampler would build from :meth:`read_all`'s statistics and thread
        counters (``sampling._with_kvm``, by the retention rule of a
        ``patched`` kernel or a stock one), without a Python call per
        vCPU; the records themselves for :meth:`Reading.stats`.
        ``known`` (a list by vCPU index of the thread ids the caller
        found) lends the tids its ints where they are the same.
        """
        raw = self._raw(pid)
        tids, vcpus = _taskiter.vcpus(raw, counters, patched, known)
        return Reading(tids, vcpus, raw)

    def _raw(self, pid):
        """One iteration's records for ``pid`` (none: ``b''``)."""
        if pid is None:
            return b''
        if self._threads is not None:
            raw = self._threads.take_vcpus(pid)
            if raw is not None:
                self._read_without_link(pid)
                return raw
        link = self._link(pid)
        if link is None:
            return b''
        return self._program.read_raw(link)

    def forget(self, pid):
        """Release the link of ``pid``, if held."""
        self._release(pid)
