"""vsmtio-nova-conf on real files, checked by nova's own config loading.

Each edited file is loaded by nova itself in a child process
(``nova.conf.CONF`` with ``--config-file``, then nova's filter and weigher
handlers resolve the class paths), so "enabled" means what nova-scheduler
would load, not what this module thinks it wrote.
"""

import io
import json
import os
import subprocess
import sys
import tempfile
from unittest import mock

import testtools

from vsmtio_contract import workload
from vsmtio_nova.deploy import ini
from vsmtio_nova.deploy import nova_conf

NOVA_LOADS = '''
import json, sys
import nova.conf
from nova.scheduler import filters, weights
CONF = nova.conf.CONF
CONF(['--config-file', sys.argv[1]], project='nova', default_config_files=[])
fs = CONF.filter_scheduler
print(json.dumps({
    'available': fs.available_filters,
    'loaded_filters': sorted(c.__name__ for c in
        filters.HostFilterHandler().get_matching_classes(
            fs.available_filters)),
    'enabled': fs.enabled_filters,
    'weights': fs.weight_classes,
    'loaded_weighers': sorted(c.__name__ for c in
        weights.HostWeightHandler().get_matching_classes(fs.weight_classes)),
    'driver': CONF.compute_driver,
    'virt_type': CONF.libvirt.virt_type,
}))
'''

# The shape devstack leaves: comments, a repeated available_filters, a
# list on one line, options the plugin must not touch.
DEVSTACK = '''\
# nova.conf written by devstack
[DEFAULT]
debug = True
compute_driver=libvirt.LibvirtDriver

; scheduler: devstack sets the filters
[filter_scheduler]
available_filters = nova.scheduler.filters.all_filters
enabled_filters = ComputeFilter,ImagePropertiesFilter
# keep this comment
track_instance_changes = False

[libvirt]
virt_type = qemu
'''


class NovaConfTest(testtools.TestCase):

    def write(self, text):
        fd, path = tempfile.mkstemp(suffix='.conf')
        self.addCleanup(os.unlink, path)
        with os.fdopen(fd, 'w', newline='') as f:
            f.write(text)
        return path

    def read(self, path):
        with open(path, newline='') as f:
            return f.read()

    def nova_sees(self, path):
        out = subprocess.run([sys.executable, '-c', NOVA_LOADS, path],
                             capture_output=True, text=True)
        self.assertEqual(0, out.returncode, out.stderr[-2000:])
        return json.loads(out.stdout)

    def assert_vsmtio_on(self, seen):
        self.assertIn('nova.scheduler.filters.all_filters', seen['available'])
        self.assertIn(nova_conf.FILTER, seen['available'])
        self.assertIn(nova_conf.RETENTION_FILTER, seen['available'])
        self.assertIn('WorkloadMixFilter', seen['loaded_filters'])
        self.assertIn('ContextRetentionFilter', seen['loaded_filters'])
        self.assertIn('ContextRetentionFilter', seen['enabled'])
        self.assertIn('ComputeFilter', seen['loaded_filters'])
        self.assertIn('WorkloadMixFilter', seen['enabled'])
        self.assertIn(nova_conf.WEIGHER, seen['weights'])
        self.assertIn('WorkloadMixWeigher', seen['loaded_weighers'])
        self.assertIn('RAMWeigher', seen['loaded_weighers'])

    def round_trip(self, text, retention=False):
        """enable changes, is idempotent; disable restores every byte."""
        path = self.write(text)
        self.assertTrue(nova_conf.enable(path, retention=retention))
        enabled = self.read(path)
        self.assertFalse(nova_conf.enable(path, retention=retention))
        self.assertEqual(enabled, self.read(path))
        seen = self.nova_sees(path)
        self.assert_vsmtio_on(seen)
        self.assertTrue(nova_conf.disable(path))
        self.assertEqual(text, self.read(path))
        self.assertFalse(nova_conf.disable(path))
        return enabled, seen

    def test_devstack_file(self):
        enabled, seen = self.round_trip(DEVSTACK)
        self.assertEqual(['ComputeFilter', 'ImagePropertiesFilter',
                          'WorkloadMixFilter', 'ContextRetentionFilter'],
                         seen['enabled'])
        self.assertEqual(['nova.scheduler.filters.all_filters',
                          nova_conf.FILTER, nova_conf.RETENTION_FILTER],
                         seen['available'])
        self.assertEqual(['nova.scheduler.weights.all_weighers',
                          nova_conf.WEIGHER], seen['weights'])
        self.assertEqual('libvirt.LibvirtDriver', seen['driver'])
        self.assertEqual('qemu', seen['virt_type'])
        for kept in ('# nova.conf written by devstack\n',
                     '; scheduler: devstack sets the filters\n',
                     '# keep this comment\n', 'virt_type = qemu\n'):
            self.assertIn(kept, enabled)
        self.assertIn('# vsmtio-nova-conf: appended WorkloadMixFilter,'
                      'ContextRetentionFilter\n'
                      'enabled_filters = ComputeFilter,ImagePropertiesFilter,'
                      'WorkloadMixFilter,ContextRetentionFilter\n', enabled)

    def test_empty_file_gets_nova_defaults_plus_ours(self):
        _enabled, seen = self.round_trip('[DEFAULT]\n')
        from nova.conf import scheduler  # noqa: F401 (nova is installed)
        defaults = nova_conf.nova_default('enabled_filters')
        self.assertEqual(defaults + ['WorkloadMixFilter',
                                     'ContextRetentionFilter'],
                         seen['enabled'])
        self.assertEqual(['nova.scheduler.weights.all_weighers',
                          nova_conf.WEIGHER], seen['weights'])

    def test_no_trailing_newline(self):
        self.round_trip('[DEFAULT]\ndebug = True')
        self.round_trip('[filter_scheduler]\nenabled_filters = A',
                        retention=True)

    def test_retention_replaces_and_restores_driver(self):
        enabled, seen = self.round_trip(DEVSTACK, retention=True)
        self.assertEqual(nova_conf.COMPUTE_DRIVER, seen['driver'])
        self.assertIn('# vsmtio-nova-conf: was '
                      'compute_driver=libvirt.LibvirtDriver\n', enabled)

    def test_retention_without_a_driver_line(self):
        _enabled, seen = self.round_trip('[DEFAULT]\n', retention=True)
        self.assertEqual(nova_conf.COMPUTE_DRIVER, seen['driver'])

    def test_quoted_and_multiline_values(self):
        self.round_trip('[filter_scheduler]\n'
                        'enabled_filters = "ComputeFilter,RamFilter"\n'
                        'weight_classes = '
                        'nova.scheduler.weights.all_weighers,\n'
                        '    nova.scheduler.weights.ram.RAMWeigher\n')

    def test_section_case_and_repeated_keys_follow_oslo(self):
        # oslo.config lower-cases section names and keeps the last value
        # of a repeated single-valued key: the edit goes where it looks.
        enabled, seen = self.round_trip(
            '[Filter_Scheduler]\nenabled_filters = A\n'
            '[filter_scheduler]\nenabled_filters = ComputeFilter\n')
        self.assertEqual(['ComputeFilter', 'WorkloadMixFilter',
                          'ContextRetentionFilter'], seen['enabled'])
        self.assertIn('enabled_filters = A\n', enabled)

    def test_already_configured_by_hand_is_left_alone(self):
        text = ('[filter_scheduler]\n'
                'available_filters = nova.scheduler.filters.all_filters\n'
                'available_filters = %s\n'
                'available_filters = %s\n'
                'enabled_filters = WorkloadMixFilter,ContextRetentionFilter\n'
                'weight_classes = %s\n' % (nova_conf.FILTER,
                                           nova_conf.RETENTION_FILTER,
                                           nova_conf.WEIGHER))
        path = self.write(text)
        self.assertFalse(nova_conf.enable(path))
        self.assertFalse(nova_conf.disable(path))
        self.assertEqual(text, self.read(path))

    def test_disable_keeps_what_others_added_since(self):
        path = self.write('[DEFAULT]\ncompute_driver = fake.FakeDriver\n')
        nova_conf.enable(path, retention=True)
        text = self.read(path)
        # devstack's iniset puts a new key right under the header, and
        # an operator changes the driver again.
        text = text.replace('[filter_scheduler]\n',
                            '[filter_scheduler]\nhost_subset_size = 2\n')
        text = text.replace('compute_driver = ' + nova_conf.COMPUTE_DRIVER,
                            'compute_driver = ironic.IronicDriver')
        with open(path, 'w') as f:
            f.write(text)
        self.assertTrue(nova_conf.disable(path))
        self.assertEqual('[DEFAULT]\ncompute_driver = ironic.IronicDriver\n'
                         '[filter_scheduler]\nhost_subset_size = 2\n',
                         self.read(path))

    def test_disable_after_list_edited(self):
        path = self.write('[filter_scheduler]\nenabled_filters = A\n')
        nova_conf.enable(path)
        text = self.read(path).replace(
            'A,WorkloadMixFilter,ContextRetentionFilter',
            'A,WorkloadMixFilter,B,ContextRetentionFilter')
        with open(path, 'w') as f:
            f.write(text)
        nova_conf.disable(path)
        self.assertIn('\nenabled_filters = A,B\n', self.read(path))
        self.assertNotIn('vsmtio', self.read(path))

    def test_bad_file_is_refused_and_untouched(self):
        for text in ('debug = True\n[DEFAULT]\n', '[DEFAULT\n',
                     '[DEFAULT]\n  continued\n', '[DEFAULT]\nno value\n'):
            path = self.write(text)
            self.assertRaises(ini.Error, nova_conf.enable, path)
            self.assertEqual(text, self.read(path))
        path = self.write('[DEFAULT]\n# vsmtio-nova-conf: frobbed\nx = 1\n')
        self.assertRaisesRegex(ini.Error, 'unknown vsmtio-nova-conf marker',
                               nova_conf.disable, path)

    def test_driver_spanning_lines_is_refused(self):
        text = '[DEFAULT]\ncompute_driver = libvirt.\n  LibvirtDriver\n'
        path = self.write(text)
        self.assertRaisesRegex(ini.Error, 'spans several lines',
                               nova_conf.enable, path, True)
        self.assertEqual(text, self.read(path))

    def test_mode_is_kept(self):
        path = self.write(DEVSTACK)
        os.chmod(path, 0o640)
        nova_conf.enable(path)
        self.assertEqual(0o640, os.stat(path).st_mode & 0o777)

    def test_command_line(self):
        path = self.write(DEVSTACK)
        with mock.patch('sys.stdout', new_callable=io.StringIO) as out:
            self.assertEqual(0, nova_conf.main(['enable', '--retention',
                                                path]))
            self.assertEqual(0, nova_conf.main(['enable', path]))
        self.assertEqual('%s: changed\n%s: unchanged\n' % (path, path),
                         out.getvalue())
        self.assertEqual(nova_conf.COMPUTE_DRIVER,
                         self.nova_sees(path)['driver'])
        with mock.patch('sys.stdout', new_callable=io.StringIO):
            self.assertEqual(0, nova_conf.main(['disable', path]))
        self.assertEqual(DEVSTACK, self.read(path))
        with mock.patch('sys.stderr', new_callable=io.StringIO) as err:
            self.assertEqual(2, nova_conf.main(['enable', path + '.gone']))
        self.assertIn('nothing written', err.getvalue())

    def test_host_key_from_the_root_secret_of_a_nova_conf_or_stdin(self):
        before = ('[vsmtio]\nmeasured_class_secret = new-root\n'
                  'measured_class_previous_secret = old-root\n')
        path = self.write(before)
        want = workload.host_keys(['new-root', 'old-root'], 'compute-7')
        # the run as a process: what an operator and devstack run
        out = subprocess.run(
            [sys.executable, '-c', 'import sys; from vsmtio_nova.deploy '
             'import nova_conf; sys.exit(nova_conf.main(sys.argv[1:]))',
             'host-key', '--host', 'compute-7', path],
            capture_output=True, text=True, check=True)
        self.assertEqual(','.join(want) + '\n', out.stdout)
        out = subprocess.run(
            [sys.executable, '-c', 'import sys; from vsmtio_nova.deploy '
             'import nova_conf; sys.exit(nova_conf.main(sys.argv[1:]))',
             'host-key', '--host', 'compute-7', '-'],
            input='new-root\n', capture_output=True, text=True, check=True)
        self.assertEqual(want[0] + '\n', out.stdout)
        self.assertEqual(before, self.read(path))   # only read

    def test_host_key_without_a_root_secret_says_so_in_one_line(self):
        path = self.write('[vsmtio]\n')
        with mock.patch('sys.stderr', new_callable=io.StringIO) as err:
            self.assertEqual(2, nova_conf.main(['host-key', '--host', 'h',
                                                path]))
        self.assertEqual(1, err.getvalue().count('\n'))
        self.assertIn('sets no [vsmtio] measured_class_secret',
                      err.getvalue())
        with mock.patch('sys.stderr', new_callable=io.StringIO):
            self.assertRaises(SystemExit, nova_conf.main, ['host-key', path])
