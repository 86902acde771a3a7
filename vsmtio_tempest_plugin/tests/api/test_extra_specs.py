"""nova-api validates the ``vsmtio:`` flavor extra specs (HTTP 400)."""

from tempest.lib.common.utils import data_utils
from tempest.lib import decorators
from tempest.lib import exceptions as lib_exc

from vsmtio_tempest_plugin.tests import base


class ExtraSpecValidationTest(base.VsmtioBaseTest):

    @classmethod
    def resource_setup(cls):
        super().resource_setup()
        cls.flavor = cls.admin_flavors_client.create_flavor(
            name=data_utils.rand_name('vsmtio-extra-specs'), ram=128,
            vcpus=1, disk=1)['flavor']
        cls.addClassResourceCleanup(cls.admin_flavors_client.delete_flavor,
                                    cls.flavor['id'])

    def _set(self, **specs):
        return self.admin_flavors_client.set_flavor_extra_spec(
            self.flavor['id'], **specs)['extra_specs']

    @decorators.idempotent_id('2b1d7a4e-5c0f-4a43-9c6e-1f3e0d9a7b21')
    def test_valid_values_accepted(self):
        for value in ('io', 'cpu', 'auto'):
            self.assertEqual({'vsmtio:workload': value},
                             self._set(**{'vsmtio:workload': value}))
        self.assertEqual({'vsmtio:context_retention': 'false'},
                         self._set(**{'vsmtio:context_retention': 'false'}))

    @decorators.attr(type=['negative'])
    @decorators.idempotent_id('7f0c4e61-3a2d-4b8e-a9f1-6d5c2b8e0a13')
    def test_bad_workload_value_is_400(self):
        self.assertRaises(lib_exc.BadRequest, self._set,
                          **{'vsmtio:workload': 'fast'})

    @decorators.attr(type=['negative'])
    @decorators.idempotent_id('c4a9e2d7-8b1f-4e6a-b3c5-0e7d9f2a6b48')
    def test_bad_retention_value_is_400(self):
        self.assertRaises(lib_exc.BadRequest, self._set,
                          **{'vsmtio:context_retention': 'maybe'})

    @decorators.attr(type=['negative'])
    @decorators.idempotent_id('5e3b8f1a-2c7d-4a9e-8f0b-1d6c4e2a9b73')
    def test_unknown_vsmtio_key_is_400(self):
        self.assertRaises(lib_exc.BadRequest, self._set,
                          **{'vsmtio:workloads': 'io'})
