"""What operators see: options, extra-spec validation and metadefs agree."""

import importlib.util
import json
import os
import shlex

from nova.api.validation.extra_specs import validators
from nova import exception
from nova import test
import yaml

from vsmtio_contract import io_reservation
from vsmtio_contract import workload
from vsmtio_nova import conf
from vsmtio_nova.scheduler import settings

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..',
                                    '..'))


def metadefs(name):
    with open(os.path.join(ROOT, 'etc', 'metadefs', name)) as f:
        return json.load(f)


class OptionsTest(test.NoDBTestCase):

    def test_listed_for_the_config_generator(self):
        [(group, opts)] = conf.list_opts()
        self.assertEqual('vsmtio', group.name)
        self.assertEqual(
            {'target_io_fraction', 'min_io_fraction', 'max_io_fraction',
             'filter_min_classified_vcpus', 'instance_class_cache_seconds',
             'weight_multiplier', 'measured_class_secret',
             'measured_class_previous_secret', 'measured_class_host_keys',
             'sysfs_root', 'io_reservation_capacity_iops',
             'io_reservation_capacity_mib_per_s'},
            {o.name for o in opts})
        for opt in opts:
            self.assertTrue(opt.help, opt.name)
            if opt.name.startswith('measured_class_'):
                # Secrets: kept out of logs, no bounds to have.
                self.assertTrue(opt.secret)
            elif opt.name == 'sysfs_root':
                self.assertEqual('/sys', opt.default)  # a path: no bounds
            else:
                self.assertIsNotNone(opt.type.min, opt.name)

    def test_fractions_are_bounded(self):
        for name in ('target_io_fraction', 'min_io_fraction',
                     'max_io_fraction'):
            self.assertRaises(ValueError, self.flags, group='vsmtio',
                              **{name: 1.5})
            self.assertRaises(ValueError, self.flags, group='vsmtio',
                              **{name: -0.1})


class ExtraSpecValidationTest(test.NoDBTestCase):
    """nova's own validator registry, loaded through our entry point."""

    def setUp(self):
        super().setUp()
        self.assertIn(
            'vsmtio', validators.NAMESPACES,
            'the nova.api.extra_spec_validators entry point is not '
            'installed: pip install -e . (tox does this)')

    def test_good_values(self):
        for value in workload.VALUES:
            validators.validate(workload.EXTRA_SPEC_WORKLOAD, value)
        for value in ('true', 'false', 'True', '1', '0'):
            validators.validate('vsmtio:context_retention', value)
        for key in (io_reservation.EXTRA_SPEC_IOPS,
                    io_reservation.EXTRA_SPEC_MIB_PER_S):
            for value in ('1', '500', str(io_reservation.PLACEMENT_MAX)):
                validators.validate(key, value)

    def test_bad_reservations_are_refused_with_the_reason(self):
        for key in (io_reservation.EXTRA_SPEC_IOPS,
                    io_reservation.EXTRA_SPEC_MIB_PER_S):
            for value, why in (('0', 'less than the min'),
                               ('-5', 'less than the min'),
                               ('lots', 'not a valid integer'),
                               ('1.5', 'not a valid integer'),
                               (str(2 ** 31), 'greater than the max')):
                e = self.assertRaises(exception.ValidationError,
                                      validators.validate, key, value)
                self.assertIn(why, str(e))

    def test_bad_value_and_unknown_key(self):
        self.assertRaises(exception.ValidationError, validators.validate,
                          workload.EXTRA_SPEC_WORKLOAD, 'gpu')
        # The API takes the exact lower-case spelling only.
        self.assertRaises(exception.ValidationError, validators.validate,
                          workload.EXTRA_SPEC_WORKLOAD, 'IO')
        self.assertRaises(exception.ValidationError, validators.validate,
                          'vsmtio:context_retention', 'maybe')
        e = self.assertRaises(exception.ValidationError, validators.validate,
                              'vsmtio:target_io_fraction', '0.5')
        self.assertIn('does not appear to be a valid extra spec', str(e))


class MetadefsTest(test.NoDBTestCase):

    def test_flavor_namespace_matches_the_validators(self):
        ns = metadefs('vsmtio.json')
        [assoc] = ns['resource_type_associations']
        self.assertEqual({'name': 'OS::Nova::Flavor', 'prefix': 'vsmtio:'},
                         assoc)
        keys = {assoc['prefix'] + name for name in ns['properties']}
        self.assertEqual(set(validators.VALIDATORS) & keys, keys)
        self.assertEqual(
            {k for k in validators.VALIDATORS if k.startswith('vsmtio:')},
            keys)
        wl = ns['properties']['workload']
        self.assertEqual(list(workload.VALUES), wl['enum'])
        self.assertEqual('auto', wl['default'])
        for value in wl['enum']:
            validators.validate(workload.EXTRA_SPEC_WORKLOAD, value)
        self.assertEqual('boolean',
                         ns['properties']['context_retention']['type'])
        for name in ('io_reservation_iops', 'io_reservation_mib_per_s'):
            prop = ns['properties'][name]
            value = validators.VALIDATORS['vsmtio:' + name].value
            self.assertEqual('integer', prop['type'])
            self.assertEqual(value['min'], prop['minimum'])
            self.assertEqual(value['max'], prop['maximum'])

    def test_aggregate_namespace_matches_the_scheduler(self):
        ns = metadefs('vsmtio-aggregate.json')
        [assoc] = ns['resource_type_associations']
        self.assertEqual('OS::Nova::Aggregate', assoc['name'])
        props = {assoc['prefix'] + name: p
                 for name, p in ns['properties'].items()}
        self.assertEqual(set(settings.AGGREGATE_KEYS), set(props))
        opts = {o.name: o for o in conf.vsmtio_opts}
        for key, prop in props.items():
            opt = opts[settings.AGGREGATE_KEYS[key]]
            self.assertEqual(opt.default, prop['default'], key)
            self.assertEqual(opt.type.min, prop['minimum'], key)
            self.assertEqual(opt.type.max, prop.get('maximum'), key)


class DocCommandsTest(test.NoDBTestCase):
    """The docs give one command per job, and the cloud uses theirs.

    The commands are read as ``tools/cloud/doc_commands.py`` reads them
    for the cloud (``tox -e cloud`` runs them).
    """

    def setUp(self):
        super().setUp()
        spec = importlib.util.spec_from_file_location(
            'doc_commands', os.path.join(ROOT, 'tools', 'cloud',
                                         'doc_commands.py'))
        self.docs = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(self.docs)

    def test_every_command_is_run_by_the_cloud_or_excluded(self):
        # each operator command: run as written by the cloud, or on the
        # short list of those it cannot run, with the reason
        every = self.docs.every_command()
        self.assertGreater(len(every), 40)
        for doc, line, words in every:
            self.assertEqual(1, len(self.docs.entries(doc, words)),
                             '%s: %s\nis run by the cloud '
                             '(doc_commands.RUN) or excluded '
                             '(doc_commands.EXCLUDED, with why), once'
                             % (doc, line))

    def test_every_entry_names_a_command(self):
        every = self.docs.every_command()
        for key in self.docs.RUN:
            # the cloud runs it with doc_commands.one: exactly one command
            self.assertEqual(1, sum(1 for doc, _line, words in every
                                    if doc == key[0]
                                    and self.docs.matches(words, key[1:])),
                             key)
        for key, why in self.docs.EXCLUDED.items():
            self.assertTrue(why)
            self.assertTrue(any(doc == key[0]
                                and self.docs.matches(words, key[1:])
                                for doc, _line, words in every), key)
        self.assertFalse(set(self.docs.RUN) & set(self.docs.EXCLUDED))

    def test_exclusions_are_few(self):
        self.assertLessEqual(len(self.docs.EXCLUDED),
                             len(self.docs.RUN) // 2)

    def test_commands_are_written_in_console_blocks(self):
        # a command written in a literal block would be neither run nor
        # excluded
        self.assertEqual([], self.docs.outside_console())

    def test_console_blocks(self):
        text = '\n'.join([
            'Run::', '', '    not a command', '',
            '.. code-block:: console', '   :caption: x', '',
            '   $ openstack --os-compute-api-version 2.86 flavor set \\',
            '       --property a=b f', '   output', '   # vsmtio-agent \\',
            '       check  # why', '',
            'Text.'])
        self.assertEqual([('::', 'not a command'), (
            'console', '$ openstack --os-compute-api-version 2.86 flavor '
            'set \\\n    --property a=b f\noutput\n# vsmtio-agent \\\n'
            '    check  # why')], self.docs.blocks(text))
        self.assertEqual(['openstack', 'flavor', 'set', '--property',
                          'a=b', 'f'], self.docs._subcommand(
            shlex.split('openstack --os-compute-api-version 2.86 flavor '
                        'set --property a=b f')))

    def test_one_metadefs_command(self):
        found = {line for name in os.listdir(self.docs.DOC)
                 if name.endswith('.rst')
                 for line, _words in self.docs.commands(name,
                                                        'glance-manage')}
        self.assertEqual({'glance-manage db load_metadefs --path '
                          'etc/metadefs'}, found)

    def test_placement_commands_say_they_need_osc_placement(self):
        with open(os.path.join(self.docs.DOC, 'install.rst')) as f:
            text = f.read()
        for words in (('resource', 'provider', 'trait', 'list'),
                      ('trait', 'create')):
            self.docs.one('install.rst', 'openstack', *words)
            at = text.index(' '.join(words))
            self.assertIn('osc-placement', text[at - 500:at], words)

    def test_the_retention_flavor_requires_the_trait(self):
        # what install.rst tells operators to set, and what the cloud's
        # retention flavor gets by running that command
        specs = self.docs.properties(self.docs.one(
            'install.rst', 'openstack', 'flavor', 'set'))
        self.assertEqual('required',
                         specs['trait:CUSTOM_VSMTIO_CONTEXT_RETENTION'])
        self.assertEqual('dedicated', specs['hw:cpu_policy'])

    def test_the_agent_s_role_is_given_no_admin(self):
        # install.rst's command, which the cloud runs: the vsmtio-agent
        # role on every project of the domain, and that role only
        words = shlex.split(self.docs.one('install.rst', 'openstack', 'role',
                                          'add'))
        self.assertIn('--inherited', words)
        self.assertEqual('vsmtio-agent', words[-1])
        self.assertNotIn('admin', words)
        # the policy the docs install gives that role the metadata calls
        with open(os.path.join(ROOT, 'etc', 'nova', 'policy.d',
                               'vsmtio.yaml')) as f:
            rules = yaml.safe_load(f)
        self.assertEqual({'os_compute_api:server-metadata:%s' % name
                          for name in ('index', 'create', 'delete')},
                         set(rules))
        for rule in rules.values():
            self.assertIn('(role:vsmtio-agent and '
                          'project_id:%(project_id)s)', rule)
