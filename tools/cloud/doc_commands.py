"""The shell commands the operator docs give, as the docs give them.

An operator command is a prompted line (``$ `` or ``# ``, continuation
lines joined) of a ``.. code-block:: console`` block of an operator doc
(``doc/source/*.rst``; the benchmark reports are not operator docs). The
cloud runs every one of them as written (:data:`RUN`, through
``doc_runner.doc_command``), placeholders such as ``NODE`` or ``db.large``
put in, unless :data:`EXCLUDED` says why it cannot; the unit tests
(``vsmtio_nova/tests/unit/test_operator_surface.py``) fail on a command
that is in neither, on an entry that names no command, and on a command
written outside a console block, and the cloud fails when one of
:data:`RUN` did not run.
"""

import configparser
import os
import re
import shlex

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
DOC = os.path.join(ROOT, 'doc', 'source')
PROMPTS = ('$ ', '# ')

#: The commands the cloud runs as written: (doc, program, words...), each
#: naming one command of that doc (matched as :func:`one` matches).
RUN = (
    ('install.rst', 'vsmtio-nova-conf', 'enable', '/etc/nova/nova.conf'),
    ('install.rst', 'vsmtio-nova-conf', 'enable', '--retention'),
    ('install.rst', 'vsmtio-nova-conf', 'provider-config'),
    ('install.rst', 'vsmtio-nova-conf', 'disable'),
    ('install.rst', 'vsmtio-nova-conf', 'host-key'),
    ('install.rst', 'openstack', 'resource', 'provider', 'trait', 'list'),
    ('install.rst', 'openstack', 'flavor', 'set'),
    ('install.rst', 'openstack', 'trait', 'create'),
    ('install.rst', 'glance-manage'),
    ('install.rst', 'vsmtio-agent', 'check'),
    ('install.rst', 'openstack', 'role', 'create'),
    ('install.rst', 'openstack', 'user', 'create'),
    ('install.rst', 'openstack', 'role', 'add'),
    ('install.rst', 'install', '-D'),
    ('agent.rst', 'vsmtio-agent', 'check'),
    ('agent.rst', 'vsmtio-agent', 'status'),
    ('agent.rst', 'curl'),
    ('agent.rst', 'vsmtio-agent', 'restore'),
    ('dashboard.rst', 'cp'),
    ('scheduler.rst', 'openstack', 'flavor', 'set', '--property',
     'vsmtio:workload=io'),
    ('scheduler.rst', 'openstack', 'flavor', 'set', '--property',
     'vsmtio:workload=cpu'),
    ('scheduler.rst', 'openstack', 'server', 'create'),
    ('scheduler.rst', 'openstack', 'server', 'show'),
    ('scheduler.rst', 'openstack', 'aggregate', 'set', '--property',
     'vsmtio:target_io_fraction=0.7'),
    ('scheduler.rst', 'openstack', 'aggregate', 'set', '--property',
     'vsmtio:max_io_fraction=1.0'),
    ('scheduler.rst', 'openstack', 'aggregate', 'set', '--property',
     'vsmtio:weight_multiplier=2.0'),
    ('mist.rst', 'openstack', 'flavor', 'set', 'io.reserved'),
    ('mist.rst', 'openstack', 'flavor', 'set', 'io.bw'),
    ('fleet.rst', 'openstack', 'optimize', 'audittemplate', 'create'),
    ('fleet.rst', 'openstack', 'optimize', 'audit', 'create'),
    ('fleet.rst', 'openstack', 'optimize', 'audit', 'show'),
    ('fleet.rst', 'openstack', 'optimize', 'actionplan', 'list'),
    ('fleet.rst', 'openstack', 'optimize', 'actionplan', 'show'),
    ('fleet.rst', 'openstack', 'optimize', 'action', 'list'),
    ('simulator.rst', 'vsmtio-sim', 'list'),
    ('simulator.rst', 'vsmtio-sim', 'run', '--scenario', 'io_only'),
)

_SYSTEMD = ('needs systemd as the init system; the cloud supervises its '
            'daemons itself (the unit: vsmtio_agent/tests/unit/'
            'test_systemd_unit.py)')
_RELEASE = ('installs the released package; the cloud runs the source '
            'tree, which tox installs')
#: The commands the cloud does not run, and why: (doc, program, words...).
EXCLUDED = {
    ('install.rst', 'pip'): _RELEASE,
    ('scheduler.rst', 'pip'): _RELEASE,
    ('dashboard.rst', 'pip'): _RELEASE,
    ('install.rst', 'install', '-m'): _SYSTEMD,
    ('install.rst', 'systemctl'): _SYSTEMD,
    ('agent.rst', 'systemctl'): _SYSTEMD,
    ('agent.rst', 'vsmtio-agent', '--dry-run'):
        'runs the agent\'s loop until it is stopped, a second agent '
        'beside the cloud\'s own',
    ('dashboard.rst', 'python', 'manage.py'):
        'needs a Horizon source tree (manage.py); the cloud runs the same '
        'Django commands with django-admin',
    ('dashboard.rst', 'tox'): 'a developer\'s command',
    ('nova_seams.rst', 'tox'): 'a developer\'s command',
    ('cloud.rst', 'tox'): 'runs the cloud itself',
    ('cloud.rst', 'python', 'tools/cloud/cloud.py'): 'runs the cloud itself',
    ('cloud.rst', 'python', 'tools/cloud/screenshot.py'):
        'a developer\'s command: refreshes the docs\' picture',
    ('fleet.rst', 'openstack', 'optimize', 'actionplan', 'start'):
        'needs a plan with actions, which the documented audit does not '
        'give this fleet (hosts of 10 vCPUs, min_classified_vcpus=16: its '
        'empty plan is SUCCEEDED at once); tempest\'s test_fleet applies '
        'a plan with actions',
    ('guest.rst', 'disk-image-create'):
        'builds a guest image with diskimage-builder (tox -e guest-image '
        'runs it)',
    ('simulator.rst', 'vsmtio-sim', 'run', '--scenario',
     'fig5_hbase_pagerank'): 'a synopsis (options in brackets)',
    ('simulator.rst', 'vsmtio-sim', 'compare'):
        'a synopsis (options in brackets)',
}

#: Programs whose lines belong in a console block, with a prompt.
PROGRAMS = frozenset((
    'openstack', 'glance-manage', 'nova-manage', 'systemctl', 'pip',
    'python', 'python3', 'tox', 'install', 'cp', 'curl', 'sudo', 'virsh',
    'disk-image-create'))


def operator_docs():
    """The operator docs' file names (the benchmark reports are not)."""
    return sorted(n for n in os.listdir(DOC) if n.endswith('.rst'))


def blocks(text):
    """``(kind, body)`` of each literal and code block of an RST text.

    ``kind`` is ``'::'`` for a literal block (a paragraph ending in
    ``::``), else the language of a ``code-block`` directive; the body is
    dedented, without the directive's options. Other directives'
    bodies (tables, toctrees) are not blocks.
    """
    lines = text.splitlines()
    found, i = [], 0
    while i < len(lines):
        stripped = lines[i].strip()
        code = re.match(r'\.\.\s+code-block::\s*(\S*)', stripped)
        if code:
            kind = code.group(1) or 'default'
        elif stripped.startswith('..'):
            i += 1
            continue
        elif stripped.endswith('::'):
            kind = '::'
        else:
            i += 1
            continue
        outer = len(lines[i]) - len(lines[i].lstrip())
        i += 1
        block = []
        while i < len(lines) and (
                not lines[i].strip()
                or len(lines[i]) - len(lines[i].lstrip()) > outer):
            block.append(lines[i])
            i += 1
        while block and (not block[0].strip() or (
                kind != '::' and block[0].strip().startswith(':'))):
            block.pop(0)
        while block and not block[-1].strip():
            block.pop()
        if block:
            indent = min(len(b) - len(b.lstrip()) for b in block if b.strip())
            found.append((kind, '\n'.join(b[indent:] for b in block)))
    return found


def _read(name):
    with open(os.path.join(DOC, name)) as f:
        return f.read()


def commands(name, program=None):
    """The commands of ``doc/source/<name>``: ``[(line, words), ...]``.

    ``line`` is the command as a shell reads it (continuations joined,
    prompt dropped), ``words`` its words (``shlex``, comments dropped);
    ``program`` keeps only the commands it starts.
    """
    found = []
    for kind, body in blocks(_read(name)):
        if kind != 'console':
            continue
        lines = re.sub(r'\\\n\s*', ' ', body).splitlines()
        for i, line in enumerate(lines):
            if not line.startswith(PROMPTS):
                continue         # the output the docs show, or a quote's
            line, words = line[2:].strip(), None
            while words is None:
                try:
                    words = shlex.split(line, comments=True)
                except ValueError:   # a quote goes on to the next line
                    i += 1
                    line += '\n' + lines[i]
            if program is None or _subcommand(words)[0] == program:
                found.append((line, words))
    return found


def output(name, *leading):
    """The output the docs show after :func:`one`'s command: its lines."""
    line = one(name, *leading)
    for kind, body in blocks(_read(name)):
        lines = re.sub(r'\\\n\s*', ' ', body).splitlines()
        for i, shown in enumerate(lines):
            if kind == 'console' and shown[2:].strip() == line:
                after = []
                for out in lines[i + 1:]:
                    if out.startswith(PROMPTS):
                        break
                    after.append(out)
                return after
    raise LookupError('%s: no output shown for %r' % (name, line))


def every_command():
    """``[(doc, line, words), ...]`` of every operator doc."""
    return [(name, line, words) for name in operator_docs()
            for line, words in commands(name)]


def outside_console():
    """``[(doc, line)]``: command lines written outside a console block.

    A literal or other code block line that starts with one of the
    project's own programs or :data:`PROGRAMS`: such a command would be
    neither run by the cloud nor excluded.
    """
    programs = PROGRAMS | own_programs()
    found = []
    for name in operator_docs():
        for kind, body in blocks(_read(name)):
            if kind == 'console':
                continue
            for line in body.splitlines():
                words = line.lstrip('$# ').split()
                if words and _subcommand(words)[0] in programs:
                    found.append((name, line))
    return found


def own_programs():
    """The console scripts ``setup.cfg`` installs."""
    parser = configparser.ConfigParser()
    parser.read(os.path.join(ROOT, 'setup.cfg'))
    return frozenset(
        line.split('=')[0].strip() for line in parser.get(
            'entry_points', 'console_scripts').splitlines() if line.strip())


def matches(words, leading):
    """Whether a command's words start ``leading`` (as :func:`one`)."""
    return _subcommand(words)[:len(leading)] == list(leading)


def entries(doc, words):
    """The :data:`RUN` and :data:`EXCLUDED` entries naming a command."""
    return [key for key in RUN + tuple(EXCLUDED)
            if key[0] == doc and matches(words, key[1:])]


def one(name, *leading):
    """The one command line of ``name`` whose words start ``leading``.

    Option words (``--os-...-api-version N``) between the program and its
    sub-command are skipped when matching, not when running.
    """
    found = [line for line, words in commands(name)
             if matches(words, leading)]
    if len(found) != 1:
        raise LookupError('%s gives %d commands starting %r, not one'
                          % (name, len(found), ' '.join(leading)))
    return found[0]


def properties(line):
    """``{key: value}`` of a command's ``--property key=value`` words."""
    words = shlex.split(line, comments=True)
    return dict(words[i + 1].split('=', 1) for i, w in enumerate(words)
                if w == '--property' and i + 1 < len(words))


def _subcommand(words):
    """``words`` without their leading options.

    Leading ``NAME=value`` words go, and so do the program's ``--os-...``
    and ``--config-file`` options with their values.
    """
    words = list(words)
    while len(words) > 1 and re.match(r'[A-Z_]+=', words[0]):
        words.pop(0)
    out, i = [words[0]], 1
    while i < len(words) and words[i].startswith('--') and (
            words[i].startswith('--os-') or words[i] == '--config-file'):
        i += 1 if '=' in words[i] else 2
    return out + words[i:]
