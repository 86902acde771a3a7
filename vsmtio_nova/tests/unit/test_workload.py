"""The workload vocabulary and its validators, loaded the way nova-api does.

``validators.validate`` finds our validators through the
``nova.api.extra_spec_validators`` entry point of the installed package, so
these tests fail if the packaging or the entry point breaks.
"""

from nova.api.validation.extra_specs import validators
from nova import exception
import testtools

from vsmtio_contract import workload


class TestParse(testtools.TestCase):

    def test_unset_means_auto(self):
        self.assertIs(workload.WorkloadClass.AUTO, workload.parse(None))
        self.assertIs(workload.WorkloadClass.AUTO, workload.parse(''))
        self.assertIs(workload.WorkloadClass.AUTO,
                      workload.from_extra_specs({}))
        self.assertIs(workload.WorkloadClass.AUTO,
                      workload.from_extra_specs(None))

    def test_declared_classes(self):
        self.assertIs(workload.WorkloadClass.IO,
                      workload.from_extra_specs({'vsmtio:workload': 'io'}))
        self.assertIs(workload.WorkloadClass.CPU, workload.parse(' CPU '))

    def test_bad_value_names_the_key_and_choices(self):
        err = self.assertRaises(workload.InvalidWorkloadClass,
                                workload.parse, 'gpu')
        self.assertIn('vsmtio:workload', str(err))
        self.assertIn('io, cpu, auto', str(err))


class TestNovaValidators(testtools.TestCase):

    def test_good_values_pass(self):
        for value in workload.VALUES:
            validators.validate('vsmtio:workload', value)
        for value in ('true', 'false', 'True', '0'):
            validators.validate('vsmtio:context_retention', value)

    def test_bad_values_are_refused(self):
        for key, value in (('vsmtio:workload', 'gpu'),
                           ('vsmtio:context_retention', 'maybe')):
            self.assertRaises(exception.ValidationError,
                              validators.validate, key, value)

    def test_unknown_key_in_our_namespace_is_refused(self):
        err = self.assertRaises(exception.ValidationError,
                                validators.validate, 'vsmtio:colour', 'red')
        self.assertIn('vsmtio:colour', str(err))


class MeasuredClassTest(testtools.TestCase):

    def test_signed_value_round_trips(self):
        value = workload.sign_measured('s', 'uuid-1', 'cpu')
        self.assertTrue(value.startswith('cpu:'))
        self.assertEqual(workload.WorkloadClass.CPU,
                         workload.verify_measured('s', 'uuid-1', value))

    def test_untrusted_values(self):
        value = workload.sign_measured('s', 'uuid-1', 'io')
        for secret, uuid, v in (('s', 'uuid-2', value),   # copied
                                ('t', 'uuid-1', value),   # other secret
                                (None, 'uuid-1', value),  # no secret
                                ('s', 'uuid-1', 'io'),    # unsigned
                                ('s', 'uuid-1', 'gpu:00'),
                                ('s', 'uuid-1', None),
                                ('s', 'uuid-1', value.replace('io', 'cpu'))):
            self.assertIsNone(workload.verify_measured(secret, uuid, v), v)

    def test_auto_is_no_measurement(self):
        value = workload.sign_measured('s', 'uuid-1', 'auto')
        self.assertIsNone(workload.verify_measured('s', 'uuid-1', value))
