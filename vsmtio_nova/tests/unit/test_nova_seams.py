"""Each private nova seam vsmtio relies on, checked on the installed nova.

``doc/source/nova_seams.rst`` lists the seams: what vsmtio uses, why no
supported way exists, and the nova versions they were tested with. Each
test here checks, on nova's real classes, the shape the seam's code
assumes, and fails naming the seam and the nova version it was written
for, so that a nova upgrade which moves one says where to look, not only
that something broke. Where nova gains the supported way (a full class
path for ``compute_driver``, libvirt elements for what
``<qemu:commandline>`` carries), the test fails too: the seam can go.
What the seams do together in a real boot is
``tests/functional/test_libvirt_boot.py``.
"""

import collections
import datetime
from importlib import metadata
import inspect
import re

import fixtures
from oslo_utils.fixture import uuidsentinel as uuids

from nova.api.validation.extra_specs import validators
from nova.compute import resource_tracker
from nova.compute import stats as compute_stats
from nova import exception
from nova import objects
from nova.scheduler import host_manager
from nova import test
from nova.tests.unit.scheduler import fakes
from nova.virt import driver as virt_driver
from nova.virt import fake
from nova.virt.libvirt import config as libvirt_config
from nova.virt.libvirt import driver as libvirt_driver

from vsmtio_contract import specs
from vsmtio_contract import workload
from vsmtio_nova.compute import stats
from vsmtio_nova import extra_specs
from vsmtio_nova import provider_config
from vsmtio_nova.tests.unit import base
from vsmtio_nova.tests.unit.virt import test_libvirt_driver
from vsmtio_nova import virt
from vsmtio_nova.virt.libvirt import driver

#: The nova release these seams were written against.
WRITTEN_FOR = '34.0.0'
NOVA = metadata.version('nova')


class SeamMixin:

    def seam(self, name, holds, what):
        """Fail, naming the seam and the versions, unless ``holds``."""
        if not holds:
            self.fail('nova seam %s changed (written for nova %s, this is '
                      'nova %s): %s. See doc/source/nova_seams.rst.'
                      % (name, WRITTEN_FOR, NOVA, what))


class GuestXMLSeamTest(SeamMixin, test.NoDBTestCase):
    """``LibvirtDriver._get_guest_xml``: the domain XML nova defines."""

    SEAM = 'LibvirtDriver._get_guest_xml'
    LEADING = ['self', 'context', 'instance', 'network_info', 'disk_info',
               'image_meta']

    def test_exists_with_the_arguments_we_pass_on(self):
        fn = getattr(libvirt_driver.LibvirtDriver, '_get_guest_xml', None)
        self.seam(self.SEAM, callable(fn), 'it is gone')
        params = list(inspect.signature(fn).parameters.values())
        self.seam(self.SEAM, [p.name for p in params[:6]] == self.LEADING,
                  'its leading arguments are now %s, the override takes %s'
                  % ([p.name for p in params[:6]], self.LEADING))
        required = [p.name for p in params[6:]
                    if p.default is inspect.Parameter.empty]
        self.seam(self.SEAM, not required,
                  'it has new required arguments %s' % required)

    def test_nova_builds_every_domain_through_it(self):
        # The methods that define a guest's domain from its instance: if
        # one stops calling it, its guests lose what vsmtio adds.
        for name in ('spawn', '_hard_reboot', 'rescue', 'finish_migration',
                     'finish_revert_migration'):
            method = getattr(libvirt_driver.LibvirtDriver, name, None)
            self.seam(self.SEAM, method is not None,
                      'LibvirtDriver.%s is gone' % name)
            self.seam(self.SEAM,
                      'self._get_guest_xml(' in inspect.getsource(method),
                      'LibvirtDriver.%s no longer calls it' % name)

    def test_our_override_is_the_one_nova_calls(self):
        self.seam(self.SEAM,
                  driver.VsmtioLibvirtDriver._get_guest_xml
                  is not libvirt_driver.LibvirtDriver._get_guest_xml,
                  'the vsmtio driver no longer overrides it')


class SupportedInsteadTest(SeamMixin, test.NoDBTestCase):
    """``<qemu:commandline>``: what nova's libvirt config cannot say."""

    SEAM = '<qemu:commandline> for -overcommit cpu-pm=on'

    def test_nova_has_no_element_for_what_we_pass_to_qemu(self):
        # nova 34 writes neither; if it learns one, use it instead.
        source = inspect.getsource(libvirt_config)
        for word in ('cpu-pm', 'cpu_pm', 'hint-dedicated'):
            self.seam(self.SEAM, word not in source,
                      'nova.virt.libvirt.config now knows %r: use nova\'s '
                      'own element instead' % word)


class LoadingSeamTest(SeamMixin, test_libvirt_driver.DomainXMLTestCase):
    """``sys.modules['nova.virt.vsmtio']``: how nova finds our driver."""

    SEAM = 'compute_driver resolved as nova.virt.<value>'

    def test_nova_loads_the_driver_after_register(self):
        virt.register()
        drvr = virt_driver.load_compute_driver(fake.FakeVirtAPI(),
                                               provider_config.COMPUTE_DRIVER)
        self.seam(self.SEAM,
                  isinstance(drvr, driver.VsmtioLibvirtDriver),
                  'load_compute_driver(%r) gave %r'
                  % (provider_config.COMPUTE_DRIVER, type(drvr)))

    def test_nova_still_refuses_a_full_class_path(self):
        # Why register() exists. Should nova accept a full class path,
        # the alias and vsmtio-nova-compute's reason to exist can go.
        try:
            virt_driver.load_compute_driver(
                fake.FakeVirtAPI(),
                'vsmtio_nova.virt.libvirt.driver.VsmtioLibvirtDriver')
        except SystemExit:
            return
        self.seam(self.SEAM, False, 'nova now loads a full class path: '
                  'drop vsmtio_nova.virt.register and set compute_driver '
                  'to the class path')


class ComputeStatsSeamTest(SeamMixin, test.NoDBTestCase):
    """``resource_tracker.compute_stats``: where the node's mix is kept."""

    SEAM = 'nova.compute.resource_tracker.compute_stats'

    def tracker(self):
        return resource_tracker.ResourceTracker(
            'host', fake.FakeDriver(fake.FakeVirtAPI()), reportclient=None)

    def test_the_tracker_builds_its_stats_from_the_module_attribute(self):
        self.seam(self.SEAM, getattr(resource_tracker, 'compute_stats',
                                     None) is compute_stats,
                  'resource_tracker no longer imports nova.compute.stats '
                  'as compute_stats')
        self.useFixture(fixtures.MonkeyPatch(
            'nova.compute.resource_tracker.compute_stats', compute_stats))
        stats.install()
        rt = self.tracker()
        self.seam(self.SEAM, isinstance(rt.stats, collections.defaultdict),
                  'ResourceTracker.stats is a %s, not a defaultdict'
                  % type(rt.stats).__name__)
        self.seam(self.SEAM, isinstance(rt.stats['node'], stats.MixStats),
                  'a new node\'s stats are a %s, not built from '
                  'compute_stats.Stats' % type(rt.stats['node']).__name__)

    def test_stats_has_the_shape_mixstats_extends(self):
        self.seam(self.SEAM, issubclass(compute_stats.Stats, dict),
                  'Stats is no longer a dict')
        params = list(inspect.signature(
            compute_stats.Stats.update_stats_for_instance).parameters)
        self.seam(self.SEAM, params == ['self', 'instance', 'is_removed'],
                  'Stats.update_stats_for_instance takes %s' % params)
        s = compute_stats.Stats()
        inst = base.instance('io')
        inst.update({'vm_state': 'active', 'task_state': None,
                     'os_type': 'linux', 'project_id': 'p'})
        s.update_stats_for_instance(inst)
        self.seam(self.SEAM, inst.uuid in getattr(s, 'states', {}),
                  'Stats.states no longer holds a counted instance')
        s.update_stats_for_instance(inst, is_removed=True)
        self.seam(self.SEAM, inst.uuid not in s.states,
                  'Stats.states keeps a removed instance')
        s.clear()
        self.seam(self.SEAM, s.states == {} and dict(s) == {},
                  'Stats.clear leaves %r' % dict(s))

    def test_the_tracker_feeds_stats_per_instance(self):
        source = inspect.getsource(resource_tracker.ResourceTracker)
        self.seam(self.SEAM, '.update_stats_for_instance(' in source,
                  'ResourceTracker no longer calls '
                  'Stats.update_stats_for_instance')


class HostStateSeamTest(SeamMixin, test.NoDBTestCase):
    """The scheduler's ledger on ``HostState`` (vsmtio_nova.scheduler)."""

    SEAM = 'HostState stats refresh and consume_from_request'

    def node(self, updated_at, stats):
        node = objects.ComputeNode(**{
            k: getattr(fakes.COMPUTE_NODES[0], k)
            for k in fakes.COMPUTE_NODES[0].obj_fields
            if fakes.COMPUTE_NODES[0].obj_attr_is_set(k)})
        node.updated_at = updated_at
        node.stats = stats
        return node

    def test_refresh_replaces_stats_and_consume_keeps_them(self):
        t0 = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)
        state = host_manager.HostState('host1', 'node1', uuids.cell)
        state.update(compute=self.node(t0, {'num_instances': '2'}))
        first = state.stats
        self.seam(self.SEAM, state.num_instances == 2,
                  'num_instances is not read from the node\'s stats')
        state._vsmtio_ledger = 'kept'
        self.seam(self.SEAM, state._vsmtio_ledger == 'kept',
                  'HostState no longer takes an attribute of ours')
        state.consume_from_request(base.spec('io', vcpus=1))
        self.seam(self.SEAM, state.num_instances == 3,
                  'consume_from_request no longer counts the instance')
        self.seam(self.SEAM, state.stats is first,
                  'consume_from_request replaced the stats')
        # saved by its compute after this scheduler consumed it
        later = datetime.datetime.now(datetime.timezone.utc) + (
            datetime.timedelta(minutes=1))
        state.update(compute=self.node(later, {'num_instances': '3'}))
        self.seam(self.SEAM, state.stats is not first,
                  'a refresh from a newer node keeps the old stats object')


class ExtraSpecValidatorSeamTest(SeamMixin, test.NoDBTestCase):
    """``ExtraSpecValidator.validate``: the one check nova-api calls.

    The validators are a supported plugin point; that nova-api judges a
    value by calling the registered object's ``validate(name, value)``,
    which :class:`vsmtio_nova.extra_specs.ContractValidator` overrides with
    the contract's parser, is not promised.
    """

    SEAM = 'ExtraSpecValidator.validate'

    def test_nova_api_judges_by_our_validate(self):
        key = workload.EXTRA_SPEC_WORKLOAD
        self.seam(self.SEAM, isinstance(validators.VALIDATORS.get(key),
                                        extra_specs.ContractValidator),
                  'nova no longer keeps the registered validator objects')

        def refuse(value):
            raise specs.Invalid('refused by the contract')

        self.useFixture(fixtures.MonkeyPatch(
            'vsmtio_contract.specs.PARSERS', dict(specs.PARSERS, **{
                key: refuse})))
        try:
            validators.validate(key, 'io')   # nova's own enum accepts it
            called = False
        except exception.ValidationError as e:
            called = 'refused by the contract' in str(e)
        self.seam(self.SEAM, called,
                  'nova-api no longer calls the validator\'s validate()')


class FilterRefusalSeamTest(SeamMixin, test.NoDBTestCase):
    """A filter's ``NoValidHost`` reaches the user with its reason.

    nova's filters only pass or fail hosts, and a request no host passes
    ends with an empty reason. ``ContextRetentionFilter`` raises
    ``NoValidHost(reason=...)`` instead (its verdict is the flavor's, the
    same for every host); that nova's filter handler lets the exception
    through and the scheduler's RPC endpoint passes it to the conductor
    as an expected one is not promised. What the conductor does with it
    (the fault, the failed create event) is nova's own, shown end to end
    by ``tests/functional/test_retention_routing.py``.
    """

    SEAM = 'NoValidHost raised by a filter'

    def test_the_filter_handler_lets_it_through(self):
        from nova.scheduler import filters as nova_filters
        from vsmtio_nova.scheduler import retention as retention_filter

        flavor = base.flavor(None, 2, name='m1.retain')
        flavor.extra_specs = {specs.CONTEXT_RETENTION: 'true'}
        spec = objects.RequestSpec(flavor=flavor)
        hosts = [host_manager.HostState('h%d' % i, 'h%d' % i, None)
                 for i in range(2)]
        try:
            list(nova_filters.HostFilterHandler().get_filtered_objects(
                [retention_filter.ContextRetentionFilter()], hosts, spec))
            reason = None
        except exception.NoValidHost as exc:
            reason = exc.format_message()
        self.seam(self.SEAM, reason is not None and 'vsmtio:' in reason,
                  'nova\'s filter handler no longer lets a filter\'s '
                  'NoValidHost through (got %r)' % reason)

    def test_the_scheduler_passes_it_to_the_conductor(self):
        from nova.scheduler import manager as scheduler_manager
        source = inspect.getsource(scheduler_manager)
        declared = re.search(
            r'@messaging\.expected_exceptions\(exception\.NoValidHost\)'
            r'\s+def select_destinations\(', source)
        self.seam(self.SEAM, declared is not None,
                  'select_destinations no longer declares NoValidHost an '
                  'expected exception of its RPC endpoint')
