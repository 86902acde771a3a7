"""MIST on a libvirt host: what it measures and how it protects.

The libvirt driver hands this class two jobs:

* **measure** (:meth:`MistHost.domain_counters`): each running domain's
  cumulative block I/O (libvirt block statistics, summed over its disks)
  and the reservation its flavor holds, read from the nova metadata nova
  writes into the domain XML (``<nova:extraSpecs>``) and capped at what
  placement admitted (:func:`vsmtio_contract.io_reservation.honoured`);
* **protect** (:meth:`MistHost.apply`) the domains in the policy's
  protection set, and release the others, through actuators that record
  every original before they change it (``vsmtio_agent.actuators``):

  - CPU: the domain's vCPU threads to SCHED_RR
    (:mod:`~vsmtio_agent.actuators.rt`), with the real-time runtime of
    their cgroups granted and bounded where the host has RT group
    scheduling; where the host grants no bounded RT runtime, the fallback
    multiplies the domain's cpu shares;
  - block I/O: the domain's ``blkiotune`` weight;
  - interrupts: block-device and network IRQs on disjoint host CPUs while
    any domain is protected (:func:`vsmtio_agent.policy.mist.irq_plan`).

A mechanism the host refuses (permission, unsupported) is reported once
and not tried again. :meth:`restore` puts everything back: at stop, after
a crash (:meth:`recover`), and whenever a domain leaves the set.
"""

import os
from xml.etree import ElementTree

import libvirt
from oslo_log import log as logging

from vsmtio_agent.actuators import actuator_record
from vsmtio_agent.actuators import attempt
from vsmtio_agent.actuators import base as act_base
from vsmtio_agent.actuators import checkpoint
from vsmtio_agent.actuators import domain as domain_act
from vsmtio_agent.actuators import irq as irq_act
from vsmtio_agent.actuators import rt
from vsmtio_agent.linux import topology
from vsmtio_agent import model
from vsmtio_agent.policy import mist
from vsmtio_contract import io_reservation

LOG = logging.getLogger(__name__)

NOVA_NS = 'http://openstack.org/xmlns/libvirt/nova/1.1'
_SPEC = ('./{%(ns)s}instance/{%(ns)s}flavor/{%(ns)s}extraSpecs/'
         '{%(ns)s}extraSpec' % {'ns': NOVA_NS})
CPU, BLKIO, IRQ = 'cpu', 'blkio', 'irq'


def flavor_extra_specs(xml_text):
    """The flavor extra specs nova wrote into a domain's metadata."""
    root = ElementTree.fromstring(xml_text)
    meta = root.find('metadata')
    if meta is None:
        return {}
    return {e.get('name'): (e.text or '') for e in meta.findall(_SPEC)
            if e.get('name')}


def block_totals(stats):
    """(requests, bytes) summed over a domain's disks, or (None, None)."""
    count = stats.get('block.count')
    if count is None:
        return None, None
    reqs = nbytes = 0
    for i in range(count):
        p = 'block.%d.' % i
        try:
            reqs += stats[p + 'rd.reqs'] + stats[p + 'wr.reqs']
            nbytes += stats[p + 'rd.bytes'] + stats[p + 'wr.bytes']
        except KeyError:
            return None, None
    return reqs, nbytes


class Meter(object):
    """Block I/O and the admitted reservation of every running domain."""

    def __init__(self):
        self._reservations = {}     # uuid -> (domain id, Reservation)

    def reservation(self, dom):
        """The domain's honoured :class:`~vsmtio_agent.model.Reservation`."""
        uuid, dom_id = dom.UUIDString(), dom.ID()
        cached = self._reservations.get(uuid)
        if cached is not None and cached[0] == dom_id:
            return cached[1]
        try:
            specs = flavor_extra_specs(dom.XMLDesc(0))
        except (libvirt.libvirtError, ElementTree.ParseError) as exc:
            LOG.warning('Cannot read the flavor of %s: %s', uuid, exc)
            specs = {}
        iops, bps, problems = io_reservation.honoured(specs)
        for problem in problems:
            LOG.warning('Domain %s (%s): %s', dom.name(), uuid, problem)
        res = model.Reservation(iops=iops, bytes_per_s=bps)
        self._reservations[uuid] = (dom_id, res)
        return res

    def domain_counters(self, conn):
        """``{uuid: DomainCounters}`` of every running domain."""
        try:
            records = conn.getAllDomainStats(
                libvirt.VIR_DOMAIN_STATS_BLOCK,
                libvirt.VIR_CONNECT_GET_ALL_DOMAINS_STATS_ACTIVE)
        except libvirt.libvirtError as exc:
            LOG.warning('No block statistics this period: %s',
                        exc.get_error_message())
            return {}
        out = {}
        for dom, stats in records:
            try:
                res = self.reservation(dom)
                uuid = dom.UUIDString()
            except libvirt.libvirtError:
                continue
            reqs, nbytes = block_totals(stats)
            out[uuid] = model.DomainCounters(io_requests=reqs,
                                             io_bytes=nbytes,
                                             reservation=res)
        live = set(out)
        for uuid in set(self._reservations) - live:
            del self._reservations[uuid]
        return out


class MistHost(object):
    """Measures reserved domains and applies MIST's protection set."""

    def __init__(self, opts, lookup, record=None, shares_held=None):
        """Build the actuators over ``record`` (default: a file record).

        ``lookup(uuid)`` gives a virDomain; ``shares_held(uuid)`` says
        whether the RASS side holds that domain's cpu shares (then MIST's
        fallback leaves them alone: one writer per knob).
        """
        self.opts = opts
        self.record = record or actuator_record.FileRecord(
            opts.checkpoint_path + '.actuators.json',
            checkpoint.boot_id(opts.procfs_root))
        self.policy = rt.ThreadPolicy(self.record, opts.procfs_root)
        self.cgroup_root = os.path.join(opts.sysfs_root, 'fs/cgroup')
        controller = rt.cpu_controller_root(self.cgroup_root)
        self.runtime = (rt.CgroupRtRuntime(self.record, controller)
                        if controller else None)
        self.blkio = domain_act.BlkioWeight(self.record, lookup)
        self.shares = domain_act.CpuShares(self.record, lookup)
        self.irq = irq_act.IrqAffinity(self.record, opts.procfs_root)
        self.shares_held = shares_held or (lambda uuid: False)
        self.unsupported = {}       # mechanism -> why it is not tried
        self.protected = {}         # uuid -> {'cpu': 'rt'|'shares', ...}
        self._threads = {}          # uuid -> {thread key: cgroup or None}
        self.meter = Meter()
        self._irq_refused = set()

    def domain_counters(self, conn):
        """``{uuid: DomainCounters}`` of every running domain."""
        return self.meter.domain_counters(conn)

    # -- protecting --------------------------------------------------------

    def apply(self, protect, domains, log):
        """Protect the domains in ``protect`` and release the others.

        ``domains`` is the driver's ``{uuid: _Domain}`` (pid, vCPU tids,
        name); ``log`` the driver's :class:`~vsmtio_agent.drivers.libvirt.
        applylog.ApplyLog` of this apply.
        """
        for uuid in sorted(set(self.protected) - set(protect)):
            entry = domains.get(uuid)
            LOG.info('MIST: releasing %s (%s): no longer needs protection',
                     getattr(entry, 'name', '?'), uuid)
            self._release(uuid, log)
        for uuid, verdict in sorted(protect.items()):
            entry = domains.get(uuid)
            if entry is None:
                continue
            if uuid not in self.protected:
                LOG.info('MIST: protecting %s (%s): %s', entry.name, uuid,
                         verdict.reason)
                self.protected[uuid] = {}
            self._protect_cpu(entry, log)
            self._protect_blkio(entry, log)
        self._interrupts(bool(self.protected), log)

    def _refuse(self, mechanism, why, log):
        if mechanism not in self.unsupported:
            self.unsupported[mechanism] = why
            LOG.warning('MIST: %s protection unavailable: %s', mechanism,
                        why)
        log.note('MIST %s: %s' % (mechanism, why))

    def _protect_cpu(self, entry, log):
        held = self.protected[entry.uuid]
        if held.get(CPU) == 'shares' or (CPU in self.unsupported
                                         and held.get(CPU) != 'rt'):
            return
        why = None
        if entry.pid and entry.tids:
            try:
                # every period: a vCPU thread may have been added
                self._rt_threads(entry, log)
                held[CPU] = 'rt'
                return
            except act_base.ActuatorError as exc:
                why = str(exc)
                log.fail()
                held.pop(CPU, None)
                self._release_threads(entry.uuid, log)
        else:
            why = 'vCPU threads of %s not found' % entry.name
        self._shares_fallback(entry, why, log)

    def _thread_ids(self, entry):
        if self.opts.mist_rt_threads == 'vcpus':
            return sorted(entry.tids.values())
        try:
            return sorted(int(t) for t in os.listdir(os.path.join(
                self.opts.procfs_root, str(entry.pid), 'task')))
        except OSError as exc:
            raise act_base.ActuatorError('threads of %s: %s'
                                         % (entry.name, exc))

    def _rt_threads(self, entry, log):
        """SCHED_RR for the domain's threads, granting runtime first.

        Threads get ``SCHED_RESET_ON_FORK``: a thread QEMU starts later
        (its I/O worker pool) begins in CFS and is raised at the next
        period, and none outlives a release at real-time priority.
        """
        threads = self._threads.setdefault(entry.uuid, {})
        keys = {}
        for tid in self._thread_ids(entry):
            keys['%d/%d' % (entry.pid, tid)] = rt.cpu_cgroup(
                self.opts.procfs_root, entry.pid, tid)
        first = next(iter(keys.values()), None)
        mode, why = rt.rt_mode(self.opts.procfs_root, self.cgroup_root,
                               first)
        if mode is None:
            raise act_base.ActuatorError(why)
        threads.update(keys)
        if mode == 'group':
            self._grant()
        want = {'policy': os.SCHED_RR | os.SCHED_RESET_ON_FORK,
                'priority': self.opts.mist_rt_priority}
        for key in sorted(keys):
            try:
                now = self.policy.read(key)
            except act_base.ActuatorError:
                if self.opts.mist_rt_threads == 'all':
                    threads.pop(key, None)
                    continue    # a worker thread that has just exited
                raise
            if (now['policy'], now['priority']) != (want['policy'],
                                                    want['priority']):
                attempt.write(self.policy, key, want)
                log.done()

    def _grant(self):
        """RT runtime for every protected vCPU cgroup, top-down."""
        if self.runtime is None:
            raise act_base.ActuatorError('no cgroup v1 cpu controller under '
                                         '%s' % self.cgroup_root)
        leaves = sorted({cg for threads in self._threads.values()
                         for cg in threads.values() if cg})
        # groups no longer needed go back first, children before parents
        needed = {a for leaf in leaves for a in rt.ancestors(leaf)}
        needed.update(leaves)
        for key in sorted(set(self.record.keys(self.runtime.kind)) - needed,
                          key=lambda k: (-k.count('/'), k)):
            self.runtime.restore(key)
        for group, value in rt.grants(self.runtime, leaves,
                                      self.opts.mist_rt_runtime_us):
            if self.runtime.read(group) != value:
                attempt.write(self.runtime, group, value)

    def _release_threads(self, uuid, log):
        """Threads back to their policy, then unneeded runtime back.

        What fails stays recorded for the next restore.
        """
        for key in sorted(self._threads.pop(uuid, {})):
            try:
                self.policy.restore(key)
            except act_base.ActuatorError as exc:
                log.note('MIST release: %s' % exc)
        if self.runtime is not None and self.record.keys(self.runtime.kind):
            try:
                self._grant()
            except act_base.ActuatorError as exc:
                log.note('MIST release: %s' % exc)

    def _shares_fallback(self, entry, why, log):
        held = self.protected[entry.uuid]
        factor = self.opts.mist_cpu_shares_factor
        if factor == 1:
            self._refuse(CPU, '%s; the shares fallback is off' % why,
                         log)
            return
        if self.shares_held(entry.uuid):
            log.note('MIST cpu: %s; its cpu shares are the RASS '
                     'split\'s (already raised)' % entry.name)
            return
        try:
            original = self.shares.read(entry.uuid)['value']
            if self.shares.set(entry.uuid,
                               min(int(round(original * factor)), 10000)):
                log.done()
            held[CPU] = 'shares'
            LOG.info('MIST: %s gets %.1fx cpu shares instead of real-time '
                     'priority: %s', entry.name, factor, why)
        except act_base.ActuatorError as exc:
            log.fail()
            if exc.denied:
                self._refuse(CPU, '%s; cpu shares: %s' % (why, exc),
                             log)
            else:
                log.note('MIST cpu: %s' % exc)

    def _protect_blkio(self, entry, log):
        if BLKIO in self.unsupported:
            return
        try:
            if self.blkio.set(entry.uuid, self.opts.mist_blkio_weight):
                log.done()
            self.protected[entry.uuid][BLKIO] = True
        except act_base.ActuatorError as exc:
            log.fail()
            if exc.denied:
                self._refuse(BLKIO, str(exc), log)
            else:
                log.note('MIST blkio: %s' % exc)

    def _release(self, uuid, log):
        self.protected.pop(uuid, None)
        self._release_threads(uuid, log)
        for actuator in (self.shares, self.blkio):
            try:
                actuator.restore(uuid)
            except act_base.ActuatorError as exc:
                log.fail()
                log.note('MIST release of %s: %s' % (uuid, exc))

    def _interrupts(self, active, log):
        if not self.opts.mist_irq_separation or IRQ in self.unsupported:
            return
        if not active:
            if self.record.keys(self.irq.kind):
                LOG.info('MIST: interrupts back where they were')
                for key, exc in self.irq.restore_all():
                    log.fail()
                    log.note('MIST irq %s: %s' % (key, exc))
            return
        try:
            irqs = irq_act.read_interrupts(self.opts.procfs_root)
            cpus = topology.online_cpus(self.opts.sysfs_root)
            block_cpus = (topology.parse_cpu_list(
                self.opts.mist_block_irq_cpus)
                if self.opts.mist_block_irq_cpus else None)
        except (OSError, ValueError) as exc:
            self._refuse(IRQ, 'cannot read interrupts or CPUs: %s' % exc,
                         log)
            return
        plan = mist.irq_plan(irqs, self.opts.mist_block_irq_pattern,
                             self.opts.mist_net_irq_pattern, cpus,
                             block_cpus)
        for number, want in sorted(plan.items()):
            if number in self._irq_refused:
                continue
            try:
                if self.irq.move(number, want):
                    log.done()
                    LOG.info('MIST: IRQ %d (%s) -> CPUs %s', number,
                             irqs[number], topology.format_cpu_list(want))
            except act_base.ActuatorError as exc:
                self._irq_refused.add(number)
                log.fail()
                log.note('MIST irq: %s' % exc)
                if exc.denied:
                    self._refuse(IRQ, str(exc), log)
                    return

    # -- restoring -----------------------------------------------------------

    def restore(self):
        """Put back every recorded original; the number that failed.

        Threads leave real time before their groups lose its runtime.
        """
        failed = 0
        actuators = [self.policy] + ([self.runtime] if self.runtime else [])
        actuators += [self.shares, self.blkio, self.irq]
        for actuator in actuators:
            for key, exc in actuator.restore_all():
                failed += 1
                LOG.error('MIST: cannot restore %s %s: %s', actuator.kind,
                          key, exc)
        self.protected.clear()
        self._threads.clear()
        return failed

    def recover(self):
        """Restore what a crashed agent left recorded; the number failed."""
        if not self.record.load():
            return 0
        LOG.warning('Actuator record %s holds changes a previous agent did '
                    'not undo; restoring them.', self.record.path)
        return self.restore()

    def describe(self):
        """(capabilities, missing) lines for ``vsmtio-agent check``."""
        caps = ['MIST: I_cpu threshold %.3f, %d periods to act, %d to '
                'release' % (self.opts.mist_icpu_threshold,
                             self.opts.mist_act_periods,
                             self.opts.mist_clear_periods)]
        # as for a guest's thread: libvirt puts them below the root group
        mode, why = rt.rt_mode(self.opts.procfs_root, self.cgroup_root,
                               'machine' if self.runtime else None)
        (caps if mode else []).append('MIST cpu: %s' % why)
        missing = [] if mode else ['MIST real-time: %s (fallback: cpu '
                                   'shares x%.1f)'
                                   % (why, self.opts.mist_cpu_shares_factor)]
        missing += ['MIST %s: %s' % kv for kv in sorted(
            self.unsupported.items())]
        return caps, missing
