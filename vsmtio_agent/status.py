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

A value the host refused (:meth:`HostDriver.refusals`: a read-only
``halt_poll_ns``) is shown as refused, with the host's reason, never as
in force; each mechanism has a line saying whether it is kept, not kept,
not tried or refused, and why.
"""

import dataclasses
import json
import math
import os
import stat
import time

import jsonschema
import prettytable

from vsmtio_agent.policy import vocabulary

# Linux's PID_MAX_LIMIT: a larger pid is not a process, and os.kill
# cannot take it.
PID_MAX = 4 * 1024 * 1024
# Every number the daemon writes fits in 64 bits; a larger one would fail
# the table's formatting (a float overflow).
_INT_LIMIT = 2 ** 63
# Longest name shown: a nova server name may have 255 characters.
MAX_NAME = 64
# The guard's mechanisms every status lists (either procedure's names;
# the wider split levels are listed once kept or judged).
MECHANISMS = vocabulary.PER_VM + (vocabulary.SPLIT, vocabulary.BORROW)
_ORDER = MECHANISMS + vocabulary.WIDER
# I_cpu's unit: MIST's interference ratio.
I_CPU_UNIT = 'involuntary per voluntary switch'

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
                   'factor': {'type': ['number', 'null']}}}
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
        'retention': {'type': 'boolean'},
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
        'vms': {'type': 'object', 'additionalProperties': _VM},
        'refused': {'type': 'object',
                    'additionalProperties': {'type': 'string'}},
        'untried': {'type': 'object',
                    'additionalProperties': {'type': 'string'}}}}
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
    return '%d \u00b5s' % (ns // 1000)


def _retention_line(decision, domain, refused):
    """What a VM retains: the timeout in force, or why none is."""
    retains = decision.retains(domain)
    if refused is not None:
        return 'no retention: the host refused the timeout (%s)' % refused
    if not decision.retention:
        return 'no retention: the guard does not keep it'
    if decision.timeouts is None:
        return ('retains up to %s (the host-wide LTCR timeout)'
                % _us(retains))
    if retains:
        return 'retains up to %s (its own timeout)' % _us(retains)
    return 'no retention: not kept for this VM'


def _classes_line(decision, placements):
    """A VM's vCPUs by class, and whether the split places them."""
    classes = {}
    for p in placements:
        classes[p.role.value] = classes.get(p.role.value, 0) + 1
    placed = sum(1 for p in placements if decision.applies(p))
    return '%s vCPU(s); %s' % (
        ', '.join('%d %s' % (n, c) for c, n in sorted(classes.items())),
        'RASS places %d of them' % placed if placed else
        'where nova put them (%s)' % (
            'the split is off' if not decision.split
            else 'their cores are not split'))


def vm_lines(period, refusals=None):
    """``{domain: [what it has this period, and why]}`` of one period.

    Read from the period's decision and verdicts (what the agent asked of
    the host), one short line each: its vCPUs' classes and whether the
    split places them, its retention and its timeout (or, where the host
    refused the timeout, that and why: ``refusals`` is the driver's), its
    CPU weight, the requests it served (MIST's verdicts have their own
    lines).
    """
    if period is None or period.start:
        return {}
    refused = (refusals or {}).get('retention')
    served = period.served or {}
    decision = period.decision
    by_domain = {}
    for ref, placement in sorted(decision.placements.items()):
        by_domain.setdefault(ref.domain, []).append(placement)
    out = {}
    for domain, placements in sorted(by_domain.items()):
        has = [_classes_line(decision, placements),
               _retention_line(decision, domain, refused)]
        factor = decision.weights.get(domain)
        if factor is not None and factor != 1:
            has.append('CPU weight x%.2f' % factor)
        if served.get(domain) is not None:
            has.append('served %.1f requests and packets per second'
                       % served[domain])
        out[domain] = has
    return out


def document(period, driver, opts, mode, names=True):
    """The status file's document of one :class:`Period`.

    Without ``names`` no server name is in it (for a file others can
    read); with them each is :func:`printable`. ``timeout_ns`` is None
    where the host refused the timeout: the decision's value is what the
    policy chose, not what the host has (``refused`` says why).
    """
    ran = period is not None and not period.start
    names = ({domain: printable(name)
              for domain, name in driver.domain_names().items()}
             if names else {})
    refused = {m: printable(why, limit=1000)
               for m, why in driver.refusals().items()}
    return {'time': time.time(), 'pid': os.getpid(), 'mode': mode,
            'period': opts.period, 'ticks': period.number if period else 0,
            'timeout_ns': (period.decision.timeout_ns
                           if ran and 'retention' not in refused else None),
            'retention': bool(ran and period.decision.retention),
            'dry_run': opts.dry_run,
            'vcpus': rows(period, driver.vcpu_pins(), names),
            'vms': {domain: {'name': names.get(domain), 'has': has}
                    for domain, has in vm_lines(period, refused).items()},
            'refused': refused,
            'mist_levers': driver.mist_levers(),
            **_engine_state(period)}


def _engine_state(period):
    """The guard's and MIST's part of the document (None where off)."""
    if period is None:
        return {'untried': {}, 'mechanisms': [], 'verdicts': None,
                'retaining': None, 'mist': None}
    return {
        'untried': dict(period.untried or {}),
        'mechanisms': sorted(period.kept),
        'verdicts': ([dataclasses.asdict(v) for v in period.verdicts]
                     if period.verdicts is not None else None),
        'retaining': (dict(period.retaining)
                      if period.retaining is not None else None),
        'mist': ({d: dataclasses.asdict(v)
                  for d, v in sorted(period.mist.items())}
                 if period.mist is not None else None)}


def _num(value, fmt='%.2f'):
    return 'n/a' if value is None else fmt % value


def _per_vm(verdicts):
    """Each VM's verdict: kept or not for it, and why."""
    return '; '.join('%s for %s (%s)' % (
        'kept' if v['kept'] else 'not kept', printable(v['domain']),
        printable(v['reason'], limit=1000)) for v in verdicts)


def mechanism_line(doc, mechanism):
    """``mechanism``'s state and why, one line, or None if nothing to say.

    Refused by the host (the driver's reason) before anything the guard
    says: a verdict on a value the host did not take judges nothing.
    Then the guard's verdicts (kept or not, with their reasons), the
    reason it does not try it, or, with the guard off, whether the agent
    applies it.
    """
    refused = (doc.get('refused') or {}).get(mechanism)
    if refused is not None:
        return 'refused by the host (%s)' % printable(refused, limit=1000)
    kept = mechanism in (doc.get('mechanisms') or ())
    untried = (doc.get('untried') or {}).get(mechanism)
    if doc.get('verdicts') is None:
        return 'applied (guard off)' if kept else 'not applied (%s)' % (
            printable(untried or 'not in force', limit=1000))
    return _judged_line(doc, mechanism, kept, untried)


def _judged_line(doc, mechanism, kept, untried):
    """With the guard on: its verdicts, why it is not tried, or neither."""
    judged = [v for v in doc['verdicts'] if v['mechanism'] == mechanism]
    if judged and any(v.get('domain') for v in judged):
        return _per_vm(judged)
    if judged:
        return '%s (%s)' % ('kept' if kept else 'not kept', '; '.join(
            printable(v['reason'], limit=1000) for v in judged))
    if untried is not None:
        return 'not tried (%s)' % printable(untried, limit=1000)
    if kept:
        return 'kept'
    if mechanism in MECHANISMS:
        return 'not kept (not judged yet: the guard probes it in its turn)'
    return None


def mechanism_lines(doc):
    """``  mechanism: state (why)`` for each mechanism worth a line."""
    names = set(MECHANISMS) | set(doc.get('mechanisms') or ()) | set(
        doc.get('refused') or ()) | {
        v['mechanism'] for v in doc.get('verdicts') or ()}
    names = sorted(names, key=lambda m: (
        _ORDER.index(m) if m in _ORDER else len(_ORDER), m))
    out = []
    for name in names:
        line = mechanism_line(doc, name)
        if line is not None:
            out.append('  %s: %s' % (printable(name), line))
    return out


def _head(doc):
    """The first line: mode, period, the timeout in force or refused."""
    timeout = doc['timeout_ns']
    refused = (doc.get('refused') or {}).get('retention')
    if refused is not None:
        timeout = 'refused by the host'
    elif timeout is None:
        timeout = 'n/a'
    elif doc.get('retention') is False:
        timeout = '%s, not in force: no VM retains' % _us(timeout)
    else:
        timeout = _us(timeout)
    return ('mode %s, period %.2f s, %d period(s), retention timeout %s%s'
            % (printable(doc['mode']), doc['period'], doc['ticks'],
               timeout, ', dry run' if doc.get('dry_run') else ''))


def format_table(doc):
    """A per-core table of one status document."""
    num = _num
    text = printable    # every word from the file, as the terminal gets it

    table = prettytable.PrettyTable(
        ['core', 'domain', 'vcpu', 'class', 'retention', 'util', 'IPC',
         'I_cpu (invol./vol.)', 'pinned'])
    table.align = 'l'
    for row in sorted(doc['vcpus'], key=lambda r: (r['core'], r['domain'],
                                                   r['vcpu'])):
        table.add_row([row['core'], text(row.get('server') or row['domain']),
                       row['vcpu'], text(row['class']),
                       num(row['retention_rate'], '%.3f'),
                       num(row.get('utilisation')), num(row['ipc']),
                       num(row['i_cpu']),
                       ','.join(map(str, row['pinned']))])
    lines = [_head(doc)]
    if doc.get('verdicts') is None:
        lines.append('guard off: every mechanism the host takes is applied')
    else:
        lines.append('mechanisms kept: %s' % (
            ', '.join(map(text, doc.get('mechanisms') or ())) or 'none'))
    lines.append('mechanisms:')
    lines.extend(mechanism_lines(doc))
    lines.extend(_guard_lines(doc))
    lines.extend(_mist_lines(doc))
    lines.extend(_vm_text(doc))
    return '\n'.join(lines) + '\n' + table.get_string()


def _mist_lines(doc):
    """MIST's levers and its verdict per reserved VM (none with it off)."""
    mist = doc.get('mist')
    if mist is None:
        return []
    lines = ['MIST: %d reserved VM(s), %d protected' % (
        len(mist), sum(1 for v in mist.values() if v['protect']))]
    for lever, line in (doc.get('mist_levers') or {}).items():
        if line:
            lines.append('  %s: %s' % (lever, line))
    for domain, v in sorted(mist.items()):
        i_cpu = v.get('i_cpu')
        lines.append('  %s: %s, I_cpu %s (%s)' % (
            printable(domain),
            'protected' if v['protect'] else 'not protected',
            # a unit only after a figure: "n/a involuntary per..." reads
            # as one
            'n/a' if i_cpu is None else '%s %s' % (_num(i_cpu), I_CPU_UNIT),
            printable(v['reason'], limit=1000)))
    return lines


def _vm_text(doc):
    """Per VM, by name then domain: what it has this period, and why."""
    vms = doc.get('vms') or {}
    lines = ['VMs:'] if vms else []
    text = printable
    for domain, vm in sorted(vms.items(),
                             key=lambda item: (item[1]['name'] or '',
                                               item[0])):
        lines.append('  %s %s' % (text(vm['name']), text(domain))
                     if vm['name'] else '  %s' % text(domain))
        for line in vm['has']:
            lines.append('    %s' % text(line, limit=1000))
    return lines


def _guard_lines(doc):
    """What the guard retains per VM, and each of its verdicts."""
    if doc.get('verdicts') is None:
        return []
    text = printable
    lines = []
    retaining = doc.get('retaining')
    if retaining is not None and 'retention' not in (doc.get('refused')
                                                     or {}):
        lines.append('retaining: %s' % (', '.join(
            '%s at %s' % (text(d), _us(ns))
            for d, ns in sorted(retaining.items())) or 'no VM'))
    for v in doc['verdicts']:
        lines.append('  guard: %s%s%s %s (%s)' % (
            text(v['mechanism']),
            ' for %s' % text(v['domain']) if v.get('domain') else '',
            ' at %s' % _us(v['timeout_ns'])
            if v.get('timeout_ns') else
            ' x%g' % v['factor'] if v.get('factor') else '',
            'kept' if v['kept'] else 'dropped',
            text(v['reason'], limit=1000)))
    return lines
