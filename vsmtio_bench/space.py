"""The oracle's search space: every static setting of a host's levers.

The oracle must be an upper bound on what the product can reach, so its
space is a superset of the product's (``vsmtio_agent.policy.search``):

- ``weights``: a factor on each honest serving VM's cgroup CPU weight, 1
  to 4 in steps of 0.25, refined in steps of 0.05 near the best found
  (:func:`refine`; the product walks the same grid, 1.25 to 4,
  ``search.Params.weights``);
- ``retain``: each VM's retention timeout, off or 25 us to 1 ms, each step
  at most a doubling (the product's LTCR moves within that range);
- ``split``: the share of the cores RASS splits into I/O and CPU siblings
  with borrowing, the product's grades (``vocabulary.SHARES``) or off;
- ``haltpoll_max_us``: a stock host's lever, KVM's halt-polling maximum
  (one module parameter for the host), off or 25 us to 1 ms, with the same
  weights: the ``haltpoll`` family, since a host polls or retains.

A configuration is a dict (:func:`all_off`'s fields); a VM left out of
``retain`` or ``weights`` is off (factor 1). The VMs that run the same
workload in the same role are a *group*: most scenarios pair two of each,
and the search first moves a group together (half the coordinates), then
each VM on its own.
"""

import json
import math

from vsmtio_agent import model
from vsmtio_agent.policy import rass
from vsmtio_sim import tenants

WEIGHTS = tuple(1.0 + 0.25 * i for i in range(13))            # 1 .. 4
# the finer step the search ends with near the weight it settled on
FINE = 0.05
TIMEOUTS_US = (25, 50, 100, 200, 400, 800, 1000)
# off, and the product's grades (vocabulary.SHARES: a test holds them equal)
SPLITS = (0.0, 0.125, 0.25, 0.5, 1.0)
HALTPOLL_MAX_US = TIMEOUTS_US
FAMILIES = ('vsmtio', 'haltpoll')
SPACE = {'weights': WEIGHTS, 'timeouts_us': TIMEOUTS_US, 'splits': SPLITS,
         'haltpoll_max_us': HALTPOLL_MAX_US}
_DEFAULT = {'weights': 1.0, 'retain': 0}


def all_off(family):
    """Vanilla's own setting in either family."""
    return {'family': family, 'retain': {}, 'split': 0.0, 'weights': {},
            'haltpoll_max_us': 0}


def get(cfg, field, vm):
    if vm is None:
        return cfg[field]
    return cfg[field].get(vm, _DEFAULT[field])


def put(cfg, field, vms, value):
    """A copy of ``cfg`` with ``field`` set to ``value`` for ``vms``.

    ``vms`` is None for a host-wide field, else a VM name or a tuple of
    them (a group); a default is left out, so equal settings are equal
    dicts.
    """
    if vms is None:
        return dict(cfg, **{field: value})
    inner = dict(cfg[field])
    for vm in (vms,) if isinstance(vms, str) else vms:
        inner.pop(vm, None)
        if value != _DEFAULT[field]:
            inner[vm] = value
    return dict(cfg, **{field: inner})


def key(cfg):
    return json.dumps(cfg, sort_keys=True)


def groups(vms):
    """``{(role, workload): (vm, ...)}`` of the honest VMs of a result.

    An adversary is its own group: the host does not set its levers by
    what an adversary's neighbours want.
    """
    out = {}
    for name, v in sorted(vms.items()):
        k = (tenants.role(v), v.get('workload', name))
        if v['adversary']:
            k = ('adversary', name)
        out.setdefault(k, []).append(name)
    return {k: tuple(v) for k, v in out.items()}


def near(coord, cfg, steps=2):
    """``coord`` with a joint weight's values near ``cfg``'s weight.

    After the first pass the weight moves at most ``steps`` grid steps
    either way (every timeout with each): the whole grid again costs five
    times as many runs and a pass that moved another coordinate shifts
    the best weight by a step or two, not across the grid.
    """
    fields, vms, values = coord
    if fields[0] != 'weights' or len(fields) < 2:
        return coord
    w = value(cfg, fields, vms)[0]
    return (fields, vms, [v for v in values
                          if abs(v[0] - w) <= steps * 0.25 + 1e-9])


def refine(cfg, vms):
    """Each serving group's weight on a finer grid around ``cfg``'s.

    A floor is often crossed between two quarter steps (a weight that
    gives the serving VMs most keeps the computing ones at 0.97 only
    just), so the search ends by trying ``FINE`` steps within a quarter
    step either way of where each serving group's weight settled.
    """
    out = []
    for (role, _w), members in sorted(groups(vms).items()):
        if role != 'serving':
            continue
        w = get(cfg, 'weights', members[0])
        values = sorted({round(min(WEIGHTS[-1], max(1.0, w + FINE * k)), 9)
                         for k in range(-4, 5)})
        out.append((('weights',), members, values))
    return out


def coordinates(family, vms, per_vm=False):
    """``[(fields, vms, values)]``: what descent varies, one at a time.

    ``fields`` is one field or a pair searched jointly (every
    combination: a serving group's weight with its timeout, or with the
    host's halt-polling maximum, where the gain the greedy one-at-a-time
    search cannot build lies); ``vms`` a group, one VM or None
    (host-wide). ``per_vm``: each VM of a group of several on its own
    instead (a refinement once the groups settle). Weights only for
    honest serving VMs: raising a computing VM's weight takes CPU from the
    serving ones, and an adversary's is not the host's to raise.
    """
    timeouts = (0,) + TIMEOUTS_US
    by_group = groups(vms)
    if per_vm:
        return [c for (role, _w), members in sorted(by_group.items())
                if len(members) > 1 for vm in members
                for c in _vm_coordinates(family, role, vm, timeouts)]
    out = []
    for (role, _w), members in sorted(by_group.items()):
        serving = role == 'serving'
        if serving and family == 'vsmtio':
            out.append((('weights', 'retain'), members,
                        [(w, t) for w in WEIGHTS for t in timeouts]))
        elif serving:
            out.append((('weights', 'haltpoll_max_us'), members,
                        [(w, t) for w in WEIGHTS
                         for t in (0,) + HALTPOLL_MAX_US]))
        elif family == 'vsmtio':
            out.append((('retain',), members, timeouts))
    if family == 'vsmtio':
        out.append((('split',), None, SPLITS))
    elif not any(role == 'serving' for role, _w in by_group):
        out.append((('haltpoll_max_us',), None, (0,) + HALTPOLL_MAX_US))
    return out


def _vm_coordinates(family, role, vm, timeouts):
    out = []
    if role == 'serving':
        out.append((('weights',), vm, WEIGHTS))
    if family == 'vsmtio':
        out.append((('retain',), vm, timeouts))
    return out


def value(cfg, fields, vms):
    """The current value of a coordinate (of its first VM for a group)."""
    vm = vms if vms is None or isinstance(vms, str) else vms[0]
    got = tuple(get(cfg, f, None if f == 'haltpoll_max_us' else vm)
                for f in fields)
    return got if len(fields) > 1 else got[0]


def setting(cfg, fields, vms, val):
    """``cfg`` with a coordinate at ``val``."""
    vals = val if len(fields) > 1 else (val,)
    for f, v in zip(fields, vals):
        cfg = put(cfg, f, None if f == 'haltpoll_max_us' else vms, v)
    return cfg


def starts(family, vms):
    """Where coordinate descent starts: all off.

    The first pass tries every weight with every timeout (or halt-polling
    maximum) for each serving group and every grade of the split, so a
    second start would repeat it.
    """
    return [all_off(family)]


def label(cfg):
    """A short readable form: ``vsmtio: web 50us x2.5, split 0.5``."""
    parts = []
    for vm in sorted(set(cfg['retain']) | set(cfg['weights'])):
        bits = []
        if cfg['retain'].get(vm):
            bits.append('%dus' % cfg['retain'][vm])
        if cfg['weights'].get(vm, 1) != 1:
            bits.append('x%g' % cfg['weights'][vm])
        parts.append('%s %s' % (vm, ' '.join(bits)))
    head = cfg['family']
    if cfg['family'] == 'haltpoll':
        # the haltpoll family with polling off is a stock host's weights
        head = ('haltpoll max %dus' % cfg['haltpoll_max_us']
                if cfg['haltpoll_max_us'] else 'stock host')
    if cfg['split']:
        parts.append('split %s' % ('all' if cfg['split'] >= 1 else
                                   '%g' % cfg['split']))
    return '%s: %s' % (head, ', '.join(parts) or 'all off')


def parse_config(text):
    """A static configuration from JSON, or ValueError.

    The fields of :func:`all_off` (any left out are off): ``family``,
    ``retain`` (``{vm: us}``, each within 1 us and 100 ms), ``split``
    (the share of the cores, 0 to 1, or true for all), ``weights``
    (``{vm: factor}``, each within 1 and 100) and ``haltpoll_max_us`` (0
    to 100 ms). Which VMs a scenario has is checked against it
    (:func:`check_vms`).
    """
    try:
        got = json.loads(text)
    except ValueError as e:
        raise ValueError('--config is not JSON: %s' % e)
    if not isinstance(got, dict):
        raise ValueError('--config must be a JSON object, got %r' % (got,))
    family = got.get('family', 'vsmtio')
    if family not in FAMILIES:
        raise ValueError('family must be one of %s, got %r'
                         % (', '.join(FAMILIES), family))
    cfg = all_off(family)
    unknown = sorted(set(got) - set(cfg))
    if unknown:
        raise ValueError('unknown --config fields: %s (known: %s)'
                         % (', '.join(map(str, unknown)),
                            ', '.join(sorted(cfg))))
    for field, low, high in (('retain', 1, 100000), ('weights', 1, 100)):
        inner = got.get(field, {})
        if not isinstance(inner, dict):
            raise ValueError('%s must map VM names to numbers, got %r'
                             % (field, inner))
        cfg[field] = {str(vm): _number('%s of %s' % (field, vm), v, low,
                                       high) for vm, v in inner.items()}
    split = got.get('split', 0.0)
    cfg['split'] = (1.0 if split is True else 0.0 if split is False
                    else _number('split', split, 0, 1))
    cfg['haltpoll_max_us'] = _number('haltpoll_max_us',
                                     got.get('haltpoll_max_us', 0), 0, 100000)
    if family != 'haltpoll' and cfg['haltpoll_max_us']:
        raise ValueError('haltpoll_max_us is the haltpoll family\'s')
    if family == 'haltpoll' and (cfg['retain'] or cfg['split']):
        raise ValueError('the haltpoll family has no retention or split')
    return cfg


def _number(what, v, low, high):
    # (bool is an int to json; inf and nan are not numbers here)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not (
            low <= v <= high):
        raise ValueError('%s must be a number within %g and %g, got %r'
                         % (what, low, high, v))
    return v


def check_vms(cfg, vms):
    """ValueError unless every VM ``cfg`` names is one of ``vms``."""
    named = set(cfg['retain']) | set(cfg['weights'])
    unknown = sorted(named - set(vms))
    if unknown:
        raise ValueError('no VM %s on this scenario (it has %s)'
                         % (', '.join(unknown), ', '.join(sorted(vms))))


def split_cores(core_ids, share):
    """The first ``share`` of the cores (at least one), in id order."""
    if not share:
        return frozenset()
    ids = sorted(core_ids)
    return frozenset(ids[:max(1, math.ceil(share * len(ids) - 1e-9))])


def setup_for(cfg):
    """The static configuration as a ``runner.run_conf`` setup callable."""
    def setup(sim):
        cores = split_cores({v.home.core_id for v in sim.vcpus},
                            cfg['split'])
        placements = {}
        for v in sim.vcpus:
            if v.home.core_id in cores:
                role = (model.Role.CPU if sim.scenario.vm_kind(v.vm) == 'cpu'
                        else model.Role.IO)
                placements[v.ref] = rass.placement(
                    sim.topology.core(v.home.core_id), role)
        if cfg['family'] == 'haltpoll':
            sim.hp_max = cfg['haltpoll_max_us'] * 1000
        sim.apply(model.Decision(
            timeout_ns=0, placements=placements, split=bool(cores),
            split_cores=cores or None, borrow=True,
            timeouts={vm: us * 1000 for vm, us in cfg['retain'].items()},
            weights=dict(cfg['weights'])))
    return setup
