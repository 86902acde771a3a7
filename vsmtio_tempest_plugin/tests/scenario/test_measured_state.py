"""The agent's signed class appears on the server, and nothing else of it.

Server metadata is the tenant's: the only key the agent writes there is
the signed class the scheduler reads; its other measurements are in its
metrics. Keys earlier releases wrote are deleted.
"""

import time

from tempest import config
from tempest.lib import decorators

from vsmtio_tempest_plugin.tests import base

CONF = config.CONF
CLASS_KEY = 'vsmtio:measured_class'
FORMER_KEYS = {'vsmtio:retention_rate', 'vsmtio:i_cpu',
               'vsmtio:runqueue_delay', 'vsmtio:measured_at'}


class MeasuredStateTest(base.VsmtioBaseTest):

    def _wait_for_state(self, server_id):
        deadline = time.monotonic() + CONF.vsmtio.publish_timeout
        while time.monotonic() < deadline:
            meta = self.servers_client.list_server_metadata(
                server_id)['metadata']
            if CLASS_KEY in meta:
                return meta
            time.sleep(5)
        self.fail('no %s on server %s after %d s' % (
            CLASS_KEY, server_id, CONF.vsmtio.publish_timeout))

    @decorators.attr(type=['scenario'])
    @decorators.idempotent_id('4f8a2c6e-1b9d-4e3a-8c7f-0a5d2e9b6c14')
    def test_measured_state_published(self):
        image = CONF.vsmtio.image_io or CONF.compute.image_ref
        server = self.boot(self.vsmtio_flavor({}), image=image,
                           metadata={'owner-note': 'kept'})
        meta = self._wait_for_state(server['id'])
        # the tenant's key is kept; of the agent's, the tenant sees the
        # signed class only
        self.assertEqual('kept', meta['owner-note'])
        self.assertEqual({CLASS_KEY},
                         {k for k in meta if k.startswith('vsmtio:')})
        # <class>:<expires>:<host>:<signature>
        cls, _sep, rest = meta[CLASS_KEY].partition(':')
        expires, _sep, rest = rest.partition(':')
        signed_host, _sep, sig = rest.rpartition(':')
        self.assertIn(cls, ('io', 'cpu'))
        self.assertGreater(int(expires), time.time())
        self.assertRegex(sig, '^[0-9a-f]{64}$')
        on = self.admin_servers_client.show_server(
            server['id'])['server']['OS-EXT-SRV-ATTR:host']
        self.assertEqual(on, signed_host)
        secret = CONF.vsmtio.measured_class_secret
        if secret:
            from vsmtio_contract import workload
            self.assertEqual(cls, workload.verify_measured(
                workload.derive_host_key(secret, on), server['id'],
                meta[CLASS_KEY], on, time.time()).value)

    @decorators.attr(type=['scenario', 'negative'])
    @decorators.idempotent_id('7a1c4e9b-3d2f-4b8a-a6e0-9c5d1f2b7e43')
    def test_owner_written_state_is_repaired(self):
        """The owner's forged class is put right, a former key deleted.

        The agent repairs the key it owns at its next round and deletes
        the measurements earlier releases wrote; the owner's other keys
        (``vsmtio:foo`` too) are kept.
        """
        server = self.boot(self.vsmtio_flavor({}))
        meta = self._wait_for_state(server['id'])
        forged = {CLASS_KEY: 'io:9999999999:elsewhere:' + '0' * 64,
                  'vsmtio:retention_rate': '0.999', 'vsmtio:foo': 'bar'}
        self.servers_client.update_server_metadata(server['id'], forged)
        deadline = time.monotonic() + CONF.vsmtio.publish_timeout
        while time.monotonic() < deadline:
            meta = self.servers_client.list_server_metadata(
                server['id'])['metadata']
            if meta.get(CLASS_KEY) != forged[CLASS_KEY]:
                break
            time.sleep(5)
        self.assertNotEqual(forged[CLASS_KEY], meta.get(CLASS_KEY))
        self.assertFalse(FORMER_KEYS & set(meta))
        self.assertEqual('bar', meta['vsmtio:foo'])
