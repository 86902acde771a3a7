"""The provider config vsmtio-nova-conf writes, read back by nova's loader.

What reaches placement from it is shown on nova's functional harness
(``tests/functional/test_io_reservation.py``, ``test_retention_routing.py``);
here: what the file says for which host, that nova's own
``get_provider_configs`` accepts it, and that nothing is written where nova
would refuse the result or the file is not ours.
"""

import io
import os
import shutil
import tempfile
from unittest import mock

from nova.compute import provider_config as nova_provider_config
import testtools

from vsmtio_contract import io_reservation
from vsmtio_contract import kernel_abi
from vsmtio_nova import capability
from vsmtio_nova.deploy import nova_conf
from vsmtio_nova import provider_config

OPERATORS = '''\
meta:
  schema_version: '1.0'
providers:
  - identification:
      uuid: $COMPUTE_NODE
    traits:
      additional: [CUSTOM_RACK_7]
'''


class ProviderConfigTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.tmp)
        self.location = os.path.join(self.tmp, 'provider_config')
        self.file = os.path.join(self.location, provider_config.FILENAME)
        self.patched = os.path.join(self.tmp, 'sys')
        os.makedirs(os.path.dirname(os.path.join(self.patched,
                                                 kernel_abi.ABI_VERSION)))
        with open(os.path.join(self.patched, kernel_abi.ABI_VERSION),
                  'w') as f:
            f.write('1\n')

    def nova_conf(self, driver=provider_config.COMPUTE_DRIVER, virt_type='kvm',
                  sysfs=None, iops=0, mib=0):
        path = os.path.join(self.tmp, 'nova.conf')
        with open(path, 'w') as f:
            f.write('[DEFAULT]\ncompute_driver = %s\n'
                    '[libvirt]\nvirt_type = %s\n'
                    '[compute]\nprovider_config_location = %s\n'
                    '[vsmtio]\nsysfs_root = %s\n'
                    'io_reservation_capacity_iops = %d\n'
                    'io_reservation_capacity_mib_per_s = %d\n'
                    % (driver, virt_type, self.location,
                       sysfs or self.patched, iops, mib))
        return path

    def cli(self, *args):
        out, err = io.StringIO(), io.StringIO()
        with mock.patch('sys.stdout', out), mock.patch('sys.stderr', err):
            rc = nova_conf.main(list(args))
        return rc, out.getvalue(), err.getvalue()

    def nova_reads(self):
        return nova_provider_config.get_provider_configs(self.location)

    def test_retaining_host_with_capacity(self):
        rc, out, _ = self.cli('provider-config',
                              self.nova_conf(iops=20000, mib=800))
        self.assertEqual(0, rc)
        self.assertIn('written', out)
        entry = self.nova_reads()['$COMPUTE_NODE']
        self.assertEqual([capability.TRAIT], entry['traits']['additional'])
        inventories = {rc: inv for item in entry['inventories']['additional']
                       for rc, inv in item.items()}
        self.assertEqual(20000,
                         inventories[io_reservation.RC_IOPS]['total'])
        self.assertEqual(800,
                         inventories[io_reservation.RC_MIB_PER_S]['max_unit'])
        self.assertEqual({capability.TRAIT},
                         provider_config.advertised_traits(
                             nova_conf.load(self.nova_conf())))

    def test_no_trait_without_the_driver_kvm_or_kernel(self):
        for conf in (self.nova_conf(driver='libvirt.LibvirtDriver', iops=5),
                     self.nova_conf(virt_type='qemu', iops=5),
                     self.nova_conf(sysfs=self.tmp, iops=5)):
            self.assertEqual(0, self.cli('provider-config', conf)[0])
            entry = self.nova_reads()['$COMPUTE_NODE']
            self.assertNotIn('traits', entry)
            self.assertIn('inventories', entry)

    def test_nothing_to_say_removes_the_file(self):
        self.cli('provider-config', self.nova_conf(iops=5))
        self.assertTrue(os.path.exists(self.file))
        rc, out, _ = self.cli('provider-config',
                              self.nova_conf(virt_type='qemu'))
        self.assertEqual(0, rc)
        self.assertIn('nothing to write', out)
        self.assertFalse(os.path.exists(self.file))
        self.assertEqual({}, self.nova_reads())

    def test_dry_run_writes_nothing(self):
        rc, out, _ = self.cli('provider-config', '--dry-run',
                              self.nova_conf(iops=5))
        self.assertEqual(0, rc)
        self.assertIn('CUSTOM_VSMTIO_IO_IOPS', out)
        self.assertFalse(os.path.exists(self.location))

    def test_conflict_with_an_operator_file_refused_in_one_line(self):
        os.makedirs(self.location)
        with open(os.path.join(self.location, 'rack.yaml'), 'w') as f:
            f.write(OPERATORS)
        rc, out, err = self.cli('provider-config', self.nova_conf(iops=5))
        self.assertEqual(2, rc)
        self.assertEqual(1, len(err.splitlines()))
        self.assertIn('multiple definitions', err)
        # named where it would be, not where nova's loader tried it
        self.assertIn(self.file, err)
        self.assertFalse(os.path.exists(self.file))
        self.assertEqual(['CUSTOM_RACK_7'], self.nova_reads()[
            '$COMPUTE_NODE']['traits']['additional'])

    def test_a_file_not_ours_is_left_alone(self):
        os.makedirs(self.location)
        with open(self.file, 'w') as f:
            f.write(OPERATORS)
        conf = self.nova_conf(iops=5)
        rc, _, err = self.cli('provider-config', conf)
        self.assertEqual(2, rc)
        self.assertIn('not written by vsmtio-nova-conf', err)
        self.assertFalse(provider_config.remove(nova_conf.load(conf)))
        with open(self.file) as f:
            self.assertEqual(OPERATORS, f.read())

    def test_bad_option_value_refused_in_one_line(self):
        path = self.nova_conf()
        with open(path, 'a') as f:
            f.write('io_reservation_capacity_iops = -1\n')
        rc, _, err = self.cli('provider-config', path)
        self.assertEqual(2, rc)
        self.assertEqual(1, len(err.splitlines()))
        self.assertIn('io_reservation_capacity_iops', err)
        self.assertFalse(os.path.exists(self.location))

    def test_disable_removes_our_file(self):
        conf = self.nova_conf(iops=5)
        self.cli('provider-config', conf)
        rc, out, _ = self.cli('disable', conf)
        self.assertEqual((0, '%s: changed\n' % conf), (rc, out))
        self.assertFalse(os.path.exists(self.file))
