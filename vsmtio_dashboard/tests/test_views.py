"""The panel's pages through Django's test client, as Horizon tests its
own panels (its test data, an admin or a member user); Prometheus's
answers are the recorded ones, nova's server list is Horizon's test
data, and the mix filter's table reads nova's and placement's records
as :mod:`vsmtio_dashboard.api.nova` gives them (no service runs in a unit
test). Horizon's test catalogue has no Aetos: the tests that expect the
panel add it."""

from unittest import mock

from django import template
from django.test import utils as django_utils
from django.urls import reverse
from django.utils.html import escape
from openstack_auth import utils as auth_utils
from openstack_dashboard.test import helpers

from vsmtio_dashboard.api import nova
from vsmtio_dashboard.api import prometheus
from vsmtio_dashboard import mixfilter
from vsmtio_dashboard.tests import answers

INDEX = reverse('horizon:admin:vsmtio_hosts:index')
AETOS_URL = 'http://aetos.example.com/prometheus'
#: Aetos as its devstack plugin registers it, in the test data's region.
AETOS = {'type': prometheus.SERVICE_TYPE,
         'name': 'aetos',
         'endpoints_links': [],
         'endpoints': [{'region': 'RegionOne', 'interface': interface,
                        'url': AETOS_URL}
                       for interface in ('admin', 'internal', 'public')]}


def _detail(instance):
    return reverse('horizon:admin:vsmtio_hosts:detail',
                   kwargs={'instance': instance})


class _PanelChecks:
    def nav(self):
        """The sidebar Horizon would render for this user."""
        # the test request's user is otherwise resolved by Django's own
        # middleware, which is keystone's only once a client request has
        # patched it: a test run alone would see an anonymous user
        self.request.user = auth_utils.get_user(self.request)
        return template.Template('{% load horizon %}{% horizon_nav %}').render(
            template.Context({'request': self.request}))

    def assertShown(self, html):
        """The panel's link and its vSMT-IO group are in the sidebar."""
        self.assertIn('href="%s"' % INDEX, html)
        self.assertIn('sidebar-accordion-admin-vsmtio', html)

    def assertHidden(self, html):
        """A sidebar was drawn, without the panel or its group."""
        self.assertIn('id="sidebar-accordion"', html)
        self.assertNotIn(INDEX, html)
        self.assertNotIn('sidebar-accordion-admin-vsmtio', html)

    def assertRefused(self):
        """The panel's URL refuses, before any query is sent."""
        with mock.patch.object(prometheus, 'query') as query:
            res = self.client.get(INDEX)
        query.assert_not_called()
        self.assertNotEqual(200, res.status_code)


class _WithAetos(_PanelChecks):
    def _setup_test_data(self):
        super()._setup_test_data()
        self.service_catalog.append(AETOS)


class _AdminViews(_WithAetos, helpers.BaseAdminViewTests):
    """An admin's pages on the recorded answers of ``ANSWERS``."""
    ANSWERS = answers.PATH

    def setUp(self):
        super().setUp()
        self.recorded = answers.Recorded(self.ANSWERS)
        patcher = mock.patch.object(prometheus, 'query', self.recorded)
        patcher.start()
        self.addCleanup(patcher.stop)
        # nova's names (the guard's reasons name VMs by them)
        patcher = mock.patch('openstack_dashboard.api.nova.server_list',
                             return_value=([], False))
        self.server_list = patcher.start()
        self.addCleanup(patcher.stop)
        # the mix filter's table: nova's and placement's records
        self.nova = {}
        for name, value in (('servers', []), ('nodes', []),
                            ('aggregates', []),
                            ('vcpu_allocation_ratios', {})):
            patcher = mock.patch.object(nova, name, return_value=value)
            self.nova[name] = patcher.start()
            self.addCleanup(patcher.stop)


class AdminViewsTest(_AdminViews):
    def test_hosts_table(self):
        res = self.client.get(INDEX)
        self.assertEqual(200, res.status_code)
        self.assertTemplateUsed(res, 'vsmtio_dashboard/hosts/index.html')
        rows = {h.instance: h for h in res.context['vsmtio_hosts_table'].data}
        self.assertEqual({answers.HOST, answers.DOWN_HOST}, set(rows))
        html = res.content.decode()
        self.assertIn('compute-1', html)
        self.assertIn('200 µs; per VM 100 µs to 400 µs', html)
        self.assertIn('retention: 1 of 2 VMs (every floor held: 1, tenant '
                      'below floor: 1)', html)
        self.assertIn('1 of 1 reserved VMs', html)
        self.assertIn('running, 2 periods failed in 5 min', html)
        self.assertIn('period 1234 (300 in 5 min)', html)
        self.assertIn('not reported', html)   # the down host's mode
        self.assertIn(_detail(answers.HOST), html)

    def test_host_page(self):
        server_list = self.server_list
        server, gone = self.servers.list()[:2]
        server.id, gone.id = answers.VM1, answers.VM2

        def servers(request, search_opts):
            # VM2 was deleted: nova lists it only when asked for those
            return ([gone] if search_opts.get('deleted') else [server],
                    False)
        server_list.side_effect = servers
        res = self.client.get(_detail(answers.HOST))
        self.assertEqual(200, res.status_code)
        self.assertTemplateUsed(res, 'vsmtio_dashboard/hosts/detail.html')
        by_slug = {c['chart'].slug: c for c in res.context['charts']}
        self.assertEqual(2, by_slug['mix']['svg'].count('<polyline'))
        self.assertIn('io: 3', by_slug['mix']['svg'])
        self.assertEqual('', by_slug['kept']['svg'])
        html = res.content.decode()
        self.assertIn(server.name, html)
        self.assertIn('retention dropped (tenant below floor)', html)
        self.assertIn('1,500 requests/s', html)
        # the computing VM against its floor, the VM tried for by name
        self.assertIn('0.955 under retention for %s (floor 0.97, below)'
                      % server.name, html)
        # a deleted server by its name, said to be deleted
        self.assertIn('%s (deleted)' % gone.name,
                      by_slug['floors']['svg'])
        # nova's page for the server nova knows, none for the other
        self.assertIn(reverse('horizon:admin:instances:detail',
                              args=[answers.VM1]), html)
        self.assertNotIn(reverse('horizon:admin:instances:detail',
                                 args=[answers.VM2]), html)
        self.assertNotIn('vsmtio-simulated', html)
        summary = dict(res.context['summary'])
        self.assertEqual('stock', summary['Mode'])
        self.assertEqual(
            [mock.call(mock.ANY, search_opts={'all_tenants': True}),
             mock.call(mock.ANY, search_opts={'all_tenants': True,
                                              'deleted': True})],
            server_list.call_args_list)

    def test_metrics_unavailable_is_said(self):
        def fail(request, promql):
            raise prometheus.MetricsUnavailable('Aetos answered 503')
        with mock.patch.object(prometheus, 'query', fail):
            res = self.client.get(INDEX)
        self.assertEqual(200, res.status_code)
        self.assertEqual([], res.context['vsmtio_hosts_table'].data)
        self.assertMessageCount(res, error=1)

    def test_in_navigation(self):
        self.assertShown(self.nav())


def _cells(table):
    """``{row id: {column name: text shown}}`` of a rendered table."""
    return {row.datum.id: {name: str(cell.data)
                           for name, cell in row.cells.items()}
            for row in table.get_rows()}


class MixFilterViewsTest(_AdminViews):
    """The mix filter's table on nova's records (nova's API mocked)."""

    def setUp(self):
        super().setUp()
        cpu = mixfilter.Flavor('vsmtio.cpu', 1, {'vsmtio:workload': 'cpu'})
        io = mixfilter.Flavor('vsmtio.io', 4, {'vsmtio:workload': 'io'})
        self.nova['nodes'].return_value = [
            mixfilter.Node('compute-1', 'compute-1', 10, 1, 4.0),
            mixfilter.Node('compute-2', 'compute-2', 10, 8, 4.0)]
        self.nova['servers'].return_value = [
            mixfilter.Server('compute-1', 'compute-1', cpu),
            mixfilter.Server('compute-2', 'compute-2', io),
            mixfilter.Server('compute-2', 'compute-2', io._replace(
                name='vsmtio.cpu4', extra_specs={'vsmtio:workload': 'cpu'}))]
        # the cloud walk's aggregate: no I/O on compute-1
        self.nova['aggregates'].return_value = [mixfilter.Aggregate(
            'walk-no-io', ('compute-1',), {'vsmtio:min_io_fraction': '0',
                                           'vsmtio:max_io_fraction': '0'})]

    @django_utils.override_settings(
        VSMTIO_NOVA_OPTIONS={'filter_min_classified_vcpus': 1})
    def test_refusal_shown_where_the_band_would_break(self):
        res = self.client.get(INDEX)
        self.assertEqual(200, res.status_code)
        rows = _cells(res.context['vsmtio_mix_table'])
        self.assertEqual({'compute-1', 'compute-2'}, set(rows))
        refused = rows['compute-1']
        self.assertEqual('io:cpu 0:1 vCPUs, I/O share 0.000',
                         refused['counted'])
        self.assertEqual('[0.000, 0.000] from aggregate walk-no-io',
                         refused['band'])
        self.assertEqual('refused from 1 vCPU: I/O share 0.000 -> 0.500 '
                         'outside [0.000, 0.000], 38 vCPUs free',
                         refused['io'])
        self.assertEqual('passes, up to the 39 vCPUs left', refused['cpu'])
        html = res.content.decode()
        self.assertIn(escape(refused['io']), html)
        self.assertIn("Judged with nova.conf's [vsmtio] options as "
                      'VSMTIO_NOVA_OPTIONS mirrors them: min_io_fraction '
                      '0.1, max_io_fraction 0.9, filter_min_classified_vcpus '
                      '1.', html)

    @django_utils.override_settings(
        VSMTIO_NOVA_OPTIONS={'filter_min_classified_vcpus': 1})
    def test_nothing_refused_where_the_band_holds(self):
        res = self.client.get(INDEX)
        held = _cells(res.context['vsmtio_mix_table'])['compute-2']
        self.assertEqual('io:cpu 4:4 vCPUs, I/O share 0.500',
                         held['counted'])
        self.assertEqual('[0.100, 0.900] from the options', held['band'])
        self.assertEqual('32 of 40 (10 vCPUs × allocation ratio 4)',
                         held['free'])
        for cls in ('io', 'cpu'):
            self.assertEqual('passes, up to the 32 vCPUs left', held[cls])
        self.assertNotIn('refused', ' '.join(held.values()))

    def test_without_the_setting_the_defaults_are_said(self):
        res = self.client.get(INDEX)
        self.assertContains(res, '<p class="vsmtio-mix-help">nova lets a '
                                 'host filter only pass or fail a host')
        self.assertContains(
            res, 'Horizon has no VSMTIO_NOVA_OPTIONS setting: the table '
                 "judges with nova's defaults (min_io_fraction 0.1, "
                 'max_io_fraction 0.9, filter_min_classified_vcpus 16).')
        rows = _cells(res.context['vsmtio_mix_table'])
        # one classified vCPU of the 16 nova judges from by default
        self.assertTrue(rows['compute-1']['io'].startswith(
            'passes unjudged: the host has 1 classified vCPUs, the '
            'filter judges from 16'), rows['compute-1'])

    @django_utils.override_settings(
        VSMTIO_NOVA_OPTIONS={'max_io_fraction': 1.5})
    def test_a_setting_nova_would_refuse_is_said(self):
        res = self.client.get(INDEX)
        self.assertContains(res, 'VSMTIO_NOVA_OPTIONS: max_io_fraction=1.5 '
                                 'is refused')

    def test_nova_unavailable_is_said_and_the_agents_stay(self):
        self.nova['nodes'].side_effect = Exception('nova answered 503')
        res = self.client.get(INDEX)
        self.assertEqual(200, res.status_code)
        self.assertEqual([], res.context['vsmtio_mix_table'].data)
        self.assertEqual(2, len(res.context['vsmtio_hosts_table'].data))
        self.assertMessageCount(res, error=1)

    def test_placement_unavailable_assumes_ratio_one_and_says_so(self):
        self.nova['vcpu_allocation_ratios'].side_effect = Exception('no')
        self.nova['nodes'].side_effect = lambda request, ratios: [
            mixfilter.Node('compute-1', 'compute-1', 10, 1,
                           ratios.get('compute-1'))]
        res = self.client.get(INDEX)
        [row] = _cells(res.context['vsmtio_mix_table']).values()
        self.assertIn('placement gave no allocation ratio: 1.0 assumed',
                      row['free'])
        self.assertMessageCount(res, error=0)


class SimulatedHostViewsTest(_AdminViews):
    """The pages on real answers about the simulated host's agent."""
    ANSWERS = answers.SIMULATED_PATH

    def test_hosts_table(self):
        res = self.client.get(INDEX)
        self.assertEqual(200, res.status_code)
        [row] = res.context['vsmtio_hosts_table'].data
        self.assertTrue(row.simulated)
        html = res.content.decode()
        self.assertIn('%s (simulated SMT host)' % row.name, html)
        self.assertIn('simulated (a model of an SMT host, not a machine)',
                      html)
        self.assertIn('retention: 1 of 1 VMs', html)

    def test_host_page(self):
        res = self.client.get(_detail(answers.SIM_HOST))
        self.assertEqual(200, res.status_code)
        html = res.content.decode()
        self.assertIn('vsmtio-simulated', html)     # the banner
        self.assertIn('(simulated SMT host)', html)  # the title
        self.assertIn('requests/s', html)
        self.assertIn('(floor 0.97', html)
        # the model's VMs are nova's servers nowhere: no link to nova
        for vm in res.context['table'].data:
            self.assertNotIn(reverse('horizon:admin:instances:detail',
                                     args=[vm.domain]), html)
        by_slug = {c['chart'].slug: c for c in res.context['charts']}
        for slug in ('mix', 'timeout', 'kept', 'floors', 'served'):
            self.assertIn('<polyline', by_slug[slug]['svg'], slug)
        self.assertIn('floor: 0.97', by_slug['floors']['svg'])


class WithoutAetosTest(_PanelChecks, helpers.BaseAdminViewTests):
    """A cloud whose catalogue has no Aetos: nothing to read, no panel."""

    def test_not_in_navigation(self):
        html = self.nav()
        self.assertHidden(html)
        # the admin's other panels are there: the catalogue hid this one
        self.assertIn(reverse('horizon:admin:hypervisors:index'), html)

    def test_refused(self):
        self.assertRefused()

    @django_utils.override_settings(VSMTIO_METRICS_ENDPOINT=AETOS_URL)
    def test_named_endpoint_is_enough(self):
        self.assertShown(self.nav())


class MemberViewsTest(_WithAetos, helpers.TestCase):
    def test_not_for_members(self):
        self.assertHidden(self.nav())
        self.assertRefused()
