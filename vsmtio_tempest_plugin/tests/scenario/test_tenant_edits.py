"""A tenant deleting its server's measured class changes nothing it counts.

Server metadata is the tenant's, and so is the signed class the agent
writes there. Were deleting it to make the server uncounted, a tenant
could shift its host's I/O : CPU mix at will, and with it where the
scheduler puts other tenants' servers and which of them the Watcher
strategy live-migrates. nova-compute keeps the class it last verified
until that class's signed expiry, so the host's mix, as the operator
reads it from the compute node's stats (``[vsmtio] node_stats_command``),
stays what it was.

The agent is stopped for the test (``agent_stop_command``), or its next
round would put the class back before nova-compute recounts. The host's
mix is read as a whole: the test expects no other server to come or go on
that host meanwhile (the cloud's tempest runs one test at a time).
"""

import json
import shlex
import time

from tempest import config
from tempest.lib import decorators

from vsmtio_tempest_plugin.tests import base
from vsmtio_tempest_plugin.tests import host

CONF = config.CONF
CLASS_KEY = 'vsmtio:measured_class'
#: ``ComputeNode.stats`` keys of the node's counted mix.
IO_VCPUS = 'vsmtio_io_vcpus'
CPU_VCPUS = 'vsmtio_cpu_vcpus'


class TenantEditTest(base.VsmtioBaseTest):

    @classmethod
    def skip_checks(cls):
        super().skip_checks()
        if not CONF.vsmtio.node_stats_command:
            raise cls.skipException('[vsmtio] node_stats_command is unset')
        cls.skip_without_host('agent_stop_command', 'agent_start_command')

    def node_mix(self, on):
        """``(io, cpu)`` vCPUs nova-compute counts on ``on`` now."""
        out = host.run_here(CONF.vsmtio.node_stats_command.format(
            host=shlex.quote(on))).stdout.strip()
        if not out:
            self.fail('%s printed nothing for host %s'
                      % (CONF.vsmtio.node_stats_command, on))
        stats = json.loads(out.splitlines()[-1])
        if IO_VCPUS not in stats:
            raise self.skipException(
                'host %s keeps no mix in its stats (its nova-compute is '
                'not vsmtio-nova-compute)' % on)
        return int(stats[IO_VCPUS]), int(stats.get(CPU_VCPUS, 0))

    def wait_for_class(self, server_id):
        deadline = time.monotonic() + CONF.vsmtio.publish_timeout
        while time.monotonic() < deadline:
            meta = self.servers_client.list_server_metadata(
                server_id)['metadata']
            if CLASS_KEY in meta:
                return meta[CLASS_KEY].partition(':')[0]
            time.sleep(5)
        self.fail('no %s on server %s after %d s' % (
            CLASS_KEY, server_id, CONF.vsmtio.publish_timeout))

    @decorators.attr(type=['scenario', 'negative'])
    @decorators.idempotent_id('fe41af9e-ad8b-428f-a992-48a56cbbe09b')
    def test_deleting_the_class_leaves_the_host_mix(self):
        server = self.boot(self.vsmtio_flavor({}))
        on = server['OS-EXT-SRV-ATTR:host']
        cls = self.wait_for_class(server['id'])
        self.assertIn(cls, ('io', 'cpu'))
        # Let nova-compute recount with the class, then take its mix.
        time.sleep(CONF.vsmtio.node_stats_wait)
        before = self.node_mix(on)
        self.assertGreaterEqual(before[0 if cls == 'io' else 1],
                                server['flavor']['vcpus'])

        self.addCleanup(host.agent_start, on)
        host.agent_stop(on)
        self.servers_client.delete_server_metadata_item(server['id'],
                                                        CLASS_KEY)
        self.assertNotIn(CLASS_KEY, self.servers_client.list_server_metadata(
            server['id'])['metadata'])

        # Through at least one recount, the mix stays what it was.
        readings = []
        deadline = time.monotonic() + CONF.vsmtio.node_stats_wait
        while time.monotonic() < deadline:
            readings.append(self.node_mix(on))
            time.sleep(10)
        readings.append(self.node_mix(on))
        self.assertEqual([before] * len(readings), readings)
