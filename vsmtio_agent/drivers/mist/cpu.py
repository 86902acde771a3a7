"""MIST's CPU protection of a reserved domain (paper §IV).

The domain's threads move to SCHED_RR (:mod:`~vsmtio_agent.actuators.rt`)
only where the host has RT group scheduling: the domain's cgroups are
granted a runtime sized to its reservation (:func:`~vsmtio_agent.actuators.
rt.budget_us`), split evenly over the cgroups that hold its RT threads:
which thread serves its I/O (the vCPU that submits, the emulator or I/O
thread that completes) is not known, and an even split keeps the domain's
total at its budget. Without a budget of the VM's own (a host whose RT
runtime is bounded only host-wide, or not at all, or leaves other tasks
too little) no thread is made RT (:class:`NoRtBudget`, raised before any
change) and the fallback multiplies the domain's cpu shares: the knob
RASS's split also raises, so MIST claims it in the ledger first (MIST
outranks the split) and computes its value from the recorded original,
never from the split's.
"""

import os

from oslo_log import log as logging

from vsmtio_agent.actuators import attempt
from vsmtio_agent.actuators import base as act_base
from vsmtio_agent.actuators import ledger
from vsmtio_agent.actuators import rt
from vsmtio_agent.actuators import shares as shares_act
from vsmtio_agent import model

LOG = logging.getLogger(__name__)

MAX_SHARES = 10000


class NoRtBudget(act_base.ActuatorError):
    """The host cannot give this VM a real-time budget of its own.

    Not a failure: the host's configuration, which the cpu shares fallback
    answers. Raised before any thread or cgroup is changed.
    """


class CpuProtection:
    """Real-time threads, their runtime, or the cpu-shares fallback."""

    def __init__(self, opts, record):
        self.opts = opts
        self.record = record
        self.owners = record.owners
        self.policy = rt.ThreadPolicy(record, opts.procfs_root)
        self.cgroup_root = os.path.join(opts.sysfs_root, 'fs/cgroup')
        controller = rt.cpu_controller_root(self.cgroup_root)
        self.runtime = (rt.CgroupRtRuntime(record, controller)
                        if controller else None)
        self._threads = {}          # uuid -> {thread key: cgroup or None}
        self._reserved = {}         # uuid -> its model.Reservation
        self.budgets = {}           # uuid -> (granted, needed) µs/period

    def _write(self, actuator, key, value, scope=None):
        self.owners.claim(ledger.MIST, actuator.kind, scope, key)
        attempt.write(actuator, key, value)

    def _restore(self, actuator, key, scope=None):
        actuator.restore(key)
        self.owners.release(ledger.MIST, actuator.kind, scope, key)

    # -- real time -----------------------------------------------------------

    def thread_ids(self, entry):
        if self.opts.mist_rt_threads == 'vcpus':
            return sorted(entry.tids.values())
        try:
            return sorted(int(t) for t in os.listdir(os.path.join(
                self.opts.procfs_root, str(entry.pid), 'task')))
        except OSError as exc:
            raise act_base.ActuatorError('threads of %s: %s'
                                         % (entry.name, exc))

    def rt_threads(self, entry, reservation, log):
        """SCHED_RR for the domain's threads, granting runtime first.

        ``reservation`` sizes the domain's RT budget. :class:`NoRtBudget`,
        with nothing changed, where the host has no RT group scheduling
        to give it one.

        Threads get ``SCHED_RESET_ON_FORK``: a thread QEMU starts later
        (its I/O worker pool) begins in CFS and is raised at the next
        period, and none outlives a release at real-time priority.
        """
        threads = self._threads.setdefault(entry.uuid, {})
        keys = {}
        for tid in self.thread_ids(entry):
            keys['%d/%d' % (entry.pid, tid)] = rt.cpu_cgroup(
                self.opts.procfs_root, entry.pid, tid)
        first = next(iter(keys.values()), None)
        budget, why = rt.per_vm_budget(self.opts.procfs_root,
                                       self.cgroup_root, first,
                                       self.opts.mist_rt_min_other_share)
        if not budget:
            raise NoRtBudget(why)
        threads.update(keys)
        self._reserved[entry.uuid] = reservation
        self.grant()
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
                self._write(self.policy, key, want)
                log.done()

    def grant(self):
        """RT runtime for every protected domain's cgroups, top-down."""
        if self.runtime is None:
            raise act_base.ActuatorError('no cgroup v1 cpu controller under '
                                         '%s' % self.cgroup_root)
        want = {}
        for uuid, threads in sorted(self._threads.items()):
            leaves = sorted({cg for cg in threads.values() if cg})
            if not leaves:
                continue
            try:
                period = rt.period_us(self.opts.procfs_root,
                                      self.runtime.path(leaves[0]))
            except (OSError, ValueError) as exc:
                raise act_base.ActuatorError('no real-time period: %s'
                                             % exc)
            budget, need = rt.budget_us(
                self._reserved.get(uuid, model.Reservation()), period,
                self.opts.mist_rt_us_per_request,
                self.opts.mist_rt_us_per_mib, self.opts.mist_rt_runtime_us,
                self.opts.mist_rt_min_other_share)
            if self.budgets.get(uuid) != (budget, need):
                LOG.info('MIST: real-time budget of %s: %d of every %d us '
                         '(its reservation needs %d)', uuid, budget, period,
                         need)
                self.budgets[uuid] = (budget, need)
            share = max(rt.MIN_GRANT_US, budget // len(leaves))
            for leaf in leaves:
                want[leaf] = want.get(leaf, 0) + share
        # groups no longer needed go back first, children before parents
        needed = {a for leaf in want for a in rt.ancestors(leaf)}
        needed.update(want)
        for key in sorted(set(self.record.keys(self.runtime.kind)) - needed,
                          key=lambda k: (-k.count('/'), k)):
            self._restore(self.runtime, key)
        for group, value in rt.grants(self.runtime, want):
            if self.runtime.read(group) != value:
                self._write(self.runtime, group, value)

    def release_threads(self, uuid, log):
        """Threads back to their policy, then unneeded runtime back.

        What fails stays recorded for the next restore.
        """
        self._reserved.pop(uuid, None)
        self.budgets.pop(uuid, None)
        for key in sorted(self._threads.pop(uuid, {})):
            try:
                self._restore(self.policy, key)
            except act_base.ActuatorError as exc:
                log.note('MIST release: %s' % exc)
        if self.runtime is not None and self.record.keys(self.runtime.kind):
            try:
                self.grant()
            except act_base.ActuatorError as exc:
                log.note('MIST release: %s' % exc)

    # -- the cpu-shares fallback ---------------------------------------------

    def shares_actuator(self, entry):
        return shares_act.CpuShares(
            entry.record(self.record), entry.dom,
            entry.shares[0] if entry.shares else None)

    def raise_shares(self, entry, factor):
        """The domain's original shares times ``factor``; whether written.

        The original, not the value in force: the split may have raised
        it before MIST took the knob over.
        """
        actuator = self.shares_actuator(entry)
        current = actuator.read(shares_act.KEY)
        try:
            original = actuator.record.original(actuator.kind,
                                                shares_act.KEY)
        except KeyError:
            original = current
        want = min(int(round(original * factor)), MAX_SHARES)
        self.owners.claim(ledger.MIST, actuator.kind, entry.uuid,
                          shares_act.KEY)
        entry.shares = (actuator.parameter, current)
        if current == want:
            return False
        attempt.write(actuator, shares_act.KEY, want)
        entry.shares = (actuator.parameter, want)
        return True

    def release_shares(self, entry):
        """The original shares back, if MIST holds them."""
        if not self.owners.holds(ledger.MIST, shares_act.KIND, entry.uuid,
                                 shares_act.KEY):
            return
        actuator = self.shares_actuator(entry)
        try:
            original = actuator.record.original(actuator.kind,
                                                shares_act.KEY)
        except KeyError:
            original = None
        self._restore(actuator, shares_act.KEY, entry.uuid)
        if original is not None:
            entry.shares = (actuator.parameter, original)

    def reset(self):
        self._threads.clear()
        self._reserved.clear()
        self.budgets.clear()
