"""The scenario file format as JSON Schema (draft 2020-12).

The format's shape lives here, apart from the loader (:mod:`scenario`),
which applies it after the checks JSON Schema cannot make (non-finite
numbers, alias expansion) and turns a valid document into a
:class:`~vsmtio_sim.scenario.Scenario`. doc/source/simulator.rst lists
every field with its default.
"""

from vsmtio_sim import cpuidle
from vsmtio_sim import workloads as wl_mod

DIST = {
    'type': 'object',
    'required': ['dist'],
    'properties': {
        'dist': {'enum': ['const', 'exponential', 'lognormal', 'uniform',
                          'mixture']},
        'mean_us': {'type': 'number', 'exclusiveMinimum': 0},
        'sigma': {'type': 'number', 'minimum': 0, 'maximum': 5},
        'low_us': {'type': 'number', 'minimum': 0},
        'high_us': {'type': 'number', 'exclusiveMinimum': 0},
        'weight': {'type': 'number', 'exclusiveMinimum': 0},
        'parts': {'type': 'array', 'minItems': 1,
                  'items': {'$ref': '#/$defs/dist'}},
    },
    'additionalProperties': False,
    'allOf': [
        {'if': {'properties': {'dist': {'enum': [
            'const', 'exponential', 'lognormal']}}},
         'then': {'required': ['mean_us']}},
        {'if': {'properties': {'dist': {'const': 'uniform'}}},
         'then': {'required': ['low_us', 'high_us']}},
        # every part of a mixture says how often it is drawn
        {'if': {'properties': {'dist': {'const': 'mixture'}}},
         'then': {'required': ['parts'], 'properties': {'parts': {
             'items': {'required': ['weight']}}}}},
    ],
}

WORKLOAD = {
    'type': 'object',
    'required': ['kind', 'cpi', 'working_set_kib'],
    'properties': {
        'kind': {'enum': list(wl_mod.KINDS)},
        'working_set_kib': {'type': 'number', 'minimum': 0,
                            'maximum': 1048576},
        'cpi': {'type': 'object', 'required': ['base', 'miss'],
                'properties': {
                    'base': {'type': 'number', 'exclusiveMinimum': 0,
                             'maximum': 50},
                    'miss': {'type': 'number', 'minimum': 0,
                             'maximum': 50}},
                'additionalProperties': False},
        'burst': {'$ref': '#/$defs/dist'},
        'device': {'$ref': '#/$defs/dist'},
        'irq': {
            'type': 'object', 'required': ['steering', 'handler'],
            'properties': {
                'steering': {'enum': list(wl_mod.STEERINGS)},
                'queues': {'type': 'integer', 'minimum': 1,
                           'maximum': 4096},
                'handler': {'$ref': '#/$defs/dist'},
                'description': {'type': 'string'}},
            'additionalProperties': False},
        'description': {'type': 'string'},
    },
    'additionalProperties': False,
    'if': {'properties': {'kind': {'enum': ['io', 'mixed']}}},
    'then': {'required': ['burst', 'device']},
}

NUM = {'type': 'number', 'minimum': 0}

# The host's idle states (costs.yaml ``host_idle``, cpuidle.py). Spelled
# out, not left to the shipped value's type: a host profile writes its
# own table here, and a state without an exit latency would otherwise
# fail only when the engine builds its governor.
HOST_IDLE = {
    'type': 'object',
    'properties': {
        'governor': {'enum': list(cpuidle.GOVERNORS)},
        'per_core': {'type': 'boolean'},
        'states': {
            'type': 'array', 'minItems': 1,
            'items': {
                'type': 'object',
                'required': ['name', 'exit_latency_us',
                             'target_residency_us'],
                'properties': {
                    'name': {'type': 'string', 'minLength': 1},
                    'exit_latency_us': NUM,
                    'target_residency_us': NUM},
                'additionalProperties': False}}},
    'additionalProperties': False,
}
SECONDS = {'type': 'number', 'exclusiveMinimum': 0, 'maximum': 3600}

VM = {
    'type': 'object', 'required': ['name', 'workload', 'vcpus'],
    'properties': {
        'name': {'type': 'string', 'pattern': r'^[A-Za-z0-9_.-]+\Z'},
        # the workload from the start (before the first phase)
        'workload': {'type': 'string'},
        'vcpus': {'type': 'integer', 'minimum': 1, 'maximum': 4096},
        'threads': {'type': 'array',
                    'items': {'type': 'integer', 'minimum': 0}},
        # a tenant shaping its behaviour to game the policy: reported
        # apart from the host's classes
        'adversary': {'type': 'boolean'},
        # the tenant (nova project) that owns the VM, for trust domains;
        # unset: the scenario's one tenant (its name)
        'project': {'type': 'string', 'pattern': r'^[A-Za-z0-9_.-]+\Z'},
        # the workload changes at these simulated times
        'phases': {
            'type': 'array', 'minItems': 1,
            'items': {'type': 'object', 'required': ['at_s', 'workload'],
                      'properties': {'at_s': SECONDS,
                                     'workload': {'type': 'string'}},
                      'additionalProperties': False}},
        # vm: every vCPU changes at once; vcpu: vCPU i of n changes
        # i / n x phase_spread_s later
        'phase_sync': {'enum': ['vm', 'vcpu']},
        'phase_spread_s': SECONDS,
        # the schedule (the first workload from 0, then the phases)
        # starts again every phase_cycle_s
        'phase_cycle_s': SECONDS,
    },
    'additionalProperties': False,
    'dependentRequired': {'phase_sync': ['phases'],
                          'phase_spread_s': ['phases'],
                          'phase_cycle_s': ['phases']},
    'if': {'properties': {'phase_sync': {'const': 'vcpu'}},
           'required': ['phase_sync']},
    'then': {'required': ['phase_spread_s']},
}

#: The JSON Schema every scenario file must satisfy.
SCHEMA = {
    '$schema': 'https://json-schema.org/draft/2020-12/schema',
    'title': 'vsmtio simulated-host scenario',
    'type': 'object',
    'required': ['name', 'host', 'vms'],
    'additionalProperties': False,
    '$defs': {'dist': DIST},
    'properties': {
        'name': {'type': 'string', 'pattern': r'^[a-z0-9_]+\Z'},
        'title': {'type': 'string'},
        'description': {'type': 'string'},
        'host': {
            'type': 'object', 'required': ['cores'],
            'properties': {
                'cores': {'type': 'integer', 'minimum': 1, 'maximum': 256},
                'sockets': {'type': 'integer', 'minimum': 1, 'maximum': 8},
                # each socket's last-level cache: its hyperthreads share
                # it (llc_share_kib each, data/host.yaml, when unset)
                'llc_kib': {'type': 'number', 'exclusiveMinimum': 0,
                            'maximum': 1048576},
                'llc_share_kib': {'type': 'number', 'exclusiveMinimum': 0,
                                  'maximum': 1048576},
                'remote_memory_latency_ratio': {
                    'type': 'number', 'minimum': 1, 'maximum': 10}},
            'additionalProperties': False},
        'duration_s': SECONDS,
        'warmup_s': {'type': 'number', 'minimum': 0, 'maximum': 3600},
        'workloads': {'type': 'object',
                      'additionalProperties': WORKLOAD},
        'vms': {'type': 'array', 'minItems': 1, 'items': VM},
        'placement': {'enum': ['balanced', 'explicit']},
        'initial_timeout_us': {'type': 'number', 'exclusiveMinimum': 0},
        'costs': {
            'type': 'object',
            'properties': {
                'cpu_ghz': {'type': 'number', 'exclusiveMinimum': 0},
                'sibling_switching_speed': {
                    'type': 'number', 'exclusiveMinimum': 0, 'maximum': 1},
                'sibling_polling_speed': {
                    'type': 'number', 'exclusiveMinimum': 0, 'maximum': 1},
                'sibling_retaining_speed': {
                    'type': 'number', 'exclusiveMinimum': 0, 'maximum': 1},
                'smt_pair_speedup': {
                    'type': 'object', 'required': ['min', 'max'],
                    'properties': {
                        'min': {'type': 'number', 'minimum': 1,
                                'maximum': 2},
                        'max': {'type': 'number', 'minimum': 1,
                                'maximum': 2}},
                    'additionalProperties': False},
                'cache_refill_gbps': {'type': 'number',
                                      'exclusiveMinimum': 0},
                'cache_share_kib': NUM,
                'vm_exit_ns': NUM, 'context_switch_ns': NUM,
                'l1d_flush_ns': NUM, 'ipi_ns': NUM,
                'retention_resume_ns': NUM,
                'host_idle': HOST_IDLE,
            },
            # costs.yaml may grow inputs a release later: each is checked
            # against its shipped value's type (_check_overrides)
            'additionalProperties': True},
        'scheduler': {
            'type': 'object',
            'properties': {
                'policy': {'enum': ['cfs', 'eevdf']},
                'base_slice_us': {'type': 'number', 'exclusiveMinimum': 0},
                'latency_us': {'type': 'number', 'exclusiveMinimum': 0},
                'min_granularity_us': {'type': 'number',
                                       'exclusiveMinimum': 0},
                'wakeup_granularity_us': NUM,
                # 0 (no VM cgroups) or cpu.shares' own range
                'vm_cgroup_shares': {'type': 'integer', 'anyOf': [
                    {'const': 0}, {'minimum': 2, 'maximum': 262144}]},
                'tick_hz': {'type': 'number', 'minimum': 100,
                            'maximum': 1000},
                'load_half_life_ms': {'type': 'number',
                                      'exclusiveMinimum': 0}},
            'additionalProperties': True},
        'haltpoll': {
            'type': 'object',
            'properties': {
                'max_ns': {'type': 'integer', 'minimum': 0},
                'grow': {'type': 'integer', 'minimum': 1},
                'grow_start_ns': {'type': 'integer', 'minimum': 0},
                'shrink': {'type': 'integer', 'minimum': 0},
                'enhanced_max_ns': {'type': 'integer', 'minimum': 0}},
            'additionalProperties': True},
        'vsmtio': {
            'type': 'object',
            'properties': {'retention_yields': {'type': 'boolean'}},
            'additionalProperties': True},
        'paper': {'type': 'object'},
    },
}
