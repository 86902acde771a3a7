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
        self.assertIs(workload.WorkloadClass.AUTO,
                      workload.from_extra_specs({}))
        self.assertIs(workload.WorkloadClass.AUTO,
                      workload.from_extra_specs(None))

    def test_declared_classes(self):
        self.assertIs(workload.WorkloadClass.IO,
                      workload.from_extra_specs({'vsmtio:workload': 'io'}))
        self.assertIs(workload.WorkloadClass.CPU, workload.parse('cpu'))

    def test_what_the_api_refuses_is_never_reinterpreted(self):
        # Before: ' CPU ' and 'IO' were read as cpu and io at run time,
        # though nova-api refuses them; '' was read as auto.
        for value in ('IO', ' CPU ', 'Io', '', 'io ', 1):
            self.assertRaises(workload.InvalidWorkloadClass,
                              workload.parse, value)

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


NOW = 1800000000


class MeasuredClassTest(testtools.TestCase):

    def sign(self, cls='io', uuid='uuid-1', host='h1', expires=NOW + 600):
        return workload.sign_measured('s', uuid, cls, host, expires)

    def test_signed_value_round_trips(self):
        value = self.sign('cpu')
        self.assertTrue(value.startswith('cpu:%d:h1:' % (NOW + 600)))
        self.assertEqual(workload.WorkloadClass.CPU,
                         workload.verify_measured('s', 'uuid-1', value, 'h1',
                                                  NOW))

    def test_a_host_name_with_colons_still_parses(self):
        value = self.sign(host='a:b')
        self.assertEqual(workload.WorkloadClass.IO, workload.verify_measured(
            's', 'uuid-1', value, 'a:b', NOW))

    def test_untrusted_values(self):
        value = self.sign()
        for secret, uuid, v in (('s', 'uuid-2', value),   # copied
                                ('t', 'uuid-1', value),   # other secret
                                (None, 'uuid-1', value),  # no secret
                                ('s', 'uuid-1', 'io'),    # unsigned
                                ('s', 'uuid-1', 'gpu:00'),
                                ('s', 'uuid-1', None),
                                ('s', 'uuid-1', value.replace('io', 'cpu')),
                                # the expiry or host edited
                                ('s', 'uuid-1', value.replace(
                                    str(NOW + 600), str(NOW + 6000))),
                                ('s', 'uuid-1', value.replace('h1', 'h2'))):
            self.assertIsNone(
                workload.verify_measured(secret, uuid, v, 'h1', NOW), v)

    def test_other_host_expired_or_too_long_refused(self):
        cases = ((self.sign(), 'h2', NOW, 'measured on h1'),
                 (self.sign(), 'h1', NOW + 600, 'expired'),
                 (self.sign(expires=NOW + workload.MAX_LIFETIME + 1), 'h1',
                  NOW, 'beyond'))
        for value, host, now, why in cases:
            cls, reason = workload.check_measured('s', 'uuid-1', value,
                                                  host, now)
            self.assertIsNone(cls)
            self.assertIn(why, reason)

    def test_auto_is_no_measurement(self):
        self.assertIsNone(workload.verify_measured(
            's', 'uuid-1', self.sign('auto'), 'h1', NOW))


class HostKeyTest(testtools.TestCase):
    """Each host's own key, derived from the controllers' root secret."""

    def test_a_host_key_signs_for_its_host_only(self):
        h1 = workload.derive_host_key('root', 'h1')
        h2 = workload.derive_host_key('root', 'h2')
        self.assertNotEqual(h1, h2)
        self.assertNotEqual(h1, workload.derive_host_key('other-root', 'h1'))
        self.assertRegex(h1, '^[0-9a-f]{64}$')
        value = workload.sign_measured(h2, 'uuid-1', 'io', 'h1', NOW + 600)
        # h2's key claiming h1: h1's verifier holds h1's key
        self.assertIn('signature', workload.check_measured(
            h1, 'uuid-1', value, 'h1', NOW)[1])

    def test_every_key_of_a_rotation_verifies(self):
        new, old = (workload.host_keys(['new-root', 'old-root'], 'h1'))
        self.assertEqual([new], workload.host_keys(['new-root', None], 'h1'))
        for key in (new, old):
            value = workload.sign_measured(key, 'uuid-1', 'cpu', 'h1',
                                           NOW + 600)
            self.assertEqual(workload.WorkloadClass.CPU,
                             workload.verify_measured([new, old], 'uuid-1',
                                                      value, 'h1', NOW))
            self.assertEqual(workload.Measurement(
                workload.WorkloadClass.CPU, NOW + 600, 'h1'),
                workload.trusted_measurement([new, old], 'uuid-1', value,
                                             'h1', NOW)[0])
        self.assertIn('no key', workload.check_measured(
            [], 'uuid-1', 'cpu:1:h1:00', 'h1', NOW)[1])
