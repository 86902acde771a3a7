"""Turn vsmtio on or off in a nova.conf, and put back exactly what it was.

The one piece of code that edits nova.conf for vsmtio: the devstack
plugin, the test cloud and operators (``vsmtio-nova-conf``) all use it.

:func:`enable` adds the vsmtio filters (``WorkloadMixFilter`` and
``ContextRetentionFilter``) to ``[filter_scheduler] available_filters`` (a
repeated key: nova's ``all_filters`` stays) and ``enabled_filters``, and the
weigher to ``weight_classes``; with
``retention=True`` it also sets ``[DEFAULT] compute_driver`` to the vsmtio
libvirt driver. A key the file does not set is written with nova's default
plus ours, so nothing nova would have loaded is lost. It is idempotent
(devstack's ``iniadd`` is not).

Every line it adds or changes is preceded by a ``# vsmtio-nova-conf: ...``
comment saying what it did (``added``, ``appended ITEM``, ``was LINE``,
``added section``), so an operator reading the file sees it and
:func:`disable` undoes exactly that, and nothing else, even after other
tools edited the file: a file changed only by enable comes back byte for
byte.

On a compute host, ``provider-config`` writes what the host tells
placement (the retention trait, the reserved-I/O inventory) as nova's
provider config (:mod:`vsmtio_nova.provider_config`), from the options of
the nova.conf given; ``disable`` removes that file too.

On a controller, ``host-key --host HOST`` prints compute host HOST's
measured-class keys (``[vsmtio] measured_class_host_keys`` of that host's
nova.conf; the first is its agent's ``[vsmtio_publish]
measured_class_key``), derived from the root secret of the nova.conf
given (``-``: the root secret on standard input), so that the root
secret never leaves the controllers.
"""

import argparse
import sys

from oslo_config import cfg

from vsmtio_nova.deploy import ini
from vsmtio_nova import provider_config

GROUP = 'filter_scheduler'
FILTER_CLASS = 'WorkloadMixFilter'
FILTER = 'vsmtio_nova.scheduler.filters.' + FILTER_CLASS
RETENTION_FILTER_CLASS = 'ContextRetentionFilter'
RETENTION_FILTER = ('vsmtio_nova.scheduler.retention.'
                    + RETENTION_FILTER_CLASS)
FILTERS = (FILTER, RETENTION_FILTER)
WEIGHER = 'vsmtio_nova.scheduler.weights.WorkloadMixWeigher'
COMPUTE_DRIVER = provider_config.COMPUTE_DRIVER
MARK = '# vsmtio-nova-conf: '
EOL_FLAG = ' +eol'


def nova_default(name):
    """nova's own default for a ``[filter_scheduler]`` option."""
    from nova.conf import scheduler

    for group, opts in scheduler.list_opts().items():
        if getattr(group, 'name', group) != GROUP:
            continue
        for opt in opts:
            if opt.name == name:
                return list(opt.default)
    raise ini.Error('nova has no [%s] %s option' % (GROUP, name))


def _mark(doc, action):
    return MARK + action + doc.eol


def _add_key(doc, section, key, value):
    """Add ``key = value`` (and the section if absent), marked."""
    where = doc.insertion_point(section)
    if where is None:
        where = len(doc.lines)
        lines = [_mark(doc, 'added section'), '[%s]%s' % (section, doc.eol)]
    else:
        lines = []
    lines += [_mark(doc, 'added'), doc.line(key, value)]
    if doc.insert(where, lines):
        # The file ended without a newline: say so, disable removes it.
        doc.lines[where] = doc.lines[where].rstrip('\r\n') + EOL_FLAG + doc.eol
    return True


def _ensure_available(doc):
    units = doc.find(GROUP, 'available_filters')
    missing = [f for f in FILTERS if f not in [u.value for u in units]]
    if units and missing:
        lines = []
        for value in missing:
            lines += [_mark(doc, 'added'), doc.line('available_filters',
                                                    value)]
        doc.insert(units[-1].end, lines)
    elif missing:
        for value in nova_default('available_filters') + missing:
            _add_key(doc, GROUP, 'available_filters', value)
    return bool(missing)


def _ensure_in_list(doc, key, items):
    units = doc.find(GROUP, key)
    if not units:
        return _add_key(doc, GROUP, key,
                        ','.join(nova_default(key) + list(items)))
    unit = units[-1]  # the one oslo.config keeps
    missing = [i for i in items if i not in ini.split_list(unit.value)]
    if not missing:
        return False
    content, _end = ini.split_eol(doc.lines[unit.end - 1])
    core = content.rstrip()
    quote = core[-1] if unit.quoted and unit.end == unit.start + 1 else ''
    body = core[:-1] if quote else core
    sep = ',' if unit.value.strip() else ('' if quote else ' ')
    doc.set_last_line(unit, body + sep + ','.join(missing) + quote
                      + content[len(core):])
    doc.insert(unit.start, [_mark(doc, 'appended ' + ','.join(missing))])
    return True


def _ensure_driver(doc):
    units = doc.find('DEFAULT', 'compute_driver')
    if not units:
        return _add_key(doc, 'DEFAULT', 'compute_driver', COMPUTE_DRIVER)
    unit = units[-1]
    if unit.value == COMPUTE_DRIVER:
        return False
    if unit.end - unit.start > 1:
        raise ini.Error('%s:%d: compute_driver spans several lines; set it '
                        'by hand' % (doc.name, unit.start + 1))
    old, _end = ini.split_eol(doc.lines[unit.start])
    doc.replace(unit.start, unit.end,
                [_mark(doc, 'was ' + old),
                 doc.line('compute_driver', COMPUTE_DRIVER)])
    return True


def enable(path, retention=False):
    """Add vsmtio's filter and weigher (and driver); True if changed."""
    doc = ini.Document.read(path)
    changed = _ensure_available(doc)
    changed |= _ensure_in_list(doc, 'enabled_filters',
                               (FILTER_CLASS, RETENTION_FILTER_CLASS))
    changed |= _ensure_in_list(doc, 'weight_classes', (WEIGHER,))
    if retention:
        changed |= _ensure_driver(doc)
    if changed:
        ini.write_atomic(path, doc.text())
    return changed


def _remove_item(doc, unit, item):
    """Take back ``item`` as :func:`_ensure_in_list` appended it."""
    items = ini.split_list(unit.value)
    if item not in items:
        return
    content, _end = ini.split_eol(doc.lines[unit.end - 1])
    core = content.rstrip()
    quote = core[-1] if unit.quoted and unit.end == unit.start + 1 else ''
    body = core[:-1] if quote else core
    for added in (',' + item, ' ' + item, item):
        if body.endswith(added) and (added[0] == ',' or items == [item]):
            body = body[:-len(added)]
            doc.set_last_line(unit, body + quote + content[len(core):])
            return
    # Edited since: rewrite the value without our item.
    items.remove(item)
    doc.replace(unit.start, unit.end, [doc.line(unit.key, ','.join(items))])


def _undo(doc, index):
    """Undo the change the marker at ``index`` describes."""
    action = ini.split_eol(doc.lines[index])[0][len(MARK):]
    ended = action.endswith(EOL_FLAG)
    if ended:
        action = action[:-len(EOL_FLAG)]
    unit = doc.unit_at(index + 1)
    if action == 'added':
        doc.replace(index, unit.end if unit else index + 1, [])
    elif action.startswith('appended '):
        for item in reversed(ini.split_list(action[len('appended '):])):
            if unit:
                _remove_item(doc, unit, item)
                unit = doc.unit_at(index + 1)
        doc.replace(index, index + 1, [])
    elif action.startswith('was '):
        if unit and unit.key == 'compute_driver' and (
                unit.value == COMPUTE_DRIVER):
            doc.replace(index, unit.end, [action[len('was '):] + doc.eol])
        else:  # changed by someone since: theirs now
            doc.replace(index, index + 1, [])
    elif action == 'added section':
        # The header goes only if nothing but blank lines is left under it
        # (the markers below were undone first): others' keys keep theirs.
        header = doc.header_at(index + 1) is not None
        rest = doc.lines[index + 2:doc.section_end(index + 1)]
        empty = header and not any(line.strip() for line in rest)
        doc.replace(index, index + 2 if empty else index + 1, [])
    else:
        raise ini.Error('%s:%d: unknown vsmtio-nova-conf marker %r'
                        % (doc.name, index + 1, action))
    if ended and index == len(doc.lines) and index > 0:
        doc.lines[index - 1] = doc.lines[index - 1].rstrip('\r\n')


def disable(path):
    """Undo what :func:`enable` added; True if the file changed."""
    doc = ini.Document.read(path)
    marks = [i for i, line in enumerate(doc.lines) if line.startswith(MARK)]
    for index in reversed(marks):
        _undo(doc, index)
    if marks:
        ini.write_atomic(path, doc.text())
    return bool(marks)


def load(path):
    """The options the provider config is made of, read from one nova.conf.

    A ConfigOpts of its own (not nova's global one) holding nova's own
    option objects, so types, defaults and deprecated names are nova's.
    """
    from nova.conf import compute
    from nova.conf import libvirt

    from vsmtio_nova import conf as vsmtio_conf

    conf = cfg.ConfigOpts()
    conf.register_opts(compute.compute_opts)
    conf.register_opts(compute.compute_group_opts, group='compute')
    conf.register_opts(libvirt.libvirt_general_opts, group='libvirt')
    for group, opts in vsmtio_conf.list_opts():
        conf.register_opts(opts, group=group.name)
    conf([], project='nova', default_config_files=[path],
         default_config_dirs=[])
    return conf


def _provider_config(path, dry_run):
    written, text, why = provider_config.write(load(path), dry_run=dry_run)
    if dry_run and text:
        print(text, end='')
    if text is None:
        outcome = 'nothing to write' + (
            '' if dry_run else '; removed if there was one')
    else:
        outcome = 'would be written' if dry_run else 'written'
    print('%s: %s (%s)' % (written, outcome, why))


def host_keys(nova_conf, host, stdin=None):
    """HOST's keys from the root secrets of ``nova_conf`` (``-``: stdin)."""
    from vsmtio_contract import workload

    if nova_conf == '-':
        roots = [(stdin or sys.stdin).readline().strip()]
    else:
        group = load(nova_conf).vsmtio
        roots = [group.measured_class_secret,
                 group.measured_class_previous_secret]
    keys = workload.host_keys(roots, host)
    if not keys:
        raise ValueError('no root secret: %s' % (
            'standard input is empty' if nova_conf == '-' else
            '%s sets no [vsmtio] measured_class_secret' % nova_conf))
    return keys


def _run(args):
    if args.action == 'host-key':
        print(','.join(host_keys(args.nova_conf, args.host)))
        return
    if args.action == 'provider-config':
        return _provider_config(args.nova_conf, args.dry_run)
    if args.action == 'enable':
        changed = enable(args.nova_conf, retention=args.retention)
    else:
        conf = load(args.nova_conf)  # first: a bad file changes nothing
        changed = disable(args.nova_conf)
        changed |= provider_config.remove(conf)
    print('%s: %s' % (args.nova_conf, 'changed' if changed else 'unchanged'))


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog='vsmtio-nova-conf',
        description='Add (enable) or take back (disable) vsmtio\'s filter, '
                    'weigher and, with --retention, compute driver in a '
                    'nova.conf (idempotent; comments and other lines are '
                    'kept); or write this compute host\'s provider config '
                    '(provider-config) from it; or print compute host '
                    'HOST\'s measured-class keys from its root secret '
                    '(host-key --host HOST; NOVA_CONF - reads the secret '
                    'from standard input).')
    parser.add_argument('action', choices=('enable', 'disable',
                                           'provider-config', 'host-key'))
    parser.add_argument('--retention', action='store_true',
                        help='enable: also set [DEFAULT] compute_driver = '
                             '%s (run vsmtio-nova-compute)' % COMPUTE_DRIVER)
    parser.add_argument('--dry-run', action='store_true',
                        help='provider-config: print it, write nothing')
    parser.add_argument('--host',
                        help='host-key: nova\'s name of the compute host '
                             '([DEFAULT] host there)')
    parser.add_argument('nova_conf', metavar='NOVA_CONF')
    args = parser.parse_args(argv)
    if (args.action == 'host-key') != bool(args.host):
        parser.error('host-key needs --host, and --host goes with host-key')
    if args.retention and args.action != 'enable':
        parser.error('--retention goes with enable')
    if args.dry_run and args.action != 'provider-config':
        parser.error('--dry-run goes with provider-config')
    try:
        _run(args)
    except (OSError, ValueError, cfg.Error) as e:
        # ini.Error and provider_config.Error are ValueErrors
        print('vsmtio-nova-conf: %s (nothing written)' % e, file=sys.stderr)
        return 2
    return 0
