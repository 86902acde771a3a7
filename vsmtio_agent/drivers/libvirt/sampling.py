"""Sampling every running domain's vCPUs: libvirt stats, procfs, perf.

One ``getAllDomainStats`` call per period gives each vCPU's run time and
run-queue delay (and, for kvm domains, KVM's halt statistics); each vCPU
thread's switch counts and last CPU come from procfs, its instructions
from perf where the host has a PMU. Sampling writes nothing to the host.
"""

import time

import libvirt
from oslo_log import log as logging

from vsmtio_agent.actuators import libvirt_errors
from vsmtio_agent.drivers import base
from vsmtio_agent.linux import perf
from vsmtio_agent.linux import procfs
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
_NO_COUNTERS = procfs.ThreadCounters()
_NO_RETENTION = {}   # never modified: a vCPU of a TCG domain has none


class Sampler:
    """Builds one :class:`~vsmtio_agent.model.Snapshot` per period."""

    def __init__(self, connection, domains, procfs_root, patched, forget):
        """``forget(uuid, why)`` drops a domain that stopped running."""
        self.connection = connection
        self.domains = domains
        self.patched = patched
        self.forget = forget
        self.reader = procfs.ThreadReader(procfs_root)
        # per-vCPU instructions: what the guard judges CPU-bound vCPUs by
        self.perf = perf.ThreadCounters('instructions')

    def sample(self):
        conn = self.connection.get()
        flags = libvirt.VIR_CONNECT_GET_ALL_DOMAINS_STATS_ACTIVE
        try:
            records = conn.getAllDomainStats(
                libvirt.VIR_DOMAIN_STATS_STATE | libvirt.VIR_DOMAIN_STATS_VCPU,
                flags)
        except libvirt.libvirtError as exc:
            if self.connection.lost(exc):
                raise base.HostDriverError('libvirt connection lost: %s'
                                           % exc.get_error_message())
            raise base.HostDriverError('getAllDomainStats failed: %s'
                                       % exc.get_error_message())
        now = time.monotonic_ns()
        seen, vcpus = set(), {}
        for dom, stats in records:
            try:
                entry = self.domains.track(dom)
                seen.add(entry.uuid)
                vcpus.update(self._vcpu_counters(entry, stats))
            except libvirt.libvirtError as exc:
                if exc.get_error_code() not in libvirt_errors.GONE:
                    LOG.warning('Skipping a domain this period: %s',
                                exc.get_error_message())
        for uuid in set(self.domains.entries) - seen:
            self.forget(uuid, 'is no longer running')
        # Files held open for a QEMU that exited or was replaced.
        self.reader.retain({e.pid for e in self.domains.values()})
        self.perf.retain({t for e in self.domains.values()
                          for t in e.tids.values()})
        return model.Snapshot(time_ns=now, vcpus=vcpus)

    def _vcpu_counters(self, entry, stats):
        nvcpus = stats.get('vcpu.current')
        cpu_of, time_of = {}, {}
        if nvcpus is None:
            # Drivers without vCPU stats (test:///) still list vCPUs.
            infos = entry.dom.vcpus()[0]
            nvcpus = len(infos)
            for number, _state, cpu_time, cpu in infos:
                cpu_of[number], time_of[number] = cpu, cpu_time
        tids = self.domains.threads_of(entry, nvcpus)
        out = {}
        for index in range(nvcpus):
            prefix = 'vcpu.%d.' % index
            thread = None
            if index in tids:
                thread = self.reader.read(
                    entry.pid, tids[index],
                    schedstat=prefix + 'delay' not in stats)
                if thread is None:  # the thread is gone: rediscover
                    entry.tids = {}
            thread = thread or _NO_COUNTERS
            run_ns = stats.get(prefix + 'time', time_of.get(index))
            delay = stats.get(prefix + 'delay', thread.runqueue_delay_ns)
            retention = (self._retention(entry, stats, prefix)
                         if entry.kvm else _NO_RETENTION)
            instructions = (self.perf.read(tids[index]) if index in tids
                            else None)
            out[model.VcpuRef(entry.uuid, index)] = model.VcpuCounters(
                instructions=instructions,
                halts=stats.get(prefix + 'halt_exits.sum'),
                cpu=thread.cpu if thread.cpu is not None
                else cpu_of.get(index),
                run_ns=run_ns if run_ns is not None else thread.run_ns,
                voluntary_switches=thread.voluntary_switches,
                involuntary_switches=thread.involuntary_switches,
                runqueue_delay_ns=delay,
                **retention)
        return out

    def _retention(self, entry, stats, prefix):
        """Retention counters: the patched kernel's, else halt polling.

        On a stock host a halted vCPU that polls keeps its hyperthread (and
        its context) as a retaining vCPU would, and polls that end without
        a wake-up are the timeouts. TCG domains have no such statistics:
        missing, not zero.
        """
        if not entry.kvm:
            return _NO_RETENTION
        if self.patched:
            return {field: stats[prefix + key]
                    for field, key in PATCHED_STATS.items()
                    if prefix + key in stats}
        poll_ns = [stats.get(prefix + k) for k in _KVM_POLL_NS]
        polls = stats.get(prefix + _KVM_POLLS)
        hits = stats.get(prefix + _KVM_POLL_HITS)
        out = {}
        if None not in poll_ns:
            out['retention_ns'] = sum(poll_ns)
        if polls is not None:
            out['retentions'] = polls
            if hits is not None:
                out['retention_timeouts'] = polls - hits
        return out

    def close(self):
        self.reader.close()
        self.perf.close()
