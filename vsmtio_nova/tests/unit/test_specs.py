"""One parser for every reader: what nova-api refuses, no reader reads.

nova-api validates ``vsmtio:`` extra specs only at microversion 2.86 and
later (the openstack client's default is 2.61), so a value it would refuse
reaches nova-compute, the scheduler and the agent. Each reader goes
through :data:`vsmtio_contract.specs.PARSERS`, the function nova-api's
validator calls: the property test holds nova's validator (loaded through
its entry point, as nova-api loads it) and the run-time readers to the same
verdict on any value, and the readers ignore, with one warning, what the
API refuses.
"""

from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
from nova.api.validation.extra_specs import validators
from nova.compute import utils as compute_utils
from nova import exception
from nova import objects
from nova.scheduler import host_manager
from nova import test

from vsmtio_contract import io_reservation
from vsmtio_contract import specs
from vsmtio_contract import workload
from vsmtio_nova import capability
from vsmtio_nova.compute import stats as mix_stats
from vsmtio_nova import faults
from vsmtio_nova import mix
from vsmtio_nova.scheduler import retention as retention_filter
from vsmtio_nova.tests.unit import base

#: Values a client below microversion 2.86 can store, and their neighbours.
SPELLINGS = ['io', 'IO', 'Io', ' io', 'io ', 'cpu', 'CPU', 'auto', 'Auto',
             '', 'true', 'True', 'TRUE', 'yes', 'on', '1', '0', 'no', 'off',
             'false', 'maybe', ' 5', '5 ', '+5', '0', '-1', '1.5', '1_000',
             str(2 ** 31 - 1), str(2 ** 31), '\u0665', 'lots']
VALUES = st.one_of(st.sampled_from(SPELLINGS), st.text(max_size=12))


def api_accepts(key, value):
    try:
        validators.validate(key, value)
    except exception.ValidationError:
        return False
    return True


def reader_accepts(key, value):
    try:
        specs.PARSERS[key](value)
    except specs.Invalid:
        return False
    return True


class OneParserTest(test.NoDBTestCase):

    def setUp(self):
        super().setUp()
        specs.WARNED.clear()

    @settings(max_examples=300, deadline=None)
    @given(key=st.sampled_from(sorted(specs.PARSERS)), value=VALUES)
    def test_the_api_and_the_readers_agree_on_every_value(self, key, value):
        self.assertEqual(api_accepts(key, value), reader_accepts(key, value),
                         '%s=%r' % (key, value))

    def test_every_vsmtio_validator_is_the_contract_s(self):
        ours = {name for name in validators.VALIDATORS
                if name.startswith('vsmtio:')}
        self.assertLessEqual(set(specs.PARSERS), ours)

    def test_upper_case_class_is_not_io_anywhere(self):
        # Before: nova-compute and the scheduler lower-cased 'IO' and
        # counted the flavor as io; nova-api >= 2.86 refuses it.
        self.assertFalse(api_accepts(workload.EXTRA_SPEC_WORKLOAD, 'IO'))
        flavor = base.flavor('IO', 4, name='m1.shouty')
        self.assertEqual((workload.WorkloadClass.AUTO, 4),
                         mix.classify_flavor(flavor))
        inst = base.instance('IO', 4)
        self.assertEqual((workload.WorkloadClass.AUTO, 4),
                         mix_stats.classify(inst, None))
        self.assertIn("Ignoring vsmtio:workload of flavor m1.shouty",
                      self.stdlog.logger.output)

    def test_a_bad_value_is_said_once_per_flavor(self):
        flavor = base.flavor('IO', 4, name='m1.noisy')
        for _ in range(60):   # an hour of periodic recounts
            mix.classify_flavor(flavor)
        self.assertEqual(1, self.stdlog.logger.output.count(
            'vsmtio:workload of flavor m1.noisy'))
        mix.classify_flavor(base.flavor('Cpu', 4, name='m1.other'))
        self.assertIn('m1.other', self.stdlog.logger.output)

    def test_reservation_the_api_refuses_reserves_nothing(self):
        self.assertFalse(api_accepts(io_reservation.EXTRA_SPEC_IOPS,
                                     str(2 ** 31)))
        iops, _b, problems = io_reservation.honoured({
            io_reservation.EXTRA_SPEC_IOPS: str(2 ** 31),
            'resources:' + io_reservation.RC_IOPS: '100'})
        self.assertIsNone(iops)
        self.assertIn('nova-api refuses it', problems[0])

    def test_retention_spelled_badly_asks_for_nothing(self):
        for value in ('sometimes', 'TRUEISH'):
            self.assertFalse(api_accepts(specs.CONTEXT_RETENTION, value))
            self.assertFalse(capability.flavor_asks(
                {specs.CONTEXT_RETENTION: value}))
        # nova's own words are accepted by both, with the same meaning
        for value, meant in (('True', True), ('on', True), ('0', False)):
            self.assertTrue(api_accepts(specs.CONTEXT_RETENTION, value))
            self.assertIs(meant, capability.flavor_asks(
                {specs.CONTEXT_RETENTION: value}))


class RetentionFilterTest(test.NoDBTestCase):
    """The filter refuses what cannot be honoured, naming what is missing.

    It refuses the request, not a host: nova's NoValidHost with the reason,
    which nova writes as the fault (functional: test_retention_routing).
    """

    def check(self, extra_specs):
        flavor = base.flavor(None, 2, name='m1.retain')
        flavor.extra_specs = dict(extra_specs)
        spec = objects.RequestSpec(flavor=flavor)
        host = host_manager.HostState('h', 'h', None)
        return retention_filter.ContextRetentionFilter().host_passes(
            host, spec)

    def check_named(self, name, extra_specs):
        flavor = base.flavor(None, 2, name=name)
        flavor.extra_specs = dict(extra_specs)
        return retention_filter.ContextRetentionFilter().host_passes(
            host_manager.HostState('h', 'h', None),
            objects.RequestSpec(flavor=flavor))

    def refused(self, extra_specs):
        exc = self.assertRaises(exception.NoValidHost, self.check,
                                extra_specs)
        return exc.format_message()

    def test_shared_cpus_refused_with_the_reason(self):
        why = self.refused({specs.CONTEXT_RETENTION: 'true',
                            capability.TRAIT_SPEC: 'required'})
        self.assertTrue(why.startswith(
            'No valid host was found. vsmtio: context retention refused: '
            'missing extra spec hw:cpu_policy=dedicated'), why)
        self.assertTrue(why.endswith('(flavor m1.retain)'), why)
        self.assertIn('missing extra spec hw:cpu_policy=dedicated',
                      self.stdlog.logger.output)

    def test_dedicated_with_the_trait_passes(self):
        self.assertTrue(self.check({
            specs.CONTEXT_RETENTION: 'true', 'hw:cpu_policy': 'dedicated',
            capability.TRAIT_SPEC: 'required'}))

    def test_missing_trait_refused(self):
        self.assertIn('trait:%s=required' % capability.TRAIT, self.refused(
            {specs.CONTEXT_RETENTION: 'true', 'hw:cpu_policy': 'dedicated'}))

    def test_fault_fits_nova_s_limit_and_keeps_what_is_missing(self):
        # nova cuts a fault's message at 255 (compute.utils
        # exception_to_dict): both missing specs and a long flavor name
        # must still leave the missing trait in what it keeps.
        self.assertEqual(255, faults.FAULT_MESSAGE_LIMIT)
        for name in ('m1.retain', 'r' * 255, '\u00e9' * 200):
            exc = self.assertRaises(
                exception.NoValidHost, self.check_named, name,
                {specs.CONTEXT_RETENTION: 'true'})
            message = exc.format_message()
            kept = compute_utils.exception_to_dict(exc)['message']
            self.assertEqual(message, kept)
            self.assertLessEqual(len(message.encode('utf-8')), 255)
            for missing in ('hw:cpu_policy=dedicated',
                            'trait:%s=required' % capability.TRAIT,
                            'vsmtio:context_retention=true'):
                self.assertIn(missing, kept)
            self.assertIn('(flavor ' + name[:4], kept)

    def test_no_retention_passes(self):
        for extra in ({}, {specs.CONTEXT_RETENTION: 'false'},
                      {specs.CONTEXT_RETENTION: 'garbled'}):
            self.assertTrue(self.check(extra))
