"""Keeping the recorded originals true to the host while the agent runs.

Between a start's recovery and a stop's restore, the checkpoint must keep
saying exactly what the agent changed and what each knob was before, or a
restore would write back the wrong value or leave a change behind. Each
apply therefore first reconciles it with what happened since the last
one: the guard switched a mechanism off (its knobs go back), a domain
arrived carrying another agent's originals (they go back), a domain left
(its records go), or a change failed (its original is still in place).
Every write back goes through the :class:`~vsmtio_agent.drivers.libvirt.
recovery.Restorer`, as at a stop.
"""

import libvirt
from oslo_log import log as logging

from vsmtio_agent.actuators import kernel_knob
from vsmtio_agent.actuators import ledger
from vsmtio_agent.actuators import pinning
from vsmtio_agent.actuators import rass_class
from vsmtio_agent.actuators import shares as shares_mod
from vsmtio_agent.drivers import base

LOG = logging.getLogger(__name__)


class Reconciler:
    """The checkpoint kept in step with the host, through a restorer."""

    def __init__(self, restorer):
        self.restorer = restorer
        self.checkpoint = restorer.checkpoint
        self.connection = restorer.connection
        self.domains = restorer.domains
        self.timeout = restorer.timeout

    def withdraw(self, decision, log):
        """Put back what belongs to mechanisms ``decision`` turns off.

        The split's pins, shares and RASS classes when it is off; the
        retention timeout knob when retention is off. Recorded originals
        are written back and leave the checkpoint, as at stop.
        """
        restorer = self.restorer
        if not decision.split and self.checkpoint.domains():
            try:
                conn = self.connection.get()
            except base.HostDriverError as exc:
                log.fail('cannot withdraw the split: %s' % exc)
                conn = None
            if conn is not None:
                for uuid in sorted(self.checkpoint.domains()):
                    if restorer.restore_domain(conn, uuid, ledger.RASS):
                        log.done()
                    else:
                        log.fail()
                restorer.save()
        if not decision.retention and self.timeout.applied is not None:
            knob, _why = self.timeout.target()
            if knob is not None and knob.relpath in self.checkpoint.keys(
                    kernel_knob.KIND):
                error = restorer.restore_host(restorer.knobs, knob.relpath)
                if error:
                    log.fail(error)
                    return
                self.checkpoint.owners.release(
                    ledger.LTCR, restorer.knobs.kind, None, knob.relpath)
                restorer.save()
                log.done()
            self.timeout.applied = None

    def adopt(self, log):
        """Write back the originals domains arrived carrying.

        Each domain incarnation the checkpoint knows nothing of that
        carries originals (:mod:`~vsmtio_agent.drivers.libvirt.carried`:
        it arrived by live migration with another agent's changes, or this
        host's checkpoint was lost) has them recorded as its own and put
        back before anything is planned, as at a stop. Carried pins that
        name a CPU this host does not have are not taken.
        """
        arrived = [e for e in self.domains.values() if e.carried is not None]
        if not arrived:
            return
        try:
            conn = self.connection.get()
            ncpus = conn.getCPUMap()[0]
        except (base.HostDriverError, libvirt.libvirtError) as exc:
            log.fail('cannot take the originals domains carry: %s' % exc)
            return
        for entry in arrived:
            carried, entry.carried = entry.carried, None
            record = self.checkpoint.domain(entry.uuid, entry.id, entry.name)
            if not record.empty:
                continue    # this agent's own: the checkpoint has them
            taken = [(kind, key, value)
                     for kind, key, value in carried.originals
                     if kind != pinning.KIND or max(value, default=-1)
                     < ncpus and value]
            left = len(carried.originals) - len(taken)
            LOG.info('Domain %s (%s) carries %d original(s) the agent on '
                     '%s recorded%s; writing them back', entry.label,
                     entry.uuid, len(taken), carried.host,
                     ' (%d pin(s) naming CPUs not on this host left out)'
                     % left if left else '')
            if not taken:
                continue
            try:
                with self.checkpoint.deferred():
                    for kind, key, value in taken:
                        record.record(kind, key, value)
            except OSError as exc:
                self.checkpoint.drop_domain(entry.uuid)
                log.fail('cannot record the originals %s carries: %s'
                         % (entry.label, exc))
                continue
            if self.restorer.restore_domain(conn, entry.uuid):
                log.done()
            else:
                log.fail()
            self.restorer.save()

    def forget(self, uuid, why):
        """Drop a domain that is gone, with its recorded originals."""
        entry = self.domains.pop(uuid)
        name = self.checkpoint.drop_domain(uuid)
        self.checkpoint.owners.drop(uuid)
        if name is not None:
            LOG.info('Domain %s (%s) %s; forgetting the originals recorded '
                     'for it.', name, uuid, why)
            self.restorer.save()
        elif entry is not None:
            LOG.info('Domain %s (%s) %s.', entry.label, uuid, why)

    def prune(self):
        """Drop records of domain values that are (still) the originals.

        A change that failed left its original in place: nothing to
        restore, and a later restore would only fail the same way.
        Returns whether anything was dropped.
        """
        pruned = False
        for uuid, (dom_id, _name) in self.checkpoint.domains().items():
            entry = self.domains.get(uuid)
            if entry is None or entry.id != dom_id:
                continue
            record = entry.record(self.checkpoint)
            now = {pinning.KIND: lambda k: entry.pins.get(int(k)),
                   shares_mod.KIND: lambda k: (entry.shares[1]
                                               if entry.shares else None),
                   rass_class.KIND: lambda k: entry.rass.get(int(k))}
            for kind, current in now.items():
                for key in record.keys(kind):
                    original = record.original(kind, key)
                    if kind == pinning.KIND:
                        original = frozenset(original)
                    if current(key) == original:
                        record.forget(kind, key)
                        pruned = True
        return pruned
