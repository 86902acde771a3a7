"""Sampling every running domain's vCPUs: libvirt stats, procfs, perf.

Each vCPU thread's own counters (run time, run-queue delay, switch counts,
last CPU: :mod:`vsmtio_agent.linux.procfs`) come first. The running domains
are those tracked until libvirt's lifecycle events (or, without events,
their ids listed each period) say they changed; ``getAllDomainStats`` is
called only then, or when a group of statistics is needed
(:meth:`~vsmtio_agent.drivers.libvirt.domains.Domains.running`). KVM's
per-vCPU halt statistics of kvm domains come from a BPF iterator over each
QEMU's vCPU files (:mod:`vsmtio_agent.linux.kvmstats`) where the vCPU
threads are read with BPF too, else from that call's vCPU group, which then
also gives their vCPUs' number, and its run time and delay stand in for a
thread that could not be read. The BPF read of a QEMU's vCPU files carries
each vCPU thread's own counters too: a kvm domain whose every vCPU has them
is read with that one read, and its threads are not read again. Where no
domain needs it, the vCPU group is not asked for (:meth:`Sampler.sample`
says what it costs libvirtd). The thread's run time is the scheduler's,
in nanoseconds (``schedstat``); libvirt's ``vcpu.N.time`` is the thread's
user and system time from ``/proc/.../stat``, in clock ticks (10 ms at the
usual USER_HZ of 100): a tenth of the agent's default period.
Instructions come from perf where the host has a PMU. Sampling writes
nothing to the host.
"""

import itertools
import operator
import time

import libvirt
from oslo_log import log as logging

from vsmtio_agent.actuators import libvirt_errors
from vsmtio_agent.drivers import base
from vsmtio_agent.linux import kvmstats
from vsmtio_agent.linux import perf
from vsmtio_agent.linux import procfs
from vsmtio_agent.linux import taskiter
from vsmtio_agent import model

LOG = logging.getLogger(__name__)

# KVM's per-vCPU binary statistics as libvirt names them for kvm domains:
# the patched kernel's retention counters (ABI.rst), stock halt polling.
PATCHED_STATS = {'retention_ns': 'retention_ns.sum',
                 'retentions': 'retentions.sum',
                 'retention_timeouts': 'retention_timeouts.sum'}
_KVM_POLL_NS = ('halt_poll_success_ns.sum', 'halt_poll_fail_ns.sum')
_KVM_POLLS = 'halt_attempted_poll.sum'
_KVM_POLL_HITS = 'halt_successful_poll.sum'
# VcpuCounters' retention fields, in their order
_RETENTION_FIELDS = ('retention_ns', 'retentions', 'retention_timeouts')
_NO_COUNTERS = procfs.ThreadCounters()
_EMPTY = {}     # never modified: no virDomainGetVcpus figures
# VcpuCounters._make without its length check (the layout is fixed here)
_counters, _VcpuCounters = tuple.__new__, model.VcpuCounters
# (and the layout kvmstats' C decoding builds: _records.c)
assert _VcpuCounters._fields == (
    'weight', 'cpu', 'run_ns', 'retention_ns', 'retentions',
    'retention_timeouts', 'instructions', 'cycles', 'base_cycles',
    'miss_cycles', 'voluntary_switches', 'involuntary_switches',
    'runqueue_delay_ns', 'halts', 'switches_ns')
# a thread's run time and CPU in its ThreadCounters (looked for in C)
_RUN_NS, _CPU = operator.itemgetter(0), operator.itemgetter(4)
_KEYS = []      # per vCPU index: its stats keys (time, delay, halts, prefix)


def _from_thread(run_ns, runqueue_delay_ns, voluntary_switches,
                 involuntary_switches, cpu, switches_ns):
    """The counters of a vCPU that has only its thread's.

    A domain without KVM's statistics (not kvm, or no vCPU group) on a
    host without perf counters, whose every vCPU thread gave its run time
    and CPU: what :meth:`Sampler._vcpu_counters` builds for each of them,
    without its look-ups for the figures no source has.
    """
    return _counters(_VcpuCounters, (
        1024, cpu, run_ns,
        None, None, None,           # no retention counters
        None, None, None, None,     # no perf counters
        voluntary_switches, involuntary_switches, runqueue_delay_ns,
        None,                       # no halts
        switches_ns))


# _from_thread's counters, built by the BPF reader in C (taskiter.Shape)
_THREAD_ONLY = taskiter.Shape.of(_from_thread(*procfs.ThreadCounters()))


def _retention(kernel_patched, patched, poll_ns, polls, hits):
    """(retention_ns, retentions, retention_timeouts) of a kvm vCPU.

    One rule for KVM's statistics from either source, libvirt's vCPU
    group or BPF (:mod:`vsmtio_agent.linux.kvmstats`): the patched
    kernel's counters (``patched``, in that order) on a patched kernel,
    else halt polling. On a stock host a halted vCPU that polls keeps its
    hyperthread (and its context) as a retaining vCPU would: the time it
    polled (``poll_ns``, successful and failed) and its polls, of which
    those that end without a wake-up (attempted less successful) are the
    timeouts. A counter a source lacks is None (missing, not zero), and
    so is what is built on it.
    """
    if kernel_patched:
        return patched
    return (None if None in poll_ns else sum(poll_ns), polls,
            None if polls is None or hits is None else polls - hits)


def _kvm_retention(kernel_patched, kvm):
    """:func:`_retention` of a :class:`kvmstats.VcpuStats` (BPF's)."""
    return _retention(
        kernel_patched,
        (kvm.retention_ns, kvm.retentions, kvm.retention_timeouts),
        (kvm.halt_poll_success_ns, kvm.halt_poll_fail_ns),
        kvm.halt_attempted_poll, kvm.halt_successful_poll)


def _with_kvm(thread, kvm, kernel_patched):
    """:func:`_from_thread` with KVM's statistics read with BPF."""
    (run_ns, runqueue_delay_ns, voluntary_switches, involuntary_switches,
     cpu, switches_ns) = thread
    return _counters(_VcpuCounters, (
        1024, cpu, run_ns) + _kvm_retention(kernel_patched, kvm) + (
        None, None, None, None,     # no perf counters
        voluntary_switches, involuntary_switches, runqueue_delay_ns,
        kvm.halt_exits, switches_ns))


def _keys(nvcpus):
    """The stats keys of vCPUs 0..nvcpus-1, built once per index."""
    for index in range(len(_KEYS), nvcpus):
        prefix = 'vcpu.%d.' % index
        _KEYS.append((prefix + 'time', prefix + 'delay',
                      prefix + 'halt_exits.sum', prefix))
    return _KEYS


class Sampler:
    """Builds one :class:`~vsmtio_agent.model.Snapshot` per period."""

    def __init__(self, connection, domains, procfs_root, patched, forget,
                 switch_read_periods=1, thread_reader='auto'):
        """``forget(uuid, why)`` drops a domain that stopped running.

        ``switch_read_periods``: each vCPU thread's switch counts and last
        CPU are read every this many periods, a rotating share of the
        threads each period (:meth:`procfs.ThreadReader.read_many`), but
        every period for a domain with a MIST reservation: MIST's detector
        and its hysteresis count periods of I_cpu, which a late reading
        would shift (a VM protected again soon after its release is held
        twice as long; a late I_cpu can miss that window).

        ``thread_reader``: ``auto``, ``bpf`` or ``procfs``
        (:func:`taskiter.thread_reader`); the BPF reader reads every
        counter every period. :class:`base.HostDriverError` if ``bpf``
        cannot be had.
        """
        self.connection = connection
        self.every = switch_read_periods
        self._turn = 0          # the slow cadence's offset this period
        self._position = 0      # threads read so far this period
        self._reserved = frozenset()    # MIST-reserved, as last period
        self.domains = domains
        self.patched = patched
        self.forget = forget
        self.mist = None        # MIST's host part: block I/O per domain
        try:
            self.reader = taskiter.thread_reader(procfs_root, thread_reader)
        except taskiter.Unavailable as exc:
            raise base.HostDriverError(str(exc))
        # the BPF reader builds a vCPU's counters from its thread's alone
        self._shaped = isinstance(self.reader, taskiter.TaskIterReader)
        # KVM's statistics with BPF where the threads are read with BPF
        # (thread_reader = procfs, or a procfs_root elsewhere, asks for
        # no BPF); else libvirt's vCPU group, saying why (describe()).
        self.kvm, self.kvm_why = None, None
        if isinstance(self.reader, taskiter.TaskIterReader):
            try:
                self.kvm = kvmstats.KvmStatsReader(self.reader)
            except kvmstats.Unavailable as exc:
                self.kvm_why = str(exc)
        else:
            self.kvm_why = ('the vCPU threads are read from procfs (%s)'
                            % getattr(self.reader, 'why', 'procfs'))
        if self.kvm is None:
            LOG.info('KVM\'s vCPU statistics from libvirt\'s vCPU group: %s.',
                     self.kvm_why)
        self._kvm_read = set()  # kvm domains' uuids all read with BPF
        self._refs = {}     # uuid -> its vCPUs' refs, by index
        self._layouts = {}  # uuid -> (tids, nvcpus, found, their tids)
        # per-vCPU instructions: what the guard judges CPU-bound vCPUs by
        self.perf = perf.ThreadCounters('instructions')

    def sample(self):
        conn = self.connection.get()
        # The vCPU group only where it holds what nothing else gives: KVM's
        # halt statistics. For it libvirtd reads three procfs files of each
        # vCPU thread and asks each QEMU over QMP, every call (measured on
        # TCG domains: ~65 us per vCPU and ~0.6 ms per domain of libvirtd's
        # CPU, against ~0.3 ms for the whole call without it). Not for a
        # kvm domain whose vCPUs were all read with BPF last period.
        groups = libvirt.VIR_DOMAIN_STATS_STATE
        if any(entry.kvm and entry.uuid not in self._kvm_read
               for entry in self.domains.values()):
            groups |= libvirt.VIR_DOMAIN_STATS_VCPU
        running = self.domains.running(self.connection, conn, groups)
        now = time.monotonic_ns()
        if self._shaped:
            # every QEMU's threads and KVM vCPUs in one kernel call where
            # the BPF reader can (TaskIterReader.begin), the threads of a
            # kvm domain read with BPF last period aside: KVM's records
            # carry them
            threads, vcpus = [], []
            for entry, _s in running:
                if entry.pid:
                    if entry.kvm and self.kvm is not None:
                        vcpus.append(entry.pid)
                        if entry.uuid in self._kvm_read:
                            continue
                    threads.append(entry.pid)
            self.reader.begin(threads, vcpus)
        seen, vcpus = set(), {}
        self._turn = (self._turn + 1) % self.every
        self._position = self._turn
        for entry, stats in running:
            try:
                seen.add(entry.uuid)
                self._vcpu_counters(entry, stats, now, vcpus)
            except libvirt.libvirtError as exc:
                if exc.get_error_code() not in libvirt_errors.GONE:
                    LOG.warning('Skipping a domain this period: %s',
                                exc.get_error_message())
        for uuid in set(self.domains.entries) - seen:
            self.forget(uuid, 'is no longer running')
        for uuid in set(self._refs) - seen:
            del self._refs[uuid]
        for uuid in set(self._layouts) - seen:
            del self._layouts[uuid]
        self._kvm_read &= seen
        # Files held open for a QEMU that exited or was replaced.
        self.reader.retain({e.pid for e in self.domains.values()})
        if self.kvm is not None:
            self.kvm.retain({e.pid for e in self.domains.values() if e.kvm})
        if self.perf.unavailable is None:   # else it holds no counter
            self.perf.retain({t for e in self.domains.values()
                              for t in e.tids.values()})
        domains = self.mist.domain_counters(conn) if self.mist else {}
        # read their switch counts every period from the next one on
        self._reserved = frozenset(uuid for uuid, d in domains.items()
                                   if d.reservation.reserved)
        return model.Snapshot(time_ns=now, vcpus=vcpus, domains=domains)

    def _vcpu_counters(self, entry, stats, now, out):
        """Add ``{VcpuRef: VcpuCounters}`` of one domain to ``out``.

        This runs for every vCPU every period: the domain's threads are
        read in one call (:meth:`procfs.ThreadReader.read_many`), the stats
        keys and refs are built once per vCPU index and domain, which of
        its vCPUs have a thread once per discovery of its threads, and
        the counters are built positionally, in one tuple where the
        domain has neither KVM's statistics nor perf counters (TCG, or a
        host without a PMU).
        """
        nvcpus = stats.get('vcpu.current')
        cpu_of = time_of = _EMPTY
        if nvcpus is None:
            # Without vCPU stats (a domain that is not kvm, a kvm domain
            # read with BPF, or a driver with none, test:///) the vCPUs
            # are listed with one more call,
            # virDomainGetVcpus: made once per incarnation for their
            # number, and again only in a period where a thread's own
            # counters are missing (below). (Nova does not hot-plug vCPUs;
            # a domain's vCPUs are counted again when it restarts.)
            nvcpus = entry.nvcpus
            if nvcpus is None:
                nvcpus = entry.nvcpus = len(entry.dom.vcpus()[0])
        tids = self.domains.threads_of(entry, nvcpus)
        found, found_tids = self._found(entry.uuid, tids, nvcpus)
        perf = self.perf.read if self.perf.unavailable is None else None
        kvm = entry.kvm
        # (found_tids: what the reading's tids are compared with below,
        # whose ints it reuses where they are the same)
        reading = (self.kvm.read_vcpus(entry.pid, _VcpuCounters,
                                       self.patched, found_tids)
                   if kvm and self.kvm is not None else None)
        if (reading is not None and perf is None and len(found) == nvcpus
                and 'vcpu.current' not in stats
                and reading.tids == found_tids):
            # One read for a kvm domain: each vCPU's record carries the
            # counters of the very thread found for it (not a vCPU that
            # never ran, nor one another thread ran), as the task iterator
            # would give them, and its counters are built from it in C
            # (_with_kvm's, by _retention's rule).
            self._kvm_read.add(entry.uuid)
            out.update(zip(self._refs_of(entry.uuid, nvcpus), reading.vcpus))
            return
        bpf = self._kvm_stats(reading, entry, nvcpus)
        if (self._shaped and not kvm and perf is None
                and len(found) == nvcpus and 'vcpu.current' not in stats):
            # each vCPU's counters are its thread's (_from_thread's), and
            # the BPF reader builds them (it always has run time and CPU)
            read = self.reader.read_many(entry.pid, found_tids,
                                         shape=_THREAD_ONLY)
            if None not in read:
                out.update(zip(self._refs_of(entry.uuid, nvcpus), read))
                return
            # a thread is gone: the general way, with its threads' own
            read = list(map(_THREAD_ONLY.counters, read))
        else:
            every = 1 if entry.uuid in self._reserved else self.every
            read = self.reader.read_many(entry.pid, found_tids, now, every,
                                         self._position)
            self._position += len(found)
        if None in read:    # a thread is gone: rediscover
            entry.tids = {}
        # every vCPU's thread found and read with its run time and CPU
        complete = (len(found) == nvcpus and None not in read
                    and None not in map(_RUN_NS, read)
                    and None not in map(_CPU, read))
        if complete and perf is None and 'vcpu.current' not in stats:
            # nothing to look up: each vCPU's counters are its thread's,
            # and KVM's where every vCPU was read with BPF
            if not kvm:
                out.update(zip(self._refs_of(entry.uuid, nvcpus),
                               itertools.starmap(_from_thread, read)))
                return
            if entry.uuid in self._kvm_read:    # bpf has every vCPU
                out.update(zip(self._refs_of(entry.uuid, nvcpus), map(
                    _with_kvm, read, map(bpf.__getitem__, range(nvcpus)),
                    itertools.repeat(self.patched))))
                return
        if entry.nvcpus is not None and not complete:
            # virDomainGetVcpus's run time and CPU for the vCPUs whose
            # thread did not give them (the thread's counters come first)
            infos = entry.dom.vcpus()[0]
            cpu_of = {number: cpu for number, _s, _t, cpu in infos}
            time_of = {number: cpu_time for number, _s, cpu_time, _c in infos}
        if len(found) == nvcpus:    # found is range(nvcpus)
            threads = read
        else:
            threads = [None] * nvcpus
            for index, counters in zip(found, read):
                threads[index] = counters
        refs = self._refs_of(entry.uuid, nvcpus)
        keys = _keys(nvcpus)
        get = stats.get
        if not entry.kvm and perf is None:
            for index, ref, (k_time, k_delay, k_halts, _p), thread in zip(
                    range(nvcpus), refs, keys, threads):
                (t_run, t_delay, vol, invol, cpu,
                 switches_ns) = thread or _NO_COUNTERS
                out[ref] = _counters(_VcpuCounters, (
                    1024,                                       # weight
                    cpu if cpu is not None else cpu_of.get(index),
                    t_run if t_run is not None
                    else get(k_time, time_of.get(index)),       # run_ns
                    None, None, None,       # no retention counters
                    None, None, None, None,     # no perf counters
                    vol, invol,
                    t_delay if t_delay is not None
                    else get(k_delay),                  # runqueue_delay_ns
                    get(k_halts),                               # halts
                    switches_ns,
                ))
            return
        no_retention = (None, None, None)
        for index in range(nvcpus):
            k_time, k_delay, k_halts, prefix = keys[index]
            (t_run, t_delay, vol, invol, cpu,
             switches_ns) = threads[index] or _NO_COUNTERS
            halts = get(k_halts)
            vcpu = bpf.get(index) if bpf else None
            if vcpu is not None:
                retention = _kvm_retention(self.patched, vcpu)
                halts = vcpu.halt_exits
            elif kvm:
                retention = _retention(
                    self.patched,
                    tuple(get(prefix + PATCHED_STATS[field])
                          for field in _RETENTION_FIELDS),
                    tuple(get(prefix + k) for k in _KVM_POLL_NS),
                    get(prefix + _KVM_POLLS), get(prefix + _KVM_POLL_HITS))
            else:
                retention = no_retention
            out[refs[index]] = _counters(_VcpuCounters, (
                1024,                                           # weight
                cpu if cpu is not None else cpu_of.get(index),
                t_run if t_run is not None
                else get(k_time, time_of.get(index))) + retention + (
                perf(tids[index]) if perf is not None and index in tids
                else None,                                      # instructions
                None, None, None,           # cycles, base and miss cycles
                vol, invol,
                t_delay if t_delay is not None
                else get(k_delay),                      # runqueue_delay_ns
                halts,
                switches_ns,
            ))

    def _kvm_stats(self, reading, entry, nvcpus):
        """KVM's statistics of a kvm domain's vCPUs read with BPF, or None.

        ``{index: kvmstats.VcpuStats}`` of ``reading`` (None: not read
        with BPF). A domain whose vCPUs are not all found (its QEMU not
        found, or gone) has the others from libvirt's vCPU group, asked
        for from the next period on.
        """
        if reading is None:
            return None
        read = reading.stats()
        if read.keys() >= set(range(nvcpus)):
            self._kvm_read.add(entry.uuid)
        else:
            self._kvm_read.discard(entry.uuid)
        return read

    def _found(self, uuid, tids, nvcpus):
        """The indexes below ``nvcpus`` with a thread in ``tids``, and theirs.

        Kept per domain while its ``tids`` (replaced, never changed, on
        each discovery) and ``nvcpus`` stay the same.
        """
        cached = self._layouts.get(uuid)
        if cached is not None and cached[0] is tids and cached[1] == nvcpus:
            return cached[2], cached[3]
        found = [i for i in range(nvcpus) if i in tids]
        found_tids = [tids[i] for i in found]
        self._layouts[uuid] = (tids, nvcpus, found, found_tids)
        return found, found_tids

    def _refs_of(self, uuid, nvcpus):
        """The domain's :class:`~vsmtio_agent.model.VcpuRef` by index."""
        refs = self._refs.get(uuid)
        if refs is None or len(refs) < nvcpus:
            refs = self._refs[uuid] = tuple(model.VcpuRef(uuid, i)
                                            for i in range(nvcpus))
        return refs

    def close(self):
        self.reader.close()
        if self.kvm is not None:
            self.kvm.close()
        self.perf.close()
