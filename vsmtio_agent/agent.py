"""The agent loop: the imperative shell around the pure policy engine.

Each period the agent lets the host run (``driver.advance``), samples every
vCPU, derives the period's rates, asks the engine for a decision and hands
it to the driver. Everything host-specific is in the driver, so the same
loop drives a real KVM host and the simulated one.

:meth:`Agent.tick` returns one frozen :class:`Period`: what was observed,
decided and applied. It is the one thing the daemon, its metrics and
``status``, and the simulator runner read, so none of them can pair one
period's stats with another period's decision. :meth:`Agent.loop` is the
one loop they all run.
"""

import dataclasses
import threading
import types
from typing import Mapping
from typing import Optional

from oslo_log import log as logging

from vsmtio_agent.drivers import base
from vsmtio_agent import model
from vsmtio_agent.policy import engine as engine_mod
from vsmtio_agent.policy import mist
from vsmtio_agent.policy import monitor

LOG = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Period:
    """One period of the agent, as every consumer reads it.

    ``number`` is 0 for the start (the first sample and the initial
    timeout, no stats yet) and counts periods from 1. ``result`` is None
    when nothing was applied (a dry run). ``timeout_ns``, ``mechanisms``
    (in force this period), ``kept`` (what the guard keeps) and
    ``verdicts`` (the guard's last verdict per mechanism and VM, None
    with the guard off), ``retaining``
    (``{domain: timeout ns}`` the guard keeps, None where the host's
    timeout is host-wide or the guard is off), ``served`` (each domain's
    requests and packets per second, None where the host counts none),
    ``mist`` (MIST's verdict per reserved domain, None with MIST off)
    and ``untried`` (``{mechanism: why}`` of those the engine does not try
    on this host, which no verdict explains) are the engine's state once
    the decision was taken.
    """

    number: int
    snapshot: model.Snapshot
    stats: Mapping
    decision: model.Decision
    result: Optional[base.ApplyResult]
    timeout_ns: int
    mechanisms: frozenset
    kept: frozenset
    verdicts: Optional[tuple]
    mist: Optional[Mapping] = None
    retaining: Optional[Mapping] = None
    served: Optional[Mapping] = None
    untried: Optional[Mapping] = None

    @property
    def start(self):
        return self.number == 0

    @property
    def dry_run(self):
        return self.result is None


class Agent(object):

    def __init__(self, conf, driver, engine=None):
        self.conf = conf
        self.driver = driver
        self.topology = driver.topology()
        # a host that sets a retention timeout per VM lets the guard keep
        # retention, and search its timeout, for each VM on its own; one
        # that sets VMs' CPU weights gives it the weight lever
        knobs = driver.describe().knobs
        self.engine = engine or engine_mod.PolicyEngine(
            self.topology, engine_mod.Params.from_conf(
                conf, 'per_vm_retention' in knobs, 'vm_weights' in knobs,
                'retention' in knobs))
        # The options every period reads, read once, as the engine's Params
        # are (an oslo.config look-up runs a few Python calls, cold in the
        # period: about 7 % of a period, profiled on the kvm bench host).
        # No option of the agent is mutable: a change needs a restart.
        opts = conf.vsmtio_agent
        self._period_s = opts.period
        self._idle_switch_threshold = opts.idle_switch_threshold
        self._dry_run = opts.dry_run
        self._kept_before = frozenset()
        self.period = None          # the last Period
        self.ticks = 0
        self._halt = threading.Event()
        self._stopped = False

    # What the last period saw; None/{} until one has run after the start.

    @property
    def last_snapshot(self):
        return self.period.snapshot if self.period else None

    @property
    def last_stats(self):
        return self.period.stats if self.period else {}

    @property
    def last_decision(self):
        if self.period is None or self.period.start:
            return None
        return self.period.decision

    @property
    def last_result(self):
        return self.period.result if self.period else None

    def _apply(self, decision):
        if self._dry_run:
            LOG.info('dry run: would set timeout %d ns, %d placements, '
                     'swaps %s', decision.timeout_ns,
                     len(decision.placements),
                     ', '.join('%s<->%s' % (s.a, s.b)
                               for s in decision.swaps) or 'none')
            for domain, verdict in sorted(decision.protect.items()):
                LOG.info('dry run: would protect %s: %s', domain,
                         verdict.reason)
            for change in self.driver.preview(decision):
                LOG.info('dry run: would change %s', change)
            return None
        result = self.driver.apply(decision)
        if result is not None and result.failed:
            LOG.warning('%d of %d changes failed: %s', result.failed,
                        result.applied + result.failed,
                        '; '.join(result.messages))
        return result

    def _record(self, number, snapshot, stats, decision, result,
                served=None):
        """The period's :class:`Period`, kept as the last one.

        ``stats`` is the period's own dict (derive's, which nothing else
        holds), so the record wraps it read-only rather than copy it.
        """
        guard = self.engine.guard
        self.period = Period(
            number=number, snapshot=snapshot,
            stats=types.MappingProxyType(stats), decision=decision,
            result=result, timeout_ns=self.engine.timeout_ns,
            mechanisms=frozenset(self.engine.mechanisms),
            kept=frozenset(self.engine.kept),
            verdicts=(tuple(guard.verdicts)
                      if guard is not None else None),
            retaining=(types.MappingProxyType(dict(guard.kept.timeouts))
                       if guard is not None
                       and self.engine.params.guard.per_vm else None),
            served=(types.MappingProxyType(served)
                    if served is not None else None),
            mist=(types.MappingProxyType(dict(self.engine.mist_verdicts))
                  if self.engine.params.mist is not None else None),
            untried=types.MappingProxyType(self.engine.untried))
        return self.period

    def _start(self):
        """Take the first snapshot and put the initial timeout in force."""
        self.driver.advance(0)
        snapshot = self.driver.sample()
        first = self.engine.first_decision()
        period = self._record(0, snapshot, {}, first, self._apply(first))
        LOG.info('agent started on %s host: %d cores, initial retention '
                 'timeout %d us', self.driver.describe().mode,
                 len(self.topology.cores), first.timeout_ns // 1000)
        return period

    def tick(self):
        """Run one period (the start, the first time); its :class:`Period`."""
        if self.period is None:
            return self._start()
        self.driver.advance(self._period_s)
        snapshot = self.driver.sample()
        stats = monitor.derive(self.period.snapshot, snapshot,
                               self._idle_switch_threshold,
                               self.topology, self.period.stats)
        vms = mist.observe(self.period.snapshot, snapshot, stats,
                           self._idle_switch_threshold)
        served = (monitor.served_rates(self.period.snapshot, snapshot)
                  if snapshot.domains else None)
        decision = self.engine.step(stats, vms, snapshot.tenancy,
                                    snapshot.core_scheduling, served)
        result = self._apply(decision)
        self.ticks += 1
        period = self._record(self.ticks, snapshot, stats, decision, result,
                              served)
        self._log_verdict()
        for swap in decision.swaps:
            LOG.info('adjuster: swapped %s (core %d) with %s (core %d)',
                     swap.a, swap.core_a, swap.b, swap.core_b)
        if LOG.isEnabledFor(logging.DEBUG):    # (its arguments cost)
            LOG.debug('period %d: timeout %d ns, %d vCPUs', self.ticks,
                      decision.timeout_ns, len(stats))
        return period

    def _log_verdict(self):
        """Log the guard's verdict of a block that just ended.

        At INFO when it changed what is kept, at DEBUG otherwise: a
        search ends a visit every few seconds.
        """
        guard = self.engine.guard
        v = guard.finished if guard is not None else None
        if v is None:
            return
        what = v.mechanism + ('' if v.domain is None else
                              ' for %s' % v.domain)
        if v.timeout_ns is not None:
            what += ' at %d us' % (v.timeout_ns // 1000)
        if self.period.kept != self._kept_before:
            LOG.info('guard: %s %s (%s); kept now: %s', what,
                     'kept' if v.kept else 'dropped', v.reason,
                     ', '.join(sorted(self.period.kept)) or 'nothing')
        else:
            LOG.debug('guard: %s %s (%s)', what,
                      'kept' if v.kept else 'not kept', v.reason)
        self._kept_before = self.period.kept

    def loop(self, periods=None, before=None, after=None, on_error=None):
        """The one loop: tick until halted or ``periods`` have run.

        ``before()`` is asked before each period (False ends the loop);
        ``after(period)`` gets each :class:`Period`. Without ``on_error``
        an error ends the loop; with it (the daemon) a failed period is
        logged, handed to ``on_error(exc)``, and the next one starts a
        period later.
        """
        while not self._halt.is_set() and (periods is None
                                           or self.ticks < periods):
            if before is not None and not before():
                return
            try:
                period = self.tick()
            except Exception as exc:
                if on_error is None:
                    raise
                if isinstance(exc, base.HostDriverError):
                    LOG.warning('Period skipped: %s', exc)
                else:
                    LOG.exception('Period failed; the agent goes on')
                on_error(exc)
                self._halt.wait(self._period_s)
                continue
            if after is not None:
                after(period)

    def run(self, periods=None, **hooks):
        """:meth:`loop`, then :meth:`stop` (the host put back)."""
        try:
            self.loop(periods, **hooks)
        finally:
            self.stop()

    def halt(self):
        """End the loop at the end of the current period (any thread)."""
        self._halt.set()
        self.driver.interrupt()

    def stop(self):
        """Stop ticking and put the host back as it was (once)."""
        self._halt.set()
        if self._stopped:
            return
        self._stopped = True
        try:
            self.driver.restore()
        finally:
            self.driver.close()
