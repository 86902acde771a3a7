"""Scenarios: YAML data files describing a host, its VMs and their work.

A scenario names the host (its cores and, optionally, its sockets and
their last-level caches), the VMs (each running one workload model on N
vCPUs, or a schedule of workloads in time phases), the initial placement
of vCPUs on hyperthreads, how long to run, and optionally overrides of the
costs and kernel parameters (``costs``, ``scheduler``, ``haltpoll``,
``vsmtio``). Files are validated against the JSON Schema of
:mod:`vsmtio_sim.schema` after the checks JSON Schema cannot make
(non-finite numbers, alias expansion); an invalid file gets one error
line naming the field.
Shipped scenarios live in ``scenarios/``; doc/source/simulator.rst lists
every field with its default and the release that added it.

A file written for the first release still loads: a field later releases
made required gets the default it would have had (:data:`_DEFAULTS`), a
field they retired is dropped (:data:`_RETIRED`), each with a
:class:`ScenarioDeprecationWarning` saying what to write instead.

Initial placement ``balanced`` (the default) is what CFS's load balancer
converges to when every vCPU counts as one task: CPU-bound vCPUs first, each
on the hyperthread with the fewest vCPUs so far (lowest cpu id on ties),
then the I/O vCPUs the same way. So in the paper's 2-vCPUs-per-hyperthread
settings each hyperthread holds one vCPU of each kind, and with one vCPU
per hyperthread (Fig. 4) every core pairs a CPU-bound with an I/O-bound
vCPU. Every kernel model starts from the same placement; only RASS moves
vCPUs afterwards. ``explicit`` lists each VM's hyperthreads. A VM with
phases is placed by the kind of its first workload.
"""

import copy
import dataclasses
import heapq
import math
import os
import warnings

import jsonschema
import yaml

from vsmtio_sim import schema
from vsmtio_sim import workloads as wl_mod

HERE = os.path.dirname(os.path.abspath(__file__))
SCENARIO_DIR = os.path.join(HERE, 'scenarios')
DATA_DIR = os.path.join(HERE, 'data')

#: At most this many YAML nodes once every alias is expanded: a shipped
#: scenario has a few hundred; a few nested aliases can otherwise stand
#: for billions ("billion laughs"), which every later walk would visit.
MAX_NODES = 100000

#: At most this many levels of YAML collections: a shipped scenario nests
#: five deep. PyYAML composes a document recursively, as does every walk
#: of it after: a deeper one would end in a RecursionError.
MAX_DEPTH = 32

#: Fields of the first release's format that a later release replaced:
#: dropped on load, with a warning naming what replaced them.
_RETIRED = {
    ('costs', 'smt_corun_speedup'):
        'use costs.smt_pair_speedup (the range every pair falls in)',
    ('costs', 'reference_cpi'):
        'each pair\'s co-run speed now follows from its two CPI stacks',
    ('costs', 'cache_refill_ns'):
        'use costs.cache_refill_gbps and each workload\'s working_set_kib',
}

#: Fields a later release made required, with the default a file without
#: them gets: a workload's working set by its kind, the estimates of
#: data/workloads.yaml (analytics stream through more than any cache
#: share; a request server touches about an L2's worth).
_DEFAULTS = {'working_set_kib': {wl_mod.CPU: 4096, wl_mod.IO: 256,
                                 wl_mod.MIXED: 256}}

#: Host fields and their defaults (data/host.yaml has their sources).
HOST_FIELDS = ('sockets', 'llc_kib', 'llc_share_kib',
               'remote_memory_latency_ratio')


class ScenarioError(ValueError):
    """A scenario cannot be loaded; the message is one line."""


class ScenarioDeprecationWarning(FutureWarning):
    """A scenario uses a field of an earlier release's format.

    A FutureWarning, shown by default: the file's author is its reader.
    """


class _Loader(yaml.SafeLoader):
    """YAML's safe loader, refusing deep nesting and alias bombs."""

    _depth = 0

    def compose_node(self, parent, index):
        if self._depth >= MAX_DEPTH:
            mark = self.peek_event().start_mark
            raise ScenarioError('line %d: nested deeper than %d levels'
                                % (mark.line + 1, MAX_DEPTH))
        self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_document(self, node):
        if _expanded_size(node, {}, set()) > MAX_NODES:
            raise ScenarioError(
                'line %d: more than %d YAML nodes once aliases are '
                'expanded (an alias bomb?)'
                % (node.start_mark.line + 1, MAX_NODES))
        return super().construct_document(node)


def _expanded_size(node, sizes, active):
    """Nodes under ``node`` with every alias expanded, capped early."""
    key = id(node)
    if key in sizes:
        return sizes[key]
    if key in active:               # an alias of its own ancestor
        return MAX_NODES + 1
    active.add(key)
    total = 1
    if isinstance(node, yaml.SequenceNode):
        children = node.value
    elif isinstance(node, yaml.MappingNode):
        children = [n for pair in node.value for n in pair]
    else:
        children = ()
    for child in children:
        total += _expanded_size(child, sizes, active)
        if total > MAX_NODES:
            break
    active.discard(key)
    sizes[key] = total
    return total


def _load_yaml(path):
    try:
        with open(path) as f:
            return yaml.load(f, Loader=_Loader)   # nosec: a SafeLoader
    except OSError as e:
        raise ScenarioError('cannot read %s: %s' % (path, e.strerror))
    except ScenarioError as e:
        raise ScenarioError('%s %s' % (path, e))
    except yaml.YAMLError as e:
        mark = getattr(e, 'problem_mark', None)
        where = (' line %d' % (mark.line + 1)) if mark else ''
        # a reader's error has no ``problem``, and says where on a line
        # of its own: its first line is the problem
        problem = str(getattr(e, 'problem', None) or e).splitlines()
        raise ScenarioError('%s%s: not valid YAML (%s)'
                            % (path, where, problem[0] if problem else e))
    except (ValueError, TypeError, AttributeError, OverflowError) as e:
        # PyYAML's constructors of tagged values let their own errors out
        # (a !!timestamp that is no date, a day out of range)
        raise ScenarioError('%s: not valid YAML (%s: %s)'
                            % (path, type(e).__name__, e))


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


def _not_plain(node, path=(), seen=None):
    """(path, what) of the first NaN, infinity or key that is not text.

    None if there is none. Each container is walked once, however often
    aliases repeat it. A key YAML read as a number or a date would be
    compared with text keys by the code that sorts them.
    """
    if isinstance(node, float):
        return None if math.isfinite(node) else (path,
                                                 'not a finite number')
    if isinstance(node, dict):
        for key in node:
            if not isinstance(key, str):
                return path, 'key %s is not text' % _short(key)
        items = node.items()
    elif isinstance(node, list):
        items = enumerate(node)
    else:
        return None
    seen = set() if seen is None else seen
    if id(node) in seen:
        return None
    seen.add(id(node))
    for k, v in items:
        found = _not_plain(v, path + (k,), seen)
        if found is not None:
            return found
    return None


def _short(value):
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + '...'


def _deprecated(source, what):
    warnings.warn('%s: %s' % (source, what), ScenarioDeprecationWarning,
                  stacklevel=4)


def _upgrade(doc, source):
    """A copy of ``doc`` in this release's format (see _RETIRED)."""
    doc = copy.deepcopy(doc)
    for (group, key), instead in sorted(_RETIRED.items()):
        section = doc.get(group)
        if isinstance(section, dict) and key in section:
            del section[key]
            _deprecated(source, '%s.%s is retired and ignored: %s'
                        % (group, key, instead))
    specs = doc.get('workloads')
    for name, spec in sorted((specs or {}).items()
                             if isinstance(specs, dict) else ()):
        kind = spec.get('kind') if isinstance(spec, dict) else None
        if kind in wl_mod.KINDS and 'working_set_kib' not in spec:
            value = _DEFAULTS['working_set_kib'][kind]
            spec['working_set_kib'] = value
            _deprecated(source, 'workloads.%s.working_set_kib is missing '
                        '(required since the second release); using %d, '
                        'the default for kind %s' % (name, value, kind))
    return doc


def _check_data(doc, source):
    """ScenarioError unless ``doc`` is a mapping of plain data.

    Non-finite numbers first: JSON Schema lets NaN through every bound;
    and keys that are not text, before anything sorts them.
    """
    if not isinstance(doc, dict):
        raise ScenarioError('%s: a scenario is a YAML mapping' % source)
    check_plain(doc, source)


def check_plain(doc, source):
    """ScenarioError naming the first NaN, infinity or key not text."""
    found = _not_plain(doc)
    if found is not None:
        where, what = found
        raise ScenarioError('%s: %s: %s' % (
            source, '.'.join(str(p) for p in where) or '(top level)', what))


def validate(doc, source, spec=schema.SCHEMA):
    """Raise ScenarioError, one line naming the field, unless ``doc`` fits.

    ``spec`` is the scenario's schema, or another JSON Schema whose
    documents get the same one-line errors (a host profile's).
    """
    check_plain(doc, source)
    validator = jsonschema.Draft202012Validator(spec)
    errors = sorted(validator.iter_errors(doc),
                    key=lambda e: (len(list(e.absolute_path)), e.message))
    if errors:
        e = errors[0]
        raise ScenarioError('%s: %s: %s' % (source, _field(e), e.message))


#: The groups of inputs a scenario overrides, and where they ship.
INPUT_GROUPS = ('costs', 'scheduler', 'haltpoll', 'vsmtio')


def _shipped_inputs():
    return dict(_data('kernels.yaml'), costs=_data('costs.yaml'))


def check_inputs(sections, source):
    """ScenarioError unless ``sections`` are overrides a scenario could make.

    ``sections`` maps groups of :data:`INPUT_GROUPS` to overrides. They
    get a scenario's own checks and one-line errors (plain finite data,
    the schema's section, a shipped input of the shipped type), so inputs
    from elsewhere than a scenario file (a host profile) are refused as
    a scenario's would be, and before anything runs.
    """
    if not isinstance(sections, dict):
        raise ScenarioError('%s: inputs are a mapping of groups' % source)
    unknown = sorted(set(sections) - set(INPUT_GROUPS), key=str)
    if unknown:
        raise ScenarioError('%s: %r is not a group of inputs (%s)'
                            % (source, unknown[0], ', '.join(INPUT_GROUPS)))
    props = schema.SCHEMA['properties']
    validate(sections, source, {
        'type': 'object', '$defs': schema.SCHEMA['$defs'],
        'properties': {g: props[g] for g in INPUT_GROUPS}})
    shipped = _shipped_inputs()
    _check_overrides(sections, {g: shipped[g] for g in sections}, source)


def with_inputs(doc, sections):
    """A copy of scenario ``doc`` with ``sections``' inputs over its own.

    Deep, as a scenario's overrides land over the shipped inputs: a key
    ``sections`` does not name keeps the scenario's value (or the shipped
    one). Nothing is validated here: :func:`from_dict` does it.
    """
    if not isinstance(doc, dict):
        return doc                      # from_dict says what is wrong
    doc = copy.deepcopy(doc)
    for group, over in sections.items():
        doc[group] = _merge(doc.get(group) or {}, over)
    return doc


def _check_overrides(doc, shipped, source):
    """Every override names a shipped input and keeps its type.

    The schema lists the inputs it knew when it was written; one the
    shipped data files gained since is checked here against its shipped
    value, so a data file can grow without the schema.
    """
    for group, base in shipped.items():
        for key, value in (doc.get(group) or {}).items():
            if key not in base:
                raise ScenarioError(
                    '%s: %s: additional properties are not allowed (%r '
                    'is not an input)' % (source, group, key))
            want = base[key]
            ok = (isinstance(value, bool) == isinstance(want, bool)
                  and isinstance(value, (int, float)) ==
                  isinstance(want, (int, float))
                  and isinstance(value, dict) == isinstance(want, dict))
            if not ok:
                raise ScenarioError('%s: %s.%s: must be like the shipped '
                                    '%r' % (source, group, key, want))


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
    host: dict = dataclasses.field(default_factory=dict)
    #: every group of data/kernels.yaml with the scenario's overrides
    kernel: dict = dataclasses.field(default_factory=dict)

    @property
    def workload_list(self):
        return [self.workloads[k] for k in sorted(self.workloads)]

    @property
    def adversaries(self):
        """Names of the VMs marked as gaming the policy."""
        return frozenset(vm['name'] for vm in self.vms
                         if vm.get('adversary'))

    @property
    def projects(self):
        """``{vm name: project}``: unset, the scenario's one tenant."""
        return {vm['name']: vm.get('project', self.name)
                for vm in self.vms}

    @property
    def n_vcpus(self):
        return sum(vm['vcpus'] for vm in self.vms)

    @property
    def sockets(self):
        return self.host.get('sockets', 1)

    def socket_of(self, cpu):
        """The socket of hyperthread ``cpu`` (cores split evenly)."""
        return (cpu % self.cores) // (self.cores // self.sockets)

    def vm_kind(self, name):
        """A VM's class: its workloads' kind, ``mixed`` where phases mix."""
        vm = next(v for v in self.vms if v['name'] == name)
        kinds = {self.workloads[w].kind for w in _vm_workloads(vm)}
        return kinds.pop() if len(kinds) == 1 else wl_mod.MIXED

    def align(self, start_s, length_s):
        """A measuring window of whole phase cycles after one-off changes.

        ``(start, length)`` no earlier and no shorter than asked: it
        starts after every phase change that does not repeat and, where
        VMs cycle, on a multiple of the cycles' least common multiple and
        lasts whole such periods. So kernels measured over windows that
        begin at different times still see the same phases, in the same
        proportions; without phases the window is as asked.
        """
        start, length = start_s, length_s
        period_ms = 0
        for vm in self.vms:
            phases = vm.get('phases')
            if not phases:
                continue
            cycle = vm.get('phase_cycle_s')
            if cycle:
                ms = int(round(cycle * 1000))
                period_ms = math.lcm(period_ms, ms) if period_ms else ms
            else:
                start = max(start, phases[-1]['at_s']
                            + vm.get('phase_spread_s', 0.0))
        if period_ms:
            period = period_ms / 1000.0
            start = math.ceil(start / period - 1e-9) * period
            length = max(1, math.ceil(length / period - 1e-9)) * period
        return start, length

    def phase_changes(self):
        """Yield ``(t_s, vm, index, workload)`` in time order.

        Without end for VMs whose phases cycle; nothing for VMs without
        phases.
        """
        heap = []
        for vm in self.vms:
            steps = [(0.0, vm['workload'])] + [
                (p['at_s'], p['workload']) for p in vm.get('phases', ())]
            if len(steps) < 2:
                continue
            n = vm['vcpus']
            spread = (vm.get('phase_spread_s', 0.0)
                      if vm.get('phase_sync') == 'vcpu' else 0.0)
            for i in range(n):
                heapq.heappush(heap, (steps[1][0] + spread * i / n,
                                      vm['name'], i, 1, 0, steps, spread,
                                      vm.get('phase_cycle_s')))
        while heap:
            t, name, i, k, cycle, steps, spread, period = heapq.heappop(
                heap)
            yield t, name, i, self.workloads[steps[k][1]]
            k += 1
            if k == len(steps):
                if not period:
                    continue
                k, cycle = 0, cycle + 1
            n = next(v['vcpus'] for v in self.vms if v['name'] == name)
            at = steps[k][0] + (period or 0.0) * cycle + spread * i / n
            heapq.heappush(heap, (at, name, i, k, cycle, steps, spread,
                                  period))

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


def _vm_workloads(vm):
    return [vm['workload']] + [p['workload'] for p in vm.get('phases', ())]


def _library():
    # keys starting with '_' hold YAML anchors shared by workloads
    library = {k: v for k, v in _data('workloads.yaml').items()
               if not k.startswith('_')}
    lib_errors = list(jsonschema.Draft202012Validator(
        {'$defs': {'dist': schema.DIST}, 'type': 'object',
         'additionalProperties': schema.WORKLOAD}).iter_errors(library))
    if lib_errors:  # pragma: no cover - shipped data is tested
        raise ScenarioError('workloads.yaml: %s: %s'
                            % (_field(lib_errors[0]), lib_errors[0].message))
    return library


def _check_phases(vm, n, source):
    last = 0.0
    for k, p in enumerate(vm.get('phases', ())):
        if p['at_s'] <= last:
            raise ScenarioError('%s: vms.%d.phases.%d.at_s: phases must '
                                'start in time order, after 0 (%g <= %g)'
                                % (source, n, k, p['at_s'], last))
        last = p['at_s']
    cycle = vm.get('phase_cycle_s')
    if cycle is not None and cycle <= last:
        raise ScenarioError('%s: vms.%d.phase_cycle_s: must exceed the '
                            'last phase\'s at_s (%g <= %g)'
                            % (source, n, cycle, last))


def _workloads(doc, source):
    """The Workload of every workload a VM runs, by name."""
    specs = _library()
    specs.update(doc.get('workloads') or {})
    used = {}
    names = set()
    for n, vm in enumerate(doc['vms']):
        if vm['name'] in names:
            raise ScenarioError('%s: vms.%d.name: duplicate VM name %r'
                                % (source, n, vm['name']))
        names.add(vm['name'])
        _check_phases(vm, n, source)
        for k, w in enumerate(_vm_workloads(vm)):
            if w not in specs:
                field = ('workload' if k == 0
                         else 'phases.%d.workload' % (k - 1))
                raise ScenarioError('%s: vms.%d.%s: unknown workload %r'
                                    % (source, n, field, w))
            used[w] = wl_mod.Workload.from_dict(w, specs[w])
    return used


def _host(doc, source):
    """The host's fields with their defaults (data/host.yaml)."""
    host = _merge(_data('host.yaml'), doc['host'])
    if host['cores'] % host['sockets']:
        raise ScenarioError('%s: host.sockets: %d cores do not split '
                            'evenly over %d sockets'
                            % (source, host['cores'], host['sockets']))
    if 'llc_kib' in host:
        # the socket's cache, shared by its hyperthreads
        per_socket = 2 * host['cores'] // host['sockets']
        host['llc_share_kib'] = host['llc_kib'] / per_socket
    return host


def _check_placement(doc, cores, source):
    placement = doc.get('placement', 'balanced')
    if placement != 'explicit':
        return placement
    for n, vm in enumerate(doc['vms']):
        threads = vm.get('threads')
        if threads is None or len(threads) != vm['vcpus']:
            raise ScenarioError(
                '%s: vms.%d.threads: explicit placement needs one '
                'hyperthread per vCPU' % (source, n))
        bad = [t for t in threads if t >= 2 * cores]
        if bad:
            raise ScenarioError('%s: vms.%d.threads: hyperthread %d '
                                'does not exist on %d cores'
                                % (source, n, bad[0], cores))
    return placement


def _costs(doc, host, source):
    shipped = _data('costs.yaml')
    _check_overrides(doc, {'costs': shipped}, source)
    costs = _merge(shipped, doc.get('costs'))
    pair = costs['smt_pair_speedup']
    if pair['min'] > pair['max']:
        raise ScenarioError('%s: costs.smt_pair_speedup: min must not '
                            'exceed max (%g > %g)'
                            % (source, pair['min'], pair['max']))
    return costs


def _window(doc, source):
    duration = float(doc.get('duration_s', 2.0))
    warmup = float(doc.get('warmup_s', 0.5))
    if warmup >= duration:
        raise ScenarioError('%s: warmup_s: must be shorter than duration_s '
                            '(%g >= %g)' % (source, warmup, duration))
    return duration, warmup


def from_dict(doc, source='<scenario>'):
    """Validate ``doc`` and build a :class:`Scenario`; ScenarioError."""
    _check_data(doc, source)
    doc = _upgrade(doc, source)
    validate(doc, source)
    used = _workloads(doc, source)
    host = _host(doc, source)
    cores = host['cores']
    placement = _check_placement(doc, cores, source)
    costs = _costs(doc, host, source)
    kparams = _data('kernels.yaml')
    _check_overrides(doc, kparams, source)
    sched = _merge(kparams['scheduler'], doc.get('scheduler'))
    haltpoll = _merge(kparams['haltpoll'], doc.get('haltpoll'))
    vsmtio = _merge(kparams['vsmtio'], doc.get('vsmtio'))
    duration, warmup = _window(doc, source)
    switch_ns = (costs['vm_exit_ns'] + costs['context_switch_ns']
                 + costs['l1d_flush_ns'] + costs['ipi_ns'])
    init_t = doc.get('initial_timeout_us')
    init_ns = init_t * 1e3 if init_t else 2.0 * switch_ns
    return Scenario(
        name=doc['name'], title=doc.get('title', doc['name']),
        source=source, cores=cores, vms=list(doc['vms']), workloads=used,
        costs=costs, scheduler=sched, haltpoll=haltpoll, vsmtio=vsmtio,
        duration_s=duration, warmup_s=warmup, placement_policy=placement,
        initial_timeout_ns=init_ns, paper=doc.get('paper') or {},
        host=host, kernel={g: _merge(kparams[g], doc.get(g))
                           for g in kparams})


def inputs(doc):
    """Every input ``doc`` runs with, shipped defaults filled in.

    ``{'costs', 'scheduler', 'haltpoll', 'vsmtio', 'host': {...},
    'workloads': {name: spec}}``: the tree :func:`set_input`'s dotted
    paths address (the workloads are those its VMs run).
    """
    kparams = _data('kernels.yaml')
    specs = _library()
    specs.update(doc.get('workloads') or {})
    names = {w for vm in doc['vms'] for w in _vm_workloads(vm)}
    return {
        'costs': _merge(_data('costs.yaml'), doc.get('costs')),
        'scheduler': _merge(kparams['scheduler'], doc.get('scheduler')),
        'haltpoll': _merge(kparams['haltpoll'], doc.get('haltpoll')),
        'vsmtio': _merge(kparams['vsmtio'], doc.get('vsmtio')),
        'host': _merge(_data('host.yaml'), doc.get('host')),
        'workloads': {n: copy.deepcopy(specs[n]) for n in sorted(names)},
    }


def set_input(doc, path, value):
    """A copy of scenario ``doc`` with the input at dotted ``path`` set.

    ``path`` is ``group.key[.key...]`` into :func:`inputs` (``costs``,
    ``scheduler``, ``haltpoll``, ``vsmtio``, ``host``) or
    ``workloads.NAME.key[.key]`` where NAME may be ``*`` (every workload
    the VMs run). ``value`` is the new value, or a function of the current
    one. The override lands where a scenario's own overrides do, so the
    result is an ordinary scenario. KeyError for a path that names no
    input.
    """
    doc = copy.deepcopy(doc)
    tree = inputs(doc)
    parts = path.split('.')
    if parts[0] == 'workloads':
        names = sorted(tree['workloads']) if parts[1] == '*' else [parts[1]]
        for name in names:
            spec = tree['workloads'][name]
            _assign(spec, parts[2:], value)
            doc.setdefault('workloads', {})[name] = spec
        return doc
    _lookup(tree, parts)                # KeyError if it is no input
    node = doc.setdefault(parts[0], {})
    for depth in range(2, len(parts)):
        key = parts[depth - 1]
        if key not in node:
            node[key] = copy.deepcopy(_lookup(tree, parts[:depth]))
        node = node[key]
    node[parts[-1]] = _lookup(tree, parts)
    _assign(node, parts[-1:], value)
    return doc


def _assign(node, keys, value):
    for key in keys[:-1]:
        node = node[key]
    old = node[keys[-1]]
    node[keys[-1]] = value(old) if callable(value) else value


def _lookup(tree, parts):
    for key in parts:
        tree = tree[key]
    return tree


def shipped():
    """Names of the scenarios shipped with vsmtio, sorted."""
    return sorted(f[:-5] for f in os.listdir(SCENARIO_DIR)
                  if f.endswith('.yaml'))


def load_doc(name_or_path):
    """The YAML document of a shipped scenario or a scenario file."""
    if os.sep in name_or_path or name_or_path.endswith(('.yaml', '.yml')):
        path = name_or_path
    else:
        path = os.path.join(SCENARIO_DIR, name_or_path + '.yaml')
        if not os.path.exists(path):
            raise ScenarioError('unknown scenario %r (see vsmtio-sim list)'
                                % name_or_path)
    return _load_yaml(path), os.path.basename(path)


def load(name_or_path):
    """Load a shipped scenario by name, or a scenario file by path."""
    doc, source = load_doc(name_or_path)
    return from_dict(doc, source=source)
