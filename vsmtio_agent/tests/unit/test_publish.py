"""The measured-state publisher: which keys, which values, how often.

The compute API itself is exercised against a real cloud by the tempest
plugin (``vsmtio_tempest_plugin``: the agent's state appears on a real
server) and on nova's functional harness
(``vsmtio_nova/tests/functional/test_measured_replay.py``). Here the
client is a recorder of the three calls the publisher makes over one
server's metadata, so that bounding, rounding, signing, rate limiting and
repairing are checked exactly.
"""

import logging

import fixtures
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


def vcpu(retention=None, i_cpu=None, delay=None):
    st = helpers.stats(retention_rate=retention)
    return st.__class__(**dict(st.__dict__, i_cpu=i_cpu,
                               runqueue_delay_ratio=delay))


def decision(roles):
    return model.Decision(timeout_ns=1000, placements={
        ref: model.Placement(core_id=0, role=role, home=0, threads=(0,))
        for ref, role in roles.items()})


class RecordingClient(object):
    """Servers' metadata; records update/delete calls; ``missing`` 404."""

    def __init__(self, missing=()):
        self.calls = []
        self.missing = set(missing)
        self.servers = {}

    def metadata(self, server):
        if server in self.missing:
            raise ks_exc.NotFound()
        return dict(self.servers.get(server, {}))

    def update(self, server, items):
        if server in self.missing:
            raise ks_exc.NotFound()
        self.calls.append(('update', server, dict(items)))
        self.servers.setdefault(server, {}).update(items)

    def delete(self, server, key):
        self.calls.append(('delete', server, key))
        self.servers.get(server, {}).pop(key, None)


class TestInstanceValues(testtools.TestCase):

    def test_only_the_class_is_published(self):
        a0, a1 = model.VcpuRef('uuid-a', 0), model.VcpuRef('uuid-a', 1)
        stats = {a0: vcpu(0.12345, 2.0, 0.1), a1: vcpu(0.2, None, 0.3)}
        values = publish.instance_values(
            stats, decision({a0: model.Role.IO, a1: model.Role.CPU}),
            True)
        # a tie is io (the publisher signs it when it writes); the rates
        # are the metrics' (test_agent), never server metadata
        self.assertEqual({'uuid-a': {publish.CLASS_KEY: 'io'}}, values)
        self.assertEqual((publish.CLASS_KEY,), publish.KEYS)

    def test_without_secret_a_domain_has_nothing(self):
        a0 = model.VcpuRef('uuid-a', 0)
        values = publish.instance_values(
            {a0: vcpu(delay=0.5)}, decision({a0: model.Role.CPU}), False)
        self.assertEqual({'uuid-a': {}}, values)

    def test_majority_class(self):
        refs = [model.VcpuRef('u', i) for i in range(3)]
        roles = dict(zip(refs, [model.Role.CPU, model.Role.CPU,
                                model.Role.IO]))
        values = publish.instance_values(
            {r: vcpu() for r in refs}, decision(roles), True)['u']
        self.assertEqual('cpu', values[publish.CLASS_KEY])


class TestChanges(testtools.TestCase):

    def test_same_class_is_no_change(self):
        old = {publish.CLASS_KEY: 'io:1:h:s', 'user:key': 'x'}
        self.assertEqual(({}, []), publish.changes(old, dict(old)))

    def test_former_keys_deleted_user_keys_kept(self):
        old = {publish.CLASS_KEY: 'io:1:h:s', 'vsmtio:i_cpu': '1.00',
               'vsmtio:measured_at': 't1', 'vsmtio:foo': 'y',
               'user:key': 'x'}
        new = {publish.CLASS_KEY: 'cpu:1:h:s', 'other': 'never written'}
        self.assertEqual(
            ({publish.CLASS_KEY: 'cpu:1:h:s'},
             ['vsmtio:i_cpu', 'vsmtio:measured_at']),
            publish.changes(old, new))

    def test_class_deleted_when_no_longer_published(self):
        self.assertEqual(({}, [publish.CLASS_KEY]), publish.changes(
            {publish.CLASS_KEY: 'io:1:h:s'}, {}))


class PublisherBase(testtools.TestCase):

    def setUp(self):
        super().setUp()
        conf = cfg.ConfigOpts()
        conf_agent.register_opts(conf)
        conf_publish.register_opts(conf)
        self.conf = self.useFixture(cfg_fixture.Config(conf)).conf
        self.conf.set_override('interval', 60, group='vsmtio_publish')
        self.conf.set_override('measured_class_secret', SECRET,
                               group='vsmtio_publish')
        self.conf.set_override('measured_class_lifetime', 600,
                               group='vsmtio_publish')
        self.conf.set_override('host', 'compute-1', group='vsmtio_publish')
        self.now = 1000.0
        self.wall = 1.8e9
        self.client = RecordingClient(missing={'not-a-server'})
        self.pub = publish.Publisher(conf, client=self.client,
                                     clock=lambda: self.now,
                                     wallclock=lambda: self.wall)

    def later(self, seconds):
        self.now += seconds
        self.wall += seconds

    def trusted(self, uuid='a', host='compute-1'):
        return workload.check_measured(
            SECRET, uuid, self.client.servers[uuid].get(publish.CLASS_KEY),
            host, self.wall)


class TestPublisher(PublisherBase):

    def signed(self, uuid='a'):
        return self.client.servers[uuid][publish.CLASS_KEY]

    def test_writes_on_change_at_most_once_per_interval(self):
        self.pub.publish({'a': {publish.CLASS_KEY: 'io'}})
        self.now += 10
        self.pub.publish({'a': {publish.CLASS_KEY: 'cpu'}})  # too soon
        self.assertTrue(self.signed().startswith('io:'))
        self.now += 60
        self.pub.publish({'a': {publish.CLASS_KEY: 'cpu'}})
        self.now += 60
        self.pub.publish({'a': {publish.CLASS_KEY: 'cpu'}})  # no call
        self.assertEqual([('update', 'a'), ('update', 'a')],
                         [c[:2] for c in self.client.calls])
        self.assertTrue(self.signed().startswith('cpu:'))

    def test_change_logged_at_info_once(self):
        logger = self.useFixture(fixtures.FakeLogger(
            name='vsmtio_agent.publish', level=logging.INFO))
        for _ in range(3):
            self.pub.publish({'a': {publish.CLASS_KEY: 'io'}})
            self.later(60)
        self.assertEqual(1, logger.output.count(
            'server a: published measured class io (was none)'))

    def test_former_keys_deleted_once_without_secret(self):
        """An upgrade: the rates earlier releases wrote go, once."""
        self.client.servers['a'] = {'vsmtio:i_cpu': '1.00',
                                    'vsmtio:measured_at': 't', 'own': 'x'}
        self.pub.publish({'a': {}})
        self.later(60)
        self.pub.publish({'a': {}})
        self.assertEqual({'own': 'x'}, self.client.servers['a'])
        self.assertEqual([('delete', 'a', 'vsmtio:i_cpu'),
                          ('delete', 'a', 'vsmtio:measured_at')],
                         self.client.calls)

    def test_max_instances_bounds_a_round(self):
        self.conf.set_override('max_instances', 2, group='vsmtio_publish')
        self.pub.publish({u: {publish.CLASS_KEY: 'io'} for u in 'abc'})
        self.assertEqual(2, len(self.client.calls))
        self.now += 60
        self.pub.publish({u: {publish.CLASS_KEY: 'io'} for u in 'abc'})
        # the one left out goes first next round
        self.assertEqual('c', self.client.calls[2][1])

    def test_domain_without_server_is_skipped_for_an_interval(self):
        self.pub.publish({'not-a-server': {publish.CLASS_KEY: 'io'}})
        self.assertEqual({}, self.pub.published)
        self.assertEqual(0, self.pub.failures)

    def test_dry_run_writes_nothing(self):
        self.conf.set_override('dry_run', True, group='vsmtio_agent')
        pub = publish.Publisher(self.conf, client=self.client,
                                clock=lambda: self.now)
        pub.publish({'a': {publish.CLASS_KEY: 'io'}})
        self.assertEqual([], self.client.calls)

    def test_summary_counts_published_classes(self):
        self.pub.publish({'a': {publish.CLASS_KEY: 'io'}, 'b': {}})
        self.assertEqual({'io': 1, 'unpublished': 1},
                         self.pub.summary()['classes'])

    def test_every_option_has_help(self):
        for _group, opts in conf_publish.list_opts().items():
            for opt in opts:
                self.assertTrue(opt.help, opt.name)


class TestSignedClass(PublisherBase):
    """The class is signed for instance, host and expiry, and repaired."""

    def test_signature_binds_instance_host_and_expiry(self):
        self.pub.publish({'a': {publish.CLASS_KEY: 'io'}})
        value = self.client.servers['a'][publish.CLASS_KEY]
        self.assertEqual((workload.WorkloadClass.IO, None), self.trusted())
        self.assertEqual(('io', '%d' % (self.wall + 600), 'compute-1'),
                         tuple(value.split(':')[:3]))
        # another instance, another host, or past its expiry: refused
        self.assertIsNone(workload.verify_measured(
            SECRET, 'b', value, 'compute-1', self.wall))
        self.assertIn('compute-2', workload.check_measured(
            SECRET, 'a', value, 'compute-2', self.wall)[1])
        self.assertIn('expired', workload.check_measured(
            SECRET, 'a', value, 'compute-1', self.wall + 600)[1])

    def test_reasserted_before_expiry_not_at_every_round(self):
        self.pub.publish({'a': {publish.CLASS_KEY: 'io'}})
        first = self.client.servers['a'][publish.CLASS_KEY]
        self.later(240)    # less than half the lifetime: unchanged
        self.pub.publish({'a': {publish.CLASS_KEY: 'io'}})
        self.assertEqual(1, len(self.client.calls))
        self.later(120)    # past half: signed afresh, still valid
        self.pub.publish({'a': {publish.CLASS_KEY: 'io'}})
        self.assertEqual(2, len(self.client.calls))
        self.assertNotEqual(first, self.client.servers['a'][
            publish.CLASS_KEY])
        for _ in range(30):   # an hour of rounds: never expires
            self.later(60)
            self.pub.publish({'a': {publish.CLASS_KEY: 'io'}})
            self.assertEqual(workload.WorkloadClass.IO, self.trusted()[0])

    def test_a_replayed_earlier_value_is_repaired(self):
        self.pub.publish({'a': {publish.CLASS_KEY: 'io'}})
        earlier = self.client.servers['a'][publish.CLASS_KEY]
        self.later(60)
        self.pub.publish({'a': {publish.CLASS_KEY: 'cpu'}})
        now = self.client.servers['a'][publish.CLASS_KEY]
        # The owner writes the earlier io back: it still verifies (same
        # instance, host, unexpired) until the agent's next round...
        self.client.servers['a'][publish.CLASS_KEY] = earlier
        self.assertEqual(workload.WorkloadClass.IO, self.trusted()[0])
        self.later(60)
        self.pub.publish({'a': {publish.CLASS_KEY: 'cpu'}})
        # ... which reads it back and puts the agent's value back.
        self.assertEqual(now, self.client.servers['a'][publish.CLASS_KEY])
        self.assertEqual(workload.WorkloadClass.CPU, self.trusted()[0])
        # and once expired it is refused whatever happens
        self.assertIn('expired', workload.check_measured(
            SECRET, 'a', earlier, 'compute-1', self.wall + 600)[1])

    def test_forged_class_repaired_others_left_alone(self):
        self.pub.publish({'a': {publish.CLASS_KEY: 'cpu'}})
        self.client.servers['a'].update({
            publish.CLASS_KEY: 'io:9999999999:compute-1:forged',
            'vsmtio:retention_rate': '0.999',   # a former key
            'vsmtio:foo': 'bar', 'owner': 'key'})
        # the forgery never verifies, even before the agent's next round
        self.assertIn('signature', self.trusted()[1])
        self.later(60)
        self.pub.publish({'a': {publish.CLASS_KEY: 'cpu'}})
        there = self.client.servers['a']
        self.assertEqual(workload.WorkloadClass.CPU, self.trusted()[0])
        self.assertNotIn('vsmtio:retention_rate', there)
        self.assertEqual('bar', there['vsmtio:foo'])   # not the agent's
        self.assertEqual('key', there['owner'])

    def test_lifetime_is_bounded(self):
        opt = [o for o in conf_publish.opts
               if o.name == 'measured_class_lifetime'][0]
        self.assertEqual(workload.MAX_LIFETIME, opt.type.max)
        self.assertRaises(ValueError, self.conf.set_override,
                          'measured_class_lifetime',
                          workload.MAX_LIFETIME + 1,
                          group='vsmtio_publish')
