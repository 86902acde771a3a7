"""The agent's measured state appears on the server, and only its keys."""

import re
import time

from tempest import config
from tempest.lib import decorators

from vsmtio_tempest_plugin.tests import base

CONF = config.CONF
CLASS_KEY = 'vsmtio:measured_class'
KEYS = {CLASS_KEY, 'vsmtio:retention_rate', 'vsmtio:i_cpu',
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
        # the user's key is kept; the agent's keys are from its bounded set
        self.assertEqual('kept', meta['owner-note'])
        ours = {k for k in meta if k.startswith('vsmtio:')}
        self.assertLessEqual(ours, KEYS)
        cls, _sep, sig = meta[CLASS_KEY].partition(':')
        self.assertIn(cls, ('io', 'cpu'))
        self.assertRegex(sig, '^[0-9a-f]{64}$')
        secret = CONF.vsmtio.measured_class_secret
        if secret:
            from vsmtio_contract import workload
            self.assertEqual(cls, workload.verify_measured(
                secret, server['id'], meta[CLASS_KEY]).value)
        for key in KEYS - {CLASS_KEY, 'vsmtio:measured_at'}:
            if key in meta:   # absent: the host cannot measure it
                self.assertGreaterEqual(float(meta[key]), 0.0)
        self.assertTrue(re.match(r'^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$',
                                 meta['vsmtio:measured_at']))
