"""The measured-state publisher: which keys, which values, how often.

The compute API itself is exercised against a real cloud by the tempest
plugin (``vsmtio_tempest_plugin``: the agent's state appears on a real
server). Here the client is a recorder of the two calls the publisher
makes, so that bounding, rounding, signing and rate limiting are checked
exactly.
"""

import datetime

from keystoneauth1 import exceptions as ks_exc
from oslo_config import cfg
from oslo_config import fixture as cfg_fixture
import testtools

from vsmtio_agent.conf import agent as conf_agent
from vsmtio_agent.conf import publish as conf_publish
from vsmtio_agent import model
from vsmtio_agent import publish
from vsmtio_agent.tests.unit.policy import helpers
from vsmtio_contract import workload

SECRET = 'test-secret'
NOW = datetime.datetime(2026, 1, 2, 3, 4, 5,
                        tzinfo=datetime.timezone.utc)


def vcpu(retention=None, i_cpu=None, delay=None):
    st = helpers.stats(retention_rate=retention)
    return st.__class__(**dict(st.__dict__, i_cpu=i_cpu,
                               runqueue_delay_ratio=delay))


def decision(roles):
    return model.Decision(timeout_ns=1000, placements={
        ref: model.Placement(core_id=0, role=role, home=0, threads=(0,))
        for ref, role in roles.items()})


class RecordingClient(object):
    """Records update/delete calls; ``missing`` servers answer 404."""

    def __init__(self, missing=()):
        self.calls = []
        self.missing = set(missing)

    def update(self, server, items):
        if server in self.missing:
            raise ks_exc.NotFound()
        self.calls.append(('update', server, dict(items)))

    def delete(self, server, key):
        self.calls.append(('delete', server, key))


class TestInstanceValues(testtools.TestCase):

    def test_class_signed_and_rates_rounded(self):
        a0, a1 = model.VcpuRef('uuid-a', 0), model.VcpuRef('uuid-a', 1)
        stats = {a0: vcpu(0.12345, 2.0, 0.1), a1: vcpu(0.2, None, 0.3)}
        values = publish.instance_values(
            stats, decision({a0: model.Role.IO, a1: model.Role.CPU}),
            SECRET, now=NOW)['uuid-a']
        # a tie is io; the value verifies for this instance only
        self.assertEqual(workload.WorkloadClass.IO, workload.verify_measured(
            SECRET, 'uuid-a', values[publish.CLASS_KEY]))
        self.assertIsNone(workload.verify_measured(
            SECRET, 'uuid-b', values[publish.CLASS_KEY]))
        self.assertEqual('0.162', values['vsmtio:retention_rate'])
        self.assertEqual('2.00', values['vsmtio:i_cpu'])
        self.assertEqual('0.200', values['vsmtio:runqueue_delay'])
        self.assertEqual('2026-01-02T03:04:05Z', values[publish.TIME_KEY])
        self.assertLessEqual(set(values), set(publish.KEYS))

    def test_unmeasured_rates_and_class_without_secret_are_absent(self):
        a0 = model.VcpuRef('uuid-a', 0)
        values = publish.instance_values(
            {a0: vcpu(delay=0.5)}, decision({a0: model.Role.CPU}), None,
            now=NOW)['uuid-a']
        self.assertEqual({'vsmtio:runqueue_delay', publish.TIME_KEY},
                         set(values))

    def test_majority_class(self):
        refs = [model.VcpuRef('u', i) for i in range(3)]
        roles = dict(zip(refs, [model.Role.CPU, model.Role.CPU,
                                model.Role.IO]))
        values = publish.instance_values(
            {r: vcpu() for r in refs}, decision(roles), SECRET)['u']
        self.assertTrue(values[publish.CLASS_KEY].startswith('cpu:'))


class TestChanges(testtools.TestCase):

    def test_time_alone_is_no_change(self):
        old = {'vsmtio:i_cpu': '1.00', publish.TIME_KEY: 't1'}
        new = {'vsmtio:i_cpu': '1.00', publish.TIME_KEY: 't2'}
        self.assertEqual(({}, []), publish.changes(old, new))

    def test_changed_and_gone_keys(self):
        old = {'vsmtio:i_cpu': '1.00', 'vsmtio:runqueue_delay': '0.100',
               publish.TIME_KEY: 't1', 'user:key': 'x'}
        new = {'vsmtio:i_cpu': '2.00', publish.TIME_KEY: 't2',
               'other': 'never written'}
        self.assertEqual(
            ({'vsmtio:i_cpu': '2.00', publish.TIME_KEY: 't2'},
             ['vsmtio:runqueue_delay']),
            publish.changes(old, new))


class TestPublisher(testtools.TestCase):

    def setUp(self):
        super().setUp()
        conf = cfg.ConfigOpts()
        conf_agent.register_opts(conf)
        conf_publish.register_opts(conf)
        self.conf = self.useFixture(cfg_fixture.Config(conf)).conf
        self.conf.set_override('interval', 60, group='vsmtio_publish')
        self.now = 1000.0
        self.client = RecordingClient(missing={'not-a-server'})
        self.pub = publish.Publisher(conf, client=self.client,
                                     clock=lambda: self.now)

    def values(self, i_cpu='1.00'):
        return {'a': {'vsmtio:i_cpu': i_cpu, publish.TIME_KEY: 't'}}

    def test_writes_on_change_at_most_once_per_interval(self):
        self.pub.publish(self.values())
        self.now += 10
        self.pub.publish(self.values('2.00'))      # within the interval
        self.now += 60
        self.pub.publish(self.values('2.00'))
        self.now += 60
        self.pub.publish(self.values('2.00'))      # unchanged: no call
        self.assertEqual(
            [('update', 'a', {'vsmtio:i_cpu': '1.00',
                              publish.TIME_KEY: 't'}),
             ('update', 'a', {'vsmtio:i_cpu': '2.00',
                              publish.TIME_KEY: 't'})],
            self.client.calls)

    def test_deletes_only_its_own_keys_that_went(self):
        self.pub.publish({'a': {'vsmtio:i_cpu': '1.00',
                                'vsmtio:runqueue_delay': '0.100'}})
        self.now += 60
        self.pub.publish({'a': {'vsmtio:i_cpu': '1.00'}})
        self.assertEqual(('delete', 'a', 'vsmtio:runqueue_delay'),
                         self.client.calls[-1])

    def test_max_instances_bounds_a_round(self):
        self.conf.set_override('max_instances', 2, group='vsmtio_publish')
        self.pub.publish({u: {'vsmtio:i_cpu': '1.00'} for u in 'abc'})
        self.assertEqual(2, len(self.client.calls))
        self.now += 60
        self.pub.publish({u: {'vsmtio:i_cpu': '1.00'} for u in 'abc'})
        # the one left out goes first next round
        self.assertEqual('c', self.client.calls[2][1])

    def test_domain_without_server_is_skipped_for_an_interval(self):
        self.pub.publish({'not-a-server': {'vsmtio:i_cpu': '1.00'}})
        self.assertEqual({}, self.pub.published)
        self.assertEqual(0, self.pub.failures)

    def test_dry_run_writes_nothing(self):
        self.conf.set_override('dry_run', True, group='vsmtio_agent')
        pub = publish.Publisher(self.conf, client=self.client,
                                clock=lambda: self.now)
        pub.publish(self.values())
        self.assertEqual([], self.client.calls)

    def test_summary_counts_published_classes(self):
        signed = workload.sign_measured(SECRET, 'a', 'io')
        self.pub.publish({'a': {publish.CLASS_KEY: signed},
                          'b': {'vsmtio:i_cpu': '1.00'}})
        self.assertEqual({'io': 1, 'unpublished': 1},
                         self.pub.summary()['classes'])

    def test_every_option_has_help(self):
        for _group, opts in conf_publish.list_opts().items():
            for opt in opts:
                self.assertTrue(opt.help, opt.name)
