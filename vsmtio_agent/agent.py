"""The agent loop: the imperative shell around the pure policy engine.

Each period the agent lets the host run (``driver.advance``), samples every
vCPU, derives the period's rates, asks the engine for a decision and hands
it to the driver. Everything host-specific is in the driver, so the same
loop drives a real KVM host and the simulated one.
"""

from oslo_log import log as logging

from vsmtio_agent import model
from vsmtio_agent.policy import engine as engine_mod
from vsmtio_agent.policy import mist
from vsmtio_agent.policy import monitor

LOG = logging.getLogger(__name__)


class Agent(object):

    def __init__(self, conf, driver, engine=None):
        self.conf = conf
        self.driver = driver
        self.topology = driver.topology()
        self.engine = engine or engine_mod.PolicyEngine(
            self.topology, engine_mod.Params.from_conf(conf))
        self.last_snapshot = None
        self.last_stats = {}
        self.last_decision = None
        self.last_result = None
        self.ticks = 0
        self._stopping = False
        self._stopped = False

    @property
    def opts(self):
        return self.conf.vsmtio_agent

    def _apply(self, decision):
        if self.opts.dry_run:
            LOG.info('dry run: would set timeout %d ns, %d placements, '
                     'swaps %s', decision.timeout_ns,
                     len(decision.placements),
                     ', '.join('%s<->%s' % (s.a, s.b)
                               for s in decision.swaps) or 'none')
            for domain, verdict in sorted(decision.protect.items()):
                LOG.info('dry run: would protect %s: %s', domain,
                         verdict.reason)
            return None
        result = self.driver.apply(decision)
        if result is not None and result.failed:
            LOG.warning('%d of %d changes failed: %s', result.failed,
                        result.applied + result.failed,
                        '; '.join(result.messages))
        return result

    def start(self):
        """Take the first snapshot and put the initial timeout in force."""
        self.last_snapshot = self.driver.sample()
        first = model.Decision(timeout_ns=self.engine.timeout_ns,
                               placements={})
        self.last_result = self._apply(first)
        LOG.info('agent started on %s host: %d cores, initial retention '
                 'timeout %d us', self.driver.describe().mode,
                 len(self.topology.cores), first.timeout_ns // 1000)

    def tick(self):
        """Run one period; return its decision (None on the first)."""
        if self.last_snapshot is None:
            self.driver.advance(0)
            self.start()
            return None
        self.driver.advance(self.opts.period)
        snapshot = self.driver.sample()
        stats = monitor.derive(self.last_snapshot, snapshot,
                               self.opts.idle_switch_threshold,
                               self.topology)
        vms = mist.observe(self.last_snapshot, snapshot, stats,
                           self.opts.idle_switch_threshold)
        decision = self.engine.step(stats, vms)
        self.last_result = self._apply(decision)
        self.last_snapshot = snapshot
        self.last_stats = stats
        self.last_decision = decision
        self.ticks += 1
        for swap in decision.swaps:
            LOG.info('adjuster: swapped %s (core %d) with %s (core %d)',
                     swap.a, swap.core_a, swap.b, swap.core_b)
        LOG.debug('period %d: timeout %d ns (%s), %d vCPUs', self.ticks,
                  decision.timeout_ns, self.engine.ltcr.phase.value,
                  len(stats))
        return decision

    def run(self, periods=None):
        """Tick until ``periods`` are done or :meth:`stop` is called."""
        try:
            while not self._stopping and (periods is None
                                          or self.ticks < periods):
                self.tick()
        finally:
            self.stop()

    def stop(self):
        """Stop ticking and put the host back as it was (once)."""
        self._stopping = True
        if self._stopped:
            return
        self._stopped = True
        try:
            self.driver.restore()
        finally:
            self.driver.close()
