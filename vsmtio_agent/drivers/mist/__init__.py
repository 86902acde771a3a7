"""MIST on a libvirt host: what it measures and how it protects.

Beside the libvirt driver, which composes it over the one ledger (the
driver's checkpoint and its owners), never through callbacks:

* **measure** (:mod:`.meter`): the reservation each running domain's
  flavor holds (its block I/O is the sampler's, as every domain's);
* **protect** (:meth:`MistHost.apply`) the domains in the policy's
  protection set, and release the others, through the actuators that
  record every original in the checkpoint before they change it:

  - CPU (:mod:`.cpu`): the domain's threads to SCHED_RR, with a runtime
    sized to its reservation granted to its cgroups, only where the host
    has RT group scheduling (a budget of the VM's own); else, the
    cpu-shares fallback, logged once and reported by ``check`` and
    ``status`` (:meth:`MistHost.cpu_mode`);
  - block I/O: the domain's ``blkiotune`` weight, where the host has
    one: under an I/O scheduler without proportional weights libvirt
    refuses even to read it, and the lever is skipped, said once and
    reported by ``check`` and ``status`` (:meth:`MistHost.blkio_mode`),
    asked again every :data:`BLKIO_RECHECK` seconds;
  - interrupts: the IRQs of the devices a protected domain alone owns
    (:mod:`.devices`) or a configured set, less a ban list, block and
    network ones on disjoint host CPUs
    (:func:`vsmtio_agent.policy.mist.irq_plan`); while irqbalance runs,
    only the IRQs it is told to leave alone.

Every knob MIST writes it claims first in the ledger (MIST outranks the
split and LTCR) and releases when it writes the original back. A
mechanism the host refuses (permission, unsupported) is reported once and
not tried again. Restoring at stop, after a crash and by ``vsmtio-agent
restore`` is the driver's, through the same actuators, whatever MIST's
configuration is then.
"""

import time

import libvirt
from oslo_log import log as logging

from vsmtio_agent.actuators import attempt
from vsmtio_agent.actuators import base as act_base
from vsmtio_agent.actuators import blkio as blkio_act
from vsmtio_agent.actuators import irq as irq_act
from vsmtio_agent.actuators import ledger
from vsmtio_agent.actuators import rt
from vsmtio_agent.drivers.mist import cpu as cpu_mod
from vsmtio_agent.drivers.mist import devices
from vsmtio_agent.drivers.mist import meter as meter_mod
from vsmtio_agent.linux import iosched
from vsmtio_agent.linux import topology
from vsmtio_agent.policy import mist

LOG = logging.getLogger(__name__)

CPU, BLKIO, IRQ = 'cpu', 'blkio', 'irq'

# How long a domain whose weight libvirt refused is left alone before it
# is asked again: the operator may load BFQ on a running host, and asking
# costs one libvirt call.
BLKIO_RECHECK = 600.0


class MistHost(object):
    """Measures reserved domains and applies MIST's protection set."""

    def __init__(self, opts, record):
        """Build the actuators over ``record``: the driver's checkpoint."""
        self.opts = opts
        self.record = record
        self.owners = record.owners
        self.cpu = cpu_mod.CpuProtection(opts, record)
        self.irq = irq_act.IrqAffinity(record, opts.procfs_root)
        self.unsupported = {}       # mechanism -> why it is not tried
        self.protected = {}         # uuid -> {'cpu': 'rt'|'shares', ...}
        self.meter = meter_mod.Meter()
        self._irq_refused = set()
        self._irq_said = set()      # reasons already logged
        self._cpu_said = set()      # reasons for no real time, logged
        self.blkio_refused = {}     # uuid -> when libvirt refused its weight
        self.blkio_why = None       # why the host has no weight, if not
        self.blkio_seen = False     # a weight was read: the lever exists
        self._blkio_said = set()    # reasons for no weight, logged
        self.clock = time.monotonic
        self.irq_plan = {}          # the IRQs planned last, and their CPUs

    def reservation(self, entry):
        """The reservation MIST honours for a running domain's entry."""
        return self.meter.reservation(entry)

    def retain(self, uuids):
        """Forget what was read of domains not in ``uuids``."""
        self.meter.retain(uuids)
        for uuid in set(self.blkio_refused) - set(uuids):
            del self.blkio_refused[uuid]

    # -- protecting --------------------------------------------------------

    def apply(self, protect, domains, log):
        """Protect the domains in ``protect`` and release the others.

        ``domains`` is the driver's :class:`~vsmtio_agent.drivers.libvirt.
        domains.Domains`; ``log`` its :class:`~vsmtio_agent.drivers.
        libvirt.applylog.ApplyLog` of this apply.
        """
        for uuid in sorted(set(self.protected) - set(protect)):
            entry = domains.get(uuid)
            LOG.info('MIST: releasing %s (%s): no longer needs protection',
                     getattr(entry, 'name', '?'), uuid)
            self._release(uuid, entry, log)
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
        self._interrupts(domains, log)

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
                self.cpu.rt_threads(entry, self.meter.reserved(entry.uuid),
                                    log)
                held[CPU] = 'rt'
                return
            except cpu_mod.NoRtBudget as exc:
                # the host's configuration, not a failed change: nothing
                # was changed, and the fallback is the answer
                self._no_real_time(str(exc))
                why = 'no per-VM real-time budget on this host'
                held.pop(CPU, None)
                self.cpu.release_threads(entry.uuid, log)
            except act_base.ActuatorError as exc:
                why = str(exc)
                log.fail()
                held.pop(CPU, None)
                self.cpu.release_threads(entry.uuid, log)
        else:
            why = 'vCPU threads of %s not found' % entry.name
        self._shares_fallback(entry, why, log)

    def _no_real_time(self, why):
        """Say once per reason that protected VMs get no real time."""
        if why in self._cpu_said:
            return
        self._cpu_said.add(why)
        factor = self.opts.mist_cpu_shares_factor
        LOG.warning('MIST: %s: protected VMs get %s instead of real-time '
                    'priority', why, 'cpu shares x%.1f' % factor
                    if factor != 1 else 'no CPU protection (the cpu shares '
                    'fallback is off)')

    def cpu_mode(self):
        """(real time, one line): how MIST protects a VM's CPU on this host.

        Real time only with a per-VM budget (RT group scheduling); else
        the cpu shares fallback, and why. For ``check`` and ``status``.
        As for a guest's thread: libvirt puts them below the root group.
        """
        budget, why = rt.per_vm_budget(
            self.opts.procfs_root, self.cpu.cgroup_root,
            'machine' if self.cpu.runtime else None,
            self.opts.mist_rt_min_other_share)
        if budget:
            return True, ('real-time priority (SCHED_RR) with a per-VM '
                          'budget: %s' % why)
        factor = self.opts.mist_cpu_shares_factor
        if factor == 1:
            return False, ('no CPU protection: %s, and the cpu shares '
                           'fallback is off (mist_cpu_shares_factor = 1)'
                           % why)
        return False, ('cpu shares x%.1f instead of real-time priority: %s'
                       % (factor, why))

    def _shares_fallback(self, entry, why, log):
        factor = self.opts.mist_cpu_shares_factor
        if factor == 1:
            self._refuse(CPU, '%s; the shares fallback is off' % why, log)
            return
        try:
            if self.cpu.raise_shares(entry, factor):
                log.done()
            self.protected[entry.uuid][CPU] = 'shares'
            LOG.info('MIST: %s gets %.1fx cpu shares instead of real-time '
                     'priority: %s', entry.name, factor, why)
        except act_base.ActuatorError as exc:
            log.fail()
            if exc.denied:
                self._refuse(CPU, '%s; cpu shares: %s' % (why, exc), log)
            else:
                log.note('MIST cpu: %s' % exc)

    def _protect_blkio(self, entry, log):
        """The domain's weight, where the host has one (asked per domain).

        Read before anything is claimed or recorded: a refusal
        (:class:`~vsmtio_agent.actuators.blkio.Unavailable`) leaves the
        domain alone for :data:`BLKIO_RECHECK` seconds, counts no
        failure and is said once. A weight the agent set before the
        refusal stays recorded and claimed, for the release to put back.
        """
        if BLKIO in self.unsupported:
            return
        refused = self.blkio_refused.get(entry.uuid)
        if refused is not None and self.clock() - refused < BLKIO_RECHECK:
            return
        actuator = blkio_act.BlkioWeight(entry.record(self.record),
                                         entry.dom)
        try:
            current = actuator.read(blkio_act.KEY)
        except blkio_act.Unavailable as exc:
            self.blkio_refused[entry.uuid] = self.clock()
            self._no_blkio([entry.dom], str(exc))
            return
        except act_base.ActuatorError as exc:
            log.fail()
            log.note('MIST blkio: %s' % exc)
            return
        self.blkio_refused.pop(entry.uuid, None)
        self._blkio_available()
        try:
            self.owners.claim(ledger.MIST, actuator.kind, entry.uuid,
                              blkio_act.KEY)
            if current != self.opts.mist_blkio_weight:
                attempt.write(actuator, blkio_act.KEY,
                              self.opts.mist_blkio_weight)
                log.done()
            self.protected[entry.uuid][BLKIO] = True
        except blkio_act.Unavailable as exc:
            self.blkio_refused[entry.uuid] = self.clock()
            self._no_blkio([entry.dom], str(exc))
        except act_base.ActuatorError as exc:
            log.fail()
            if exc.denied:
                self._refuse(BLKIO, str(exc), log)
            else:
                log.note('MIST blkio: %s' % exc)

    def _no_blkio(self, doms, refusal):
        """Keep why the host has no block I/O weight; say it once.

        libvirt's refusal, with the scheduler of the disks under the
        images of ``doms`` where sysfs shows them (the usual cause). One
        refusal is said once, however many domains meet it; a reason
        that names the scheduler replaces one that could not.
        """
        sources = []
        for dom in doms:
            try:
                sources += devices.disk_sources(dom.XMLDesc(0))
            except (libvirt.libvirtError, ValueError):
                continue
        found = iosched.schedulers(self.opts.sysfs_root, sources)
        names = set(found.values())
        if names and not names & set(iosched.PROPORTIONAL):
            why = ('the host\'s I/O scheduler (%s) has no proportional '
                   'weights (bfq): libvirt: %s'
                   % (', '.join('%s on %s' % (found[d], d)
                                for d in sorted(found)), refusal))
        elif self.blkio_why is not None:
            why = self.blkio_why
        else:
            why = 'libvirt refuses the domain\'s weight: %s' % refusal
        self.blkio_why = why
        if refusal not in self._blkio_said:
            self._blkio_said.add(refusal)
            LOG.warning('MIST blkio: not available: %s; protected VMs get '
                        'CPU and interrupt protection only', why)

    def _blkio_available(self):
        """A weight was read: say so once if it had been refused."""
        if self.blkio_why is not None and not self.blkio_refused:
            LOG.info('MIST blkio: available again')
            self.blkio_why = None
            self._blkio_said.clear()
        self.blkio_seen = True

    def blkio_mode(self, doms=()):
        """(available or None, one line): MIST's block I/O lever here.

        From what libvirt said of the domains MIST protected; where it
        protected none yet (``check``), from reading the weight of the
        running libvirt domains ``doms`` (reading only; None if there are
        none to ask). For ``check`` and ``status``.
        """
        doms = list(doms)
        if self.blkio_why is None and not self.blkio_seen:
            for dom in doms:
                try:
                    blkio_act.BlkioWeight(None, dom).read(blkio_act.KEY)
                except blkio_act.Unavailable as exc:
                    # the disks under every running domain's images
                    self._no_blkio(doms, str(exc))
                    break
                except act_base.ActuatorError:
                    continue
                self.blkio_seen = True
                break
        if self.blkio_why is not None:
            return False, 'not available: %s' % self.blkio_why
        if BLKIO in self.unsupported:
            return False, 'not available: %s' % self.unsupported[BLKIO]
        if self.blkio_seen:
            return True, ('the domain\'s blkiotune weight, %d'
                          % self.opts.mist_blkio_weight)
        return None, ('the domain\'s blkiotune weight, %d, where the '
                      'host\'s I/O scheduler weighs it (bfq): no running '
                      'domain to ask' % self.opts.mist_blkio_weight)

    def _release(self, uuid, entry, log):
        """Everything MIST holds of the domain back to its original.

        A domain that is gone took its values with it (the driver dropped
        its record): only MIST's claims on it are left to let go.
        """
        self.protected.pop(uuid, None)
        self.cpu.release_threads(uuid, log)
        if entry is not None:
            try:
                self.cpu.release_shares(entry)
                if self.owners.holds(ledger.MIST, blkio_act.KIND, uuid,
                                     blkio_act.KEY):
                    blkio_act.BlkioWeight(entry.record(self.record),
                                          entry.dom).restore(blkio_act.KEY)
            except act_base.ActuatorError as exc:
                log.fail()
                log.note('MIST release of %s: %s' % (uuid, exc))
                return
        self.owners.release_all(ledger.MIST, uuid)

    def _say_once(self, why):
        if why not in self._irq_said:
            self._irq_said.add(why)
            LOG.warning('MIST interrupts: %s', why)

    def _wanted_irqs(self, domains, irqs, log):
        """``(block, network)`` IRQs to separate for the protected set."""
        if self.opts.mist_irq_scope == 'pattern':
            return mist.irq_classes(irqs, self.opts.mist_block_irq_pattern,
                                    self.opts.mist_net_irq_pattern)
        block, net = set(), set()
        for uuid in sorted(self.protected):
            entry = domains.get(uuid)
            if entry is None:
                continue
            try:
                found = devices.domain_irqs(self.opts.sysfs_root,
                                            entry.dom.XMLDesc(0))
            except (libvirt.libvirtError, ValueError) as exc:
                log.note('MIST irq: devices of %s: %s' % (entry.name, exc))
                continue
            block |= found[0]
            net |= found[1]
            for problem in found[2]:
                self._say_once('%s: %s' % (entry.name, problem))
        return block, net

    def _plan(self, domains, log):
        """``({irq: CPUs}, {irq: action names})`` for this period."""
        if not self.protected:
            return {}, {}
        try:
            irqs = irq_act.read_interrupts(self.opts.procfs_root)
            cpus = topology.online_cpus(self.opts.sysfs_root)
            block_cpus = (topology.parse_cpu_list(
                self.opts.mist_block_irq_cpus)
                if self.opts.mist_block_irq_cpus else None)
        except (OSError, ValueError) as exc:
            self._refuse(IRQ, 'cannot read interrupts or CPUs: %s' % exc,
                         log)
            return None, None
        block, net = self._wanted_irqs(domains, irqs, log)
        banned = set(self.opts.mist_irq_ban) | self._irq_refused
        plan = mist.irq_plan(block & set(irqs), net & set(irqs), cpus,
                             block_cpus, banned)
        balancer = irq_act.irqbalance(self.opts.procfs_root)
        if balancer is not None and plan:
            pid, left_alone = balancer
            kept = {n: c for n, c in plan.items() if n in left_alone}
            if len(kept) < len(plan):
                self._say_once(
                    'irqbalance (pid %d) runs and would move IRQs %s back '
                    'within seconds: not moving them (ban them in its '
                    'IRQBALANCE_ARGS with --banirq, or stop it)'
                    % (pid, topology.format_cpu_list(set(plan) - set(kept))))
            plan = kept
        return plan, irqs

    def _interrupts(self, domains, log):
        """Move the planned IRQs; give back the recorded ones not planned.

        The plan follows the protected set: a domain released takes its
        devices' IRQs out of it, irqbalance starting takes out what it
        would fight over, and what leaves the plan goes back (if it still
        serves the device it did when moved).
        """
        if not self.opts.mist_irq_separation:
            return
        plan, irqs = ({}, {}) if IRQ in self.unsupported else self._plan(
            domains, log)
        if plan is None:
            return
        self.irq_plan = plan
        self._give_back(set(self.record.keys(self.irq.kind))
                        - {str(n) for n in plan}, log)
        for number, want in sorted(plan.items()):
            self.owners.claim(ledger.MIST, self.irq.kind, None, str(number))
            try:
                if self.irq.move(number, want, irqs[number]):
                    log.done()
                    LOG.info('MIST: IRQ %d (%s) -> CPUs %s', number,
                             irqs[number], topology.format_cpu_list(want))
            except act_base.ActuatorError as exc:
                self._irq_refused.add(number)
                self.owners.release(ledger.MIST, self.irq.kind, None,
                                    str(number))
                log.fail()
                log.note('MIST irq: %s' % exc)
                if exc.denied:
                    # half a separation is none: what was moved goes back
                    self._refuse(IRQ, str(exc), log)
                    self._give_back(set(self.record.keys(self.irq.kind)),
                                    log)
                    return

    def _give_back(self, keys, log):
        """The recorded IRQs ``keys`` to their originals (if still theirs)."""
        if keys and not self.protected:
            LOG.info('MIST: interrupts back where they were')
        for key in sorted(keys, key=int):
            try:
                self.irq.restore(key)
                self.owners.release(ledger.MIST, self.irq.kind, None, key)
            except act_base.ActuatorError as exc:
                log.fail()
                log.note('MIST irq %s: %s' % (key, exc))

    # -- after a restore ---------------------------------------------------

    def reset(self):
        """Forget what was protected: the driver restored every original."""
        self.protected.clear()
        self.cpu.reset()

    def describe(self, doms=()):
        """(capabilities, missing) lines for ``vsmtio-agent check``.

        ``doms``: the running libvirt domains, whose block I/O weight is
        read where MIST has not asked libvirt yet.
        """
        caps = ['MIST: I_cpu threshold %.3f, %d periods to act, %d to '
                'release' % (self.opts.mist_icpu_threshold,
                             self.opts.mist_act_periods,
                             self.opts.mist_clear_periods)]
        real_time, line = self.cpu_mode()
        missing = []
        (caps if real_time else missing).append('MIST cpu: %s' % line)
        weight, line = self.blkio_mode(doms)
        (missing if weight is False else caps).append('MIST blkio: %s'
                                                      % line)
        if self.opts.mist_irq_separation:
            caps.append('MIST interrupts: %s%s' % (
                'those of the devices a protected VM alone owns '
                '(assigned to it)'
                if self.opts.mist_irq_scope == 'domain'
                else 'every IRQ matching the patterns',
                '; never IRQs %s' % ','.join(
                    str(n) for n in sorted(self.opts.mist_irq_ban))
                if self.opts.mist_irq_ban else ''))
            balancer = irq_act.irqbalance(self.opts.procfs_root)
            if balancer is not None:
                missing.append('MIST interrupts: irqbalance (pid %d) runs: '
                               'only the IRQs its --banirq names are moved'
                               % balancer[0])
        missing += ['MIST %s: %s' % kv for kv in sorted(
            self.unsupported.items()) if kv[0] != BLKIO]
        return caps, missing
