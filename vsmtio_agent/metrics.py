"""OpenMetrics (Prometheus) export of what the agent sees and does.

A collector keeps the agent's latest :class:`~vsmtio_agent.agent.Period`
(one frozen record: a scrape never pairs one period's stats with another's
decision) and renders it when scraped, so vCPUs that left the host leave
the output at once (no stale labelled series), and the agent loop pays
nothing for metrics between scrapes. Served by ``prometheus_client`` on
localhost unless configured otherwise.

Gauges carry the labels OpenStack Watcher's Prometheus datasource reads
by default: ``fqdn`` (this host as nova names it, :func:`host_name`,
matched against the compute node's host) and, per vCPU, ``resource`` (the
instance UUID, which is the libvirt domain UUID nova gives its guests).
"""

import socket
import threading

from oslo_config import cfg
from oslo_log import log as logging
import prometheus_client
from prometheus_client import core as prom_core

from vsmtio_agent import model

LOG = logging.getLogger(__name__)


def host_name(opts):
    """The name the metrics carry: nova's name of this compute host.

    ``[vsmtio_agent] metrics_host``; unset, nova-compute's ``[DEFAULT]
    host`` from ``nova_config_file`` (read with oslo.config's own parser,
    as nova reads it), else this machine's host name, which is what nova
    uses when ``host`` is unset. Never ``socket.getfqdn()``: on a host
    whose name does not resolve that is ``localhost``.
    """
    if opts.metrics_host:
        return opts.metrics_host
    sections = {}
    try:
        cfg.ConfigParser(opts.nova_config_file, sections).parse()
    except FileNotFoundError:
        pass
    except (OSError, cfg.ParseError) as exc:
        LOG.warning('Cannot read [DEFAULT] host from %s (%s): the metrics '
                    'carry this machine\'s host name; set [vsmtio_agent] '
                    'metrics_host', opts.nova_config_file, exc)
    values = sections.get('DEFAULT', {}).get('host')
    if values and values[-1].strip():
        return values[-1].strip()
    return socket.gethostname()


class AgentCollector:
    """Per-vCPU class and rates, host mix, timeout, apply counts."""

    def __init__(self, fqdn=None):
        self.fqdn = fqdn or socket.gethostname()
        self._lock = threading.Lock()
        self._period = None
        self._mode = None
        self.ticks = 0
        self.tick_failures = 0
        self.applied = 0
        self.failed = 0
        self.unchanged = 0
        self.decisions = {'applied': 0, 'failed': 0, 'dry_run': 0}

    def observe(self, period, mode=None):
        """Record one finished :class:`Period` (called by the loop)."""
        with self._lock:
            self._period = period
            if mode is not None:
                self._mode = mode
            self.ticks += 1
            result = period.result
            if result is None:
                self.decisions['dry_run'] += 1
            else:
                self.decisions['failed' if result.failed else 'applied'] += 1
                self.applied += result.applied
                self.failed += result.failed
                self.unchanged += result.unchanged

    def tick_failed(self):
        with self._lock:
            self.tick_failures += 1

    def collect(self):
        for family in self._families():
            if family.type == 'gauge':
                family.samples = [s._replace(labels=self._watcher_labels(
                    s.labels)) for s in family.samples]
            yield family

    def _watcher_labels(self, labels):
        extra = {'fqdn': self.fqdn}
        if 'domain' in labels:
            extra['resource'] = labels['domain']
        return {**labels, **extra}

    def _families(self):
        with self._lock:
            period, mode = self._period, self._mode
            counts = (self.ticks, self.tick_failures, self.applied,
                      self.failed, self.unchanged)
            decisions_by = dict(self.decisions)
        g = prom_core.GaugeMetricFamily
        c = prom_core.CounterMetricFamily
        ticks, tick_failures, applied, failed, unchanged = counts
        yield c('vsmtio_periods', 'Policy periods completed.', value=ticks)
        yield c('vsmtio_period_failures',
                'Periods skipped because the host could not be sampled.',
                value=tick_failures)
        decisions = c('vsmtio_decisions',
                      'Decisions by outcome: applied in full, with failed '
                      'changes, or only logged (dry run).',
                      labels=['outcome'])
        for outcome, n in sorted(decisions_by.items()):
            decisions.add_metric([outcome], n)
        yield decisions
        changes = c('vsmtio_changes',
                    'Host changes by outcome (applied, failed, unchanged).',
                    labels=['outcome'])
        changes.add_metric(['applied'], applied)
        changes.add_metric(['failed'], failed)
        changes.add_metric(['unchanged'], unchanged)
        yield changes
        if mode is not None:
            info = g('vsmtio_host_mode', 'The host mode the agent runs in.',
                     labels=['mode'])
            info.add_metric([mode], 1)
            yield info
        if period is None:
            return
        decision, stats = period.decision, period.stats
        yield g('vsmtio_retention_timeout_seconds',
                'Context-retention timeout LTCR chose for this period.',
                value=decision.timeout_ns / 1e9)
        mix = {role: 0 for role in model.Role}
        klass = g('vsmtio_vcpu_class', 'RASS class of each vCPU (1).',
                  labels=['domain', 'vcpu', 'class'])
        rates = {
            'retention_rate': g('vsmtio_vcpu_retention_rate',
                                'Share of the period in context retention.',
                                labels=['domain', 'vcpu']),
            'utilisation': g('vsmtio_vcpu_utilisation',
                             'Share of the period the vCPU ran.',
                             labels=['domain', 'vcpu']),
            'ipc': g('vsmtio_vcpu_ipc', 'Instructions per cycle.',
                     labels=['domain', 'vcpu']),
            'i_cpu': g('vsmtio_vcpu_i_cpu',
                       'MIST interference ratio (involuntary / voluntary '
                       'switches).', labels=['domain', 'vcpu']),
            'runqueue_delay_ratio': g(
                'vsmtio_vcpu_runqueue_delay_ratio',
                'Share of the period the vCPU waited on a run queue.',
                labels=['domain', 'vcpu']),
        }
        for ref, placement in sorted(decision.placements.items()):
            labels = [ref.domain, str(ref.index)]
            mix[placement.role] += 1
            klass.add_metric(labels + [placement.role.value], 1)
            st = stats.get(ref)
            for name, family in rates.items():
                value = getattr(st, name, None) if st else None
                if value is not None:   # missing stays missing
                    family.add_metric(labels, value)
        host = g('vsmtio_host_vcpus', 'vCPUs of each class on this host.',
                 labels=['class'])
        for role, n in mix.items():
            host.add_metric([role.value], n)
        yield host
        yield klass
        yield from rates.values()
        if period.verdicts is not None:
            yield from _guard_families(g, period)
        if period.mist is not None:
            yield from _mist_families(g, period.mist)


def _guard_families(g, period):
    """What the guard keeps, per mechanism and VM, and why."""
    kept = g('vsmtio_guard_kept',
             'Whether the guard keeps the mechanism (1) or not (0); domain '
             'is the VM of a per-VM mechanism, empty for a host-wide one.',
             labels=['mechanism', 'domain'])
    verdict = g('vsmtio_guard_verdict',
                'The guard\'s last verdict on the mechanism (always 1): '
                'kept or not, and why.',
                labels=['mechanism', 'domain', 'kept', 'reason'])
    alarm = g('vsmtio_guard_after_effect',
              'Dropping the mechanism did not restore the host (1): it is '
              'held off.', labels=['mechanism', 'domain'])
    for v in period.verdicts:
        domain = v.domain or ''
        if v.after_effect:
            alarm.add_metric([v.mechanism, domain], 1)
            continue
        kept.add_metric([v.mechanism, domain], 1 if v.kept else 0)
        verdict.add_metric([v.mechanism, domain, str(v.kept).lower(),
                            v.reason], 1)
    yield kept
    yield verdict
    yield alarm
    if period.retaining is not None:
        timeout = g('vsmtio_vm_retention_timeout_seconds',
                    'The retention timeout the guard keeps for the VM.',
                    labels=['domain'])
        for domain, ns in sorted(period.retaining.items()):
            timeout.add_metric([domain], ns / 1e9)
        yield timeout
    if period.served is not None:
        served = g('vsmtio_vm_served_rate',
                   'Requests and packets the VM served per second (its '
                   'block and interface statistics).', labels=['domain'])
        for domain, rate in sorted(period.served.items()):
            if rate is not None:
                served.add_metric([domain], rate)
        yield served


def _mist_families(g, verdicts):
    """MIST's verdict per reserved domain: protected, and its I_cpu."""
    protected = g('vsmtio_mist_protected',
                  'Whether MIST protects the reserved VM this period (1) '
                  'or not (0).', labels=['domain'])
    i_cpu = g('vsmtio_mist_vm_i_cpu',
              'MIST interference ratio of the reserved VM (involuntary / '
              'voluntary switches of its vCPUs).', labels=['domain'])
    for domain, v in sorted(verdicts.items()):
        protected.add_metric([domain], 1 if v.protect else 0)
        if v.i_cpu is not None:
            i_cpu.add_metric([domain], v.i_cpu)
    yield protected
    yield i_cpu


def serve(collector, host, port):
    """Start the endpoint in a thread; return (registry, server)."""
    registry = prometheus_client.CollectorRegistry()
    registry.register(collector)
    server, _thread = prometheus_client.start_http_server(
        port, addr=host, registry=registry)
    return registry, server
