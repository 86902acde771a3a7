"""The host driver for a real libvirt/KVM compute host.

It observes each running domain's vCPUs (libvirt domain stats, KVM's
per-vCPU halt statistics, the vCPU threads' procfs counters) and applies the
policy's decisions through one actuator per kind of knob: live vCPU
pinning, domain cpu shares, the retention timeout knob the kernel offers
and, on the patched kernel, RASS classes. It never leaves the host worse:
every original is checkpointed before the first change and put back on
stop, at the next start after a crash, and a vanished domain is forgotten.

Two modes (:meth:`LibvirtHostDriver.describe` says which and why):

``patched``
    the host kernel carries ``host_kernel_patches``: retention counters and
    the retention timeout come from its sysfs ABI.
``stock``
    KVM's halt-polling statistics stand in for retention (time a halted vCPU
    keeps its hyperthread polling instead of sleeping), and LTCR's timeout
    drives ``kvm.halt_poll_ns`` where that is writable.

The parts, each in its own module: ``connection`` (reconnecting with
backoff), ``domains`` (the tracked domains and their vCPU threads),
``qemu_identity`` (which process is a domain's QEMU: libvirt's pid file
or the domain's cgroup, never a process's name or command line),
``sampling`` (one snapshot per period), ``planning`` (what a decision
changes), ``applylog`` (one apply's result), ``recovery`` (the lock,
crash recovery and restore), ``reconcile`` (the recorded originals kept
true while the agent runs) and ``survey`` (what the host offers, for
:meth:`LibvirtHostDriver.describe`).
"""

import threading

from oslo_log import log as logging

from vsmtio_agent.actuators import base as actuator_base
from vsmtio_agent.actuators import checkpoint as checkpoint_mod
from vsmtio_agent.actuators import libvirt_errors
from vsmtio_agent.drivers import base
from vsmtio_agent.drivers.libvirt import applylog
from vsmtio_agent.drivers.libvirt import connection as connection_mod
from vsmtio_agent.drivers.libvirt import domains as domains_mod
from vsmtio_agent.drivers.libvirt import planning
from vsmtio_agent.drivers.libvirt import reconcile
from vsmtio_agent.drivers.libvirt import recovery
from vsmtio_agent.drivers.libvirt import sampling
from vsmtio_agent.drivers.libvirt import survey
from vsmtio_agent.drivers import mist as mist_mod
from vsmtio_agent.linux import sched_core
from vsmtio_agent.linux import topology as topology_mod
from vsmtio_contract import kernel_abi

LOG = logging.getLogger(__name__)

_PATCHED_STATS = sampling.PATCHED_STATS


class LibvirtHostDriver(base.HostDriver):
    """A libvirt/KVM host driven through libvirt, procfs and sysfs."""

    def __init__(self, conf):
        self.conf = conf
        opts = conf.vsmtio_agent
        self.opts = opts
        self.uri = opts.libvirt_uri
        self._wake = threading.Event()
        self._topology = None
        self.abi_version, abi_why = kernel_abi.patched_abi(opts.sysfs_root)
        self.checkpoint = checkpoint_mod.Checkpoint(
            opts.checkpoint_path, checkpoint_mod.boot_id(opts.procfs_root))
        self.domains = domains_mod.Domains(self.uri, opts.procfs_root,
                                           opts.sysfs_root)
        self.connection = connection_mod.Connection(
            self.uri, opts.libvirt_retry_initial, opts.libvirt_retry_max,
            on_lost=self.domains.clear)
        self.degradations = planning.Degradations()
        self.planner = planning.Planner(
            opts, self.domains, self.checkpoint, self.topology,
            bool(self.abi_version), self.degradations)
        self.restorer = recovery.Restorer(
            opts, self.checkpoint, self.connection, self.domains,
            self.planner.timeout)
        self.reconciler = reconcile.Reconciler(self.restorer)
        self.sampler = sampling.Sampler(
            self.connection, self.domains, opts.procfs_root,
            bool(self.abi_version), self.reconciler.forget,
            opts.switch_read_periods, opts.vcpu_source, opts.served_stats)
        # core scheduling: libvirt's setting, for its system daemon only
        if self.uri.startswith('qemu:///system'):
            fences, sched_core_why = sched_core.libvirt_fences()
        else:
            fences, sched_core_why = None, (
                'qemu.conf not read for %s' % self.uri)
        self.sampler.core_scheduling = fences
        # MIST: block I/O, reservations and its protection, over the same
        # checkpoint; the checkpoint's owners say who writes a knob
        self.mist = None
        if getattr(opts, 'mist', False):
            self.mist = mist_mod.MistHost(opts, self.checkpoint)
            self.sampler.mist = self.restorer.mist = self.mist
        self.survey = survey.Survey(
            opts, self.uri, self.topology, self.connection, self.domains,
            self.sampler, self.planner.timeout, self.degradations,
            (self.abi_version, abi_why), sched_core_why, self.mist)

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

    def advance(self, seconds):
        self._wake.wait(seconds)

    def interrupt(self):
        self._wake.set()

    def sample(self):
        """Observe every running domain; writes nothing to the host."""
        return self.sampler.sample()

    def recover(self):
        return self.restorer.recover()

    def restore(self):
        self.restorer.restore()

    def apply(self, decision):
        # Changing the host is apply's job, and it must never save a
        # checkpoint over one a dead agent left: recover first, if the
        # daemon has not (a driver used outside the daemon).
        self.restorer.recover()
        if not self.restorer.lock.held():
            return base.ApplyResult(messages=(
                'another vsmtio agent owns %s; not applying'
                % self.opts.checkpoint_path,))
        log = applylog.ApplyLog()
        # A domain that arrived with another agent's changes gets what nova
        # gave it back first: it starts as a domain booted here does.
        self.reconciler.adopt(log)
        # What the guard switched off goes back to the host's own values;
        # a knob is never moved for a mechanism the agent does not keep.
        self.reconciler.withdraw(decision, log)
        if self.mist is not None:
            self.mist.apply(decision.protect, self.domains, log)
        changes = [c for c in self.planner.plan(decision, log)
                   if self._claim(c, log)]
        if not changes:
            self._flush(log)
            return log.result()
        # Originals first, on disk, before any change.
        kept = []
        try:
            with self.checkpoint.deferred():
                for change in changes:
                    if not self.degradations.allows(change.mechanism):
                        continue    # refused this apply: not recorded
                    try:
                        change.actuator.keep(change.key)
                        kept.append(change)
                    except actuator_base.ActuatorError as exc:
                        self._failed(change, exc, log)
        except OSError as exc:
            raise base.HostDriverError(
                'cannot write checkpoint %s: %s; changing nothing'
                % (self.checkpoint.path, exc))
        for change in kept:
            self._write(change, log, decision.trial)
        if log.failed:
            self.reconciler.prune()
        self._flush(log)
        return log.result()

    def preview(self, decision):
        """The changes an apply of ``decision`` would make; writes nothing.

        The plan of pins, shares, the timeout and RASS classes against the
        host as last sampled (the timeout's knob looked at, not probed).
        What the guard withdraws and MIST protects are not listed.
        """
        return [change.describe() for change in self.planner.plan(
            decision, applylog.ApplyLog(), probe=False)]

    def domain_names(self):
        """``{uuid: label}``: nova's server name and the domain's."""
        return {entry.uuid: entry.label for entry in self.domains.values()}

    def mist_levers(self):
        """MIST's levers here, as last found; none with MIST off.

        The block I/O line is what libvirt said of the domains MIST
        protected (the status file is written every period: nothing is
        asked for it).
        """
        if self.mist is None:
            return {}
        return {'CPU': self.mist.cpu_mode()[1],
                'block I/O': self.mist.blkio_mode()[1]}

    def refusals(self):
        """The retention timeout and the split, where the host refused them.

        The timeout's knob read-only or failing a write (``halt_poll_ns``
        on a host whose kvm module was loaded without it writable), and
        vCPU pinning denied (the split is then observed only). A denied
        RASS class or cpu shares degrade the split without refusing it:
        ``check`` lists those.
        """
        out = {}
        why = self.planner.timeout.refusal()
        if why is not None:
            out['retention'] = why
        pins = self.degradations.reasons.get(planning.PIN)
        if pins is not None:
            out['split'] = 'vCPU pinning denied: %s' % pins
        return out

    def _flush(self, log):
        """Originals forgotten this apply leave the file too."""
        try:
            self.checkpoint.flush()
        except OSError as exc:
            log.note('cannot update checkpoint %s: %s'
                     % (self.checkpoint.path, exc))

    def _claim(self, change, log):
        """Whether the ledger lets the change's mechanism write its knob."""
        if self.checkpoint.owners.claim(change.owner, *change.knob):
            return True
        log.same()
        return False

    def _write(self, change, log, trial):
        if change.mechanism == planning.IO_CPUS:
            self.planner.io_cpus_done = True
        if not self.degradations.allows(change.mechanism):
            return      # one refusal is enough to stop asking
        try:
            change.actuator.write(change.key, change.value)
        except actuator_base.ActuatorError as exc:
            self._failed(change, exc, log)
            return
        self.planner.written(change)
        # a probe's arms change knobs every period: its verdict is logged
        LOG.log(logging.DEBUG if trial else logging.INFO,
                'Changed %s', change.describe())
        log.done()

    def _failed(self, change, exc, log):
        if isinstance(exc, libvirt_errors.DomainGone):
            self.reconciler.forget(change.entry.uuid,
                                   'disappeared before apply')
            log.same()
            return
        label = change.label
        log.fail('%s: %s' % (label, exc) if label else str(exc))
        if change.mechanism == planning.TIMEOUT:
            self.planner.timeout.refused(str(exc))
            self.degradations.refuse(planning.TIMEOUT, str(exc))
        elif exc.denied and change.mechanism != planning.IO_CPUS:
            self.degradations.refuse(change.mechanism, str(exc))
        elif label and self.connection.lost(exc):
            log.note('libvirt connection lost during apply')

    def close(self):
        self._wake.set()
        self.connection.close()
        self.sampler.close()
        self.restorer.lock.release()

    def describe(self):
        return self.survey.describe()

    def vcpu_threads(self):
        """{VcpuRef: tid} of the vCPU threads found (for status, tests)."""
        return self.domains.vcpu_threads()

    def vcpu_pins(self):
        """{VcpuRef: frozenset of CPUs} as the driver last saw or set them."""
        return self.domains.vcpu_pins()
