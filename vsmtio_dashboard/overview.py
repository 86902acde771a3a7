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
value in force. A host whose agent runs in the ``simulated`` mode (the
embedded simulated SMT host) is marked as such wherever it is named, so
a model's figures are never read as a machine's. VMs are named by nova's
server names where nova has them (a domain is nova's instance UUID),
in rows, chart legends and the guard's reasons alike.
"""

import collections
import dataclasses
import re

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
    'ratio': 'vsmtio_guard_vm_ratio{%(sel)s,kind="computing"}',
    'floor': 'vsmtio_guard_floor{%(sel)s,kind="computing"}',
}

#: The domain of a per-VM mechanism tried on every VM at once
#: (``vsmtio_agent.policy.vocabulary.ALL_VMS``): no VM of its own.
ALL_VMS = '*'

#: The host mode of the embedded simulated SMT host
#: (``vsmtio_agent.drivers.base.HostMode``).
SIMULATED = 'simulated'

#: The window and resolution of a host page's charts (a subquery: Aetos
#: has no range endpoint).
WINDOW, STEP = '30m', '15s'


@dataclasses.dataclass(frozen=True)
class Chart:
    """One chart of a host page.

    ``legend`` names the labels that name each line, the first one a VM
    where ``named`` (its server name is shown); a line whose first one
    is :data:`FLOOR` is the chart's ``reference``. Values are multiplied by
    ``scale`` into ``unit``: a timeout exported in seconds is read in
    microseconds.
    """
    slug: str
    title: str
    unit: str
    query: str    # ``%(sel)s`` selects the host
    legend: tuple
    scale: float = 1.0
    named: bool = False
    reference: str = None
    zero: bool = True   # the value axis from zero (see charts.svg)


#: A mechanism with verdicts but no kept gauge.
NOT_JUDGED = _('not judged')

#: The floor line's label value on the floors chart (``reference``).
FLOOR = 'floor'

CHARTS = (
    Chart('mix', _('vCPUs by measured class'), _('vCPUs'),
          'sum by (class) (vsmtio_host_vcpus{%(sel)s})', ('class',)),
    Chart('timeout', _('Host retention timeout'), _('µs'),
          'vsmtio_retention_timeout_seconds{%(sel)s}', ('fqdn',),
          scale=1e6),
    Chart('vm_timeout', _('Retention timeout per VM'), _('µs'),
          'vsmtio_vm_retention_timeout_seconds{%(sel)s}', ('domain',),
          scale=1e6, named=True),
    Chart('kept', _('VMs keeping each mechanism (guard)'), _('VMs'),
          'sum by (mechanism) (vsmtio_guard_kept{%(sel)s})',
          ('mechanism',)),
    Chart('floors', _('Computing VMs against their floor (guard)'),
          _('lowest throughput ratio, with a mechanism / without'),
          # each computing VM's lowest ratio in the guard's last verdicts
          # (the mechanism it is nearest to losing under), and the floor
          # it is held to as a line of its own
          'min by (vm) (vsmtio_guard_vm_ratio{%(sel)s,kind="computing"}) '
          'or label_replace(max(vsmtio_guard_floor{%(sel)s,'
          'kind="computing"}), "vm", "' + FLOOR + '", "", "")',
          ('vm',), named=True, reference=_('floor'), zero=False),
    Chart('i_cpu', _("Reserved VMs' I_cpu (MIST)"),
          _('involuntary per voluntary switch'),
          'vsmtio_mist_vm_i_cpu{%(sel)s}', ('domain',), named=True),
    Chart('served', _('Served I/O per VM'), _('requests/s'),
          'vsmtio_vm_served_rate{%(sel)s}', ('domain',), named=True),
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
    """What the guard decided for one mechanism over a host's VMs.

    ``host`` is the verdict on a host-wide mechanism (the split, which
    has no VM of its own: empty ``domain``), ``together`` the one on a
    per-VM mechanism tried for every VM at once (a VM weight tried
    host-wide); None where there is none. Neither is one more VM.
    """
    kept: int = 0
    judged: int = 0
    reasons: collections.Counter = dataclasses.field(
        default_factory=collections.Counter)
    host: bool = None
    together: bool = None

    def __str__(self):
        parts = []
        if self.host is not None:
            parts.append(_('kept') if self.host else _('not kept'))
        if self.judged:
            parts.append(_('%(kept)d of %(judged)d VMs') % {
                'kept': self.kept, 'judged': self.judged})
        if self.together is not None:
            parts.append(_('kept for every VM at once') if self.together
                         else _('not kept for every VM at once'))
        text = ', '.join(str(p) for p in parts) or str(NOT_JUDGED)
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
    def simulated(self):
        """Whether the agent drives the embedded simulated SMT host."""
        return self.mode == SIMULATED

    @property
    def label(self):
        """The host's name, marked where it is the simulated host."""
        if self.simulated:
            return _('%(name)s (simulated SMT host)') % {'name': self.name}
        return self.name

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
    ratios: dict = dataclasses.field(default_factory=dict)  # mech -> ratio
    floor: float = None
    live: bool = False   # a server nova has a page for

    @property
    def id(self):
        return self.domain

    @property
    def worst(self):
        """``(mechanism, ratio)`` of its lowest ratio as a computing VM.

        The guard holds a computing VM to its floor under every
        mechanism; the one it fares worst under is the one nearest to
        dropping. None where the guard measured it as computing in no
        verdict.
        """
        if not self.ratios:
            return None
        return min(self.ratios.items(), key=lambda item: (item[1], item[0]))

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
        if s.labels.get('domain') == ALL_VMS:
            m.together = bool(s.value)
            continue
        if not s.labels.get('domain'):
            m.host = bool(s.value)
            continue
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


def named(text, names):
    """``text`` with every domain of ``names`` replaced by its name.

    The guard's reasons name VMs by domain (``a VM loses: <uuid> 0.95 <
    0.97``), nova's instance UUIDs on a libvirt host: an operator knows
    them by name. Whole words only, so a domain that is part of another
    is left alone.
    """
    if not text or not names:
        return text
    pattern = re.compile(r'(?<![\w-])(%s)(?![\w-])' % '|'.join(
        re.escape(d) for d in sorted(names, key=len, reverse=True)))
    return pattern.sub(lambda m: names[m.group(1)], text)


def name_reasons(host_rows, names):
    """The hosts' guard and host reasons with VMs named (in place)."""
    for host in host_rows:
        for mech in host.mechanisms.values():
            renamed = collections.Counter()
            for reason, n in mech.reasons.items():
                renamed[named(reason, names)] += n
            mech.reasons = renamed
        for attr in ('refused', 'untried'):
            setattr(host, attr, {m: named(why, names)
                                 for m, why in getattr(host, attr).items()})
    return host_rows


def instances(answers, names=None, live=None):
    """A host page's instances from the answers to its instance queries.

    ``names`` names domains (deleted servers' too); ``live`` holds the
    domains nova has a page for (default: every named one).
    """
    rows = {}
    names = names or {}
    live = set(names) if live is None else set(live)

    def row(domain):
        return rows.setdefault(domain, Instance(
            domain, name=names.get(domain), live=domain in live))

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
                s.labels.get('mechanism')] = named(s.labels.get('reason'),
                                                   names)
    for s in answers.get('protected') or ():
        row(s.labels.get('domain')).protected = bool(s.value)
    for s in answers.get('i_cpu') or ():
        row(s.labels.get('domain')).i_cpu = s.value
    for s in answers.get('served') or ():
        row(s.labels.get('domain')).served = s.value
    _ratios(row, rows, answers, names)
    rows.pop(None, None)
    # a trial on every VM at once is the host's (its summary says it)
    rows.pop(ALL_VMS, None)
    return sorted(rows.values(), key=lambda r: (r.name or '', r.domain))


def _ratios(row, rows, answers, names):
    """Each computing VM's ratio per mechanism, and the floor held to."""
    for s in answers.get('ratio') or ():
        kind = s.labels.get('kind')
        if s.value is None or kind not in (None, 'computing'):
            continue
        mechanism = s.labels.get('mechanism')
        domain = s.labels.get('domain')
        if domain:
            # a per-VM mechanism: the VM it was tried for
            mechanism = _('%(mech)s for %(vm)s') % {
                'mech': mechanism, 'vm': _('every VM') if domain == ALL_VMS
                else names.get(domain, domain)}
        row(s.labels.get('vm')).ratios[mechanism] = s.value
    floors = [s.value for s in answers.get('floor') or ()
              if s.value is not None]
    if floors:
        for r in rows.values():
            r.floor = floors[0]


def _legend(chart, labels, names):
    """A line's name: its labels' values, VMs by their server names."""
    values = [labels.get(k) for k in chart.legend]
    if chart.reference is not None and values[0] == FLOOR:
        return str(chart.reference)
    if chart.named:
        values[0] = names.get(values[0], values[0])
    return ' '.join(v for v in values if v) or str(chart.title)


def lines(chart, series, names=None):
    """``[(legend, [(t, v)])]`` of one chart's answer, missing points out.

    Values in the chart's unit (``scale``); VMs by name where ``names``
    (``{domain: server name}``) has them.
    """
    out = []
    for s in series:
        points = [(t, v * chart.scale) for t, v in s.points if v is not None]
        if points:
            out.append((_legend(chart, s.labels, names or {}), points))
    if chart.reference is not None and all(
            legend == str(chart.reference) for legend, _p in out):
        # a floor with no VM to hold to it says nothing: not reported
        return []
    return sorted(out)
