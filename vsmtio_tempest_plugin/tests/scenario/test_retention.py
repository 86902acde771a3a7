"""Retention flavors get the retention domain XML, or no host at all.

Only a flavor with dedicated CPUs (``hw:cpu_policy=dedicated``) may ask:
a retaining guest holds its CPUs while idle. Anything else is refused in
scheduling, never started without what it asked for.
"""

from tempest import config
from tempest.lib import decorators

from vsmtio_tempest_plugin.tests import base
from vsmtio_tempest_plugin.tests import host

CONF = config.CONF
TRAIT_SPEC = 'trait:CUSTOM_VSMTIO_CONTEXT_RETENTION'
RETENTION = {'vsmtio:context_retention': 'true', TRAIT_SPEC: 'required',
             'hw:cpu_policy': 'dedicated'}
#: Retention on shared CPUs: refused on every host, capable or not.
SHARED = {'vsmtio:context_retention': 'true', TRAIT_SPEC: 'required'}


class RetentionTest(base.VsmtioBaseTest):

    def _xml(self, server):
        return host.domain_xml(server['OS-EXT-SRV-ATTR:host'],
                               server['OS-EXT-SRV-ATTR:instance_name'])

    @decorators.attr(type=['scenario'])
    @decorators.idempotent_id('e6b1c8a3-9d4f-4a2e-b7c0-5a3d8f1e6b92')
    def test_retention_domain_xml(self):
        """On a capable host: MWAIT exits off and the dedicated hint."""
        if not CONF.vsmtio.retention_capable:
            raise self.skipException(
                'no compute host can give context retention '
                '([vsmtio] retention_capable is False)')
        self.skip_without_host()
        server = self.boot(self.vsmtio_flavor(RETENTION))
        root = self._xml(server)
        args = host.qemu_args(root)
        self.assertIn('cpu-pm=on', args)
        self.assertEqual('-overcommit', args[args.index('cpu-pm=on') - 1])
        hint = root.find('./features/kvm/hint-dedicated')
        self.assertIsNotNone(hint)
        self.assertEqual('on', hint.get('state'))

    @decorators.attr(type=['scenario', 'negative'])
    @decorators.idempotent_id('1d7f3b9e-2a6c-4e8d-9b5a-7c0e4f2a8d31')
    def test_retention_never_on_plain_host(self):
        """Without a capable host a retention flavor fails: no valid host.

        Both with the trait the flavor should carry and without it (the
        ContextRetentionFilter refuses such a request outright).
        """
        if CONF.vsmtio.retention_capable:
            raise self.skipException('a compute host can give retention')
        for specs in (RETENTION, {'vsmtio:context_retention': 'true',
                                  'hw:cpu_policy': 'dedicated'}):
            server = self.boot(self.vsmtio_flavor(specs), wait_until=None)
            self.assertIn('No valid host',
                          self.wait_for_fault(server['id']))

    @decorators.attr(type=['scenario', 'negative'])
    @decorators.idempotent_id('b3e9d2a7-5c1f-4d8b-9e6a-2f7c0a4d1e85')
    def test_retention_on_shared_cpus_refused(self):
        """A shared-CPU flavor asking for retention finds no host.

        On any cloud, capable or not: placement (no host with the trait)
        or the ContextRetentionFilter (whose refusal the fault names,
        ``hw:cpu_policy=dedicated``) refuses it, so it never boots with its
        vCPUs holding shared host CPUs while idle.
        """
        server = self.boot(self.vsmtio_flavor(SHARED), wait_until=None)
        fault = self.wait_for_fault(server['id'])
        self.assertIn('No valid host', fault)
        if CONF.vsmtio.retention_capable:
            # A host has the trait, so placement offers it and the filter
            # refuses the request, saying why in the fault. Without one,
            # placement refuses first, and nova keeps no reason
            # (doc/source/nova_seams.rst, "Where nova keeps no reason").
            self.assertIn('No valid host was found. vsmtio: ', fault)
            self.assertIn('hw:cpu_policy=dedicated', fault)

    @decorators.attr(type=['scenario'])
    @decorators.idempotent_id('8c2e5a1f-7b3d-4f9a-a0e6-4d1b9c7f3a58')
    def test_plain_flavor_has_no_retention_xml(self):
        """A flavor that does not ask gets nova's domain, unchanged."""
        self.skip_without_host()
        server = self.boot(self.vsmtio_flavor({'vsmtio:workload': 'io'}))
        root = self._xml(server)
        self.assertNotIn('cpu-pm=on', host.qemu_args(root))
        self.assertIsNone(root.find('./features/kvm/hint-dedicated'))
