"""Watcher goal ``vsmtio_workload_mix`` and strategy ``vsmtio_mix_repair``.

Loaded by Watcher's decision engine through its ``watcher_goals`` and
``watcher_strategies`` entry points (install ``vsmtio`` into Watcher's
environment). The strategy reads each host's instances from Watcher's
compute model, counts them with nova-compute's own rule
(:func:`vsmtio_nova.mix.counted_class`: the flavor's declared
``vsmtio:workload``, or for ``auto`` the class the agent of the
instance's host signed, else the last one verified until it expires),
asks :func:`vsmtio_nova.watcher.repair.plan` for the live migrations
that bring stranded hosts back into the band, and adds them to the
solution. It moves only active, unlocked instances not excluded from
Watcher, and only onto enabled, up hosts of the audit's scope.

A tenant may delete or rewrite its instance's measured class (server
metadata is the owner's): that must never move a neighbour. The
strategy keeps the last class it verified per instance (:data:`MEMORY`,
for as long as the decision engine runs), and a host on which an
``auto`` instance has no verified class at all (never measured, or its
key gone before this process saw it) is left alone: nothing moves from
or to it, since its mix as its compute counts it is not known here.

The strategy reads each instance's flavor extra specs, which Watcher's
compute model holds only with ``[compute_model]
enable_extended_attributes = true`` in ``watcher.conf`` (its default is
false): without them no instance's ``vsmtio:workload`` is seen and every
plan would be empty, so an audit fails instead, naming the option
(:class:`ExtendedAttributesDisabled`). Each solution carries the goal's
efficacy indicators (:class:`MixEfficacy`): hosts outside the band before
and after, hosts too lightly classified to judge, vCPUs moved.
"""

import time
import typing

from oslo_config import cfg
from oslo_log import log as logging
from watcher.common import exception
from watcher.decision_engine.goal import base as goal_base
from watcher.decision_engine.goal.efficacy import base as efficacy_base
from watcher.decision_engine.goal.efficacy import indicators
from watcher.decision_engine.model import element
from watcher.decision_engine.solution import efficacy
from watcher.decision_engine.strategy.strategies import base

from vsmtio_contract import workload
from vsmtio_nova import conf as vsmtio_conf
from vsmtio_nova import mix
from vsmtio_nova.watcher import repair

LOG = logging.getLogger(__name__)

GOAL = 'vsmtio_workload_mix'
_DEFAULTS = {o.name: o.default for o in vsmtio_conf.vsmtio_opts}


class ExtendedAttributesDisabled(exception.WatcherException):
    """Watcher's model has no flavor extra specs: no mix can be judged.

    Raised from the strategy, it fails the audit (Watcher's audit handler
    sets it FAILED and logs this message), where an empty plan would say
    the fleet is fine.
    """

    msg_fmt = ('vsmtio mix repair needs [compute_model] '
               'enable_extended_attributes = true in watcher.conf: without '
               'it Watcher\'s compute model holds no flavor extra specs, so '
               'no instance\'s vsmtio:workload is seen and no host\'s mix '
               'can be judged')


class _Count(indicators.IndicatorSpecification):
    """A count the solution always sets: a non-negative integer."""

    NAME = DESCRIPTION = UNIT = None

    def __init__(self):
        super().__init__(name=self.NAME, description=self.DESCRIPTION,
                         unit=self.UNIT)

    @property
    def schema(self):
        return {'type': 'integer', 'minimum': 0}


class StrandedBefore(_Count):
    NAME = 'stranded_hosts_before'
    DESCRIPTION = 'Hosts whose I/O share is outside the mix band before.'


class StrandedAfter(_Count):
    NAME = 'stranded_hosts_after'
    DESCRIPTION = ('Hosts whose I/O share is still outside the mix band '
                   'once the plan is done.')


class UnjudgedHosts(_Count):
    NAME = 'unjudged_hosts'
    DESCRIPTION = ('Hosts with fewer classified vCPUs than '
                   'min_classified_vcpus: not judged, never stranded.')


class VcpusMoved(_Count):
    NAME = 'vcpus_moved'
    DESCRIPTION = 'vCPUs of the instances the plan live-migrates.'
    UNIT = 'vCPUs'


class MixEfficacy(efficacy_base.EfficacySpecification):
    """What a mix repair plan achieves, as Watcher shows a solution.

    The hosts outside the band before and after and the vCPUs moved say
    what the plan does; the hosts not judged say why a plan may be empty
    on a fleet whose hosts hold few classified vCPUs.
    """

    def get_indicators_specifications(self):
        return [StrandedBefore(), StrandedAfter(), UnjudgedHosts(),
                VcpusMoved(), indicators.InstanceMigrationsCount()]

    def get_global_efficacy_indicator(self, indicators_map=None):
        """The share of the stranded hosts the plan brings into the band.

        100 % where none was stranded: there was nothing to repair.
        """
        value = 100.0
        before = (indicators_map or {}).get('stranded_hosts_before')
        if before:
            after = indicators_map.stranded_hosts_after
            value = 100.0 * (before - after) / before
        return [efficacy.Indicator(
            name='stranded_hosts_repaired',
            description='Share of the hosts outside the mix band that the '
                        'plan brings into it.',
            unit='%', value=value)]


class WorkloadMixGoal(goal_base.Goal):
    """Every host's I/O : CPU vCPU share within the scheduler's band."""

    @classmethod
    def get_name(cls):
        return GOAL

    @classmethod
    def get_display_name(cls):
        return 'vsmtio workload mix'

    @classmethod
    def get_translatable_display_name(cls):
        return 'vsmtio workload mix'

    @classmethod
    def get_efficacy_specification(cls):
        return MixEfficacy()


class _Flavor(typing.NamedTuple):
    """What :func:`~vsmtio_nova.mix.classify_flavor` reads."""

    name: str
    extra_specs: dict
    vcpus: int


#: The last verified measured class of each instance, across audits.
MEMORY = mix.MeasuredMemory()


def counted_class(instance, host, keys, now, memory=MEMORY):
    """How an instance counts (:class:`vsmtio_nova.mix.Counted`).

    :func:`vsmtio_nova.mix.counted_class`, the rule nova-compute counts
    with, on Watcher's model instead of a nova object; ``keys`` are
    ``host``'s.
    """
    cls, vcpus = mix.classify_flavor(_Flavor(
        instance.name, instance.flavor_extra_specs or {}, instance.vcpus))
    value = (instance.metadata or {}).get(workload.MEASURED_CLASS_KEY)
    return mix.counted_class(cls, vcpus, instance.uuid, value, host, keys,
                             now, memory)


def movable(instance):
    return (instance.state == element.InstanceState.ACTIVE.value
            and not instance.locked and not instance.watcher_exclude)


class WorkloadMixRepair(base.BaseStrategy):
    """Live-migrate instances so that stranded hosts return to the band."""

    MIGRATION = 'migrate'
    #: Wall-clock UTC seconds, which signed expiries are compared with.
    clock = staticmethod(time.time)

    @classmethod
    def get_name(cls):
        return 'vsmtio_mix_repair'

    @classmethod
    def get_display_name(cls):
        return 'vsmtio mix repair'

    @classmethod
    def get_translatable_display_name(cls):
        return 'vsmtio mix repair'

    @classmethod
    def get_goal_name(cls):
        return GOAL

    @classmethod
    def get_config_opts(cls):
        return [
            cfg.StrOpt('measured_class_secret', secret=True,
                       help='nova.conf [vsmtio] measured_class_secret (the '
                            'root secret every host\'s key is derived '
                            'from): with it, an auto instance counts with '
                            'the class the agent of its host measured and '
                            'signed, as on its compute host; unset, auto '
                            'instances are not counted.'),
            cfg.StrOpt('measured_class_previous_secret', secret=True,
                       help='nova.conf [vsmtio] '
                            'measured_class_previous_secret: the root '
                            'secret replaced, during a rotation.'),
        ]

    @classmethod
    def get_schema(cls):
        def fraction(name, what):
            return {'description': what + ' (nova.conf [vsmtio] %s).'
                    % name, 'type': 'number', 'minimum': 0, 'maximum': 1,
                    'default': _DEFAULTS[name]}
        return {
            'properties': {
                'min_io_fraction': fraction(
                    'min_io_fraction', 'Lower bound of the I/O share'),
                'max_io_fraction': fraction(
                    'max_io_fraction', 'Upper bound of the I/O share'),
                'target_io_fraction': fraction(
                    'target_io_fraction', 'Share ties are broken towards'),
                'min_classified_vcpus': {
                    'description': 'A host is judged from this many '
                                   'classified vCPUs (nova.conf [vsmtio] '
                                   'filter_min_classified_vcpus).',
                    'type': 'integer', 'minimum': 0,
                    'default': _DEFAULTS['filter_min_classified_vcpus']},
                'max_migrations': {
                    'description': 'Most live migrations one plan holds.',
                    'type': 'integer', 'minimum': 1, 'default': 10},
            },
        }

    def pre_execute(self):
        """Fail the audit where the model cannot show any flavor's class."""
        self._pre_execute()
        if not self.compute_model.extended_attributes_enabled:
            raise ExtendedAttributesDisabled()

    def band(self):
        p = self.input_parameters
        return repair.Band(p.min_io_fraction, p.max_io_fraction,
                           p.min_classified_vcpus, p.target_io_fraction)

    def _roots(self):
        return [r for r in (
            getattr(self.config, 'measured_class_secret', None),
            getattr(self.config, 'measured_class_previous_secret', None))
            if r]

    def hosts(self):
        """The plan's view of every compute node of the audit's scope.

        A node with an ``auto`` instance whose class is expected but not
        known (:attr:`vsmtio_nova.mix.Counted.settled`) neither gives nor
        takes guests, and the log says which instance holds it.
        """
        model = self.compute_model
        roots, now = self._roots(), int(self.clock())
        MEMORY.prune(now)
        hosts = []
        for node in model.get_all_compute_nodes().values():
            keys = workload.host_keys(roots, node.hostname)
            m, guests, unsettled = mix.Mix(), [], []
            for inst in model.get_node_instances(node):
                counted = counted_class(inst, node.hostname, keys, now)
                m = m.plus(counted.cls, counted.vcpus)
                if not counted.settled:
                    unsettled.append((inst.uuid, counted.why))
                if movable(inst) and counted.cls in repair.COUNTED:
                    guests.append(repair.Guest(inst.uuid, counted.cls,
                                               counted.vcpus))
            used = model.get_node_used_resources(node)['vcpu']
            accepts = (node.state == element.ServiceState.ONLINE.value and
                       node.status == element.ServiceState.ENABLED.value)
            if unsettled:
                LOG.info('vsmtio mix repair: host %s neither gives nor '
                         'takes guests: instance %s has no verified '
                         'measured class (%s)', node.hostname,
                         unsettled[0][0], unsettled[0][1])
                guests, accepts = [], False
            hosts.append(repair.Host(node.hostname, m,
                                     node.vcpu_capacity - used,
                                     tuple(guests), accepts))
        return hosts

    def do_execute(self, audit=None):
        band = self.band()
        hosts = self.hosts()
        result = repair.plan(hosts, band,
                             self.input_parameters.max_migrations)
        before = repair.stranded(hosts, band)
        unjudged = [h.name for h in hosts
                    if h.mix.classified < max(band.min_classified, 1)]
        LOG.info('vsmtio mix repair: stranded before %s, %d live '
                 'migration(s), stranded after %s; mixes after %s',
                 list(before), len(result.moves),
                 list(result.stranded),
                 {n: tuple(m) for n, m in sorted(result.mixes.items())})
        if hosts and len(unjudged) == len(hosts):
            LOG.warning('vsmtio mix repair: no host holds %d classified '
                        'vCPUs (min_classified_vcpus), so none is judged '
                        'and the plan is empty', band.min_classified)
        self.solution.set_efficacy_indicators(
            stranded_hosts_before=len(before),
            stranded_hosts_after=len(result.stranded),
            unjudged_hosts=len(unjudged),
            vcpus_moved=sum(m.vcpus for m in result.moves),
            instance_migrations_count=len(result.moves))
        model = self.compute_model
        for move in result.moves:
            self.add_action_migrate(
                model.get_instance_by_uuid(move.uuid), 'live',
                model.get_node_by_name(move.source),
                model.get_node_by_name(move.destination))

    def post_execute(self):
        pass
