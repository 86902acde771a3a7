import logging

from django.conf import settings
from django.utils.translation import gettext_lazy as _
from horizon import exceptions
from horizon import messages
from horizon import tables
from openstack_dashboard import api

from vsmtio_dashboard.api import nova
from vsmtio_dashboard.api import prometheus
from vsmtio_dashboard import charts
from vsmtio_dashboard.content.hosts import tables as host_tables
from vsmtio_dashboard import mixfilter
from vsmtio_dashboard import overview

LOG = logging.getLogger(__name__)


def _answers(request, queries):
    """Every query's answer; stops at the first failure, which it raises."""
    return {name: prometheus.query(request, q)
            for name, q in queries.items()}


def _hosts(request, names=None):
    return overview.name_reasons(
        overview.hosts(_answers(request, overview.HOST_QUERIES)),
        names or {})


def mix_options():
    """The mix filter's options as Horizon's settings mirror nova.conf's."""
    return mixfilter.options(getattr(settings, mixfilter.SETTING, None))


def _mix_hosts(request, opts):
    """The mix table's rows; nova's failure said, and no rows.

    Said as a page message, not through ``exceptions.handle``: that takes
    every openstacksdk HTTP error (a 503 of nova's too) for the user not
    being authorized and answers the whole page with Horizon's "not
    authorized" one, the agents' table with it.
    """
    try:
        ratios = nova.vcpu_allocation_ratios(request)
    except Exception as exc:   # no placement in the catalogue, or no answer
        LOG.warning('vsmtio panel: no allocation ratios from placement: %s',
                    exc)
        ratios = {}
    try:
        return mixfilter.hosts(nova.nodes(request, ratios),
                               nova.servers(request),
                               nova.aggregates(request), opts)
    except Exception as exc:
        LOG.warning('vsmtio panel: cannot read nova: %s', exc)
        messages.error(request, _('Unable to read nova\'s compute hosts, '
                                  'servers and aggregates: %s') % exc)
        return []


class IndexView(tables.MultiTableView):
    """The agents' hosts, and what nova's mix filter would refuse where."""

    table_classes = (host_tables.HostsTable, host_tables.MixTable)
    template_name = 'vsmtio_dashboard/hosts/index.html'
    page_title = _('vSMT-IO hosts')

    def get_vsmtio_hosts_data(self):
        try:
            return _hosts(self.request, _server_names(self.request))
        except prometheus.MetricsUnavailable as exc:
            exceptions.handle(self.request,
                              _('Unable to read the agents\' metrics: %s')
                              % exc)
            return []

    def get_vsmtio_mix_data(self):
        return _mix_hosts(self.request, self._mix_options())

    def _mix_options(self):
        if not hasattr(self, '_options'):
            self._options = mix_options()
        return self._options

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        context['mix_options'] = self._mix_options()
        context['mix_setting'] = mixfilter.SETTING
        return context


def _server_names(request, deleted=False):
    """Instance names by UUID (domains are nova's instance UUIDs).

    With ``deleted``, the servers deleted and not yet archived, each
    named as such: a host page's charts cover 30 minutes, in which
    servers come and go.
    """
    opts = {'all_tenants': True}
    if deleted:
        opts['deleted'] = True
    try:
        servers, _more = api.nova.server_list(request, search_opts=opts)
    except Exception:
        exceptions.handle(request, _('Unable to list instance names.'),
                          ignore=True)
        return {}
    if deleted:
        return {s.id: _('%s (deleted)') % s.name for s in servers}
    return {s.id: s.name for s in servers}


class DetailView(tables.DataTableView):
    table_class = host_tables.InstancesTable
    template_name = 'vsmtio_dashboard/hosts/detail.html'
    page_title = _('vSMT-IO host {{ host.label }}')

    def _names(self):
        """nova's server names, deleted ones too, asked once per page."""
        if not hasattr(self, '_names_by_domain'):
            self._live = _server_names(self.request)
            self._names_by_domain = dict(
                _server_names(self.request, deleted=True), **self._live)
        return self._names_by_domain

    def _host(self):
        if not hasattr(self, '_host_row'):
            self._host_row = None
            instance = self.kwargs['instance']
            try:
                for host in _hosts(self.request, self._names()):
                    if host.instance == instance:
                        self._host_row = host
            except prometheus.MetricsUnavailable as exc:
                exceptions.handle(self.request,
                                  _('Unable to read the agents\' metrics: '
                                    '%s') % exc)
            if self._host_row is None:
                self._host_row = overview.Host(instance, name=instance)
        return self._host_row

    def get_data(self):
        instance = self.kwargs['instance']
        try:
            answers = _answers(self.request,
                               overview.instance_queries(instance))
        except prometheus.MetricsUnavailable as exc:
            exceptions.handle(self.request,
                              _('Unable to read the agents\' metrics: %s')
                              % exc)
            return []
        names = self._names()
        return overview.instances(answers, names, live=self._live)

    def _charts(self):
        out = []
        for chart in overview.CHARTS:
            try:
                series = prometheus.query(
                    self.request,
                    overview.chart_query(chart, self.kwargs['instance']))
            except prometheus.MetricsUnavailable as exc:
                out.append({'chart': chart, 'svg': '', 'error': str(exc)})
                continue
            out.append({'chart': chart,
                        'svg': charts.svg(overview.lines(chart, series,
                                                         self._names()),
                                          chart.unit, chart.zero)})
        return out

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        host = self._host()
        context['host'] = host
        context['summary'] = [
            (column.verbose_name, column.get_raw_data(host))
            for column in host_tables.HostsTable(self.request).columns.values()
            if column.name not in ('name',)]
        context['simulated'] = host.simulated
        context['charts'] = self._charts()
        context['window'] = overview.WINDOW
        return context
