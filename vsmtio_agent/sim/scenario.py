"""Scenarios: YAML data files describing a host, its VMs and their work.

A scenario names the host size, the VMs (each running one workload model on
N vCPUs), the initial placement of vCPUs on hyperthreads, how long to run,
and optionally overrides of the costs and kernel parameters
(``costs``, ``scheduler``, ``haltpoll``, ``vsmtio``). Files are
validated against :data:`SCHEMA` (JSON Schema); an invalid file gets one
error line naming the field. Shipped scenarios live in ``scenarios/``.

Initial placement ``balanced`` (the default) is what CFS's load balancer
converges to when every vCPU counts as one task: CPU-bound vCPUs first, each
on the hyperthread with the fewest vCPUs so far (lowest cpu id on ties),
then the I/O vCPUs the same way. So in the paper's 2-vCPUs-per-hyperthread
settings each hyperthread holds one vCPU of each kind, and with one vCPU
per hyperthread (Fig. 4) every core pairs a CPU-bound with an I/O-bound
vCPU. Every kernel model starts from the same placement; only RASS moves
vCPUs afterwards. ``explicit`` lists each VM's hyperthreads.
"""

import copy
import dataclasses
import os

import jsonschema
import yaml

from vsmtio_agent.sim import workloads as wl_mod

HERE = os.path.dirname(os.path.abspath(__file__))
SCENARIO_DIR = os.path.join(HERE, 'scenarios')
DATA_DIR = os.path.join(HERE, 'data')

_DIST = {
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
        {'if': {'properties': {'dist': {'const': 'mixture'}}},
         'then': {'required': ['parts']}},
    ],
}

_WORKLOAD = {
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

_NUM = {'type': 'number', 'minimum': 0}

#: The JSON Schema every scenario file must satisfy.
SCHEMA = {
    '$schema': 'https://json-schema.org/draft/2020-12/schema',
    'title': 'vsmtio simulated-host scenario',
    'type': 'object',
    'required': ['name', 'host', 'vms'],
    'additionalProperties': False,
    '$defs': {'dist': _DIST},
    'properties': {
        'name': {'type': 'string', 'pattern': '^[a-z0-9_]+$'},
        'title': {'type': 'string'},
        'description': {'type': 'string'},
        'host': {
            'type': 'object', 'required': ['cores'],
            'properties': {'cores': {'type': 'integer', 'minimum': 1,
                                     'maximum': 256}},
            'additionalProperties': False},
        'duration_s': {'type': 'number', 'exclusiveMinimum': 0,
                       'maximum': 3600},
        'warmup_s': {'type': 'number', 'minimum': 0, 'maximum': 3600},
        'workloads': {'type': 'object',
                      'additionalProperties': _WORKLOAD},
        'vms': {
            'type': 'array', 'minItems': 1,
            'items': {
                'type': 'object', 'required': ['name', 'workload', 'vcpus'],
                'properties': {
                    'name': {'type': 'string',
                             'pattern': '^[A-Za-z0-9_.-]+$'},
                    'workload': {'type': 'string'},
                    'vcpus': {'type': 'integer', 'minimum': 1,
                              'maximum': 4096},
                    'threads': {'type': 'array',
                                'items': {'type': 'integer',
                                          'minimum': 0}},
                    # a tenant shaping its behaviour to game the policy:
                    # reported apart from the host's classes
                    'adversary': {'type': 'boolean'},
                },
                'additionalProperties': False}},
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
                'cache_share_kib': _NUM,
                'vm_exit_ns': _NUM, 'context_switch_ns': _NUM,
                'l1d_flush_ns': _NUM, 'ipi_ns': _NUM,
                'retention_resume_ns': _NUM,
            },
            'additionalProperties': False},
        'scheduler': {
            'type': 'object',
            'properties': {
                'latency_us': {'type': 'number', 'exclusiveMinimum': 0},
                'min_granularity_us': {'type': 'number',
                                       'exclusiveMinimum': 0},
                'wakeup_granularity_us': _NUM,
                # 0 (no VM cgroups) or cpu.shares' own range
                'vm_cgroup_shares': {'type': 'integer', 'anyOf': [
                    {'const': 0}, {'minimum': 2, 'maximum': 262144}]},
                'tick_hz': {'type': 'number', 'minimum': 100,
                            'maximum': 1000},
                'load_half_life_ms': {'type': 'number',
                                      'exclusiveMinimum': 0}},
            'additionalProperties': False},
        'haltpoll': {
            'type': 'object',
            'properties': {
                'max_ns': {'type': 'integer', 'minimum': 0},
                'grow': {'type': 'integer', 'minimum': 1},
                'grow_start_ns': {'type': 'integer', 'minimum': 0},
                'shrink': {'type': 'integer', 'minimum': 0},
                'enhanced_max_ns': {'type': 'integer', 'minimum': 0}},
            'additionalProperties': False},
        'vsmtio': {
            'type': 'object',
            'properties': {'retention_yields': {'type': 'boolean'}},
            'additionalProperties': False},
        'paper': {'type': 'object'},
    },
}


class ScenarioError(ValueError):
    """A scenario cannot be loaded; the message is one line."""


def _load_yaml(path):
    try:
        with open(path) as f:
            return yaml.safe_load(f)
    except OSError as e:
        raise ScenarioError('cannot read %s: %s' % (path, e.strerror))
    except yaml.YAMLError as e:
        mark = getattr(e, 'problem_mark', None)
        where = (' line %d' % (mark.line + 1)) if mark else ''
        raise ScenarioError('%s%s: not valid YAML (%s)'
                            % (path, where, getattr(e, 'problem', e)))


def _data(name):
    return _load_yaml(os.path.join(DATA_DIR, name))


def _merge(base, over):
    out = copy.deepcopy(base)
    for k, v in (over or {}).items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = _merge(out[k], v)
        else:
            out[k] = v
    return out


def _field(error):
    path = '.'.join(str(p) for p in error.absolute_path)
    return path or '(top level)'


@dataclasses.dataclass
class Scenario:
    """A validated scenario with the defaults filled in."""

    name: str
    title: str
    source: str
    cores: int
    vms: list
    workloads: dict
    costs: dict
    scheduler: dict
    haltpoll: dict
    vsmtio: dict
    duration_s: float
    warmup_s: float
    placement_policy: str
    initial_timeout_ns: float
    paper: dict

    @property
    def workload_list(self):
        return [self.workloads[k] for k in sorted(self.workloads)]

    @property
    def adversaries(self):
        """Names of the VMs marked as gaming the policy."""
        return frozenset(vm['name'] for vm in self.vms
                         if vm.get('adversary'))

    @property
    def n_vcpus(self):
        return sum(vm['vcpus'] for vm in self.vms)

    def placement(self):
        """Yield ``(vm, index, workload, cpu)`` for every vCPU."""
        n_threads = 2 * self.cores
        if self.placement_policy == 'explicit':
            for vm in self.vms:
                wl = self.workloads[vm['workload']]
                for i in range(vm['vcpus']):
                    yield vm['name'], i, wl, vm['threads'][i]
            return
        load = [0] * n_threads
        order = sorted(self.vms, key=lambda vm: (
            self.workloads[vm['workload']].kind != wl_mod.CPU))
        for vm in order:
            wl = self.workloads[vm['workload']]
            for i in range(vm['vcpus']):
                cpu = min(range(n_threads), key=lambda c: (load[c], c))
                load[cpu] += 1
                yield vm['name'], i, wl, cpu


def from_dict(doc, source='<scenario>'):
    """Validate ``doc`` and build a :class:`Scenario`; ScenarioError."""
    if not isinstance(doc, dict):
        raise ScenarioError('%s: a scenario is a YAML mapping' % source)
    validator = jsonschema.Draft202012Validator(SCHEMA)
    errors = sorted(validator.iter_errors(doc),
                    key=lambda e: (len(list(e.absolute_path)), e.message))
    if errors:
        e = errors[0]
        raise ScenarioError('%s: %s: %s' % (source, _field(e), e.message))
    # keys starting with '_' hold YAML anchors shared by workloads
    library = {k: v for k, v in _data('workloads.yaml').items()
               if not k.startswith('_')}
    lib_errors = list(jsonschema.Draft202012Validator(
        {'$defs': {'dist': _DIST}, 'type': 'object',
         'additionalProperties': _WORKLOAD}).iter_errors(library))
    if lib_errors:  # pragma: no cover - shipped data is tested
        raise ScenarioError('workloads.yaml: %s: %s'
                            % (_field(lib_errors[0]), lib_errors[0].message))
    specs = dict(library)
    specs.update(doc.get('workloads') or {})
    used = {}
    names = set()
    for n, vm in enumerate(doc['vms']):
        if vm['name'] in names:
            raise ScenarioError('%s: vms.%d.name: duplicate VM name %r'
                                % (source, n, vm['name']))
        names.add(vm['name'])
        w = vm['workload']
        if w not in specs:
            raise ScenarioError('%s: vms.%d.workload: unknown workload %r'
                                % (source, n, w))
        used[w] = wl_mod.Workload.from_dict(w, specs[w])
    cores = doc['host']['cores']
    placement = doc.get('placement', 'balanced')
    for n, vm in enumerate(doc['vms']):
        threads = vm.get('threads')
        if placement == 'explicit':
            if threads is None or len(threads) != vm['vcpus']:
                raise ScenarioError(
                    '%s: vms.%d.threads: explicit placement needs one '
                    'hyperthread per vCPU' % (source, n))
            bad = [t for t in threads if t >= 2 * cores]
            if bad:
                raise ScenarioError('%s: vms.%d.threads: hyperthread %d '
                                    'does not exist on %d cores'
                                    % (source, n, bad[0], cores))
    costs = _merge(_data('costs.yaml'), doc.get('costs'))
    kparams = _data('kernels.yaml')
    sched = _merge(kparams['scheduler'], doc.get('scheduler'))
    haltpoll = _merge(kparams['haltpoll'], doc.get('haltpoll'))
    vsmtio = _merge(kparams['vsmtio'], doc.get('vsmtio'))
    duration = float(doc.get('duration_s', 2.0))
    warmup = float(doc.get('warmup_s', 0.5))
    if warmup >= duration:
        raise ScenarioError('%s: warmup_s: must be shorter than duration_s '
                            '(%g >= %g)' % (source, warmup, duration))
    switch_ns = (costs['vm_exit_ns'] + costs['context_switch_ns']
                 + costs['l1d_flush_ns'] + costs['ipi_ns'])
    pair = costs['smt_pair_speedup']
    if pair['min'] > pair['max']:
        raise ScenarioError('%s: costs.smt_pair_speedup: min must not '
                            'exceed max (%g > %g)'
                            % (source, pair['min'], pair['max']))
    init_t = doc.get('initial_timeout_us')
    init_ns = init_t * 1e3 if init_t else 2.0 * switch_ns
    return Scenario(
        name=doc['name'], title=doc.get('title', doc['name']),
        source=source, cores=cores, vms=list(doc['vms']), workloads=used,
        costs=costs, scheduler=sched, haltpoll=haltpoll, vsmtio=vsmtio,
        duration_s=duration, warmup_s=warmup, placement_policy=placement,
        initial_timeout_ns=init_ns, paper=doc.get('paper') or {})


def shipped():
    """Names of the scenarios shipped with vsmtio, sorted."""
    return sorted(f[:-5] for f in os.listdir(SCENARIO_DIR)
                  if f.endswith('.yaml'))


def load(name_or_path):
    """Load a shipped scenario by name, or a scenario file by path."""
    if os.sep in name_or_path or name_or_path.endswith(('.yaml', '.yml')):
        path = name_or_path
    else:
        path = os.path.join(SCENARIO_DIR, name_or_path + '.yaml')
        if not os.path.exists(path):
            raise ScenarioError('unknown scenario %r (see vsmtio-sim list)'
                                % name_or_path)
    return from_dict(_load_yaml(path), source=os.path.basename(path))
