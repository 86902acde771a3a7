"""The shell commands the operator docs give, as the docs give them.

The cloud runs the docs' own commands (loading the metadata definitions,
defining the retention trait, giving a flavor retention, checking a host's
traits) rather than its own equivalents, so a command that does not work
fails the cloud, and a doc that names two different ones for the same job
fails the unit tests (``vsmtio_nova/tests/unit/test_operator_surface.py``).
Commands are taken from reStructuredText literal blocks (a paragraph ending
in ``::``, then an indented block), one command per line once backslash
continuations are joined.
"""

import os
import re
import shlex

DOC = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), 'doc', 'source')


def literal_blocks(text):
    """Each ``::`` literal block of an RST text, dedented, in order."""
    lines = text.splitlines()
    blocks, i = [], 0
    while i < len(lines):
        if not lines[i].rstrip().endswith('::'):
            i += 1
            continue
        i += 1
        while i < len(lines) and not lines[i].strip():
            i += 1
        block = []
        while i < len(lines) and (not lines[i].strip()
                                  or lines[i].startswith((' ', '\t'))):
            block.append(lines[i])
            i += 1
        while block and not block[-1].strip():
            block.pop()
        if block:
            indent = min(len(b) - len(b.lstrip()) for b in block if b.strip())
            blocks.append('\n'.join(b[indent:] for b in block))
    return blocks


def commands(name, program=None):
    """The commands of ``doc/source/<name>``: ``[(line, words), ...]``.

    ``line`` is the command as a shell reads it (continuations joined),
    ``words`` its words (``shlex``); comments are dropped, and
    ``program`` keeps only the commands it starts.
    """
    with open(os.path.join(DOC, name)) as f:
        text = f.read()
    found = []
    for block in literal_blocks(text):
        joined = re.sub(r'\\\n\s*', ' ', block)
        for line in joined.splitlines():
            line = line.strip()
            if not line or line.startswith('#'):
                continue
            if program is not None and line.split()[0] != program:
                continue
            try:
                words = shlex.split(line)
            except ValueError:
                continue      # not shell: a code sample's line
            found.append((line, words))
    return found


def one(name, *leading):
    """The one command line of ``name`` whose words start ``leading``.

    Option words (``--os-...-api-version N``) between the program and its
    sub-command are skipped when matching, not when running.
    """
    matches = [line for line, words in commands(name, leading[0])
               if _subcommand(words)[:len(leading)] == list(leading)]
    if len(matches) != 1:
        raise LookupError('%s gives %d commands starting %r, not one'
                          % (name, len(matches), ' '.join(leading)))
    return matches[0]


def properties(line):
    """``{key: value}`` of a command's ``--property key=value`` words."""
    words = shlex.split(line)
    return dict(words[i + 1].split('=', 1) for i, w in enumerate(words)
                if w == '--property' and i + 1 < len(words))


def _subcommand(words):
    """``words`` without the program's leading ``--option value`` pairs."""
    out, i = [words[0]], 1
    while i < len(words) and words[i].startswith('--'):
        i += 1 if '=' in words[i] else 2
    return out + words[i:]
