from django.urls import reverse
from django.utils.translation import gettext_lazy as _
from horizon import tables

from vsmtio_dashboard import mixfilter
from vsmtio_nova import mix

NOT_REPORTED = _('not reported')


def _or_missing(value):
    return NOT_REPORTED if value is None else value


def _seconds(value):
    if value is None:
        return NOT_REPORTED
    if value < 1e-3:
        return '%.0f µs' % (value * 1e6)
    return '%.3g ms' % (value * 1e3) if value < 1 else '%.3g s' % value


def _vcpus(klass):
    def get(host):
        return NOT_REPORTED if not host.vcpus else host.vcpus.get(klass, 0)
    return get


def _timeouts(host):
    refused = host.refused.get('retention')
    if refused is not None:
        return _('refused by the host (%s)') % refused
    text = _seconds(host.timeout)
    values = [v for v in host.vm_timeouts.values() if v is not None]
    if values:
        text = _('%(host)s; per VM %(low)s to %(high)s') % {
            'host': text, 'low': _seconds(min(values)),
            'high': _seconds(max(values))}
    return text


def _mechanisms(host):
    """Each mechanism: refused by the host, judged, or not tried; why."""
    states = {name: str(mech) for name, mech in host.mechanisms.items()}
    for name, why in host.untried.items():
        states.setdefault(name, _('not tried (%s)') % why)
    for name, why in host.refused.items():
        states[name] = _('refused by the host (%s)') % why
    if not states:
        return NOT_REPORTED
    return '; '.join('%s: %s' % item for item in sorted(states.items()))


def _mist(host):
    if host.reserved is None:
        return NOT_REPORTED
    return _('%(p)d of %(n)d reserved VMs') % {
        'p': host.protected, 'n': host.reserved}


def _health(host):
    health = {'running': _('running'), 'stalled': _('stalled'),
              'down': _('down')}.get(host.health, NOT_REPORTED)
    if host.recent_failures:
        health = _('%(h)s, %(n)d periods failed in 5 min') % {
            'h': health, 'n': round(host.recent_failures)}
    return health


def _last_period(host):
    if host.periods is None:
        return NOT_REPORTED
    if host.recent_periods is None:
        return _('period %d') % host.periods
    return _('period %(n)d (%(r)d in 5 min)') % {
        'n': host.periods, 'r': round(host.recent_periods)}


def _detail_link(host):
    return reverse('horizon:admin:vsmtio_hosts:detail',
                   kwargs={'instance': host.instance})


def _mode(host):
    if host.simulated:
        return _('simulated (a model of an SMT host, not a machine)')
    return _or_missing(host.mode)


class HostsTable(tables.DataTable):
    name = tables.Column('label', verbose_name=_('Host'), link=_detail_link)
    target = tables.Column('instance', verbose_name=_('Scrape target'))
    mode = tables.Column(_mode, verbose_name=_('Mode'))
    io = tables.Column(_vcpus('io'), verbose_name=_('I/O vCPUs'))
    cpu = tables.Column(_vcpus('cpu'), verbose_name=_('CPU vCPUs'))
    timeout = tables.Column(_timeouts,
                            verbose_name=_('Retention timeout'))
    kept = tables.Column(_mechanisms,
                         verbose_name=_('Mechanisms kept (why)'))
    mist = tables.Column(_mist, verbose_name=_('MIST protections'))
    health = tables.Column(_health, verbose_name=_('Agent'))
    last = tables.Column(_last_period, verbose_name=_('Last period'))

    class Meta:
        name = 'vsmtio_hosts'
        verbose_name = _('vSMT-IO hosts')


def _instance_link(inst):
    """nova's page of the server; none for a VM nova does not know.

    The simulated host's VMs are the model's, and a server deleted since
    has no page.
    """
    if not inst.live:
        return None
    return reverse('horizon:admin:instances:detail', args=[inst.domain])


def _class(inst):
    return _or_missing(inst.measured_class)


def _vm_vcpus(inst):
    if not inst.vcpus:
        return NOT_REPORTED
    return ', '.join('%s %d' % (k, n) for k, n in sorted(inst.vcpus.items()))


def _kept(inst):
    if not inst.kept and not inst.reasons:
        return NOT_REPORTED
    out = []
    for mech in sorted(set(inst.kept) | set(inst.reasons)):
        state = {True: _('kept'), False: _('dropped'),
                 None: NOT_REPORTED}[inst.kept.get(mech)]
        reason = inst.reasons.get(mech)
        out.append('%s %s%s' % (mech, state,
                                ' (%s)' % reason if reason else ''))
    return '; '.join(out)


def _protected(inst):
    return {True: _('protected'), False: _('not protected'),
            None: NOT_REPORTED}[inst.protected]


def _number(attr, fmt):
    def get(inst):
        value = getattr(inst, attr)
        return NOT_REPORTED if value is None else fmt % value
    return get


def _rate(value):
    """Requests per second: whole ones from 100 up, else 3 digits."""
    if value is None:
        return NOT_REPORTED
    text = ('{:,.0f}' if abs(value) >= 100 else '{:.3g}').format(value)
    return _('%s requests/s') % text


def _floor(inst):
    """The computing VM's lowest ratio, under which mechanism, its floor."""
    worst = inst.worst
    if worst is None:
        return NOT_REPORTED
    mechanism, ratio = worst
    text = _('%(ratio).3f under %(mech)s') % {'ratio': ratio,
                                              'mech': mechanism}
    if inst.floor is not None:
        text = _('%(text)s (floor %(floor).2f%(below)s)') % {
            'text': text, 'floor': inst.floor,
            'below': _(', below') if ratio < inst.floor else ''}
    return text


class InstancesTable(tables.DataTable):
    name = tables.Column(lambda i: i.name or i.domain,
                         verbose_name=_('Instance'), link=_instance_link)
    measured = tables.Column(_class, verbose_name=_('Measured class'))
    vcpus = tables.Column(_vm_vcpus, verbose_name=_('vCPUs by class'))
    timeout = tables.Column(lambda i: _seconds(i.timeout),
                            verbose_name=_('Retention timeout'))
    kept = tables.Column(_kept, verbose_name=_('Guard (why)'))
    mist = tables.Column(_protected, verbose_name=_('MIST'))
    floor = tables.Column(_floor, verbose_name=_('As a computing VM '
                                                 '(with / without)'))
    i_cpu = tables.Column(_number('i_cpu', '%.3g'),
                          verbose_name=_('I_cpu (involuntary per voluntary '
                                         'switch)'))
    served = tables.Column(lambda i: _rate(i.served),
                           verbose_name=_('Served I/O'))

    class Meta:
        name = 'vsmtio_instances'
        verbose_name = _('Instances on this host')


def _share(value):
    return _('none') if value is None else '%.3f' % value


def _host_name(row):
    """nova's host, and its node where the node is named otherwise."""
    if row.node.node and row.node.node != row.host:
        return _('%(host)s (node %(node)s)') % {
            'host': row.host, 'node': row.node.node}
    return row.host


def _counted(row):
    """The host's mix as the filter counts it, as its log line gives it."""
    text = _('io:cpu %(io)d:%(cpu)d vCPUs, I/O share %(share)s') % {
        'io': row.mix.io, 'cpu': row.mix.cpu,
        'share': _share(row.mix.share())}
    if row.uncounted:
        text = _('%(text)s; %(n)d vCPUs without a declared class (auto) '
                 'not counted here') % {'text': text, 'n': row.uncounted}
    return text


def _band(row):
    band = row.band
    source = (_('aggregate %s') % ', '.join(row.band_from)
              if row.band_from else _('the options'))
    text = _('[%(low).3f, %(high).3f] from %(source)s') % {
        'low': band.low, 'high': band.high, 'source': source}
    for key in band.ignored:
        text = _('%(text)s; %(key)s of its aggregates is not a fraction in '
                 '[0, 1]: the option is used') % {'text': text, 'key': key}
    if band.crossed:
        text = _('%(text)s; its aggregates give [%(low).3f, %(high).3f], '
                 'min above max: the options are used') % {
            'text': text, 'low': band.crossed[0], 'high': band.crossed[1]}
    return text


def _free(row):
    """The vCPUs left, of the node's vCPUs times its allocation ratio."""
    node = row.node
    free = mix.free_vcpus(node.vcpus, node.ratio, node.vcpus_used, 0)
    values = {'free': free, 'capacity': free + node.vcpus_used,
              'vcpus': node.vcpus, 'ratio': node.ratio}
    if node.ratio is None:
        return _('%(free)g of %(capacity)g (%(vcpus)d vCPUs; placement gave '
                 'no allocation ratio: 1.0 assumed)') % values
    return _('%(free)g of %(capacity)g (%(vcpus)d vCPUs × allocation '
             'ratio %(ratio)g)') % values


def _why(row, verdict):
    """The filter's numbers, worded as its INFO line words them."""
    return _('I/O share %(before)s -> %(after).3f outside [%(low).3f, '
             '%(high).3f], %(free)g vCPUs free') % {
        'before': _share(row.mix.share()), 'after': verdict.after,
        'low': row.band.low, 'high': row.band.high, 'free': verdict.free}


def _verdict(cls):
    """One more server of class ``cls``: passes, or refused and why."""
    def get(row):
        verdict = row.verdicts[cls]
        if not verdict.judged:
            return _('passes unjudged: the host has %(n)d classified '
                     'vCPUs, the filter judges from %(min)d') % {
                'n': row.mix.classified, 'min': row.min_classified}
        if verdict.refused_from is None:
            if verdict.full:
                return _('passes (no whole vCPU left: nova\'s other '
                         'filters refuse it)')
            return _('passes, up to the %(room)d vCPUs left') % {
                'room': verdict.room}
        if verdict.refused_from == 1:
            return _('refused from 1 vCPU: %(why)s') % {
                'why': _why(row, verdict)}
        return _('passes up to %(ok)d vCPUs; refused from %(n)d vCPUs: '
                 '%(why)s') % {'ok': verdict.refused_from - 1,
                               'n': verdict.refused_from,
                               'why': _why(row, verdict)}
    return get


class MixTable(tables.DataTable):
    """nova's ``WorkloadMixFilter`` per compute host, as it judges now."""

    host = tables.Column(_host_name, verbose_name=_('Compute host'))
    counted = tables.Column(_counted,
                            verbose_name=_('vCPUs the filter counts'))
    band = tables.Column(_band, verbose_name=_('I/O share band'))
    free = tables.Column(_free, verbose_name=_('vCPUs left'))
    io = tables.Column(_verdict(mixfilter.IO),
                       verbose_name=_('One more I/O server'))
    cpu = tables.Column(_verdict(mixfilter.CPU),
                        verbose_name=_('One more CPU server'))

    class Meta:
        name = 'vsmtio_mix'
        verbose_name = _('Mix filter (WorkloadMixFilter) by compute host')
