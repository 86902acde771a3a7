# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.
"""Every repository path and configuration option the docs cite exists.

A Sphinx extension: each reference that does not resolve is a warning
(``vsmtio.ref``), so ``sphinx-build -W`` (``tox -e docs``) fails on it.
It reads every page of the build, and the files named by the
``vsmtio_refcheck_extra`` setting (globs relative to the repository's
root): reStructuredText files such as ``README.rst`` and reno notes
(``releasenotes/notes/*.yaml``, each section's text parsed as
reStructuredText). Release notes record history: a note may name a file,
module or option that a later change removed or renamed, so in them only
configuration groups (``[group]``) and paths of the documentation
(``doc/...``) are checked.

What is checked, in inline literals (````like this````), token by token
(a token is a whitespace-separated word; a leading ``./`` or ``(``, a
trailing ``.,;:)`` and a ``:LINE`` suffix are dropped, and of
``--opt=VALUE`` only ``VALUE`` is read):

Repository paths
    A token with a ``/`` whose first component is a top-level entry of the
    repository (``doc``, ``etc``, ``tools``, ``vsmtio_agent``, ...) must
    name an existing file or directory. A relative token (first component
    not top-level, such as ``policy/rass.py``) is checked only when its last
    component has a source file's extension (``.py``, ``.yaml``, ``.rst``,
    ...): some repository file's path must end with it. Paths are also read
    from literal blocks (code blocks), there only when top-level.

Python modules
    A dotted token whose first component is one of the repository's
    top-level packages (``vsmtio_agent.agent.Agent``) must lead to a module
    or package; what follows the module (classes, functions) is not
    checked. ``GROUP.OPTION`` with GROUP a configuration group of this
    project (``vsmtio_agent.guard_settle_periods``, as ``--set`` takes it)
    is accepted when OPTION is an option of that group; entry-point group
    names of ``setup.cfg`` (``vsmtio_agent.host_drivers``) are accepted.

Configuration options
    ``[group]`` and ``[group] option`` (anywhere in a literal; ``*`` in the
    option is a glob) must be a real group and option, and so must the
    ``[group]`` headers and ``option = value`` lines of a literal block
    that has a ``[group]`` line (a configuration file excerpt). The options
    are read with oslo.config's generator (``oslo-config-generator
    --format json``) from every namespace of ``setup.cfg``'s
    ``oslo.config.opts`` entry points and of the generator configurations
    in ``etc/oslo-config-generator/`` (``oslo.log`` for the agent's
    ``[DEFAULT]``), plus the tempest plugin's options
    (``vsmtio_tempest_plugin/config.py``, what its ``get_opt_lists``
    gives tempest; it shares the ``[vsmtio]`` name with nova's group, so
    the two are one group here), plus ``ALLOWED_OPTIONS`` below: the other
    services' groups the docs cite (nova, tempest, Watcher), whose options
    are those services' to define.

Not checked (false positives, or not this repository's): tokens with
``://`` (URLs, libvirt URIs), host paths (starting with ``/`` or ``~``),
shell globs and placeholders (``*``, ``?``, ``[``, ``{``, ``<``, ``$``,
``...``, an all-capitals component such as ``NAME`` or ``N``), relative
paths without a source extension (``sim/``, ``updates/dkms``), group
names that are not identifiers (``[a-z0-9_]+``, ``[min, max]``), and
in configuration excerpts capitalised sections (``[Service]``: a systemd
unit, not an oslo.config file), and C paths of the Linux kernel's tree
(``arch/x86/kvm/x86.c``: a relative ``.c`` or ``.h`` path whose first
component is one of ``KERNEL_TREE``).
"""

import configparser
import fnmatch
import glob
import io
import json
import os
import re

from docutils import core as docutils_core
from docutils import nodes
from sphinx.util import logging

LOG = logging.getLogger(__name__)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, '..', '..', '..'))

#: Options of other services' configuration files that the docs cite.
#: ``'group'`` accepts any option of the group; ``('group', 'option')``
#: that one option.
ALLOWED_OPTIONS = {
    # nova.conf: nova's own options, which the docs tell operators to set
    # beside vsmtio's (nova is not installed to build the docs).
    ('DEFAULT', 'host'),
    ('DEFAULT', 'compute_driver'),
    'compute',
    'filter_scheduler',
    'libvirt',
    # tempest.conf: tempest's own groups.
    'identity',
    # watcher.conf: Watcher's groups; a strategy's options live in a group
    # named after it.
    'compute_model',
    'watcher_cluster_data_model_collectors.compute',
    'watcher_strategies.vsmtio_mix_repair',
}

#: A relative path is checked when its last component ends so.
SOURCE_EXTENSIONS = ('.py', '.yaml', '.yml', '.json', '.rst', '.txt', '.sh',
                     '.conf', '.cfg', '.ini', '.c', '.h', '.png', '.service',
                     '.sample', '.patch', '.toml')

#: First components of the Linux kernel's source tree (for C paths).
KERNEL_TREE = {'arch', 'block', 'drivers', 'fs', 'include', 'kernel', 'mm',
               'net', 'tools', 'virt'}

SKIP_DIRS = {'.git', '.tox', '.venv', 'build', '__pycache__', '.eggs',
             '.stestr', '.hypothesis'}

PATH_TOKEN = re.compile(r'^[A-Za-z0-9_.\-/]+$')
PLACEHOLDER = re.compile(r'^[A-Z][A-Z_]*$')
DOTTED = re.compile(r'^[A-Za-z_]\w*(\.[A-Za-z_]\w*)+$')
GROUP_REF = re.compile(r'(?:^|(?<=\s))\[([A-Za-z_][A-Za-z0-9_.]*)\]'
                       r'(?:[ \t]+([A-Za-z_][\w\-]*\*?))?')
INI_LINE = re.compile(r'^\s*([A-Za-z_][\w\-]*)\s*=')
INI_HEADER = re.compile(r'^\s*\[([A-Za-z_][A-Za-z0-9_.]*)\]\s*$')


def _repo_files():
    files = []
    for top, dirs, names in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS
                   and not d.endswith('.egg-info')]
        rel = os.path.relpath(top, ROOT)
        for name in names:
            files.append(name if rel == '.' else rel + '/' + name)
    return files


def _setup_cfg():
    parser = configparser.ConfigParser(interpolation=None)
    parser.read(os.path.join(ROOT, 'setup.cfg'))
    return parser


def _namespaces(setup):
    names = []
    entry_points = setup.get('entry_points', 'oslo.config.opts', fallback='')
    for line in entry_points.splitlines():
        if '=' in line:
            names.append(line.split('=', 1)[0].strip())
    for conf in sorted(glob.glob(os.path.join(
            ROOT, 'etc', 'oslo-config-generator', '*.conf'))):
        with open(conf) as f:
            for line in f:
                m = re.match(r'\s*namespace\s*=\s*(\S+)', line)
                if m:
                    names.append(m.group(1))
    return list(dict.fromkeys(names))


def _options(namespaces):
    """{group: {option, ...}} of the namespaces, by oslo.config's generator."""
    from oslo_config import cfg
    from oslo_config import generator

    conf = cfg.ConfigOpts()
    generator.register_cli_opts(conf)
    args = ['--format', 'json']
    for ns in namespaces:
        args += ['--namespace', ns]
    conf(args, project='vsmtio-docs', default_config_files=[],
         default_config_dirs=[])
    out = io.StringIO()
    generator.generate(conf, output_file=out)
    options = {}
    for group, data in json.loads(out.getvalue())['options'].items():
        names = options.setdefault(group, set())
        for opt in data['opts']:
            names.add(opt['name'])
            for dep in opt.get('deprecated_opts') or ():
                if dep.get('name') and dep.get('group') in (None, group):
                    names.add(dep['name'])
    # the tempest plugin's options, as its get_opt_lists gives them to
    # tempest (the module imports oslo.config only, not tempest)
    from vsmtio_tempest_plugin import config as tempest_config
    options.setdefault(tempest_config.group.name, set()).update(
        o.name for o in tempest_config.opts)
    options.setdefault('service_available', set()).add(
        tempest_config.service_option.name)
    # option names may be written with - or _ (oslo.config accepts both)
    return {g: names | {n.replace('-', '_') for n in names}
            for g, names in options.items()}


class Checker(object):

    def __init__(self):
        setup = _setup_cfg()
        self.files = set(_repo_files())
        self.dirs = {f.rsplit('/', i)[0] for f in self.files
                     for i in range(1, f.count('/') + 1)}
        self.top = {p.split('/', 1)[0] for p in self.files | self.dirs}
        self.packages = {d for d in self.top
                         if d + '/__init__.py' in self.files}
        self.entry_point_groups = (set(setup.options('entry_points'))
                                   if setup.has_section('entry_points')
                                   else set())
        self.options = _options(_namespaces(setup))
        self.own_groups = set(self.options)

    # -- paths --------------------------------------------------------
    def exists(self, path):
        path = path.rstrip('/')
        return path in self.files or path in self.dirs

    def check_path(self, token, relative_too=True):
        """None if fine or not a path, else what is wrong."""
        if token.startswith('./'):
            token = token[2:]
        if ('/' not in token or '://' in token or '...' in token
                or token.startswith(('/', '~', '.'))
                or not PATH_TOKEN.match(token)):
            return None
        parts = [p for p in token.split('/') if p]
        if not parts or any(PLACEHOLDER.match(p) and '.' not in p
                            for p in parts):
            return None
        if parts[0] in self.top:
            if self.exists(token):
                return None
            return 'no such file or directory: %s' % token
        if not relative_too or not token.endswith(SOURCE_EXTENSIONS):
            return None
        if parts[0] in KERNEL_TREE and token.endswith(('.c', '.h')):
            return None
        suffix = '/' + token.strip('/')
        if any(('/' + f).endswith(suffix) for f in self.files):
            return None
        return 'no repository file ends with: %s' % token

    def check_dotted(self, token):
        if not DOTTED.match(token):
            return None
        parts = token.split('.')
        if token in self.entry_point_groups or any(
                PLACEHOLDER.match(p) for p in parts[1:]):
            return None
        if (len(parts) == 2 and parts[0] in self.own_groups
                and parts[1] in self.options[parts[0]]):
            return None
        if parts[0] not in self.packages:
            return None
        path = parts[0]
        for part in parts[1:]:
            if self.exists(path + '/' + part + '.py'):
                return None
            if path + '/' + part + '/__init__.py' in self.files:
                path += '/' + part
                continue
            if path == parts[0]:
                if parts[0] in self.own_groups:
                    return 'no module or [%s] option: %s' % (parts[0], token)
                return 'no such module: %s' % token
            return None  # an attribute of the package
        return None

    # -- options ------------------------------------------------------
    def check_option(self, group, option=None):
        if group in ALLOWED_OPTIONS:
            return None
        if option and (group, option) in ALLOWED_OPTIONS:
            return None
        if group not in self.options:
            return 'no such configuration group: [%s]' % group
        if not option:
            return None
        names = self.options[group]
        if '*' in option:
            if fnmatch.filter(names, option):
                return None
        elif option in names or option.replace('-', '_') in names:
            return None
        return 'no such option: [%s] %s' % (group, option)

    # -- texts --------------------------------------------------------
    def tokens(self, text):
        for raw in text.split():
            token = raw.lstrip('(').rstrip('.,;:)')
            if token.startswith('-') and '=' in token:
                token = token.split('=', 1)[1]
            elif '=' in token:
                # KEY=VALUE: both halves may be references
                key, value = token.split('=', 1)
                yield key
                token = value
            token = re.sub(r':\d+$', '', token)
            if token:
                yield token

    def check_literal(self, text):
        problems = []
        for group, option in GROUP_REF.findall(text):
            problems.append(self.check_option(group, option or None))
        for token in self.tokens(text):
            problems.append(self.check_path(token))
            problems.append(self.check_dotted(token))
        return [p for p in problems if p]

    def check_block(self, text):
        problems = []
        group = None
        if any(INI_HEADER.match(line) for line in text.splitlines()):
            for line in text.splitlines():
                header = INI_HEADER.match(line)
                if header:
                    group = header.group(1)
                    if group[0].isupper() and group != 'DEFAULT':
                        group = None  # e.g. a systemd unit's [Service]
                    else:
                        problems.append(self.check_option(group))
                    continue
                line = line.split('#', 1)[0]
                opt = INI_LINE.match(line)
                if opt and group:
                    problems.append(self.check_option(group, opt.group(1)))
        for token in self.tokens(text):
            problems.append(self.check_path(token, relative_too=False))
        return [p for p in problems if p]

    def check_history(self, text):
        """What a release note's literal gets wrong (groups, doc paths)."""
        problems = [self.check_option(group)
                    for group, _option in GROUP_REF.findall(text)]
        problems += [self.check_path(token) for token in self.tokens(text)
                     if token.startswith(('doc/', './doc/'))]
        return [p for p in problems if p]

    def check_tree(self, doctree, history=False):
        """(node, problem) of a docutils tree."""
        for node in doctree.findall(nodes.literal):
            text = node.astext()
            for problem in (self.check_history(text) if history
                            else self.check_literal(text)):
                yield node, problem
        for node in doctree.findall(nodes.literal_block):
            for problem in ([] if history
                            else self.check_block(node.astext())):
                yield node, problem


def _line_of(text, needle, default=None):
    at = text.find(needle)
    return text.count('\n', 0, at) + 1 if at >= 0 else default


def _parse_rst(text):
    return docutils_core.publish_doctree(
        text, settings_overrides={'report_level': 5, 'halt_level': 5,
                                  'file_insertion_enabled': False,
                                  'raw_enabled': False})


def _extra_texts(patterns):
    """(path, whole text, [reStructuredText pieces]) of the extra files."""
    import yaml

    for pattern in patterns:
        for path in sorted(glob.glob(os.path.join(ROOT, pattern))):
            with open(path) as f:
                text = f.read()
            if path.endswith(('.yaml', '.yml')):
                pieces = []
                for value in (yaml.safe_load(text) or {}).values():
                    for item in value if isinstance(value, list) else [value]:
                        if isinstance(item, str):
                            pieces.append(item)
            else:
                pieces = [text]
            yield path, text, pieces


def _warn(problem, location):
    LOG.warning('%s', problem, location=location, type='vsmtio',
                subtype='ref')


def _relative(path):
    return os.path.relpath(path, ROOT)


def check(app, exception):
    if exception is not None:
        return
    env = app.env
    checker = Checker()
    for docname in sorted(env.found_docs):
        doctree = env.get_doctree(docname)
        for node, problem in checker.check_tree(doctree):
            _warn(problem, node)
    for path, text, pieces in _extra_texts(
            app.config.vsmtio_refcheck_extra):
        history = path.endswith(('.yaml', '.yml'))
        for piece in pieces:
            for node, problem in checker.check_tree(_parse_rst(piece),
                                                    history=history):
                line = _line_of(text, node.astext().split('\n')[0], 1)
                _warn(problem, '%s:%d' % (_relative(path), line))


def setup(app):
    app.add_config_value('vsmtio_refcheck_extra', [], 'env')
    # At the end of every build, even one that read no page again (pages
    # do not change when a cited file goes away)
    app.connect('build-finished', check)
    return {'parallel_read_safe': True, 'parallel_write_safe': True,
            'version': '1.0'}
