"""The host driver for a real libvirt/KVM compute host.

It observes each running domain's vCPUs (libvirt domain stats, KVM's
per-vCPU halt statistics, the vCPU threads' procfs counters) and applies the
policy's decisions as live vCPU pinning, domain cpu shares and the retention
timeout knob the kernel offers. It never leaves the host worse: every
original value is checkpointed before the first change and put back on
stop, at the next start after a crash, and a vanished domain is forgotten.

Two modes (:meth:`LibvirtHostDriver.describe` says which and why):

``patched``
    the host kernel carries ``host_kernel_patches``: retention counters and
    the retention timeout come from its sysfs ABI.
``stock``
    KVM's halt-polling statistics stand in for retention (time a halted vCPU
    keeps its hyperthread polling instead of sleeping), and LTCR's timeout
    drives ``kvm.halt_poll_ns`` where that is writable.
"""

import fcntl
import os
import threading
import time
from xml.etree import ElementTree

import libvirt
from oslo_log import log as logging

from vsmtio_agent.drivers import base
from vsmtio_agent.drivers import mist_host
from vsmtio_agent.host import checkpoint as checkpoint_mod
from vsmtio_agent.host import perf
from vsmtio_agent.host import procfs
from vsmtio_agent.host import sysfs_knobs
from vsmtio_agent.host import topology as topology_mod
from vsmtio_agent import model

LOG = logging.getLogger(__name__)

# libvirt's own error printer would duplicate every error on stderr.
libvirt.registerErrorHandler(lambda _ctx, _err: None, None)

_GONE = (libvirt.VIR_ERR_NO_DOMAIN, libvirt.VIR_ERR_OPERATION_INVALID)
_DENIED = (libvirt.VIR_ERR_ACCESS_DENIED, libvirt.VIR_ERR_OPERATION_DENIED,
           libvirt.VIR_ERR_AUTH_FAILED)
_UNSUPPORTED = (libvirt.VIR_ERR_INVALID_ARG, libvirt.VIR_ERR_NO_SUPPORT,
                libvirt.VIR_ERR_ARGUMENT_UNSUPPORTED)
_SHARES_KEYS = ('cpu_shares', 'weight')  # qemu; the test driver's fake

# KVM's per-vCPU binary statistics as libvirt names them for kvm domains:
# the patched kernel's retention counters (ABI.rst), stock halt polling.
_PATCHED_STATS = {'retention_ns': 'retention_ns.sum',
                  'retentions': 'retentions.sum',
                  'retention_timeouts': 'retention_timeouts.sum'}
_KVM_POLL_NS = ('halt_poll_success_ns.sum', 'halt_poll_fail_ns.sum')
_KVM_POLLS = 'halt_attempted_poll.sum'
_KVM_POLL_HITS = 'halt_successful_poll.sum'
_NO_COUNTERS = procfs.ThreadCounters()
_NO_RETENTION = {}   # never modified: a vCPU of a TCG domain has none


class _Domain:
    """What the driver knows about one running domain."""

    def __init__(self, dom, uuid, dom_id, name):
        self.dom = dom
        self.uuid = uuid
        self.id = dom_id
        self.name = name
        self.kvm = False
        self.pid = None
        self.pid_checked = 0.0
        self.tids = {}
        self.pins = {}       # vCPU index -> frozenset of host CPUs, as now
        self.shares = None   # (key, value) as now, or None if unreadable
        self.rass = {}       # vCPU index -> the kernel RASS class, as now


class LibvirtHostDriver(base.HostDriver):
    """A libvirt/KVM host driven through libvirt, procfs and sysfs."""

    def __init__(self, conf):
        self.conf = conf
        opts = conf.vsmtio_agent
        self.opts = opts
        self.uri = opts.libvirt_uri
        self._conn = None
        self._backoff = 0.0
        self._next_attempt = 0.0
        self._domains = {}
        self._wake = threading.Event()
        self._reader = procfs.ThreadReader(opts.procfs_root)
        # per-vCPU instructions: what the guard judges CPU-bound vCPUs by
        self._perf = perf.ThreadCounters('instructions')
        self._topology = None
        self._recovered = False
        self._lock_fd = None
        self._owner = None
        self._can_pin = True
        self._can_share = True
        self._degraded = []
        self._timeout_knob = None
        self._timeout_probe = None
        self._timeout_applied = None
        self._na_logged = False
        self._rass_io_done = False
        self._can_classify = True
        self.abi_version, self._abi_why = sysfs_knobs.patched_abi(
            opts.sysfs_root)
        self.checkpoint = checkpoint_mod.Checkpoint(
            opts.checkpoint_path, checkpoint_mod.boot_id(opts.procfs_root))
        # MIST: block I/O, reservations and its own knobs (mist_host)
        self.mist = (mist_host.MistHost(opts, self._lookup,
                                        shares_held=self._rass_shares)
                     if getattr(opts, 'mist', False) else None)

    # -- connection -------------------------------------------------------

    def _connection(self):
        """An open connection, reconnecting with exponential backoff.

        While libvirt is unreachable this raises HostDriverError at once
        (the agent skips the period) instead of blocking the loop.
        """
        if self._conn is not None:
            return self._conn
        now = time.monotonic()
        if now < self._next_attempt:
            raise base.HostDriverError(
                'libvirt at %s unreachable; next attempt in %.1f s'
                % (self.uri, self._next_attempt - now))
        try:
            self._conn = libvirt.open(self.uri)
        except libvirt.libvirtError as exc:
            self._backoff = min(
                max(self.opts.libvirt_retry_initial, self._backoff * 2),
                self.opts.libvirt_retry_max)
            self._next_attempt = now + self._backoff
            raise base.HostDriverError(
                'cannot connect to libvirt at %s: %s (retry in %.1f s)'
                % (self.uri, exc.get_error_message(), self._backoff))
        if self._backoff:
            LOG.info('Reconnected to libvirt at %s', self.uri)
        self._backoff = 0.0
        return self._conn

    def _lost(self, exc):
        """Drop a dead connection; True if that is what ``exc`` meant."""
        conn, alive = self._conn, False
        if conn is not None:
            try:
                alive = bool(conn.isAlive())
            except libvirt.libvirtError:
                alive = False
        if alive:
            return False
        self._conn = None
        self._domains.clear()
        self._backoff = self.opts.libvirt_retry_initial
        self._next_attempt = time.monotonic() + self._backoff
        LOG.warning('Lost the libvirt connection to %s (%s); nothing is '
                    'changed until it is back, retrying with backoff.',
                    self.uri, exc)
        return True

    # -- the HostDriver interface ------------------------------------------

    def topology(self):
        if self._topology is None:
            try:
                self._topology = topology_mod.build_topology(
                    self.opts.sysfs_root, self.opts.cpu_dedicated_set,
                    self.opts.cpu_shared_set)
            except (OSError, ValueError) as exc:
                raise base.HostDriverError(
                    'cannot read the CPU topology (sysfs_root %s, '
                    'cpu_dedicated_set %r, cpu_shared_set %r): %s'
                    % (self.opts.sysfs_root, self.opts.cpu_dedicated_set,
                       self.opts.cpu_shared_set, exc))
            if not self._topology.cores:
                raise base.HostDriverError(
                    'no usable CPU: cpu_dedicated_set/cpu_shared_set name '
                    'no online CPU under %s' % self.opts.sysfs_root)
        return self._topology

    def _host_cpus(self):
        return {t for c in self.topology().cores for t in c.threads}

    def advance(self, seconds):
        self._wake.wait(seconds)

    def interrupt(self):
        """End a pending :meth:`advance` early (the daemon is stopping)."""
        self._wake.set()

    def sample(self):
        """Observe every running domain; writes nothing to the host."""
        conn = self._connection()
        flags = libvirt.VIR_CONNECT_GET_ALL_DOMAINS_STATS_ACTIVE
        try:
            records = conn.getAllDomainStats(
                libvirt.VIR_DOMAIN_STATS_STATE | libvirt.VIR_DOMAIN_STATS_VCPU,
                flags)
        except libvirt.libvirtError as exc:
            if self._lost(exc):
                raise base.HostDriverError('libvirt connection lost: %s'
                                           % exc.get_error_message())
            raise base.HostDriverError('getAllDomainStats failed: %s'
                                       % exc.get_error_message())
        now = time.monotonic_ns()
        seen, vcpus = set(), {}
        for dom, stats in records:
            try:
                entry = self._track(dom)
                seen.add(entry.uuid)
                vcpus.update(self._vcpu_counters(entry, stats))
            except libvirt.libvirtError as exc:
                if exc.get_error_code() not in _GONE:
                    LOG.warning('Skipping a domain this period: %s',
                                exc.get_error_message())
        for uuid in set(self._domains) - seen:
            self._forget(uuid, 'is no longer running')
        # Files held open for a QEMU that exited or was replaced.
        self._reader.retain({e.pid for e in self._domains.values()})
        self._perf.retain({t for e in self._domains.values()
                           for t in e.tids.values()})
        domains = self.mist.domain_counters(conn) if self.mist else {}
        return model.Snapshot(time_ns=now, vcpus=vcpus, domains=domains)

    def _track(self, dom):
        uuid, dom_id = dom.UUIDString(), dom.ID()
        entry = self._domains.get(uuid)
        if entry is not None and entry.id == dom_id:
            entry.dom = dom
            return entry
        entry = _Domain(dom, uuid, dom_id, dom.name())
        xml = ElementTree.fromstring(dom.XMLDesc(0))
        entry.kvm = xml.get('type') == 'kvm'
        entry.pins = {i: _cpus(m) for i, m in enumerate(dom.vcpuPinInfo(0))}
        entry.shares = self._read_shares(dom)
        self._domains[uuid] = entry
        return entry

    def _read_shares(self, dom):
        try:
            params = dom.schedulerParameters()
        except libvirt.libvirtError:
            return None
        for key in _SHARES_KEYS:
            if key in params:
                return key, int(params[key])
        return None

    def _threads_of(self, entry, nvcpus):
        """vCPU index -> tid, re-discovered when threads or QEMU changed."""
        if entry.pid is None or len(entry.tids) < nvcpus:
            now = time.monotonic()
            if entry.pid is None and now - entry.pid_checked < 30.0 and \
                    entry.pid_checked:
                return {}
            entry.pid_checked = now
            pidfile = None
            if self.uri.startswith('qemu:///system'):
                pidfile = '/run/libvirt/qemu/%s.pid' % entry.name
            entry.pid = procfs.find_qemu_pid(entry.uuid, pidfile,
                                             self.opts.procfs_root)
            entry.tids = (procfs.vcpu_threads(entry.pid,
                                              self.opts.procfs_root)
                          if entry.pid else {})
        return entry.tids

    def _vcpu_counters(self, entry, stats):
        nvcpus = stats.get('vcpu.current')
        cpu_of, time_of = {}, {}
        if nvcpus is None:
            # Drivers without vCPU stats (test:///) still list vCPUs.
            infos = entry.dom.vcpus()[0]
            nvcpus = len(infos)
            for number, _state, cpu_time, cpu in infos:
                cpu_of[number], time_of[number] = cpu, cpu_time
        tids = self._threads_of(entry, nvcpus)
        out = {}
        for index in range(nvcpus):
            prefix = 'vcpu.%d.' % index
            thread = None
            if index in tids:
                thread = self._reader.read(
                    entry.pid, tids[index],
                    schedstat=prefix + 'delay' not in stats)
                if thread is None:  # the thread is gone: rediscover
                    entry.tids = {}
            thread = thread or _NO_COUNTERS
            run_ns = stats.get(prefix + 'time', time_of.get(index))
            delay = stats.get(prefix + 'delay', thread.runqueue_delay_ns)
            retention = (self._retention(entry, stats, prefix)
                         if entry.kvm else _NO_RETENTION)
            instructions = (self._perf.read(tids[index]) if index in tids
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
        if self.abi_version:
            return {field: stats[prefix + key]
                    for field, key in _PATCHED_STATS.items()
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

    def _forget(self, uuid, why):
        self._domains.pop(uuid, None)
        rec = self.checkpoint.domains.pop(uuid, None)
        if rec is not None:
            LOG.info('Domain %s (%s) %s; forgetting the originals recorded '
                     'for it.', rec.get('name'), uuid, why)
            self._save_checkpoint()

    # -- apply ---------------------------------------------------------------

    def apply(self, decision):
        # Changing the host is apply's job, and it must never save a
        # checkpoint over one a dead agent left: recover first, if the
        # daemon has not (a driver used outside the daemon).
        self.recover()
        if not self._owns_host():
            return base.ApplyResult(messages=(
                'another vsmtio agent owns %s; not applying'
                % self.opts.checkpoint_path,))
        counts = {'applied': 0, 'unchanged': 0, 'failed': 0}
        messages = []
        # What the guard switched off goes back to the host's own values;
        # a knob is never moved for a mechanism the agent does not keep.
        self._withdraw(decision, counts, messages)
        if self.mist is not None:
            self.mist.apply(decision.protect, self._domains, counts,
                            messages)
        pins, shares, classes, io_cpus, knob = [], [], [], None, None
        if decision.split:
            pins, shares = self._plan(decision, counts, messages)
            if self.abi_version:
                classes = self._rass_classes(decision, counts, messages)
                io_cpus = self._rass_io_cpus(counts, messages)
        if decision.retention:
            knob = self._timeout_change(decision.timeout_ns, counts,
                                        messages)
        if not (pins or shares or knob or classes or io_cpus):
            return base.ApplyResult(messages=tuple(messages), **counts)
        # Originals first, on disk, before any change.
        for entry, index, _cpus_ in pins:
            self.checkpoint.record_pin(entry.uuid, entry.id, entry.name,
                                       index, entry.pins[index])
        for entry, _value in shares:
            self.checkpoint.record_shares(entry.uuid, entry.id, entry.name,
                                          entry.shares[1])
        if knob:
            self.checkpoint.record_knob(knob[0].relpath, knob[1])
        for entry, index, _knob, original, _klass in classes:
            self.checkpoint.record_rass(entry.uuid, entry.id, entry.name,
                                        index, original)
        if io_cpus:
            self.checkpoint.record_knob(io_cpus[0].relpath, io_cpus[1])
        self._save_checkpoint()
        for entry, index, cpus in pins:
            if self._can_pin:   # one refusal is enough to stop asking
                self._do(counts, messages, entry, self._pin, entry, index,
                         cpus)
        for entry, value in shares:
            if self._can_share:
                self._do(counts, messages, entry, self._set_shares, entry,
                         value)
        if knob:
            self._write_timeout(knob[0], knob[2], counts, messages)
        if io_cpus:
            self._write_knob(io_cpus[0], io_cpus[2], counts, messages)
            self._rass_io_done = True
        for entry, index, kn, _original, klass in classes:
            if self._write_knob(kn, klass, counts, messages):
                entry.rass[index] = klass
        if counts['failed'] and self._prune():
            self._save_checkpoint()
        return base.ApplyResult(messages=tuple(messages), **counts)

    def _prune(self):
        """Drop records of domain values that are (still) the originals.

        A change that failed left its original in place: nothing to restore,
        and a later restore would only fail the same way.
        """
        pruned = False
        for uuid, rec in list(self.checkpoint.domains.items()):
            entry = self._domains.get(uuid)
            if entry is None or entry.id != rec['id']:
                continue
            for index, cpus in list(rec['pins'].items()):
                if entry.pins.get(int(index)) == frozenset(cpus):
                    del rec['pins'][index]
                    pruned = True
            if (rec['cpu_shares'] is not None and entry.shares
                    and entry.shares[1] == rec['cpu_shares']):
                rec['cpu_shares'] = None
                pruned = True
            for index, klass in list(rec.get('rass', {}).items()):
                if entry.rass.get(int(index)) == klass:
                    del rec['rass'][index]
                    pruned = True
            if not (rec['pins'] or rec.get('rass')
                    or rec['cpu_shares'] is not None):
                del self.checkpoint.domains[uuid]
        return pruned

    # -- the patched kernel's RASS knobs -----------------------------------

    def _rass_io_cpus(self, counts, messages):
        """(knob, original, wanted) for ``rass_io_cpus``, once per start.

        Every SMT core's I/O hyperthread is listed (a listed CPU needs an
        unlisted sibling, so single-thread cores are left out).
        """
        if self._rass_io_done:
            return None
        knob = sysfs_knobs.TextKnob(self.opts.sysfs_root,
                                    sysfs_knobs.RASS_IO_CPUS)
        want = topology_mod.format_cpu_list(
            c.io_thread for c in self.topology().cores
            if len(c.threads) > 1)
        try:
            current = knob.read()
        except sysfs_knobs.KnobError as exc:
            self._rass_io_done = True
            counts['failed'] += 1
            messages.append(str(exc))
            return None
        if current == want:
            self._rass_io_done = True
            counts['unchanged'] += 1
            return None
        return knob, self.checkpoint.knobs.get(knob.relpath, current), want

    def _rass_classes(self, decision, counts, messages):
        """(entry, index, knob, original, class) for each class to change."""
        out = []
        if not self._can_classify:
            return out
        for ref, placement in sorted(decision.placements.items()):
            entry = self._domains.get(ref.domain)
            if entry is None or ref.index not in entry.tids:
                continue
            knob = self._sched_rass(entry, ref.index)
            current = entry.rass.get(ref.index)
            if current is None:
                try:
                    current = entry.rass[ref.index] = knob.read()
                except sysfs_knobs.KnobError as exc:
                    counts['failed'] += 1
                    messages.append(str(exc))
                    continue
            if current == placement.role.value:
                counts['unchanged'] += 1
                continue
            rec = self.checkpoint.domains.get(entry.uuid) or {}
            original = rec.get('rass', {}).get(str(ref.index), current)
            out.append((entry, ref.index, knob, original,
                        placement.role.value))
        return out

    def _sched_rass(self, entry, index):
        return sysfs_knobs.TextKnob(
            self.opts.procfs_root, '%d/task/%d/%s' % (
                entry.pid, entry.tids[index], sysfs_knobs.SCHED_RASS))

    def _write_knob(self, knob, value, counts, messages):
        try:
            knob.write(value)
        except sysfs_knobs.KnobError as exc:
            counts['failed'] += 1
            messages.append(str(exc))
            if exc.denied and knob.relpath.endswith(sysfs_knobs.SCHED_RASS):
                self._can_classify = False
                self._degraded.append('RASS classes denied (%s)' % exc)
                LOG.warning('Degrading: %s; RASS stays pinning only', exc)
            return False
        counts['applied'] += 1
        return True

    def _withdraw(self, decision, counts, messages):
        """Put back what belongs to mechanisms ``decision`` turns off.

        The split's pins, shares and RASS classes when it is off; the
        retention timeout knob when retention is off. Recorded originals
        are written back and leave the checkpoint, as at stop.
        """
        if not decision.split and self.checkpoint.domains:
            try:
                conn = self._connection()
            except base.HostDriverError as exc:
                counts['failed'] += 1
                messages.append('cannot withdraw the split: %s' % exc)
                conn = None
            if conn is not None:
                for uuid in sorted(self.checkpoint.domains):
                    if self._restore_domain(conn, uuid):
                        counts['applied'] += 1
                    else:
                        counts['failed'] += 1
                self._save_checkpoint()
        if not decision.retention and self._timeout_applied is not None:
            knob, _why = self._timeout_target()
            if knob is not None and knob.relpath in self.checkpoint.knobs:
                error = self._restore_knob(knob.relpath)
                if error:
                    counts['failed'] += 1
                    messages.append(error)
                    return
                self._save_checkpoint()
                counts['applied'] += 1
            self._timeout_applied = None

    def _restore_knob(self, relpath):
        """Write a knob's recorded original back; the error text, if any.

        On success the knob leaves the checkpoint (the caller saves it).
        """
        value = self.checkpoint.knobs[relpath]
        knob = sysfs_knobs.knob_for(self.opts.sysfs_root, relpath, value)
        try:
            knob.write(value)
        except sysfs_knobs.KnobError as exc:
            return str(exc)
        del self.checkpoint.knobs[relpath]
        LOG.info('Restored %s to %s', knob.path, value)
        return None

    def _plan(self, decision, counts, messages):
        """The pin and share changes that differ from what is in place."""
        host = self._host_cpus()
        pins, io_domains, touched = [], set(), set()
        for ref, placement in sorted(decision.placements.items()):
            entry = self._domains.get(ref.domain)
            if entry is None or ref.index not in entry.pins:
                counts['unchanged'] += 1
                continue
            touched.add(entry.uuid)
            if placement.role == model.Role.IO:
                io_domains.add(entry.uuid)
            if not self._can_pin:
                continue
            allowed = self._allowed(entry, ref.index) & host
            want = frozenset(placement.threads) & allowed
            if not want:
                counts['unchanged'] += 1
                messages.append(
                    '%s: plan %s is outside the CPUs nova gave it (%s)'
                    % (ref, list(placement.threads),
                       topology_mod.format_cpu_list(allowed)))
                continue
            if want == entry.pins[ref.index]:
                counts['unchanged'] += 1
                continue
            pins.append((entry, ref.index, want))
        shares = []
        factor = self.opts.io_cpu_shares_factor
        for uuid in sorted(touched):
            entry = self._domains[uuid]
            if not self._can_share or entry.shares is None or factor == 1:
                continue
            if self.mist and self.mist.shares.original_value(uuid):
                continue    # MIST's fallback holds them: one writer a knob
            original = self._original_shares(entry)
            want = original
            if uuid in io_domains:
                want = min(int(round(original * factor)), 10000)
            if want != entry.shares[1]:
                shares.append((entry, want))
        return pins, shares

    def _allowed(self, entry, index):
        """CPUs the vCPU may use: where nova (its original pinning) put it."""
        rec = self.checkpoint.domains.get(entry.uuid)
        if rec and rec['id'] == entry.id and str(index) in rec['pins']:
            return frozenset(rec['pins'][str(index)])
        return entry.pins[index]

    def _original_shares(self, entry):
        rec = self.checkpoint.domains.get(entry.uuid)
        if rec and rec['id'] == entry.id and rec['cpu_shares'] is not None:
            return rec['cpu_shares']
        return entry.shares[1]

    def _do(self, counts, messages, entry, func, *args):
        try:
            func(*args)
            counts['applied'] += 1
        except libvirt.libvirtError as exc:
            code = exc.get_error_code()
            if code in _GONE:
                self._forget(entry.uuid, 'disappeared before apply')
                counts['unchanged'] += 1
                return
            counts['failed'] += 1
            messages.append('%s: %s' % (entry.name, exc.get_error_message()))
            if code in _DENIED:
                self._degrade(func.__name__, exc.get_error_message())
            elif self._lost(exc):
                messages.append('libvirt connection lost during apply')

    def _degrade(self, what, why):
        if what == '_pin':
            self._can_pin = False
            text = 'vCPU pinning denied (%s): placements are observed only' \
                % why
        else:
            self._can_share = False
            text = 'cpu shares denied (%s): shares left alone' % why
        LOG.warning('Degrading: %s', text)
        self._degraded.append(text)

    def _pin(self, entry, index, cpus):
        cpumap = tuple(c in cpus for c in range(_ncpus(entry.dom.connect())))
        try:
            entry.dom.pinVcpuFlags(index, cpumap,
                                   libvirt.VIR_DOMAIN_AFFECT_LIVE)
        except libvirt.libvirtError as exc:
            if exc.get_error_code() not in _UNSUPPORTED:
                raise
            entry.dom.pinVcpu(index, cpumap)
        entry.pins[index] = frozenset(cpus)

    def _set_shares(self, entry, value):
        key = entry.shares[0]
        try:
            entry.dom.setSchedulerParametersFlags(
                {key: value}, libvirt.VIR_DOMAIN_AFFECT_LIVE)
        except libvirt.libvirtError as exc:
            if exc.get_error_code() not in _UNSUPPORTED:
                raise
            entry.dom.setSchedulerParameters({key: value})
        entry.shares = (key, value)

    # -- the retention timeout knob ----------------------------------------

    def _timeout_target(self):
        """(knob, unit divisor) LTCR's timeout goes to, or None."""
        if self._timeout_probe is None:
            knob = sysfs_knobs.Knob(
                self.opts.sysfs_root,
                sysfs_knobs.RETENTION_TIMEOUT_NS if self.abi_version
                else sysfs_knobs.HALT_POLL_NS)
            ok, why = knob.probe()
            self._timeout_probe = (knob if ok else None, why)
        return self._timeout_probe

    def _timeout_look(self):
        """(knob or None, why) without writing: for ``describe``.

        ``check``, ``status`` and dry runs describe the host and must not
        write to it, so until an apply has probed the knob by writing its
        value back, its mode and ``access(2)`` answer.
        """
        knob = sysfs_knobs.Knob(
            self.opts.sysfs_root,
            sysfs_knobs.RETENTION_TIMEOUT_NS if self.abi_version
            else sysfs_knobs.HALT_POLL_NS)
        ok, why = knob.probe(write=False)
        return knob if ok else None, why

    def _timeout_change(self, timeout_ns, counts, messages):
        knob, why = self._timeout_target()
        if knob is None:
            if not self._na_logged:
                self._na_logged = True
                LOG.warning('Retention timeout not applicable: %s', why)
            return None
        value = int(timeout_ns)
        if self.abi_version:
            value = min(value, sysfs_knobs.RETENTION_TIMEOUT_MAX_NS)
        if value == self._timeout_applied:
            counts['unchanged'] += 1
            return None
        try:
            current = knob.read()
        except sysfs_knobs.KnobError as exc:
            counts['failed'] += 1
            messages.append(str(exc))
            return None
        if current == value:
            self._timeout_applied = value
            counts['unchanged'] += 1
            return None
        original = self.checkpoint.knobs.get(knob.relpath, current)
        return knob, original, value

    def _write_timeout(self, knob, value, counts, messages):
        try:
            knob.write(value)
        except sysfs_knobs.KnobError as exc:
            counts['failed'] += 1
            messages.append(str(exc))
            self._timeout_probe = (None, str(exc))
            LOG.warning('Degrading: retention timeout no longer applied: %s',
                        exc)
            self._degraded.append(str(exc))
            return
        self._timeout_applied = value
        counts['applied'] += 1

    # -- checkpoint, recovery and restore -------------------------------------

    def _owns_host(self):
        """Take the checkpoint's lock: one agent per host changes things."""
        if self._owner is None:
            path = self.opts.checkpoint_path + '.lock'
            try:
                os.makedirs(os.path.dirname(os.path.abspath(path)),
                            exist_ok=True)
                fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
            except OSError as exc:
                LOG.warning('Cannot open %s (%s): observing only', path, exc)
                self._owner = False
                return False
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                LOG.warning('Another vsmtio agent holds %s: this one '
                            'observes only.', path)
                self._owner = False
                return False
            self._lock_fd, self._owner = fd, True
        return self._owner

    def _save_checkpoint(self):
        try:
            self.checkpoint.save()
        except OSError as exc:
            raise base.HostDriverError(
                'cannot write checkpoint %s: %s; changing nothing'
                % (self.checkpoint.path, exc))

    def recover(self):
        """Once per start: restore what a crashed agent left changed.

        The daemon's explicit first step (before any period). Until it
        runs, this driver holds no lock and restores nothing, so
        ``status``, ``check`` and ``--dry-run``, which never call it,
        leave a dead agent's checkpoint and its changes as they are.
        """
        if self._recovered:
            return
        self._recovered = True
        if not self._owns_host():
            return
        if self.mist is not None:
            self.mist.recover()
        try:
            pending = self.checkpoint.load()
        except checkpoint_mod.CheckpointError:
            return
        except OSError as exc:
            LOG.error('Cannot read checkpoint %s: %s', self.checkpoint.path,
                      exc)
            return
        if pending:
            LOG.warning('Checkpoint %s holds changes a previous agent did '
                        'not undo (it crashed or was killed); restoring '
                        'them first.', self.checkpoint.path)
            self.restore()

    def restore(self):
        if not self._recovered:
            # Nothing was recovered or applied since start (a dry run): the
            # checkpoint on disk, if any, is not ours to touch.
            return
        if not self._owns_host():
            return
        remaining = self.mist.restore() if self.mist is not None else 0
        if self.checkpoint.domains:
            try:
                conn = self._connection()
            except base.HostDriverError as exc:
                conn = None
                LOG.error('Cannot restore domains now (%s); their originals '
                          'stay in %s and are restored at the next start.',
                          exc, self.checkpoint.path)
            if conn is not None:
                for uuid in sorted(self.checkpoint.domains):
                    if not self._restore_domain(conn, uuid):
                        remaining += 1
        for relpath in sorted(self.checkpoint.knobs):
            error = self._restore_knob(relpath)
            if error:
                LOG.error('Cannot restore %s: %s', relpath, error)
                remaining += 1
        self._timeout_applied = None
        try:
            self.checkpoint.save()
        except OSError as exc:
            LOG.error('Cannot update checkpoint %s: %s',
                      self.checkpoint.path, exc)
        if remaining:
            LOG.error('%d item(s) could not be restored; kept in %s',
                      remaining, self.checkpoint.path)

    def _restore_domain(self, conn, uuid):
        """Put one domain back; True when nothing of it is left to do."""
        rec = self.checkpoint.domains[uuid]
        try:
            dom = conn.lookupByUUIDString(uuid)
            alive = dom.isActive() and dom.ID() == rec['id']
        except libvirt.libvirtError as exc:
            if exc.get_error_code() not in _GONE:
                if self._lost(exc):
                    return False
                LOG.error('Cannot look up domain %s: %s', uuid, exc)
                return False
            alive = False
        if not alive:
            LOG.info('Domain %s (%s) is gone or was restarted; nothing of '
                     'ours is live there.', rec.get('name'), uuid)
            del self.checkpoint.domains[uuid]
            return True
        entry = self._domains.get(uuid) or _Domain(dom, uuid, rec['id'],
                                                   rec.get('name'))
        entry.dom = dom
        ok = True
        for index, cpus in sorted(rec['pins'].items()):
            try:
                self._pin(entry, int(index), frozenset(cpus))
                del rec['pins'][index]
            except libvirt.libvirtError as exc:
                ok = False
                LOG.error('Cannot restore pinning of %s vCPU %s: %s',
                          rec.get('name'), index, exc.get_error_message())
        rass = rec.get('rass', {})
        if rass:
            self._threads_of(entry, 1 + max(int(i) for i in rass))
        for index, klass in sorted(rass.items()):
            if int(index) not in entry.tids:
                continue    # the thread is gone: nothing of ours is left
            try:
                self._sched_rass(entry, int(index)).write(klass)
            except sysfs_knobs.KnobError as exc:
                ok = False
                LOG.error('Cannot restore RASS class of %s vCPU %s: %s',
                          rec.get('name'), index, exc)
        if rec['cpu_shares'] is not None:
            entry.shares = entry.shares or self._read_shares(dom)
            try:
                if entry.shares is None:
                    raise libvirt.libvirtError('cpu shares unreadable')
                self._set_shares(entry, rec['cpu_shares'])
                rec['cpu_shares'] = None
            except libvirt.libvirtError as exc:
                ok = False
                LOG.error('Cannot restore cpu shares of %s: %s',
                          rec.get('name'), exc)
        if ok:
            del self.checkpoint.domains[uuid]
            LOG.info('Restored domain %s (%s)', rec.get('name'), uuid)
        return ok

    def close(self):
        self._wake.set()
        if self._conn is not None:
            try:
                self._conn.close()
            except libvirt.libvirtError:
                pass
            self._conn = None
        self._reader.close()
        self._perf.close()
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd, self._owner = None, None

    # -- what the host offers ------------------------------------------------

    def describe(self):
        caps, missing = [], []
        try:
            topo = self.topology()
            caps.append('topology: %d core(s), %s' % (
                len(topo.cores),
                'SMT siblings' if topo.smt else 'no SMT siblings'))
            if not topo.smt:
                missing.append('SMT siblings (RASS needs two hyperthreads '
                               'per core)')
        except (OSError, ValueError, base.HostDriverError) as exc:
            missing.append('topology: %s' % exc)
        try:
            conn = self._connection()
            caps.append('libvirt %s reachable (%d running domain(s))'
                        % (self.uri, conn.numOfDomains()))
        except (base.HostDriverError, libvirt.libvirtError) as exc:
            missing.append('libvirt: %s' % exc)
        knob, why = self._timeout_probe or self._timeout_look()
        if knob is not None:
            caps.append('retention timeout -> %s' % knob.path)
        else:
            missing.append('retention timeout knob: %s' % why)
        caps.append('vCPU threads and switch counts from %s'
                    % self.opts.procfs_root)
        kvm = [d.name for d in self._domains.values() if d.kvm]
        tcg = [d.name for d in self._domains.values() if not d.kvm]
        if tcg and not kvm:
            missing.append('KVM halt statistics (domains are not type kvm: '
                           '%s)' % ', '.join(sorted(tcg)))
        pmu = any(os.path.exists(os.path.join(
            self.opts.sysfs_root, 'bus/event_source/devices', dev,
            'events/instructions')) for dev in ('cpu', 'cpu_core'))
        if self._perf.unavailable:
            missing.append('per-vCPU instructions: %s; the guard keeps no '
                           'mechanism it cannot judge'
                           % self._perf.unavailable)
        elif pmu:
            caps.append('per-vCPU instructions through perf_event_open')
        else:
            missing.append('per-vCPU instructions: no hardware PMU on this '
                           'host (no cpu events in sysfs); the guard keeps '
                           'no mechanism it cannot judge')
        missing.extend(self._degraded)
        if self.mist is not None:
            mist_caps, mist_missing = self.mist.describe()
            caps.extend(mist_caps)
            missing.extend(mist_missing)
        if self.abi_version:
            mode = 'patched'
            reason = ('%s: retention counters, timeout and RASS classes '
                      '(rass_io_cpus, sched_rass) from the patched kernel, '
                      'placements as vCPU pinning' % self._abi_why)
        else:
            mode = 'stock'
            reason = ('%s: retention from KVM halt polling, LTCR on '
                      'kvm.halt_poll_ns, RASS as vCPU pinning'
                      % self._abi_why)
            missing.insert(0, 'patched kernel: %s' % self._abi_why)
        return base.HostMode(mode=mode, reason=reason,
                             capabilities=tuple(caps),
                             missing=tuple(missing))

    def _lookup(self, uuid):
        """The running domain ``uuid`` (for MIST's actuators)."""
        try:
            return self._connection().lookupByUUIDString(uuid)
        except base.HostDriverError as exc:
            raise libvirt.libvirtError(str(exc))

    def _rass_shares(self, uuid):
        """Whether the RASS split holds the domain's cpu shares."""
        rec = self.checkpoint.domains.get(uuid)
        return bool(rec) and rec.get('cpu_shares') is not None

    def vcpu_threads(self):
        """{VcpuRef: tid} of the vCPU threads found (for status, tests)."""
        return {model.VcpuRef(e.uuid, i): tid
                for e in self._domains.values() for i, tid in e.tids.items()}

    def vcpu_pins(self):
        """{VcpuRef: frozenset of CPUs} as the driver last saw or set them."""
        return {model.VcpuRef(e.uuid, i): cpus
                for e in self._domains.values() for i, cpus in e.pins.items()}


def _cpus(cpumap):
    return frozenset(i for i, on in enumerate(cpumap) if on)


def _ncpus(conn):
    return conn.getCPUMap()[0]
