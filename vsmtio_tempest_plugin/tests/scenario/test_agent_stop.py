"""Stopping the agent puts back what it changed on the host."""

import time

from tempest.lib import decorators

from vsmtio_tempest_plugin.tests import base
from vsmtio_tempest_plugin.tests import host


class AgentStopTest(base.VsmtioBaseTest):

    @classmethod
    def skip_checks(cls):
        super().skip_checks()
        cls.skip_without_host('agent_stop_command', 'agent_start_command',
                              'agent_checkpoint_path')

    def _recorded(self, server_id, on, timeout=120):
        """The agent's checkpoint entry of the server's domain, or None.

        None: the agent changed nothing of it in ``timeout`` seconds, as
        on a host whose topology offers its placement nothing (no SMT
        siblings), which ``vsmtio-agent check`` says.
        """
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            entry = host.checkpoint(on).get('domains', {}).get(server_id)
            if entry and entry.get('pins'):
                return entry
            time.sleep(2)
        return None

    @decorators.attr(type=['scenario'])
    @decorators.idempotent_id('b5d9e3a7-0c4f-4b8e-9a2d-6e1f7c3b0a45')
    def test_stop_restores_pins(self):
        server = self.boot(self.vsmtio_flavor({}))
        name = server['OS-EXT-SRV-ATTR:instance_name']
        on = server['OS-EXT-SRV-ATTR:host']
        entry = self._recorded(server['id'], on)
        if entry is None:
            # nothing changed: stopping must leave the guest as nova
            # placed it, and the agent's record holds nothing of it
            original = host.live_pins(on, name)
        else:
            original = {int(i): sorted(cpus)
                        for i, cpus in entry['pins'].items()}
        self.addCleanup(host.agent_start, on)
        host.agent_stop(on)
        self.assertEqual(original, host.live_pins(on, name))
        self.assertNotIn(server['id'],
                         host.checkpoint(on).get('domains', {}))
