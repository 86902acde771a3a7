"""Watcher goal ``vsmtio_workload_mix`` and strategy ``vsmtio_mix_repair``.

Loaded by Watcher's decision engine through its ``watcher_goals`` and
``watcher_strategies`` entry points (install ``vsmtio`` into Watcher's
environment). The strategy reads each host's instances from Watcher's
compute model, counts them as nova-compute does (the flavor's declared
``vsmtio:workload``, or for ``auto`` the agent's signed measured class),
asks :func:`vsmtio_nova.watcher.repair.plan` for the live migrations
that bring stranded hosts back into the band, and adds them to the
solution. It moves only active, unlocked instances not excluded from
Watcher, and only onto enabled, up hosts of the audit's scope.
"""

import time
import typing

from oslo_config import cfg
from oslo_log import log as logging
from watcher.decision_engine.goal import base as goal_base
from watcher.decision_engine.goal.efficacy import specs
from watcher.decision_engine.model import element
from watcher.decision_engine.strategy.strategies import base

from vsmtio_contract import workload
from vsmtio_nova import conf as vsmtio_conf
from vsmtio_nova import mix
from vsmtio_nova.watcher import repair

LOG = logging.getLogger(__name__)

GOAL = 'vsmtio_workload_mix'
_DEFAULTS = {o.name: o.default for o in vsmtio_conf.vsmtio_opts}


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
        return specs.Unclassified()


class _Flavor(typing.NamedTuple):
    """What :func:`~vsmtio_nova.mix.classify_flavor` reads."""

    name: str
    extra_specs: dict
    vcpus: int


def counted_class(instance, host, secret, now):
    """``(WorkloadClass, vcpus)`` of an instance, as its compute counts it.

    The same rule as :func:`vsmtio_nova.compute.stats.classify`, on
    Watcher's model instead of a nova object: the declared class, and for
    an ``auto`` flavor a measured class only when it is signed for this
    instance on this host and not expired.
    """
    cls, vcpus = mix.classify_flavor(_Flavor(
        instance.name, instance.flavor_extra_specs or {}, instance.vcpus))
    if cls is not workload.WorkloadClass.AUTO or not secret:
        return cls, vcpus
    value = (instance.metadata or {}).get(workload.MEASURED_CLASS_KEY)
    if value is None:
        return cls, vcpus
    measured, _why = workload.check_measured(secret, instance.uuid, value,
                                             host, now)
    return (measured or cls), vcpus


def movable(instance):
    return (instance.state == element.InstanceState.ACTIVE.value
            and not instance.locked and not instance.watcher_exclude)


class WorkloadMixRepair(base.BaseStrategy):
    """Live-migrate instances so that stranded hosts return to the band."""

    MIGRATION = 'migrate'

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
                       help='nova.conf [vsmtio] measured_class_secret: '
                            'with it, an auto instance counts with the '
                            'class its agent measured and signed, as on '
                            'its compute host; unset, auto instances are '
                            'not counted.'),
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
        self._pre_execute()

    def band(self):
        p = self.input_parameters
        return repair.Band(p.min_io_fraction, p.max_io_fraction,
                           p.min_classified_vcpus, p.target_io_fraction)

    def hosts(self):
        """The plan's view of every compute node of the audit's scope."""
        model = self.compute_model
        secret, now = self.config.measured_class_secret, int(time.time())
        hosts = []
        for node in model.get_all_compute_nodes().values():
            m, guests = mix.Mix(), []
            for inst in model.get_node_instances(node):
                cls, vcpus = counted_class(inst, node.hostname, secret, now)
                m = m.plus(cls, vcpus)
                if movable(inst) and cls in repair.COUNTED:
                    guests.append(repair.Guest(inst.uuid, cls, vcpus))
            used = model.get_node_used_resources(node)['vcpu']
            accepts = (node.state == element.ServiceState.ONLINE.value and
                       node.status == element.ServiceState.ENABLED.value)
            hosts.append(repair.Host(node.hostname, m,
                                     node.vcpu_capacity - used,
                                     tuple(guests), accepts))
        return hosts

    def do_execute(self, audit=None):
        band = self.band()
        hosts = self.hosts()
        result = repair.plan(hosts, band,
                             self.input_parameters.max_migrations)
        LOG.info('vsmtio mix repair: stranded before %s, %d live '
                 'migration(s), stranded after %s; mixes after %s',
                 list(repair.stranded(hosts, band)), len(result.moves),
                 list(result.stranded),
                 {n: tuple(m) for n, m in sorted(result.mixes.items())})
        model = self.compute_model
        for move in result.moves:
            self.add_action_migrate(
                model.get_instance_by_uuid(move.uuid), 'live',
                model.get_node_by_name(move.source),
                model.get_node_by_name(move.destination))

    def post_execute(self):
        pass
