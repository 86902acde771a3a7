"""The panel's pages through Django's test client, as Horizon tests its
own panels (its test data, an admin or a member user); Prometheus's
answers are the recorded ones and nova's server list is Horizon's test
data (neither service runs in a unit test)."""

from unittest import mock

from django.urls import reverse
from openstack_dashboard.test import helpers

from vsmtio_dashboard.api import prometheus
from vsmtio_dashboard.tests import answers

INDEX = reverse('horizon:admin:vsmtio_hosts:index')


def _detail(instance):
    return reverse('horizon:admin:vsmtio_hosts:detail',
                   kwargs={'instance': instance})


class AdminViewsTest(helpers.BaseAdminViewTests):
    def setUp(self):
        super().setUp()
        self.recorded = answers.Recorded()
        patcher = mock.patch.object(prometheus, 'query', self.recorded)
        patcher.start()
        self.addCleanup(patcher.stop)

    def test_hosts_table(self):
        res = self.client.get(INDEX)
        self.assertEqual(200, res.status_code)
        self.assertTemplateUsed(res, 'horizon/common/_data_table_view.html')
        rows = {h.instance: h for h in res.context['table'].data}
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

    @mock.patch('openstack_dashboard.api.nova.server_list')
    def test_host_page(self, server_list):
        server = self.servers.first()
        server.id = answers.VM1
        server_list.return_value = ([server], False)
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
        self.assertIn('1.5e+03/s', html)
        summary = dict(res.context['summary'])
        self.assertEqual('stock', summary['Mode'])
        server_list.assert_called_once_with(
            mock.ANY, search_opts={'all_tenants': True})

    def test_metrics_unavailable_is_said(self):
        def fail(request, promql):
            raise prometheus.MetricsUnavailable('Aetos answered 503')
        with mock.patch.object(prometheus, 'query', fail):
            res = self.client.get(INDEX)
        self.assertEqual(200, res.status_code)
        self.assertEqual([], res.context['table'].data)
        self.assertMessageCount(res, error=1)


class MemberViewsTest(helpers.TestCase):
    def test_not_for_members(self):
        with mock.patch.object(prometheus, 'query') as query:
            res = self.client.get(INDEX)
        query.assert_not_called()
        self.assertNotEqual(200, res.status_code)
