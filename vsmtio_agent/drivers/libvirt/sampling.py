"""Sampling every running domain's vCPUs: one snapshot per period.

Each vCPU's scheduler counters come from the configured
:mod:`~vsmtio_agent.drivers.libvirt.vcpu_sources` source (procfs by
default), with libvirt's figures for a vCPU whose thread could not be
read. KVM's per-vCPU halt statistics of kvm domains (halt exits, and the
retention counters: the patched kernel's, or halt polling on a stock one)
come from ``getAllDomainStats``' vCPU group, which is asked for only
where a kvm domain runs or the source needs it: for it libvirtd reads
three procfs files per vCPU thread and asks each QEMU over QMP. The
running domains are those tracked until libvirt's lifecycle events (or,
without events, their ids listed each period) say they changed
(:meth:`~vsmtio_agent.drivers.libvirt.domains.Domains.running`).
Instructions come from perf where the host has a PMU. What each domain
serves (block requests, network packets: :mod:`.served`) comes in the
same call, for every running domain, with the reservation MIST honours
for it. Sampling writes nothing to the host.
"""

import time

import libvirt
from oslo_log import log as logging

from vsmtio_agent.actuators import libvirt_errors
from vsmtio_agent.drivers import base
from vsmtio_agent.drivers.libvirt import served
from vsmtio_agent.drivers.libvirt import vcpu_sources
from vsmtio_agent.linux import perf
from vsmtio_agent import model

LOG = logging.getLogger(__name__)

# KVM's per-vCPU binary statistics as libvirt names them for kvm domains:
# the patched kernel's retention counters (ABI.rst), stock halt polling.
PATCHED_STATS = {'retention_ns': 'retention_ns.sum',
                 'retentions': 'retentions.sum',
                 'retention_timeouts': 'retention_timeouts.sum'}
_RETENTION_FIELDS = ('retention_ns', 'retentions', 'retention_timeouts')
_KVM_POLL_NS = ('halt_poll_success_ns.sum', 'halt_poll_fail_ns.sum')
_KVM_POLLS = 'halt_attempted_poll.sum'
_KVM_POLL_HITS = 'halt_successful_poll.sum'
_HALTS = 'halt_exits.sum'
_NO_KVM = (None, None, None, None)
_NOTHING = vcpu_sources.procfs.ThreadCounters()


def _retention(patched, get, prefix):
    """(retention_ns, retentions, retention_timeouts) of a kvm vCPU.

    From its statistics in libvirt's vCPU group (``get``, with the keys
    of vCPU ``prefix``): the patched kernel's counters on a patched
    kernel, else halt polling. On a stock host a halted vCPU that polls
    keeps its hyperthread (and its context) as a retaining vCPU would: the
    time it polled (successful and failed) and its polls, of which those
    that end without a wake-up (attempted less successful) are the
    timeouts. A counter missing is None (missing, not zero), and so is
    what is built on it.
    """
    if patched:
        return tuple(get(prefix + PATCHED_STATS[field])
                     for field in _RETENTION_FIELDS)
    poll_ns = [get(prefix + key) for key in _KVM_POLL_NS]
    polls, hits = get(prefix + _KVM_POLLS), get(prefix + _KVM_POLL_HITS)
    return (None if None in poll_ns else sum(poll_ns), polls,
            None if polls is None or hits is None else polls - hits)


def _kvm_counters(stats, nvcpus, kvm, patched):
    """Each vCPU's (retention_ns, retentions, retention_timeouts, halts).

    From libvirt's vCPU group; retention only for a kvm domain.
    """
    if not stats:
        return [_NO_KVM] * nvcpus
    out = []
    for index in range(nvcpus):
        prefix = 'vcpu.%d.' % index
        retention = (_retention(patched, stats.get, prefix) if kvm
                     else _NO_KVM[:3])
        out.append(retention + (stats.get(prefix + _HALTS),))
    return out


class Sampler:
    """Builds one :class:`~vsmtio_agent.model.Snapshot` per period."""

    def __init__(self, connection, domains, procfs_root, patched, forget,
                 switch_read_periods=1, vcpu_source='procfs',
                 served_stats=True):
        """``forget(uuid, why)`` drops a domain that stopped running.

        ``vcpu_source``: ``procfs`` (its switch counts on a cadence of
        ``switch_read_periods``) or ``libvirt``
        (:mod:`~vsmtio_agent.drivers.libvirt.vcpu_sources`).
        ``served_stats``: whether each period's call asks for every
        domain's block and interface statistics (MIST's domains need them
        whatever it says).
        """
        self.connection = connection
        self.domains = domains
        self.patched = patched
        self.forget = forget
        self.served_stats = served_stats
        self.mist = None        # MIST's host part: reservations
        # whether libvirt fences VMs by core scheduling (the driver's)
        self.core_scheduling = None
        self.libvirt = vcpu_sources.LibvirtSource()
        if vcpu_source == 'procfs':
            self.source = vcpu_sources.ProcfsSource(
                domains, procfs_root, switch_read_periods)
        elif vcpu_source == 'libvirt':
            self.source = self.libvirt
        else:
            raise base.HostDriverError('unknown vcpu_source %r (one of %s)'
                                       % (vcpu_source,
                                          ', '.join(vcpu_sources.NAMES)))
        self._reserved = frozenset()    # MIST-reserved, as last period
        self._refs = {}     # uuid -> its vCPUs' refs, by index
        # per-vCPU instructions: what the guard judges CPU-bound vCPUs by
        self.perf = perf.ThreadCounters('instructions')

    def sample(self):
        """The running domains' vCPU counters now, and MIST's domains'."""
        conn = self.connection.get()
        groups = libvirt.VIR_DOMAIN_STATS_STATE
        if self.served_stats or self.mist is not None:
            groups |= served.GROUPS
        if self.source.vcpu_group or any(
                entry.kvm for entry in self.domains.values()):
            groups |= libvirt.VIR_DOMAIN_STATS_VCPU
        running = self.domains.running(self.connection, conn, groups)
        now = time.monotonic_ns()
        self.source.begin(self._reserved)
        vcpus = {}
        for entry, stats in running:
            try:
                vcpus.update(self._domain_vcpus(entry, stats, now))
            except libvirt.libvirtError as exc:
                if exc.get_error_code() not in libvirt_errors.GONE:
                    LOG.warning('Skipping a domain this period: %s',
                                exc.get_error_message())
        self._retain({entry.uuid for entry, _stats in running})
        domains = (self._served(running) if groups & served.GROUPS
                   else {})
        # their switch counts are read every period from the next one on
        self._reserved = frozenset(uuid for uuid, d in domains.items()
                                   if d.reservation.reserved)
        return model.Snapshot(
            time_ns=now, vcpus=vcpus, domains=domains,
            tenancy={entry.uuid: entry.tenancy for entry, _s in running},
            core_scheduling=self.core_scheduling)

    def _served(self, running):
        """``{uuid: DomainCounters}`` of every running domain.

        A domain whose record lacks a group has ``None`` for its figures.
        """
        mist = self.mist
        if mist is None:
            return {entry.uuid: served.counters(stats)
                    for entry, stats in running}
        return {entry.uuid: served.counters(stats, mist.reservation(entry))
                for entry, stats in running}

    def _retain(self, running):
        """Forget what is kept for domains no longer in ``running``."""
        for uuid in set(self.domains.entries) - running:
            self.forget(uuid, 'is no longer running')
        for uuid in set(self._refs) - running:
            del self._refs[uuid]
        if self.mist is not None:
            self.mist.retain(running)
        # files held open for a QEMU that exited or was replaced
        self.source.retain({e.pid for e in self.domains.values()})
        if self.perf.unavailable is None:   # else it holds no counter
            self.perf.retain({t for e in self.domains.values()
                              for t in e.tids.values()})

    def _nvcpus(self, entry, stats):
        """The domain's vCPU count: the vCPU group's, else listed once.

        Without the vCPU group (no kvm domain, or a driver with none,
        test:///) the vCPUs are listed with virDomainGetVcpus once per
        incarnation (nova does not hot-plug vCPUs; a domain's vCPUs are
        counted again when it restarts).
        """
        nvcpus = stats.get('vcpu.current')
        if nvcpus is None:
            if entry.nvcpus is None:
                entry.nvcpus = len(entry.dom.vcpus()[0])
            nvcpus = entry.nvcpus
        return nvcpus

    def _domain_vcpus(self, entry, stats, now):
        """``{VcpuRef: VcpuCounters}`` of one domain's vCPUs."""
        nvcpus = self._nvcpus(entry, stats)
        threads = self.source.read(entry, stats, nvcpus, now)
        if (self.source is not self.libvirt
                and not all(map(vcpu_sources.complete, threads))):
            # libvirt's run time, delay and CPU where a thread lacks them
            threads = list(map(vcpu_sources.with_fallback, threads,
                               self.libvirt.read(entry, stats, nvcpus, now)))
        kvm = _kvm_counters(stats, nvcpus, entry.kvm, self.patched)
        instructions = self._instructions(entry, nvcpus)
        return {ref: model.VcpuCounters(
            1024,                               # weight
            thread.cpu, thread.run_ns,
            retention_ns, retentions, timeouts,
            ins, None, None, None,      # no cycles, base or miss cycles
            thread.voluntary_switches, thread.involuntary_switches,
            thread.runqueue_delay_ns, halts, thread.switches_ns)
            for ref, thread, (retention_ns, retentions, timeouts, halts), ins
            in zip(self._refs_of(entry.uuid, nvcpus),
                   [t or _NOTHING for t in threads], kvm, instructions)}

    def _instructions(self, entry, nvcpus):
        """Each vCPU's retired instructions (perf), None where not had."""
        if self.perf.unavailable is not None:
            return [None] * nvcpus
        tids = self.domains.threads_of(entry, nvcpus)
        return [self.perf.read(tids[index]) if index in tids else None
                for index in range(nvcpus)]

    def _refs_of(self, uuid, nvcpus):
        """The domain's :class:`~vsmtio_agent.model.VcpuRef` by index."""
        refs = self._refs.get(uuid)
        if refs is None or len(refs) < nvcpus:
            refs = self._refs[uuid] = tuple(model.VcpuRef(uuid, i)
                                            for i in range(nvcpus))
        return refs

    def close(self):
        self.source.close()
        self.perf.close()
