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
        self._pre_execute()

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
