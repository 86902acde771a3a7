"""What ``vsmtio-agent status`` shows: one period, as a document and a table.

The running daemon writes :func:`document` of each
:class:`~vsmtio_agent.agent.Period` to ``status_path`` (read by ``status``
from another process); :func:`load` reads one back, checked against
:data:`SCHEMA`, and :func:`format_table` renders it for the operator.

Server names are the tenants' text. The file is readable by every local
user where its directory is (systemd creates ``/run/vsmtio`` ``0755``), so
the daemon writes them only where its directory is closed to others
(:func:`private`); where it writes them, and wherever ``status`` prints
text from the file, control characters are escaped and a name is cut at
:data:`MAX_NAME` characters (:func:`printable`), so a name cannot write to
the operator's terminal or run on over the table.
"""

import dataclasses
import json
import math
import os
import stat
import time

import jsonschema
import prettytable

# Linux's PID_MAX_LIMIT: a larger pid is not a process, and os.kill
# cannot take it.
PID_MAX = 4 * 1024 * 1024
# Every number the daemon writes fits in 64 bits; a larger one would fail
# the table's formatting (a float overflow).
_INT_LIMIT = 2 ** 63
# Longest name shown: a nova server name may have 255 characters.
MAX_NAME = 64

_NUMBER = {'type': ['number', 'null']}
_ROW = {
    'type': 'object',
    'required': ['core', 'domain', 'vcpu', 'class', 'retention_rate',
                 'ipc', 'i_cpu', 'pinned'],
    'properties': {
        'core': {'type': 'integer'}, 'domain': {'type': 'string'},
        'vcpu': {'type': 'integer'}, 'class': {'type': 'string'},
        'retention_rate': _NUMBER, 'utilisation': _NUMBER, 'ipc': _NUMBER,
        'i_cpu': _NUMBER, 'server': {'type': ['string', 'null']},
        'pinned': {'type': 'array', 'items': {'type': 'integer'}}}}
_VM = {
    'type': 'object', 'required': ['name', 'has'],
    'properties': {'name': {'type': ['string', 'null']},
                   'has': {'type': 'array', 'items': {'type': 'string'}}}}
_GUARD_VERDICT = {
    'type': 'object', 'required': ['mechanism', 'kept', 'reason'],
    'properties': {'mechanism': {'type': 'string'},
                   'kept': {'type': 'boolean'},
                   'reason': {'type': 'string'},
                   'domain': {'type': ['string', 'null']},
                   'timeout_ns': {'type': ['integer', 'null']},
                   'factor': {'type': ['number', 'null']},
                   'after_effect': {'type': 'boolean'}}}
_MIST_VERDICT = {
    'type': 'object', 'required': ['protect', 'reason'],
    'properties': {'protect': {'type': 'boolean'}, 'i_cpu': _NUMBER,
                   'reason': {'type': 'string'}}}
# What format_table reads of a status document; other keys are left alone.
SCHEMA = {
    'type': 'object',
    'required': ['pid', 'mode', 'period', 'ticks', 'timeout_ns', 'vcpus'],
    'properties': {
        'pid': {'type': 'integer', 'minimum': 1, 'maximum': PID_MAX},
        'mode': {'type': 'string'},
        'period': {'type': 'number'},
        'ticks': {'type': 'integer'},
        'timeout_ns': {'type': ['integer', 'null']},
        'dry_run': {'type': 'boolean'},
        'vcpus': {'type': 'array', 'items': _ROW},
        'mechanisms': {'type': ['array', 'null'],
                       'items': {'type': 'string'}},
        'verdicts': {'type': ['array', 'null'], 'items': _GUARD_VERDICT},
        'retaining': {'type': ['object', 'null'],
                      'additionalProperties': {'type': 'integer'}},
        'mist': {'type': ['object', 'null'],
                 'additionalProperties': _MIST_VERDICT},
        'mist_levers': {'type': 'object',
                        'additionalProperties': {'type': ['string', 'null']}},
        'vms': {'type': 'object', 'additionalProperties': _VM}}}
_VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)


class StatusError(ValueError):
    """A status file that is not a status document: one line saying why."""


def _finite(text):
    value = float(text)
    if not math.isfinite(value):
        raise ValueError('number %s out of range' % text)
    return value


def _bounded(text):
    value = int(text)
    if abs(value) >= _INT_LIMIT:
        raise ValueError('number %s out of range' % text[:20])
    return value


def _refuse(name):
    raise ValueError('%s is not a number' % name)


def load(path):
    """The status document at ``path``, or None where there is none.

    Raises :class:`StatusError` for a file that cannot be read or is not
    a whole status document (truncated, another program's, hand-edited):
    ``status`` then says so in one line.
    """
    try:
        with open(path, 'rb') as f:
            doc = json.loads(f.read().decode('utf-8'),
                             parse_float=_finite, parse_int=_bounded,
                             parse_constant=_refuse)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StatusError('cannot read %s: %s' % (path, exc.strerror))
    except (ValueError, RecursionError) as exc:
        raise StatusError('%s is not a status document: %s' % (path, exc))
    error = jsonschema.exceptions.best_match(_VALIDATOR.iter_errors(doc))
    if error is not None:
        message = error.message
        if len(message) > 200:
            message = message[:200] + '...'
        raise StatusError('%s is not a status document: at %s: %s'
                          % (path, error.json_path, message))
    return doc


def printable(text, limit=MAX_NAME):
    """``text`` with every character a terminal could act on escaped.

    What ``str.isprintable`` refuses (control characters, line and
    paragraph separators, bidirectional overrides and other format
    characters) becomes its ``\\x``/``\\u`` escape; the result is cut at
    ``limit`` characters. None stays None.
    """
    if text is None:
        return None
    text = ''.join(c if c.isprintable() else
                   c.encode('unicode_escape').decode('ascii')
                   for c in str(text))
    return text if len(text) <= limit else text[:limit - 3] + '...'


def private(path):
    """Whether only this user can reach ``path``'s directory.

    Owned by this user, with no access for group or others (a systemd
    ``RuntimeDirectoryMode=0700``): only then does the daemon put server
    names in the file.
    """
    try:
        st = os.stat(os.path.dirname(os.path.abspath(path)))
    except OSError:
        return False
    return st.st_uid == os.geteuid() and not stat.S_IMODE(st.st_mode) & 0o077


def rows(period, pins, names=None):
    """The per-vCPU rows ``status`` prints, from one :class:`Period`.

    ``pins`` is the driver's ``vcpu_pins()``: what the host has;
    ``names`` its ``domain_names()``.
    """
    names = names or {}
    if period is None or period.start:
        return []
    decision = period.decision
    rows = []
    for ref, placement in sorted(decision.placements.items()):
        st = period.stats.get(ref)
        # what the host has; the plan only where the split is applied
        pinned = pins.get(ref, placement.threads
                          if decision.applies(placement) else ())
        rows.append({
            'core': placement.core_id, 'domain': ref.domain,
            'server': names.get(ref.domain), 'vcpu': ref.index,
            'class': placement.role.value,
            'retention_rate': getattr(st, 'retention_rate', None),
            'utilisation': getattr(st, 'utilisation', None),
            'ipc': getattr(st, 'ipc', None),
            'i_cpu': getattr(st, 'i_cpu', None),
            'pinned': sorted(pinned)})
    return rows


def _us(ns):
    return '%d us' % (ns // 1000)


def vm_lines(period):
    """``{domain: [what it has this period, and why]}`` of one period.

    Read from the period's decision and verdicts (what the agent asked of
    the host), one short line each: its vCPUs' classes and whether the
    split places them, its retention and its timeout, its CPU weight
    (MIST's verdicts have their own lines).
    """
    if period is None or period.start:
        return {}
    decision = period.decision
    by_domain = {}
    for ref, placement in sorted(decision.placements.items()):
        by_domain.setdefault(ref.domain, []).append(placement)
    out = {}
    for domain, placements in sorted(by_domain.items()):
        classes = {}
        for p in placements:
            classes[p.role.value] = classes.get(p.role.value, 0) + 1
        placed = sum(1 for p in placements if decision.applies(p))
        has = ['%s vCPU(s); %s' % (
            ', '.join('%d %s' % (n, c) for c, n in sorted(classes.items())),
            'RASS places %d of them' % placed if placed else
            'where nova put them (%s)' % (
                'the split is off' if not decision.split
                else 'their cores are not split'))]
        retains = decision.retains(domain)
        if not decision.retention:
            has.append('no retention: the guard does not keep it')
        elif decision.timeouts is None:
            has.append('retains up to %s (the host-wide LTCR timeout)'
                       % _us(retains))
        elif retains:
            has.append('retains up to %s (its own timeout)' % _us(retains))
        else:
            has.append('no retention: not kept for this VM')
        factor = decision.weights.get(domain)
        if factor is not None and factor != 1:
            has.append('CPU weight x%.2f' % factor)
        out[domain] = has
    return out


def document(period, driver, opts, mode, names=True):
    """The status file's document of one :class:`Period`.

    Without ``names`` no server name is in it (for a file others can
    read); with them each is :func:`printable`.
    """
    ran = period is not None and not period.start
    names = ({domain: printable(name)
              for domain, name in driver.domain_names().items()}
             if names else {})
    return {'time': time.time(), 'pid': os.getpid(), 'mode': mode,
            'period': opts.period, 'ticks': period.number if period else 0,
            'timeout_ns': period.decision.timeout_ns if ran else None,
            'dry_run': opts.dry_run,
            'vcpus': rows(period, driver.vcpu_pins(), names),
            'vms': {domain: {'name': names.get(domain), 'has': has}
                    for domain, has in vm_lines(period).items()},
            'mechanisms': sorted(period.kept) if period else [],
            'verdicts': ([dataclasses.asdict(v) for v in period.verdicts]
                         if period and period.verdicts is not None
                         else None),
            'retaining': (dict(period.retaining)
                          if period and period.retaining is not None
                          else None),
            'mist': ({d: dataclasses.asdict(v)
                      for d, v in sorted(period.mist.items())}
                     if period and period.mist is not None else None),
            'mist_levers': driver.mist_levers()}


def format_table(doc):
    """A per-core table of one status document."""
    def num(value, fmt='%.2f'):
        return 'n/a' if value is None else fmt % value

    text = printable    # every word from the file, as the terminal gets it

    table = prettytable.PrettyTable(
        ['core', 'domain', 'vcpu', 'class', 'retention', 'util', 'IPC',
         'I_cpu', 'pinned'])
    table.align = 'l'
    for row in sorted(doc['vcpus'], key=lambda r: (r['core'], r['domain'],
                                                   r['vcpu'])):
        table.add_row([row['core'], text(row.get('server') or row['domain']),
                       row['vcpu'], text(row['class']),
                       num(row['retention_rate'], '%.3f'),
                       num(row.get('utilisation')), num(row['ipc']),
                       num(row['i_cpu']),
                       ','.join(map(str, row['pinned']))])
    timeout = doc['timeout_ns']
    head = ('mode %s, period %.2f s, %d period(s), retention timeout %s%s'
            % (text(doc['mode']), doc['period'], doc['ticks'],
               'n/a' if timeout is None else '%d us' % (timeout // 1000),
               ', dry run' if doc.get('dry_run') else ''))
    lines = [head]
    if doc.get('verdicts') is None:
        lines.append('guard off: every mechanism applied')
    else:
        lines.append('mechanisms kept: %s' % (
            ', '.join(map(text, doc.get('mechanisms') or ())) or 'none'))
        retaining = doc.get('retaining')
        if retaining is not None:
            lines.append('retaining: %s' % (', '.join(
                '%s at %d us' % (text(d), ns // 1000)
                for d, ns in sorted(retaining.items())) or 'no VM'))
        for v in doc['verdicts']:
            lines.append('  guard: %s%s%s %s (%s)' % (
                text(v['mechanism']),
                ' for %s' % text(v['domain']) if v.get('domain') else '',
                ' at %d us' % (v['timeout_ns'] // 1000)
                if v.get('timeout_ns') else
                ' x%g' % v['factor'] if v.get('factor') else '',
                'ALARM' if v.get('after_effect') else
                'kept' if v['kept'] else 'dropped',
                text(v['reason'], limit=1000)))
    mist = doc.get('mist')
    if mist is not None:
        lines.append('MIST: %d reserved VM(s), %d protected' % (
            len(mist), sum(1 for v in mist.values() if v['protect'])))
        for lever, line in (doc.get('mist_levers') or {}).items():
            if line:
                lines.append('  %s: %s' % (lever, line))
        for domain, v in sorted(mist.items()):
            lines.append('  %s: %s, I_cpu %s (%s)' % (
                text(domain),
                'protected' if v['protect'] else 'not protected',
                num(v.get('i_cpu')), text(v['reason'], limit=1000)))
    vms = doc.get('vms') or {}
    if vms:
        lines.append('VMs:')
    for domain, vm in sorted(vms.items(),
                             key=lambda item: (item[1]['name'] or '',
                                               item[0])):
        lines.append('  %s %s' % (text(vm['name']), text(domain))
                     if vm['name'] else '  %s' % text(domain))
        for line in vm['has']:
            lines.append('    %s' % text(line, limit=1000))
    return '\n'.join(lines) + '\n' + table.get_string()
