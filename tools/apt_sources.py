#!/usr/bin/env python3
"""Print the archive URI this machine's apt sources use for a suite.

The project names no package archive or mirror: a script that must hand
one to a tool that does not read apt's configuration (mmdebstrap,
diskimage-builder) asks this machine's own apt sources, as apt itself would
read them: deb822 ``*.sources`` files in ``sources.list.d`` and one-line
``deb URI SUITE COMPONENT...`` entries in ``sources.list`` and
``sources.list.d/*.list``. Only enabled ``deb`` (binary) entries count;
the first one, in apt's file order, that carries the suite wins.

    tools/apt_sources.py bookworm            # the archive of bookworm
    tools/apt_sources.py bookworm-security   # where its security updates are

Exit status 2 with a one-line message when no source carries the suite.
"""

import argparse
import glob
import os
import sys


def _deb822_stanzas(text):
    """The stanzas of a deb822 file as dicts of lower-cased field names."""
    stanzas, fields, key = [], {}, None
    for line in text.splitlines():
        if line.startswith('#'):
            continue
        if not line.strip():
            if fields:
                stanzas.append(fields)
            fields, key = {}, None
        elif line[0] in ' \t' and key:
            fields[key] += ' ' + line.strip()
        elif ':' in line:
            key, value = line.split(':', 1)
            key = key.strip().lower()
            fields[key] = value.strip()
    if fields:
        stanzas.append(fields)
    return stanzas


def _from_deb822(text):
    for fields in _deb822_stanzas(text):
        if fields.get('enabled', 'yes').lower() == 'no':
            continue
        if 'deb' not in fields.get('types', '').split():
            continue
        for uri in fields.get('uris', '').split():
            yield uri, fields.get('suites', '').split()


def _from_one_line(text):
    for line in text.splitlines():
        words = line.split('#', 1)[0].split()
        if not words or words[0] != 'deb':
            continue
        words = words[1:]
        if words and words[0].startswith('['):   # [ option=value ... ]
            while words and not words[0].endswith(']'):
                words = words[1:]
            words = words[1:]
        if len(words) >= 2:
            yield words[0], [words[1]]


def entries(root='/'):
    """``(uri, suites)`` of every enabled binary source, in apt's order."""
    etc = os.path.join(root, 'etc', 'apt')
    paths = [os.path.join(etc, 'sources.list')]
    paths += sorted(glob.glob(os.path.join(etc, 'sources.list.d', '*')))
    for path in paths:
        if path.endswith('.sources'):
            parse = _from_deb822
        elif path.endswith('.list'):
            parse = _from_one_line
        else:
            continue
        try:
            with open(path, encoding='utf-8') as f:
                text = f.read()
        except FileNotFoundError:
            continue
        yield from parse(text)


def uri_for(suite, root='/'):
    """The first source's URI carrying ``suite``, or ``None``."""
    for uri, suites in entries(root):
        if suite in suites:
            return uri.rstrip('/')
    return None


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('suite')
    parser.add_argument('--root', default='/',
                        help='read ROOT/etc/apt instead of /etc/apt')
    args = parser.parse_args(argv)
    uri = uri_for(args.suite, args.root)
    if uri is None:
        print('apt_sources: no enabled deb source for suite %s in %s'
              % (args.suite, os.path.join(args.root, 'etc', 'apt')),
              file=sys.stderr)
        return 2
    print(uri)
    return 0


if __name__ == '__main__':
    sys.exit(main())
