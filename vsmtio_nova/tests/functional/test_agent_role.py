"""The agent publishes with a role that can do nothing else, and no admin.

nova's functional harness with nova's default (new) policies enforced, as
a cloud runs them, and vsmtio's policy file
(``etc/nova/policy.d/vsmtio.yaml``) loaded the way nova loads it, from a
``policy.d`` directory. The agent's real
:class:`~vsmtio_agent.publish.Publisher` reaches nova's real API with
tokens of the shape keystone gives its user: scoped to the instance's own
project, holding the ``vsmtio-agent`` role only (the harness's auth stub
takes the project and roles from the request, as keystonemiddleware
takes them from the token).
"""

import os

from keystoneauth1 import exceptions as ks_exc
from oslo_config import cfg

import nova.policy
from nova.tests.functional.api import client

from vsmtio_agent.conf import agent as conf_agent
from vsmtio_agent.conf import publish as conf_publish
from vsmtio_agent import publish
from vsmtio_contract import workload
from vsmtio_nova.tests.functional import test_measured_replay

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
POLICY_D = os.path.join(ROOT, 'etc', 'nova', 'policy.d')
ROLE = 'vsmtio-agent'
KEY = workload.MEASURED_CLASS_KEY


class AgentTokens(object):
    """The publisher's calls with a token per project, role ``ROLE`` only.

    nova's answers become keystoneauth1's exceptions, as the publisher's
    real client raises them.
    """

    def __init__(self, base_url):
        self.base_url = base_url
        self.projects = []

    def api(self, project):
        self.projects.append(project)
        api = client.TestOpenStackClient('vsmtio', self.base_url,
                                         project_id=project, roles=[ROLE])
        api.microversion = publish.COMPUTE_MICROVERSION
        return api

    @staticmethod
    def _call(fn, *args):
        try:
            return fn(*args)
        except client.OpenStackApiNotFoundException:
            raise ks_exc.NotFound()
        except client.OpenStackApiException as e:
            raise ks_exc.ClientException(str(e).splitlines()[0])

    def metadata(self, server, project):
        return self._call(self.api(project).api_get,
                          '/servers/%s/metadata' % server).body['metadata']

    def update(self, server, items, project):
        self._call(self.api(project).post_server_metadata, server, items)

    def delete(self, server, key, project):
        self._call(self.api(project).delete_server_metadata, server, key)


class AgentRoleTest(test_measured_replay.MeasuredReplayTest):

    # MeasuredReplayTest's scenarios run with an admin client: not here.
    for _name in dir(test_measured_replay.MeasuredReplayTest):
        if _name.startswith('test_'):
            locals()[_name] = None
    del _name

    def setUp(self):
        super().setUp()
        self.use_policy(vsmtio=True)
        conf = cfg.ConfigOpts()
        conf_agent.register_opts(conf)
        conf_publish.register_opts(conf)
        conf([], default_config_files=[])
        for name, value in (
                ('measured_class_key', test_measured_replay.HOST2_KEY),
                ('measured_class_lifetime', 600), ('interval', 60),
                ('host', 'host2')):
            conf.set_override(name, value, group='vsmtio_publish')
        self.assertEqual('instance', conf.vsmtio_publish.token_scope)
        self.tokens = AgentTokens(self.api.base_url)
        self.agent = publish.Publisher(
            conf, client=self.tokens, clock=lambda: self.now,
            wallclock=lambda: self.now)

    def use_policy(self, vsmtio):
        """nova's new defaults, with or without vsmtio's policy.d file."""
        self.flags(enforce_new_defaults=True, group='oslo_policy')
        self.flags(policy_dirs=[POLICY_D] if vsmtio else [],
                   group='oslo_policy')
        nova.policy.reset()
        nova.policy.init()

    def publish(self, server, cls):
        self.agent.publish({server['id']: {KEY: cls}},
                           {server['id']: server['tenant_id']})

    def test_the_role_publishes_in_the_instance_s_project(self):
        server = self.boot('auto', host='host2')
        self.publish(server, 'io')
        self.assertEqual((1, 0), (self.agent.writes, self.agent.failures))
        self.assertEqual({server['tenant_id']}, set(self.tokens.projects))
        meta = self.api.get_server(server['id'])['metadata']
        self.assertEqual(workload.WorkloadClass.IO, workload.verify_measured(
            test_measured_replay.HOST2_KEY, server['id'], meta[KEY],
            'host2', self.now))
        self.assertEqual((2, 0), self.host2_counts())
        # a key earlier releases wrote is deleted with the same role
        self.api.post_server_metadata(server['id'],
                                      {'vsmtio:i_cpu': '0.2'})
        self.later(60)
        self.publish(server, 'io')
        self.assertNotIn('vsmtio:i_cpu',
                         self.api.get_server(server['id'])['metadata'])
        self.assertEqual(0, self.agent.failures)

    def test_the_role_can_do_nothing_else(self):
        server = self.boot('auto', host='host2')
        agent = self.tokens.api(server['tenant_id'])
        sid = server['id']
        for method, path, body in (
                ('get', '/servers', None),
                ('get', '/servers/%s' % sid, None),
                ('put', '/servers/%s' % sid, {'server': {'name': 'x'}}),
                ('put', '/servers/%s/metadata' % sid, {'metadata': {}}),
                ('put', '/servers/%s/metadata/k' % sid,
                 {'meta': {'k': 'v'}}),
                ('post', '/servers/%s/action' % sid, {'os-stop': None}),
                ('delete', '/servers/%s' % sid, None)):
            args = (path,) if body is None else (path, body)
            response = getattr(agent, 'api_' + method)(
                *args, check_response_status=None)
            self.assertEqual(403, response.status, (method, path))
        self.assertEqual('ACTIVE', self.api.get_server(sid)['status'])
        # Scoped to any other project (its own, say), the server is not
        # there: without admin nova finds servers of the token's project
        # only.
        other = self.tokens.api('service')
        self.assertRaises(client.OpenStackApiNotFoundException,
                          other.api_get, '/servers/%s/metadata' % sid)

    def test_without_vsmtio_s_policy_the_role_publishes_nothing(self):
        self.use_policy(vsmtio=False)
        server = self.boot('auto', host='host2')
        self.publish(server, 'io')
        self.assertEqual((0, 1), (self.agent.writes, self.agent.failures))
        self.assertNotIn(KEY, self.api.get_server(server['id'])['metadata'])
