"""The measured-state publisher: which keys, which values, how often.

The compute API itself is exercised against a real cloud by the tempest
plugin (``vsmtio_tempest_plugin``: the agent's state appears on a real
server) and on nova's functional harness
(``vsmtio_nova/tests/functional/test_measured_replay.py``). Here the
client is a recorder of the three calls the publisher makes over one
server's metadata, so that bounding, rounding, signing, rate limiting,
repairing and the project each call's token is scoped to are checked
exactly; the tokens' scopes themselves are keystoneauth1's real plugins,
loaded from the agent's options.
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

SECRET = 'the-controllers-root-secret'
#: compute-1's own key, which its agent holds.
KEY = workload.derive_host_key(SECRET, 'compute-1')


def vcpu(retention=None, i_cpu=None, delay=None):
    st = helpers.stats(retention_rate=retention)
    return st.__class__(**dict(st.__dict__, i_cpu=i_cpu,
                               runqueue_delay_ratio=delay))


def decision(roles):
    return model.Decision(timeout_ns=1000, placements={
        ref: model.Placement(core_id=0, role=role, home=0, threads=(0,))
        for ref, role in roles.items()})


class RecordingClient(object):
    """Servers' metadata; records update/delete calls; ``missing`` 404.

    Like nova for a token that is no admin's, it finds a server only with
    a token scoped to the server's project (``owners``, default ``p``).
    """

    def __init__(self, missing=(), owners=None):
        self.calls = []
        self.missing = set(missing)
        self.owners = owners or {}
        self.servers = {}
        self.scopes = []

    def _find(self, server, project):
        self.scopes.append((server, project))
        if (server in self.missing
                or project != self.owners.get(server, 'p')):
            raise ks_exc.NotFound()

    def metadata(self, server, project):
        self._find(server, project)
        return dict(self.servers.get(server, {}))

    def update(self, server, items, project):
        self._find(server, project)
        self.calls.append(('update', server, dict(items)))
        self.servers.setdefault(server, {}).update(items)

    def delete(self, server, key, project):
        self._find(server, project)
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
        self.conf.set_override('measured_class_key', KEY,
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

    def publish(self, values, projects=None):
        """One round, every instance owned by project ``p`` by default."""
        self.pub.publish(values, projects or {u: 'p' for u in values})

    def trusted(self, uuid='a', host='compute-1'):
        """What nova makes of the class: with the key of ``host``."""
        return workload.check_measured(
            workload.derive_host_key(SECRET, host), uuid,
            self.client.servers[uuid].get(publish.CLASS_KEY), host,
            self.wall)


class TestPublisher(PublisherBase):

    def signed(self, uuid='a'):
        return self.client.servers[uuid][publish.CLASS_KEY]

    def test_writes_on_change_at_most_once_per_interval(self):
        self.publish({'a': {publish.CLASS_KEY: 'io'}})
        self.now += 10
        self.publish({'a': {publish.CLASS_KEY: 'cpu'}})  # too soon
        self.assertTrue(self.signed().startswith('io:'))
        self.now += 60
        self.publish({'a': {publish.CLASS_KEY: 'cpu'}})
        self.now += 60
        self.publish({'a': {publish.CLASS_KEY: 'cpu'}})  # no call
        self.assertEqual([('update', 'a'), ('update', 'a')],
                         [c[:2] for c in self.client.calls])
        self.assertTrue(self.signed().startswith('cpu:'))

    def test_change_logged_at_info_once(self):
        logger = self.useFixture(fixtures.FakeLogger(
            name='vsmtio_agent.publish', level=logging.INFO))
        for _ in range(3):
            self.publish({'a': {publish.CLASS_KEY: 'io'}})
            self.later(60)
        self.assertEqual(1, logger.output.count(
            'server a: published measured class io (was none)'))

    def test_former_keys_deleted_once_without_secret(self):
        """An upgrade: the rates earlier releases wrote go, once."""
        self.client.servers['a'] = {'vsmtio:i_cpu': '1.00',
                                    'vsmtio:measured_at': 't', 'own': 'x'}
        self.publish({'a': {}})
        self.later(60)
        self.publish({'a': {}})
        self.assertEqual({'own': 'x'}, self.client.servers['a'])
        self.assertEqual([('delete', 'a', 'vsmtio:i_cpu'),
                          ('delete', 'a', 'vsmtio:measured_at')],
                         self.client.calls)

    def test_max_instances_bounds_a_round(self):
        self.conf.set_override('max_instances', 2, group='vsmtio_publish')
        self.publish({u: {publish.CLASS_KEY: 'io'} for u in 'abc'})
        self.assertEqual(2, len(self.client.calls))
        self.now += 60
        self.publish({u: {publish.CLASS_KEY: 'io'} for u in 'abc'})
        # the one left out goes first next round
        self.assertEqual('c', self.client.calls[2][1])

    def test_domain_without_server_is_skipped_for_an_interval(self):
        self.publish({'not-a-server': {publish.CLASS_KEY: 'io'}})
        self.assertEqual({}, self.pub.published)
        self.assertEqual(0, self.pub.failures)

    def test_dry_run_writes_nothing(self):
        self.conf.set_override('dry_run', True, group='vsmtio_agent')
        pub = publish.Publisher(self.conf, client=self.client,
                                clock=lambda: self.now)
        pub.publish({'a': {publish.CLASS_KEY: 'io'}})
        self.assertEqual([], self.client.calls)

    def test_summary_counts_published_classes(self):
        self.publish({'a': {publish.CLASS_KEY: 'io'}, 'b': {}})
        self.assertEqual({'io': 1, 'unpublished': 1},
                         self.pub.summary()['classes'])

    def test_every_option_has_help(self):
        for _group, opts in conf_publish.list_opts().items():
            for opt in opts:
                self.assertTrue(opt.help, opt.name)


class TestSignedClass(PublisherBase):
    """The class is signed for instance, host and expiry, and repaired."""

    def test_signature_binds_instance_host_and_expiry(self):
        self.publish({'a': {publish.CLASS_KEY: 'io'}})
        value = self.client.servers['a'][publish.CLASS_KEY]
        self.assertEqual((workload.WorkloadClass.IO, None), self.trusted())
        self.assertEqual(('io', '%d' % (self.wall + 600), 'compute-1'),
                         tuple(value.split(':')[:3]))
        # another instance, another host, or past its expiry: refused
        self.assertIsNone(workload.verify_measured(
            KEY, 'b', value, 'compute-1', self.wall))
        self.assertIn('compute-2', workload.check_measured(
            KEY, 'a', value, 'compute-2', self.wall)[1])
        self.assertIn('expired', workload.check_measured(
            KEY, 'a', value, 'compute-1', self.wall + 600)[1])
        # another host verifies with its own key: compute-1's signs
        # nothing there, whatever host the value names
        self.assertIn('signature', self.trusted(host='compute-2')[1])

    def test_reasserted_before_expiry_not_at_every_round(self):
        self.publish({'a': {publish.CLASS_KEY: 'io'}})
        first = self.client.servers['a'][publish.CLASS_KEY]
        self.later(240)    # less than half the lifetime: unchanged
        self.publish({'a': {publish.CLASS_KEY: 'io'}})
        self.assertEqual(1, len(self.client.calls))
        self.later(120)    # past half: signed afresh, still valid
        self.publish({'a': {publish.CLASS_KEY: 'io'}})
        self.assertEqual(2, len(self.client.calls))
        self.assertNotEqual(first, self.client.servers['a'][
            publish.CLASS_KEY])
        for _ in range(30):   # an hour of rounds: never expires
            self.later(60)
            self.publish({'a': {publish.CLASS_KEY: 'io'}})
            self.assertEqual(workload.WorkloadClass.IO, self.trusted()[0])

    def test_a_replayed_earlier_value_is_repaired(self):
        self.publish({'a': {publish.CLASS_KEY: 'io'}})
        earlier = self.client.servers['a'][publish.CLASS_KEY]
        self.later(60)
        self.publish({'a': {publish.CLASS_KEY: 'cpu'}})
        now = self.client.servers['a'][publish.CLASS_KEY]
        # The owner writes the earlier io back: it still verifies (same
        # instance, host, unexpired) until the agent's next round...
        self.client.servers['a'][publish.CLASS_KEY] = earlier
        self.assertEqual(workload.WorkloadClass.IO, self.trusted()[0])
        self.later(60)
        self.publish({'a': {publish.CLASS_KEY: 'cpu'}})
        # ... which reads it back and puts the agent's value back.
        self.assertEqual(now, self.client.servers['a'][publish.CLASS_KEY])
        self.assertEqual(workload.WorkloadClass.CPU, self.trusted()[0])
        # and once expired it is refused whatever happens
        self.assertIn('expired', workload.check_measured(
            KEY, 'a', earlier, 'compute-1', self.wall + 600)[1])

    def test_forged_class_repaired_others_left_alone(self):
        self.publish({'a': {publish.CLASS_KEY: 'cpu'}})
        self.client.servers['a'].update({
            publish.CLASS_KEY: 'io:9999999999:compute-1:forged',
            'vsmtio:retention_rate': '0.999',   # a former key
            'vsmtio:foo': 'bar', 'owner': 'key'})
        # the forgery never verifies, even before the agent's next round
        self.assertIn('signature', self.trusted()[1])
        self.later(60)
        self.publish({'a': {publish.CLASS_KEY: 'cpu'}})
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


class TestLeastPrivilege(PublisherBase):
    """The agent's token per instance project; its key signs for its host."""

    def test_each_instance_is_reached_in_its_own_project(self):
        self.client.owners = {'a': 'tenant-1', 'b': 'tenant-2'}
        self.publish({'a': {publish.CLASS_KEY: 'io'},
                      'b': {publish.CLASS_KEY: 'cpu'}},
                     {'a': 'tenant-1', 'b': 'tenant-2'})
        self.assertEqual({('a', 'tenant-1'), ('b', 'tenant-2')},
                         set(self.client.scopes))
        self.assertEqual(0, self.pub.failures)

    def test_an_instance_without_a_known_project_is_not_published(self):
        logger = self.useFixture(fixtures.FakeLogger(
            name='vsmtio_agent.publish', level=logging.WARNING))
        self.pub.publish({'a': {publish.CLASS_KEY: 'io'}}, {'a': None})
        self.assertEqual([], self.client.scopes)
        self.assertEqual(1, self.pub.failures)
        self.assertIn('its project is not known', logger.output)
        self.later(30)    # tried again after an interval, not before
        self.pub.publish({'a': {publish.CLASS_KEY: 'io'}}, {'a': None})
        self.assertEqual(1, self.pub.failures)

    def test_the_period_s_tenancy_gives_the_projects(self):
        ref = model.VcpuRef('a', 0)
        self.pub.observe({ref: vcpu()}, decision({ref: model.Role.IO}),
                         {'a': model.Tenancy(project='p')})
        values, projects = self.pub._pending
        self.assertEqual({'a': 'p'}, projects)
        self.pub.publish(values, projects)
        self.assertEqual(workload.WorkloadClass.IO, self.trusted()[0])

    def test_a_root_secret_here_still_signs_for_this_host_only(self):
        logger = self.useFixture(fixtures.FakeLogger(
            name='vsmtio_agent.publish', level=logging.WARNING))
        self.conf.clear_override('measured_class_key',
                                 group='vsmtio_publish')
        self.conf.set_override('measured_class_secret', SECRET,
                               group='vsmtio_publish')
        self.pub = publish.Publisher(self.conf, client=self.client,
                                     clock=lambda: self.now,
                                     wallclock=lambda: self.wall)
        self.assertEqual(KEY, self.pub.key)
        self.assertIn('can sign classes for every host', logger.output)
        self.publish({'a': {publish.CLASS_KEY: 'cpu'}})
        self.assertEqual(workload.WorkloadClass.CPU, self.trusted()[0])


class TestComputeClientScope(testtools.TestCase):
    """keystoneauth1's own plugins, loaded from the agent's options.

    Building a plugin asks keystone nothing, so the scope each token will
    ask for is read from the real plugin object.
    """

    def client(self, auth_type='password', **publish_opts):
        conf = cfg.ConfigOpts()
        conf_agent.register_opts(conf)
        conf_publish.register_opts(conf)
        conf([], default_config_files=[])
        conf.set_override('auth_type', auth_type,
                          group=conf_publish.AUTH_GROUP)
        from keystoneauth1 import loading as ks_loading
        conf.register_opts(
            [o._to_oslo_opt() for o in
             ks_loading.get_plugin_loader(auth_type).get_options()],
            group=conf_publish.AUTH_GROUP)
        for name, value in (('auth_url', 'http://keystone.example/v3'),
                            ('username', 'vsmtio'),
                            ('user_domain_name', 'Default'),
                            ('project_name', 'service'),
                            ('project_domain_name', 'Default')):
            if hasattr(conf[conf_publish.AUTH_GROUP], name):
                conf.set_override(name, value,
                                  group=conf_publish.AUTH_GROUP)
        for name, value in publish_opts.items():
            conf.set_override(name, value, group=conf_publish.GROUP)
        return publish.ComputeClient(conf)

    def test_instance_scope_asks_for_the_instance_s_project(self):
        client = self.client()
        auth = client._adapter('tenant-1').auth
        # keystoneauth1's generic password plugin keeps them private
        self.assertEqual(('tenant-1', None), (auth._project_id,
                                              auth._project_name))
        self.assertIs(auth, client._adapter('tenant-1').auth)  # reused
        self.assertEqual('tenant-2', client._adapter('tenant-2').auth
                         ._project_id)
        self.assertIs(client._adapter('tenant-1').session,
                      client._adapter('tenant-2').session)

    def test_credentials_scope_is_the_configured_one(self):
        auth = self.client(token_scope='credentials')._adapter(
            'tenant-1').auth
        self.assertEqual((None, 'service'), (auth._project_id,
                                             auth._project_name))

    def test_an_auth_type_that_cannot_be_scoped_is_refused_in_one_line(self):
        client = self.client('v3applicationcredential')
        err = self.assertRaises(ValueError, client._adapter, 'tenant-1')
        self.assertIn('token_scope = instance', str(err))
        self.assertNotIn('\n', str(err))
