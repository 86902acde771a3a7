from django.utils.translation import gettext_lazy as _
from horizon import exceptions
from horizon import tables
from openstack_dashboard import api

from vsmtio_dashboard.api import prometheus
from vsmtio_dashboard import charts
from vsmtio_dashboard.content.hosts import tables as host_tables
from vsmtio_dashboard import overview


def _answers(request, queries):
    """Every query's answer; stops at the first failure, which it raises."""
    return {name: prometheus.query(request, q)
            for name, q in queries.items()}


def _hosts(request, names=None):
    return overview.name_reasons(
        overview.hosts(_answers(request, overview.HOST_QUERIES)),
        names or {})


class IndexView(tables.DataTableView):
    table_class = host_tables.HostsTable
    page_title = _('vSMT-IO hosts')

    def get_data(self):
        try:
            return _hosts(self.request, _server_names(self.request))
        except prometheus.MetricsUnavailable as exc:
            exceptions.handle(self.request,
                              _('Unable to read the agents\' metrics: %s')
                              % exc)
            return []


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
