"""What the panel shows, computed from query answers: no I/O here.

The views run the queries named below through :mod:`.api.prometheus` and
hand the answers to these functions, so what a row or a chart says is a
pure function of what Prometheus holds, and the tests feed them recorded
answers.

A host is one scrape target (Prometheus's ``instance`` label): the agent's
``fqdn`` label is its name, but two hosts may carry the same one (an agent
left at its default), while the target is unique. The counters carry no
``fqdn`` (the agent labels gauges only), so they are joined by target.
Metrics an agent does not export (an older agent, the guard off, no
reserved VM) are ``None`` and shown as not reported, never as zero.
A mechanism the host refused (``vsmtio_host_refused``) is shown as
refused with the host's reason, and a timeout it refused never as a
value in force.
"""

import collections
import dataclasses

from django.utils.translation import gettext_lazy as _

#: Instant queries of the hosts table, by name.
HOST_QUERIES = {
    # every target that exported a vsmtio gauge in the last hour, and the
    # host name it gave
    'targets': 'group by (instance, fqdn) (last_over_time('
               '{__name__=~"vsmtio_host_mode|vsmtio_host_vcpus"}[1h]))',
    'up': 'up and on (instance, job) last_over_time('
          'vsmtio_periods_total[1h])',
    'mode': 'vsmtio_host_mode == 1',
    'vcpus': 'vsmtio_host_vcpus',
    'timeout': 'vsmtio_retention_timeout_seconds',
    'vm_timeout': 'vsmtio_vm_retention_timeout_seconds',
    'refused': 'vsmtio_host_refused',
    'untried': 'vsmtio_mechanism_untried',
    'kept': 'vsmtio_guard_kept',
    'verdict': 'vsmtio_guard_verdict',
    'protected': 'vsmtio_mist_protected',
    'periods': 'vsmtio_periods_total',
    'recent_periods': 'increase(vsmtio_periods_total[5m])',
    'recent_failures': 'increase(vsmtio_period_failures_total[5m])',
}

#: Instant queries of a host page's instances, ``%(sel)s`` selects the host.
INSTANCE_QUERIES = {
    'vcpu_class': 'vsmtio_vcpu_class{%(sel)s}',
    'vm_timeout': 'vsmtio_vm_retention_timeout_seconds{%(sel)s}',
    'kept': 'vsmtio_guard_kept{%(sel)s}',
    'verdict': 'vsmtio_guard_verdict{%(sel)s}',
    'protected': 'vsmtio_mist_protected{%(sel)s}',
    'i_cpu': 'vsmtio_mist_vm_i_cpu{%(sel)s}',
    'served': 'vsmtio_vm_served_rate{%(sel)s}',
}

#: The window and resolution of a host page's charts (a subquery: Aetos
#: has no range endpoint).
WINDOW, STEP = '30m', '15s'


@dataclasses.dataclass(frozen=True)
class Chart:
    slug: str
    title: str
    unit: str
    query: str    # ``%(sel)s`` selects the host
    legend: str   # the label that names each line


CHARTS = (
    Chart('mix', _('vCPUs by measured class'), 'vCPUs',
          'sum by (class) (vsmtio_host_vcpus{%(sel)s})', 'class'),
    Chart('timeout', _('Host retention timeout'), 's',
          'vsmtio_retention_timeout_seconds{%(sel)s}', 'fqdn'),
    Chart('vm_timeout', _('Retention timeout per VM'), 's',
          'vsmtio_vm_retention_timeout_seconds{%(sel)s}', 'domain'),
    Chart('kept', _('VMs keeping each mechanism (guard)'), 'VMs',
          'sum by (mechanism) (vsmtio_guard_kept{%(sel)s})', 'mechanism'),
    Chart('i_cpu', _("Reserved VMs' I_cpu (MIST)"), 'ratio',
          'vsmtio_mist_vm_i_cpu{%(sel)s}', 'domain'),
    Chart('served', _('Served I/O per VM'), 'ops/s',
          'vsmtio_vm_served_rate{%(sel)s}', 'domain'),
)


def selector(instance):
    """A PromQL label matcher for one scrape target (quoted safely)."""
    return 'instance="%s"' % instance.replace('\\', '\\\\').replace(
        '"', '\\"').replace('\n', '\\n')


def chart_query(chart, instance):
    return '(%s)[%s:%s]' % (chart.query % {'sel': selector(instance)},
                            WINDOW, STEP)


def instance_queries(instance):
    sel = selector(instance)
    return {name: q % {'sel': sel} for name, q in INSTANCE_QUERIES.items()}


@dataclasses.dataclass
class Mechanism:
    """What the guard decided for one mechanism over a host's VMs."""
    kept: int = 0
    judged: int = 0
    reasons: collections.Counter = dataclasses.field(
        default_factory=collections.Counter)

    def __str__(self):
        text = _('%(kept)d of %(judged)d VMs') % {'kept': self.kept,
                                                  'judged': self.judged}
        if self.reasons:
            text += ' (%s)' % ', '.join(
                '%s: %d' % (r, n) for r, n in sorted(self.reasons.items()))
        return text


@dataclasses.dataclass
class Host:
    instance: str
    name: str = None
    up: bool = None
    mode: str = None
    vcpus: dict = dataclasses.field(default_factory=dict)
    timeout: float = None
    vm_timeouts: dict = dataclasses.field(default_factory=dict)
    mechanisms: dict = dataclasses.field(default_factory=dict)
    refused: dict = dataclasses.field(default_factory=dict)  # mech -> why
    untried: dict = dataclasses.field(default_factory=dict)  # mech -> why
    protected: int = None
    reserved: int = None
    periods: int = None
    recent_periods: float = None
    recent_failures: float = None

    @property
    def id(self):   # horizon.tables keys rows by ``id``
        return self.instance

    @property
    def health(self):
        """``down``, ``stalled`` (scraped, no period in 5 min), ``running``."""
        if self.up is None:
            return None
        if not self.up:
            return 'down'
        if not self.recent_periods:
            return 'stalled'
        return 'running'


@dataclasses.dataclass
class Instance:
    domain: str
    name: str = None
    vcpus: dict = dataclasses.field(default_factory=dict)
    timeout: float = None
    kept: dict = dataclasses.field(default_factory=dict)   # mech -> bool
    reasons: dict = dataclasses.field(default_factory=dict)  # mech -> str
    protected: bool = None
    i_cpu: float = None
    served: float = None

    @property
    def id(self):
        return self.domain

    @property
    def measured_class(self):
        """The class most of its vCPUs have, ``io`` on a tie.

        The agent's rule for the class it publishes to the scheduler
        (``vsmtio_agent.publish.instance_values``): an instance with an
        I/O-bound vCPU gains from retention.
        """
        io, cpu = self.vcpus.get('io', 0), self.vcpus.get('cpu', 0)
        if not io + cpu:
            return None
        return 'io' if io * 2 >= io + cpu else 'cpu'


def _by_instance(samples):
    out = collections.defaultdict(list)
    for s in samples or ():
        out[s.labels.get('instance')].append(s)
    return out


def _mechanisms(kept, verdicts):
    """``{mechanism: Mechanism}`` from per-VM kept gauges and verdicts."""
    mechs = {}
    for s in kept:
        m = mechs.setdefault(s.labels.get('mechanism', '?'), Mechanism())
        m.judged += 1
        m.kept += 1 if s.value else 0
    for s in verdicts:
        if s.value:
            m = mechs.setdefault(s.labels.get('mechanism', '?'), Mechanism())
            m.reasons[s.labels.get('reason') or '?'] += 1
    return mechs


def _host_state(row, answers):
    """Each host's mode, vCPUs by class and timeouts, as exported."""
    for inst, samples in _by_instance(answers.get('mode')).items():
        row(inst).mode = samples[0].labels.get('mode')
    for inst, samples in _by_instance(answers.get('vcpus')).items():
        row(inst).vcpus = {s.labels.get('class'): int(s.value or 0)
                           for s in samples}
    for inst, samples in _by_instance(answers.get('timeout')).items():
        row(inst).timeout = samples[0].value
    for inst, samples in _by_instance(answers.get('vm_timeout')).items():
        row(inst).vm_timeouts = {s.labels.get('domain'): s.value
                                 for s in samples}


def _host_reasons(row, answers):
    """What each host refused or does not try, and why; the guard's say.

    A timeout the host refused is not in force: its values are dropped
    (an agent that refused it exports none; an older one may).
    """
    for name in ('refused', 'untried'):
        for inst, samples in _by_instance(answers.get(name)).items():
            r = row(inst)
            setattr(r, name, {
                s.labels.get('mechanism'): s.labels.get('reason') or '?'
                for s in samples if s.value})
            if 'retention' in r.refused:
                r.timeout, r.vm_timeouts = None, {}
    kept = _by_instance(answers.get('kept'))
    verdicts = _by_instance(answers.get('verdict'))
    for inst in set(kept) | set(verdicts):
        row(inst).mechanisms = _mechanisms(kept.get(inst, ()),
                                           verdicts.get(inst, ()))


def _host_counts(row, answers):
    """MIST's protections and the agent's period counters, per host."""
    for inst, samples in _by_instance(answers.get('protected')).items():
        r = row(inst)
        r.reserved = len(samples)
        r.protected = sum(1 for s in samples if s.value)
    for name in ('periods', 'recent_periods', 'recent_failures'):
        for inst, samples in _by_instance(answers.get(name)).items():
            value = samples[0].value
            if name == 'periods' and value is not None:
                value = int(value)
            setattr(row(inst), name, value)


def hosts(answers):
    """The hosts table's rows from the answers to :data:`HOST_QUERIES`."""
    rows = {}

    def row(instance):
        return rows.setdefault(instance, Host(instance))

    for s in answers.get('targets') or ():
        row(s.labels.get('instance')).name = s.labels.get('fqdn')
    for s in answers.get('up') or ():
        row(s.labels.get('instance')).up = bool(s.value)
    _host_state(row, answers)
    _host_reasons(row, answers)
    _host_counts(row, answers)
    rows.pop(None, None)
    for r in rows.values():
        r.name = r.name or r.instance
    return sorted(rows.values(), key=lambda r: (r.name, r.instance))


def instances(answers, names=None):
    """A host page's instances from the answers to its instance queries."""
    rows = {}
    names = names or {}

    def row(domain):
        return rows.setdefault(domain, Instance(domain,
                                                name=names.get(domain)))

    for s in answers.get('vcpu_class') or ():
        if s.value:
            vcpus = row(s.labels.get('domain')).vcpus
            klass = s.labels.get('class')
            vcpus[klass] = vcpus.get(klass, 0) + 1
    for s in answers.get('vm_timeout') or ():
        row(s.labels.get('domain')).timeout = s.value
    for s in answers.get('kept') or ():
        row(s.labels.get('domain')).kept[s.labels.get('mechanism')] = bool(
            s.value)
    for s in answers.get('verdict') or ():
        if s.value:
            row(s.labels.get('domain')).reasons[
                s.labels.get('mechanism')] = s.labels.get('reason')
    for s in answers.get('protected') or ():
        row(s.labels.get('domain')).protected = bool(s.value)
    for s in answers.get('i_cpu') or ():
        row(s.labels.get('domain')).i_cpu = s.value
    for s in answers.get('served') or ():
        row(s.labels.get('domain')).served = s.value
    rows.pop(None, None)
    return sorted(rows.values(), key=lambda r: (r.name or '', r.domain))


def lines(chart, series):
    """``[(legend, [(t, v)])]`` of one chart's answer, missing points out."""
    out = []
    for s in series:
        points = [(t, v) for t, v in s.points if v is not None]
        if points:
            out.append((s.labels.get(chart.legend) or chart.title, points))
    return sorted(out)
