"""Only the signed class is the tenant's to see, and no edit of it counts.

A deleted, forged or replayed measured class changes nothing that counts:
the compute keeps the last class it verified until that one's signed
expiry; the agent's other measurements are not in server metadata at all
(its metrics hold them).

nova's functional harness (API, scheduler, placement, three computes with
``MixStats``) and the agent's real :class:`~vsmtio_agent.publish.Publisher`
writing through nova's own API: the instance's owner deletes the class,
writes back an earlier value the agent signed, or makes one up. The
computes' periodic recount shows what each host counts. Wall-clock time is
nova's ``timeutils`` override for the computes and the same clock for the
agent. The agent signs with host2's own key; the computes hold the root
secret, as a controller does (the harness runs every service in one
process with one configuration).
"""

import datetime
import time

from oslo_config import cfg
from oslo_utils import timeutils

from nova import context as nova_context
from nova import objects

from vsmtio_agent.conf import agent as conf_agent
from vsmtio_agent.conf import publish as conf_publish
from vsmtio_agent import model
from vsmtio_agent.policy import monitor
from vsmtio_agent import publish
from vsmtio_contract import workload
from vsmtio_nova.compute import stats as mix_stats
from vsmtio_nova.tests.functional import test_workload_mix

SECRET = 'the-controllers-root-secret'
KEY = workload.MEASURED_CLASS_KEY
#: What host2's agent holds.
HOST2_KEY = workload.derive_host_key(SECRET, 'host2')


def utc(seconds):
    """nova's naive UTC datetime of a time stamp."""
    return datetime.datetime.fromtimestamp(
        seconds, datetime.timezone.utc).replace(tzinfo=None)


class HarnessClient(object):
    """The publisher's three compute API calls, through nova's harness."""

    def __init__(self, api):
        self.api = api

    def metadata(self, server, project):
        return self.api.api_get(
            '/servers/%s/metadata' % server).body['metadata']

    def update(self, server, items, project):
        self.api.post_server_metadata(server, items)

    def delete(self, server, key, project):
        self.api.delete_server_metadata(server, key)


class MeasuredReplayTest(test_workload_mix.WorkloadMixTest):

    def setUp(self):
        super().setUp()
        self.flags(measured_class_secret=SECRET, group='vsmtio')
        # From now on, so that the services still look alive to the
        # scheduler at each boot (each test boots before time moves).
        self.now = int(time.time())
        timeutils.set_time_override(utc(self.now))
        self.addCleanup(timeutils.clear_time_override)
        conf = cfg.ConfigOpts()
        conf_agent.register_opts(conf)
        conf_publish.register_opts(conf)
        conf([], default_config_files=[])
        for name, value in (('measured_class_key', HOST2_KEY),
                            ('measured_class_lifetime', 600),
                            ('interval', 60), ('host', 'host2')):
            conf.set_override(name, value, group='vsmtio_publish')
        self.agent = publish.Publisher(
            conf, client=HarnessClient(self.admin_api),
            clock=lambda: self.now, wallclock=lambda: self.now)

    # The wiring of WorkloadMixTest's own scenarios is not this test's.
    for _name in dir(test_workload_mix.WorkloadMixTest):
        if _name.startswith('test_'):
            locals()[_name] = None
    del _name

    def later(self, seconds):
        self.now += seconds
        timeutils.set_time_override(utc(self.now))

    def agent_measures(self, server, cls):
        self.agent.publish({server['id']: {KEY: cls}},
                           {server['id']: server['tenant_id']})

    def host2_counts(self):
        """(io, cpu) vCPUs host2's compute counts after its recount."""
        self._run_periodics()
        node = objects.ComputeNode.get_by_host_and_nodename(
            nova_context.get_admin_context(), 'host2', 'host2')
        return (int(node.stats.get(mix_stats.IO_VCPUS)),
                int(node.stats.get(mix_stats.CPU_VCPUS)))

    def period_values(self, server_id):
        """What the agent publishes after one real period of the server.

        Two snapshots of its vCPU through the agent's own monitor: the
        period has a retention rate, a run-queue delay and switches (what
        earlier releases also wrote as metadata), and RASS's ``io`` role.
        """
        ref = model.VcpuRef(server_id, 0)
        ms = 1000000

        def snap(t_ms):
            return model.Snapshot(t_ms * ms, {ref: model.VcpuCounters(
                cpu=0, run_ns=t_ms * ms // 2, retention_ns=t_ms * ms // 4,
                retentions=t_ms, runqueue_delay_ns=t_ms * ms // 10,
                voluntary_switches=t_ms, involuntary_switches=t_ms // 5)})

        stats = monitor.derive(snap(0), snap(1000), 0.0)
        self.assertIsNotNone(stats[ref].retention_rate)
        decision = model.Decision(timeout_ns=1000, placements={
            ref: model.Placement(core_id=0, role=model.Role.IO, home=0,
                                 threads=(0,))})
        return publish.instance_values(stats, decision, True)

    def test_the_tenant_sees_only_the_signed_class(self):
        server = self.boot('auto', host='host2')
        tenant = self.api_fixture.api     # the owner, not an admin
        # what an earlier release of the agent left on the server
        tenant.post_server_metadata(server['id'], {
            'vsmtio:i_cpu': '0.20', 'vsmtio:measured_at': 'then',
            'owner-note': 'kept'})
        self.agent.publish(self.period_values(server['id']),
                           {server['id']: server['tenant_id']})
        meta = tenant.api_get(
            '/servers/%s/metadata' % server['id']).body['metadata']
        self.assertEqual({KEY}, {k for k in meta if k.startswith('vsmtio:')})
        self.assertEqual('kept', meta['owner-note'])
        self.assertEqual(workload.WorkloadClass.IO, workload.verify_measured(
            HOST2_KEY, server['id'], meta[KEY], 'host2', self.now))
        self.assertEqual((2, 0), self.host2_counts())

        # The owner's own edit of the signed key: a class with a made-up
        # signature changes nothing, at once (not only after repair)...
        tenant.post_server_metadata(server['id'], {
            KEY: workload.sign_measured('a-guess', server['id'], 'cpu',
                                        'host2', self.now + 600)})
        log = len(self.stdlog.logger.output)
        self.assertEqual((2, 0), self.host2_counts())
        self.assertIn('signature does not hold',
                      self.stdlog.logger.output[log:])
        # ... and the agent's next round puts its own value back.
        self.later(60)
        self.agent.publish(self.period_values(server['id']),
                           {server['id']: server['tenant_id']})
        self.assertEqual((2, 0), self.host2_counts())

    def test_replayed_value_changes_nothing_then_expires(self):
        server = self.boot('auto', host='host2')
        self.agent_measures(server, 'io')
        earlier = self.api.get_server(server['id'])['metadata'][KEY]
        self.assertEqual((2, 0), self.host2_counts())

        # A minute later the agent measures cpu and writes it.
        self.later(60)
        self.agent_measures(server, 'cpu')
        self.assertEqual((0, 2), self.host2_counts())

        # The owner writes the earlier io back (its own server: allowed).
        # It still verifies (same instance, host, unexpired), but the
        # compute knows a value signed to expire later: cpu still counts.
        self.api.post_server_metadata(server['id'], {KEY: earlier})
        self.assertEqual((0, 2), self.host2_counts())
        self.later(60)
        self.agent_measures(server, 'cpu')
        # The agent has read it back and put its own value back.
        self.assertNotEqual(
            earlier, self.api.get_server(server['id'])['metadata'][KEY])
        self.assertEqual((0, 2), self.host2_counts())

        # Past the earlier value's expiry, with no agent to repair it (the
        # agent is stopped; its own cpu value expires too): the replay
        # counts for nothing, and the instance counts as declared (auto).
        # (That value was said once already, when it was put back first.)
        self.later(600)
        self.api.post_server_metadata(server['id'], {KEY: earlier})
        self.assertEqual((0, 0), self.host2_counts())

    def test_a_class_signed_for_another_host_is_not_counted(self):
        server = self.boot('auto', host='host2')
        # host1's key (its agent's, or a thief's), whichever host the
        # value names: host2 checks with host2's key
        host1_key = workload.derive_host_key(SECRET, 'host1')
        for host in ('host1', 'host2'):
            log = len(self.stdlog.logger.output)
            self.api.post_server_metadata(server['id'], {
                KEY: workload.sign_measured(host1_key, server['id'], 'io',
                                            host, self.now + 600)})
            self.assertEqual((0, 0), self.host2_counts())
            self.assertIn('signature does not hold',
                          self.stdlog.logger.output[log:])

    def test_deleting_the_class_moves_no_count_until_it_expires(self):
        # With the agent stopped (nothing repairs), the owner deletes its
        # key: the host counts the instance as before until the signed
        # expiry, so nothing the Watcher strategy plans from host mixes
        # can be set off by a tenant.
        server = self.boot('auto', host='host2')
        self.agent_measures(server, 'cpu')
        self.assertEqual((0, 2), self.host2_counts())
        self.api.delete_server_metadata(server['id'], KEY)
        self.assertNotIn(KEY, self.api.get_server(server['id'])['metadata'])
        self.later(300)
        self.assertEqual((0, 2), self.host2_counts())
        self.later(300)    # the agent's lifetime is 600 s
        self.assertEqual((0, 0), self.host2_counts())

    def test_the_agent_re_asserts_before_expiry(self):
        server = self.boot('auto', host='host2')
        for _ in range(12):   # twelve minutes of rounds, lifetime ten
            self.agent_measures(server, 'io')
            self.assertEqual((2, 0), self.host2_counts())
            self.later(60)
