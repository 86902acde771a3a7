"""What a libvirt host offers the agent: the driver's ``describe``.

Read apart from the driving (sampling and applying) because it answers
another question, for ``vsmtio-agent check``, ``status`` and the daemon's
start: which mode the host runs in, what it can and cannot do and why, and
which mechanisms can pay off here. It looks at the host through the
driver's parts and writes nothing.
"""

import os

import libvirt

from vsmtio_agent.drivers import base
from vsmtio_agent.drivers.libvirt import domains as domains_mod
from vsmtio_agent.drivers.libvirt import served
from vsmtio_agent.linux import sched_core


class Survey:
    """The :class:`~vsmtio_agent.drivers.base.HostMode` of a libvirt host.

    ``abi`` is ``(version, why)`` of the patched kernel's ABI (version
    None on a stock kernel); ``sched_core_why`` says where libvirt's core
    scheduling setting was read, or why it was not.
    """

    def __init__(self, opts, uri, topology, connection, domains, sampler,
                 timeout, degradations, abi, sched_core_why, mist=None):
        self.opts = opts
        self.uri = uri
        self.topology = topology
        self.connection = connection
        self.domains = domains
        self.sampler = sampler
        self.timeout = timeout
        self.degradations = degradations
        self.abi_version, self.abi_why = abi
        self.sched_core_why = sched_core_why
        self.mist = mist

    def describe(self):
        caps, missing = [], []
        topo = None
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
            conn = self.connection.get()
            caps.append('libvirt %s reachable (%d running domain(s))'
                        % (self.uri, conn.numOfDomains()))
        except (base.HostDriverError, libvirt.libvirtError) as exc:
            missing.append('libvirt: %s' % exc)
        knob, why = self.timeout.look()
        if knob is not None:
            caps.append('retention timeout -> %s' % knob.path)
        else:
            missing.append('retention timeout knob: %s' % why)
        caps.append(self.sampler.source.describe())
        kinds = self._domain_kinds()
        kvm = sorted(name for name, is_kvm in kinds.items() if is_kvm)
        other = sorted(name for name, is_kvm in kinds.items() if not is_kvm)
        if kvm:
            caps.append('KVM\'s vCPU halt statistics from libvirt\'s vCPU '
                        'group (%d kvm domain(s))' % len(kvm))
        elif other:
            missing.append('KVM halt statistics: no running domain is type '
                           'kvm (%s), and libvirt has them only for kvm '
                           'domains' % ', '.join(other))
        else:
            caps.append('KVM\'s vCPU halt statistics from libvirt\'s vCPU '
                        'group, for kvm domains (none running)')
        pmu = any(os.path.exists(os.path.join(
            self.opts.sysfs_root, 'bus/event_source/devices', dev,
            'events/instructions')) for dev in ('cpu', 'cpu_core'))
        if self.sampler.perf.unavailable:
            missing.append('per-vCPU instructions: %s; the guard judges '
                           'computing VMs by CPU time, so it tries '
                           'retention and VM weights, never the split'
                           % self.sampler.perf.unavailable)
        elif pmu:
            caps.append('per-vCPU instructions through perf_event_open')
        else:
            missing.append('per-vCPU instructions: no hardware PMU on this '
                           'host (no cpu events in sysfs); the guard judges '
                           'computing VMs by CPU time, so it tries '
                           'retention and VM weights, never the split')
        missing.extend(self.degradations.missing)
        self._describe_identity(caps, missing)
        self._describe_trust(caps, missing)
        if self.mist is not None:
            mist_caps, mist_missing = self.mist.describe(
                self._running_domains())
            caps.extend(mist_caps)
            missing.extend(mist_missing)
        if self.abi_version:
            mode = 'patched'
            reason = ('%s: retention counters, timeout and RASS classes '
                      '(rass_io_cpus, sched_rass) from the patched kernel, '
                      'placements as vCPU pinning' % self.abi_why)
        else:
            mode = 'stock'
            reason = ('%s: retention from KVM halt polling, LTCR on '
                      'kvm.halt_poll_ns, RASS as vCPU pinning'
                      % self.abi_why)
            missing.insert(0, 'patched kernel: %s' % self.abi_why)
        return base.HostMode(mode=mode, reason=reason,
                             capabilities=tuple(caps),
                             missing=tuple(missing),
                             knobs=frozenset(('retention',) if knob
                                             is not None else ()),
                             benefits=self._benefits(topo, knob, why))

    def _benefits(self, topo, knob, knob_why):
        """Per mechanism: whether this host can benefit, and why.

        From what ``describe`` found: the topology, the retention knob,
        and one bulk stats call for the served measure.
        """
        if topo is None:
            rass = 'unknown: the topology could not be read'
        elif topo.smt:
            rass = 'yes: %d cores with SMT siblings' % len(topo.cores)
        else:
            rass = ('no: it needs SMT siblings, and each of the %d cores '
                    'has one thread' % len(topo.cores))
        if self.abi_version:
            retention = 'yes: the patched kernel\'s retention timeout'
        elif knob is not None:
            retention = 'yes: halt polling, through %s' % knob.path
        else:
            retention = ('no: no patched kernel, and halt polling cannot be '
                         'set (%s)' % knob_why)
        return ('RASS (sibling split, borrowing): ' + rass,
                'context retention (LTCR): ' + retention,
                'served I/O measure (block and interface statistics): '
                + self._served_benefit())

    def _served_benefit(self):
        if not (self.opts.served_stats or self.mist is not None):
            return 'no: served_stats and mist are off'
        try:
            records = self.connection.call(
                self.connection.get().getAllDomainStats,
                'getAllDomainStats',
                libvirt.VIR_DOMAIN_STATS_STATE | served.GROUPS,
                libvirt.VIR_CONNECT_GET_ALL_DOMAINS_STATS_ACTIVE)
        except (base.HostDriverError, libvirt.libvirtError) as exc:
            return 'unknown: %s' % exc
        if not records:
            return 'unknown: no running domain to ask'
        counted = sum(served.counters(stats).served is not None
                      for _dom, stats in records)
        return '%s: %d of %d running domain(s) report them' % (
            'yes' if counted == len(records) else 'partly' if counted
            else 'no', counted, len(records))

    def _running_domains(self):
        """The running libvirt domains: those sampled, or listed now.

        For ``check``, before any sample, those libvirt lists; [] where
        libvirt cannot be asked. Reading them writes nothing.
        """
        if len(self.domains.entries):
            return [d.dom for d in self.domains.values()]
        try:
            return self.connection.get().listAllDomains(
                libvirt.VIR_CONNECT_LIST_DOMAINS_ACTIVE)
        except (base.HostDriverError, libvirt.libvirtError):
            return []

    def _domain_kinds(self):
        """``{name: is kvm}`` of the running domains; writes nothing.

        The domains sampled so far, or (``check``, before any sample)
        those libvirt lists now; {} where libvirt cannot be asked.
        """
        if len(self.domains.entries):
            return {d.label: d.kvm for d in self.domains.values()}
        try:
            conn = self.connection.get()
            found = conn.listAllDomains(
                libvirt.VIR_CONNECT_LIST_DOMAINS_ACTIVE)
            return {dom.name(): domains_mod.is_kvm(dom) for dom in found}
        except (base.HostDriverError, libvirt.libvirtError):
            return {}

    def _describe_identity(self, caps, missing):
        """Whose QEMU libvirt's state names, and each domain it does not.

        The domains sampled so far; for ``check``, before any sample, those
        libvirt lists now, looked for the same way (reading only).
        """
        entries = list(self.domains.values())
        if not entries:
            try:
                found = self.connection.get().listAllDomains(
                    libvirt.VIR_CONNECT_LIST_DOMAINS_ACTIVE)
                for dom in found:
                    entry = domains_mod.Domain(dom, dom.UUIDString(),
                                               dom.ID(), dom.name())
                    entry.pid = self.domains.identify(entry, quiet=True)
                    entries.append(entry)
            except (base.HostDriverError, libvirt.libvirtError):
                pass
        # a domain whose threads no reader asked for was not looked for
        unknown = [e for e in entries if e.qemu_why is not None]
        known = [e for e in entries if e.pid is not None]
        line = ('QEMU processes named by libvirt\'s state only (%s): '
                'established for %d of %d running domain(s) looked for'
                % (self.domains.qemu.describe(), len(known),
                   len(known) + len(unknown)))
        if any(e.qemu_by_name for e in known):
            line += ('; executables judged by their exec name (no '
                     'CAP_SYS_PTRACE to read /proc/<pid>/exe)')
        caps.append(line)
        for entry in sorted(unknown, key=lambda e: e.label):
            missing.append('QEMU of domain %s not established (%s): its '
                           'threads are left alone'
                           % (entry.label, entry.qemu_why))

    def _describe_trust(self, caps, missing):
        """Trust domains: the rule, and the host's core scheduling.

        Core scheduling as libvirt's setting and the kernel's cookies say.
        """
        fences = self.sampler.core_scheduling
        line = ('trust domains: %s; core scheduling: %s (%s)'
                % (self.opts.trust_domain,
                   {True: 'on', False: 'off', None: 'unknown'}[fences],
                   self.sched_core_why))
        (caps if fences is not None else missing).append(line)
        if self.domains.cookies_supported is None:
            supported, why = sched_core.supported()
        else:
            supported = self.domains.cookies_supported
            why = self.domains.cookies_why
        if supported and self.domains.cookie_failure:
            missing.append('core-scheduling cookies of vCPU threads: %s; '
                           'libvirt\'s sched_core setting stands in'
                           % self.domains.cookie_failure)
        elif supported:
            caps.append('core-scheduling cookies read per vCPU thread')
        else:
            missing.append('core-scheduling cookies: %s' % why)
