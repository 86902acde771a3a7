"""Putting the host back: after a crash and at stop.

The running agent's own write-backs (what the guard withdraws, what
arriving domains carry) go through the same :class:`Restorer`, from
:mod:`~vsmtio_agent.drivers.libvirt.reconcile`.

Only the agent that holds the checkpoint's lock changes or restores
anything (one agent per host). Every original goes back through the
actuator of its kind, whichever mechanism wrote it and whatever the
configuration is now (``vsmtio-agent restore`` runs with the daemon
stopped, perhaps killed, perhaps with MIST since switched off); what
cannot be written back stays recorded, to be tried again at the next stop
or start, never dropped. A domain that is
gone or was restarted has nothing of the agent's left: its originals are
dropped. So is an original that is no value the host takes (out of range,
:mod:`~vsmtio_agent.actuators.bounds`), with one error line naming it: it
could never be written back, and the rest of the record is restored.
"""

import fcntl
import os

import libvirt
from oslo_log import log as logging

from vsmtio_agent.actuators import base as actuator_base
from vsmtio_agent.actuators import blkio
from vsmtio_agent.actuators import checkpoint as checkpoint_mod
from vsmtio_agent.actuators import irq
from vsmtio_agent.actuators import kernel_knob
from vsmtio_agent.actuators import libvirt_errors
from vsmtio_agent.actuators import pinning
from vsmtio_agent.actuators import rass_class
from vsmtio_agent.actuators import rt
from vsmtio_agent.actuators import shares as shares_mod
from vsmtio_agent.drivers import base
from vsmtio_agent.drivers.libvirt import domains as domains_mod

LOG = logging.getLogger(__name__)


class HostLock:
    """The checkpoint's lock: one agent per host changes things."""

    def __init__(self, checkpoint_path):
        self.path = checkpoint_path + '.lock'
        self._fd = None
        self._held = None

    def held(self):
        """Take the lock (once); whether this agent holds it."""
        if self._held is None:
            try:
                os.makedirs(os.path.dirname(os.path.abspath(self.path)),
                            mode=0o700, exist_ok=True)
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT
                             | os.O_NOFOLLOW, 0o600)
            except OSError as exc:
                LOG.warning('Cannot open %s (%s): observing only', self.path,
                            exc)
                self._held = False
                return False
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                LOG.warning('Another vsmtio agent holds %s: this one '
                            'observes only.', self.path)
                self._held = False
                return False
            self._fd, self._held = fd, True
        return self._held

    def release(self):
        if self._fd is not None:
            os.close(self._fd)
            self._fd, self._held = None, None


def domain_actuators(record, entry, procfs_root):
    """Every actuator of a domain's knobs, with what its keys name."""
    return ((pinning.VcpuPinning(record, entry.dom), 'pinning', 'vCPU %s'),
            (rass_class.RassClass(record, procfs_root, entry.thread_of),
             'RASS class', 'vCPU %s'),
            (shares_mod.CpuShares(
                record, entry.dom, entry.shares[0] if entry.shares else None),
             'cpu shares', None),
            (blkio.BlkioWeight(record, entry.dom), 'block I/O weight',
             None))


def host_actuators(record, opts):
    """Every actuator of host-wide knobs, in restore order.

    Threads leave real time before their groups lose its runtime; the
    runtime's actuator exists only where a cgroup v1 cpu controller does.
    """
    out = [rt.ThreadPolicy(record, opts.procfs_root)]
    controller = rt.cpu_controller_root(os.path.join(opts.sysfs_root,
                                                     'fs/cgroup'))
    if controller:
        out.append(rt.CgroupRtRuntime(record, controller))
    out += [irq.IrqAffinity(record, opts.procfs_root),
            kernel_knob.KernelKnob(record, opts.sysfs_root)]
    return out


class Restorer:
    """Writes recorded originals back, each through its kind's actuator.

    The whole host after a crash (:meth:`recover`) and at stop
    (:meth:`restore`); one domain or one host-wide knob for the running
    agent (:meth:`restore_domain`, :meth:`restore_host`).
    """

    def __init__(self, opts, checkpoint, connection, domains, timeout):
        self.opts = opts
        self.checkpoint = checkpoint
        self.connection = connection
        self.domains = domains
        self.timeout = timeout
        self.mist = None        # MIST's host part, reset after a restore
        self.lock = HostLock(checkpoint.path)
        # Every actuator of host-wide knobs: each kind it records is
        # restored at stop and after a crash (a new kind joins here;
        # domain knobs join domain_actuators).
        self.host_actuators = host_actuators(checkpoint, opts)
        self.knobs = self.host_actuators[-1]
        self.recovered = False
        self.dropped = 0        # out-of-range originals dropped, in a restore

    def save(self):
        """Save the checkpoint; HostDriverError (change nothing) if not."""
        try:
            self.checkpoint.save()
        except OSError as exc:
            raise base.HostDriverError(
                'cannot write checkpoint %s: %s; changing nothing'
                % (self.checkpoint.path, exc))

    def recover(self):
        """Once per start: restore what a crashed agent left changed.

        The daemon's explicit first step (before any period), and all of
        ``vsmtio-agent restore``. Until it runs, the driver holds no lock
        and restores nothing, so ``status``, ``check`` and ``--dry-run``,
        which never call it, leave a dead agent's checkpoint and its
        changes as they are. Returns a :class:`~vsmtio_agent.drivers.base.
        Restored`.
        """
        if self.recovered:
            return base.Restored()
        self.recovered = True
        if not self.lock.held():
            return base.Restored(refused='another vsmtio agent holds %s'
                                 % self.lock.path)
        try:
            pending = self.checkpoint.load()
            pending = self.checkpoint.adopt_legacy() or pending
        except checkpoint_mod.CheckpointError as exc:
            return base.Restored(refused=str(exc))
        except OSError as exc:
            LOG.error('Cannot read checkpoint %s: %s', self.checkpoint.path,
                      exc)
            return base.Restored(refused='cannot read checkpoint %s: %s'
                                 % (self.checkpoint.path, exc))
        if not pending:
            return base.Restored()
        recorded = self.checkpoint.count()
        LOG.warning('Checkpoint %s holds %d change(s) a previous agent did '
                    'not undo (it crashed, was killed or is stopped); '
                    'restoring them.', self.checkpoint.path, recorded)
        remaining = self.restore()
        return base.Restored(recorded=recorded, remaining=remaining,
                             dropped=self.dropped)

    def restore(self):
        """Put back every recorded original; the number left recorded."""
        if not self.recovered:
            # Nothing was recovered or applied since start (a dry run): the
            # checkpoint on disk, if any, is not ours to touch.
            return 0
        if not self.lock.held():
            return 0
        remaining = 0
        self.dropped = 0
        # MIST's threads and their runtime first: RT before its budget.
        for actuator in self.host_actuators[:-1]:
            remaining += self._restore_kind(actuator)
        if self.checkpoint.domains():
            try:
                conn = self.connection.get()
            except base.HostDriverError as exc:
                conn = None
                remaining += len(self.checkpoint.domains())
                LOG.error('Cannot restore domains now (%s); their originals '
                          'stay in %s and are restored at the next start.',
                          exc, self.checkpoint.path)
            if conn is not None:
                for uuid in sorted(self.checkpoint.domains()):
                    if not self.restore_domain(conn, uuid):
                        remaining += 1
        remaining += self._restore_kind(self.knobs)
        remaining += self._unrestorable()
        self.timeout.applied = None
        self.checkpoint.owners.drop()
        if self.mist is not None:
            self.mist.reset()
        try:
            self.checkpoint.save()
        except OSError as exc:
            LOG.error('Cannot update checkpoint %s: %s',
                      self.checkpoint.path, exc)
        if remaining:
            LOG.error('%d item(s) could not be restored; kept in %s',
                      remaining, self.checkpoint.path)
        return remaining

    def _restore_kind(self, actuator):
        """Restore every original of one host-wide kind; the failures.

        Through the actuator's own ``restore_all``: its order matters
        (cgroups' RT runtime children before parents).
        """
        keys = self.checkpoint.keys(actuator.kind)
        failed = actuator.restore_all()
        left = 0
        for key, exc in failed:
            if isinstance(exc, actuator_base.Dropped):
                LOG.error('%s', exc)
                self.dropped += 1
            else:
                LOG.error('Cannot restore %s %s: %s', actuator.kind, key, exc)
                left += 1
        if len(keys) > len(failed):
            LOG.info('Restored %d %s original(s)', len(keys) - len(failed),
                     actuator.kind)
        return left

    def _unrestorable(self):
        """Originals of a kind no actuator here can write back.

        The RT runtime of cgroups when the cpu controller is gone: they
        stay recorded, counted, and said.
        """
        kinds = {a.kind for a in self.host_actuators}
        left = 0
        for kind in checkpoint_mod.HOST_KINDS:
            if kind not in kinds and self.checkpoint.keys(kind):
                LOG.error('Cannot restore %s %s: no actuator on this host',
                          kind, ', '.join(self.checkpoint.keys(kind)))
                left += len(self.checkpoint.keys(kind))
        return left

    def restore_domain(self, conn, uuid, mechanism=None):
        """Put one domain back; True when nothing of it is left to do.

        With ``mechanism``, only the knobs the ledger lets it have: a knob
        a higher-ranked mechanism holds stays as that one set it.
        """
        dom_id, name = self.checkpoint.domains()[uuid]
        try:
            dom = conn.lookupByUUIDString(uuid)
            alive = dom.isActive() and dom.ID() == dom_id
        except libvirt.libvirtError as exc:
            if exc.get_error_code() not in libvirt_errors.GONE:
                if self.connection.lost(exc):
                    return False
                LOG.error('Cannot look up domain %s: %s', uuid, exc)
                return False
            alive = False
        if not alive:
            LOG.info('Domain %s (%s) is gone or was restarted; nothing of '
                     'ours is live there.', name, uuid)
            self.checkpoint.drop_domain(uuid)
            self.checkpoint.owners.drop(uuid)
            return True
        entry = self.domains.get(uuid) or domains_mod.Domain(
            dom, uuid, dom_id, name)
        entry.dom = dom
        record = entry.record(self.checkpoint)
        rass_keys = record.keys(rass_class.KIND)
        if rass_keys:
            self.domains.threads_of(entry,
                                    1 + max(int(i) for i in rass_keys))
        ok = True
        for actuator, what, of in domain_actuators(record, entry,
                                                   self.opts.procfs_root):
            for key in record.keys(actuator.kind):
                if mechanism and not self.checkpoint.owners.may(
                        mechanism, actuator.kind, uuid, key):
                    continue
                value = record.original(actuator.kind, key)
                try:
                    actuator.restore(key)
                    failure = None
                except actuator_base.ActuatorError as exc:
                    failure = exc
                # (said outside the handler: oslo.log would append the
                # exception to an error logged inside it)
                if isinstance(failure, actuator_base.Dropped):
                    LOG.error('%s (domain %s)', failure, name)
                    self.dropped += 1
                    continue
                if failure is not None:
                    ok = False
                    LOG.error('Cannot restore %s of %s%s: %s', what, name,
                              ' ' + of % key if of else '', failure)
                    continue
                self.checkpoint.owners.free(actuator.kind, uuid, key)
                self._restored(entry, actuator, key, value)
        if ok and mechanism is None:
            self.checkpoint.drop_domain(uuid)
            self.checkpoint.owners.drop(uuid)
            LOG.info('Restored domain %s (%s)', name, uuid)
        elif ok:
            LOG.info('Restored %s\'s knobs of domain %s (%s)', mechanism,
                     name, uuid)
        return ok

    @staticmethod
    def _restored(entry, actuator, key, value):
        if actuator.kind == pinning.KIND:
            entry.pins[int(key)] = frozenset(value)
        elif actuator.kind == shares_mod.KIND:
            entry.shares = (actuator.parameter, value)
        elif actuator.kind == rass_class.KIND:
            entry.rass[int(key)] = value

    def restore_host(self, actuator, key):
        """Write a host-wide original back; the error text, if any.

        On success it leaves the checkpoint (the caller saves it).
        """
        value = self.checkpoint.original(actuator.kind, key)
        try:
            actuator.restore(key)
        except actuator_base.ActuatorError as exc:
            return str(exc)
        where = (self.knobs.knob(key).path if actuator is self.knobs
                 else '%s %s' % (actuator.kind, key))
        LOG.info('Restored %s to %s', where, value)
        return None
