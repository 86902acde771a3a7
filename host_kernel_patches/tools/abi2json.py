#!/usr/bin/env python3
"""Generate abi.json from ABI.rst (the .rst is the source of truth).

Usage: abi2json.py [ABI.rst] > abi.json, or --check to fail when the
committed abi.json differs from what ABI.rst says.  Stdlib only, so the
kernel check script and the agent's unit test can both run it.
"""
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_RST = os.path.join(HERE, '..', 'ABI.rst')
DEFAULT_JSON = os.path.join(HERE, '..', 'abi.json')

KEYS = ('Kind', 'Type', 'Units', 'Range', 'Values', 'Default', 'Writer',
        'Reader')
_KEY_RE = re.compile(r'^\s+(%s):\s+(.*?)\s*$' % '|'.join(KEYS))
_FIELD_RE = re.compile(
    r'^\s+0x([0-9a-f]{2})\s+(u8\[\d+\]|u\d+)\s+(\w+)\s+(guest|host|-)\s')


def _number(text):
    return int(text, 0)


def parse_entries(text):
    """Return the ABI entries ("What:" blocks) as a list of dicts."""
    entries = []
    cur = None
    for line in text.splitlines():
        if line.startswith('What:'):
            cur = {'path': line.split(':', 1)[1].strip()}
            entries.append(cur)
            continue
        if cur is None:
            continue
        m = _KEY_RE.match(line)
        if m and m.group(1).lower() not in cur:
            cur[m.group(1).lower()] = m.group(2)
    out = []
    for e in entries:
        missing = [k.lower() for k in KEYS
                   if k != 'Values' and k.lower() not in e]
        if missing:
            raise ValueError('%s: missing %s' % (e['path'], missing))
        lo = hi = None
        if e['range'] != '-':
            lo, hi = (_number(x) for x in e['range'].split('..'))
        default = e['default']
        if default == '(empty)':
            default = ''
        elif lo is not None:
            default = _number(default)
        item = {
            'path': e['path'], 'kind': e['kind'], 'type': e['type'],
            'units': e['units'], 'min': lo, 'max': hi, 'default': default,
            'writer': e['writer'], 'reader': e['reader'],
        }
        if 'values' in e:
            item['values'] = e['values'].split()
        out.append(item)
    return out


def parse_pv(text):
    """Return the PV protocol constants and the record layout."""
    bit = re.search(r'KVM_FEATURE_CTX_RETENTION``\s*=\s*\*\*(\d+)\*\*', text)
    msr = re.search(r'MSR_KVM_CTX_RETENTION``\s*=\s*\*\*(0x[0-9a-f]+)\*\*',
                    text)
    ver = re.search(r'ABI version: \*\*(\d+)\*\*', text)
    fields = []
    for line in text.splitlines():
        m = _FIELD_RE.match(line)
        if m:
            ctype = m.group(2)
            size = (int(ctype[3:-1]) if ctype.startswith('u8[')
                    else int(ctype[1:]) // 8)
            fields.append({'name': m.group(3), 'offset': int(m.group(1), 16),
                           'size': size, 'writer': m.group(4)})
    return {
        'abi_version': int(ver.group(1)),
        'feature_bit': int(bit.group(1)),
        'msr': msr.group(1),
        'msr_enable_bit': 0,
        'gpa_align': 64,
        'record_size': sum(f['size'] for f in fields),
        'fields': fields,
    }


def parse(text):
    pv = parse_pv(text)
    return {'abi_version': pv.pop('abi_version'), 'pv': pv,
            'entries': parse_entries(text)}


def render(doc):
    return json.dumps(doc, indent=2, sort_keys=True) + '\n'


def main(argv):
    check = '--check' in argv
    args = [a for a in argv if a != '--check']
    rst = args[0] if args else DEFAULT_RST
    with open(rst) as f:
        out = render(parse(f.read()))
    if not check:
        sys.stdout.write(out)
        return 0
    with open(DEFAULT_JSON) as f:
        if f.read() != out:
            sys.stderr.write('abi.json is stale: run tools/abi2json.py\n')
            return 1
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
