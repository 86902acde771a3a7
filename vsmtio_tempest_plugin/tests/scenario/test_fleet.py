"""Several hosts: the batch ends mixed, departures strand a host, Watcher
repairs it.

The hosts are those of ``[vsmtio] fleet_zone`` (the one-machine cloud's
fake-driver hosts). Every server is 1 vCPU of a declared class, so each
host's mix is read from where nova put the servers, independently of the
code under test.
"""

import json
import time

from tempest.common import waiters
from tempest import config
from tempest.lib.common import rest_client
from tempest.lib.common.utils import data_utils
from tempest.lib import decorators
from tempest.lib import exceptions as lib_exc

from vsmtio_tempest_plugin.tests import base

CONF = config.CONF


def share(io, cpu):
    return io / (io + cpu) if io + cpu else None


class FleetBase(base.VsmtioBaseTest):
    """The fleet zone's hosts, a batch booted on them, a host stranded."""

    #: Servers of each class per host in the batch: 2 + 2 of each host's
    #: 10 vCPUs, so the filter judges every host (from 1 classified vCPU
    #: in the cloud) while the fleet has room to spare.
    PER_HOST = 2

    @classmethod
    def skip_checks(cls):
        super().skip_checks()
        if not CONF.vsmtio.fleet_zone:
            raise cls.skipException('[vsmtio] fleet_zone is unset')
        if CONF.vsmtio.filter_min_classified_vcpus > 2 * cls.PER_HOST:
            raise cls.skipException(
                'the filter judges a host only from %d classified vCPUs'
                % CONF.vsmtio.filter_min_classified_vcpus)

    def setUp(self):
        super().setUp()
        self.zone = CONF.vsmtio.fleet_zone
        self.hosts = sorted(self.compute_hosts(zone=self.zone))
        if len(self.hosts) < 2:
            raise self.skipException('zone %s has %d compute host(s)'
                                     % (self.zone, len(self.hosts)))
        self.low = CONF.vsmtio.min_io_fraction
        self.high = CONF.vsmtio.max_io_fraction
        # the batch is more servers than nova's default quota of 10
        self.os_admin.quotas_client.update_quota_set(
            self.servers_client.tenant_id, instances=-1, cores=-1)

    def within(self, io, cpu):
        s = share(io, cpu)
        return (s is None or io + cpu < CONF.vsmtio.filter_min_classified_vcpus
                or self.low <= s <= self.high)

    def batch(self):
        """All I/O servers first, then all CPU servers: {id: class}."""
        flavors = {cls: self.vsmtio_flavor({'vsmtio:workload': cls})
                   for cls in ('io', 'cpu')}
        servers = {}
        for cls in ('io', 'cpu'):
            for _ in range(self.PER_HOST * len(self.hosts)):
                server = self.boot(flavors[cls],
                                   availability_zone=self.zone)
                servers[server['id']] = cls
        return servers

    def mixes(self, servers):
        """{host: [io, cpu]} of the servers, from nova's view of them."""
        out = {h: [0, 0] for h in self.hosts}
        for sid, cls in servers.items():
            host = self.admin_servers_client.show_server(
                sid)['server']['OS-EXT-SRV-ATTR:host']
            out.setdefault(host, [0, 0])[cls == 'cpu'] += 1
        return out

    def assert_all_within(self, mixes, what):
        for host, (io, cpu) in sorted(mixes.items()):
            self.assertTrue(self.within(io, cpu),
                            '%s: host %s holds io=%d cpu=%d vCPUs, outside '
                            '[%s, %s]; all: %s' % (what, host, io, cpu,
                                                   self.low, self.high,
                                                   mixes))

    def strand(self, servers, mixes):
        """Delete the CPU servers of one host; return it and who is left."""
        host = max(sorted(mixes), key=lambda h: mixes[h][1])
        leaving = [sid for sid, cls in servers.items() if cls == 'cpu' and
                   self.admin_servers_client.show_server(sid)['server']
                   ['OS-EXT-SRV-ATTR:host'] == host]
        for sid in leaving:
            self.servers_client.delete_server(sid)
        for sid in leaving:
            waiters.wait_for_server_termination(self.servers_client, sid)
        left = {sid: cls for sid, cls in servers.items()
                if sid not in leaving}
        io, cpu = self.mixes(left)[host]
        self.assertFalse(self.within(io, cpu),
                         'host %s (io=%d cpu=%d) is not stranded' % (
                             host, io, cpu))
        return host, left


class FleetTest(FleetBase):

    @decorators.attr(type=['scenario'])
    @decorators.idempotent_id('5b0e8c43-2f7a-4d19-9c6e-71a3d4e8f0b2')
    def test_adversarial_batch_held_then_stranded(self):
        """Every host in the band after a one-class-first batch.

        Then departures strand one host: the scheduler does not move
        anything back by itself.
        """
        servers = self.batch()
        mixes = self.mixes(servers)
        self.assertEqual(set(self.hosts), {h for h, m in mixes.items()
                                           if sum(m)},
                         'not every fleet host took a server: %s' % mixes)
        self.assert_all_within(mixes, 'after the batch')
        self.strand(servers, mixes)


class WatcherClient(rest_client.RestClient):
    """The few calls of Watcher's API the audit test makes."""

    def call(self, method, url, body=None):
        resp, text = self.request(
            method, url, extra_headers=False,
            headers={'Content-Type': 'application/json',
                     'Accept': 'application/json'},
            body=None if body is None else json.dumps(body))
        self.expected_success([200, 201, 202, 204], resp.status)
        return json.loads(text) if text else {}

    def delete_quietly(self, url):
        try:
            self.call('DELETE', url)
        except lib_exc.NotFound:
            pass


class FleetRepairTest(FleetBase):

    @classmethod
    def skip_checks(cls):
        super().skip_checks()
        if not CONF.vsmtio.watcher:
            raise cls.skipException('[vsmtio] watcher is False')

    def setUp(self):
        super().setUp()
        self.watcher = WatcherClient(self.os_admin.auth_provider,
                                     'infra-optim', CONF.identity.region)

    def wait(self, url, key, done, timeout):
        deadline = time.monotonic() + timeout
        while True:
            state = self.watcher.call('GET', url)[key]
            if state in done:
                return state
            if time.monotonic() > deadline:
                self.fail('%s still %s after %d s' % (url, state, timeout))
            time.sleep(2)

    def audit(self):
        """One one-shot audit of the fleet zone, applied; its plan's actions.

        The action plan is triggered by the audit (``auto_trigger``) and
        waited for; an audit whose plan holds no action (the model had not
        yet seen the departures) is run again.
        """
        # an audit's scope comes from its template
        template = self.watcher.call('POST', 'v1/audit_templates', {
            'name': data_utils.rand_name('vsmtio-fleet'),
            'goal': 'vsmtio_workload_mix',
            'strategy': 'vsmtio_mix_repair',
            'scope': [{'compute': [
                {'availability_zones': [{'name': self.zone}]}]}]})
        self.addCleanup(self.watcher.delete_quietly,
                        'v1/audit_templates/%s' % template['uuid'])
        deadline = time.monotonic() + CONF.vsmtio.watcher_audit_timeout
        while True:
            audit = self.watcher.call('POST', 'v1/audits', {
                'audit_template_uuid': template['uuid'],
                'audit_type': 'ONESHOT',
                'auto_trigger': True,
                'parameters': {
                    'min_io_fraction': self.low,
                    'max_io_fraction': self.high,
                    'min_classified_vcpus':
                        CONF.vsmtio.filter_min_classified_vcpus}})
            state = self.wait('v1/audits/%s' % audit['uuid'], 'state',
                              ('SUCCEEDED', 'FAILED', 'CANCELLED'), 300)
            self.assertEqual('SUCCEEDED', state, 'audit %s' % audit['uuid'])
            plans = self.watcher.call(
                'GET', 'v1/action_plans?audit_uuid=%s' % audit['uuid'])[
                    'action_plans']
            actions = plans and self.watcher.call(
                'GET', 'v1/actions?action_plan_uuid=%s' % plans[0]['uuid'])[
                    'actions']
            if actions:
                plan = plans[0]
                break
            if time.monotonic() > deadline:
                self.fail('no audit proposed an action within %d s'
                          % CONF.vsmtio.watcher_audit_timeout)
            time.sleep(5)
        state = self.wait('v1/action_plans/%s' % plan['uuid'], 'state',
                          ('SUCCEEDED', 'FAILED', 'CANCELLED', 'SUPERSEDED'),
                          600)
        actions = self.watcher.call(
            'GET', 'v1/actions/detail?action_plan_uuid=%s' % plan['uuid'])[
                'actions']
        self.assertEqual('SUCCEEDED', state, 'action plan %s: %s' % (
            plan['uuid'], [(a['action_type'], a['state'],
                            a.get('input_parameters')) for a in actions]))
        return actions

    @decorators.attr(type=['scenario'])
    @decorators.idempotent_id('8f3a6d21-94b7-4c0e-b5d8-2e6f1a7c9d40')
    def test_audit_repairs_stranded_host(self):
        """A Watcher audit live-migrates the stranded host back into band.

        And every other host stays within the band.
        """
        servers = self.batch()
        host, left = self.strand(servers, self.mixes(servers))
        actions = self.audit()
        self.assertTrue(all(a['action_type'] == 'migrate' and
                            a['input_parameters']['migration_type'] == 'live'
                            for a in actions), actions)
        for sid in left:
            waiters.wait_for_server_status(self.servers_client, sid,
                                           'ACTIVE')
        mixes = self.mixes(left)
        io, cpu = mixes[host]
        self.assertTrue(self.within(io, cpu), 'host %s still io=%d cpu=%d '
                        'after %d live migration(s)' % (host, io, cpu,
                                                        len(actions)))
        self.assert_all_within(mixes, 'after the audit')
