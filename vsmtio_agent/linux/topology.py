"""The host's SMT topology from sysfs, limited to the CPUs nova gave guests.

Linux lists each logical CPU's hyperthread siblings in
``/sys/devices/system/cpu/cpuN/topology/thread_siblings_list``. The root is
injectable because tests (and this machine, which has no SMT) must present
a 2-thread-per-core host as a fake sysfs tree.
"""

import os
import re

from vsmtio_agent import model

_CPU_DIR = re.compile(r'^cpu(\d+)$')


def parse_cpu_list(text):
    """Parse a kernel cpulist or nova CPU spec: ``0-3,8,^2`` -> {0,1,3,8}.

    Raises ValueError with the offending token on bad input.
    """
    include, exclude = set(), set()
    for token in text.replace(' ', '').split(','):
        if not token:
            continue
        target = include
        if token.startswith('^'):
            target, token = exclude, token[1:]
        if '-' in token:
            lo, _, hi = token.partition('-')
            if not (lo.isdigit() and hi.isdigit()) or int(lo) > int(hi):
                raise ValueError('bad CPU range %r in %r' % (token, text))
            target.update(range(int(lo), int(hi) + 1))
        elif token.isdigit():
            target.add(int(token))
        else:
            raise ValueError('bad CPU id %r in %r' % (token, text))
    return include - exclude


def format_cpu_list(cpus):
    """The inverse of :func:`parse_cpu_list` (ranges collapsed)."""
    out, run = [], []
    for cpu in sorted(cpus):
        if run and cpu == run[-1] + 1:
            run.append(cpu)
            continue
        if run:
            out.append(_fmt_run(run))
        run = [cpu]
    if run:
        out.append(_fmt_run(run))
    return ','.join(out)


def _fmt_run(run):
    return str(run[0]) if len(run) == 1 else '%d-%d' % (run[0], run[-1])


def _read(path):
    with open(path) as f:
        return f.read().strip()


def online_cpus(sysfs_root='/sys'):
    """Online logical CPUs (every listed CPU if ``online`` is absent)."""
    base = os.path.join(sysfs_root, 'devices/system/cpu')
    try:
        return parse_cpu_list(_read(os.path.join(base, 'online')))
    except FileNotFoundError:
        return {int(m.group(1)) for m in map(_CPU_DIR.match,
                                             os.listdir(base)) if m}


def read_siblings(sysfs_root='/sys'):
    """Map each online CPU to (package id, core id, frozenset of siblings)."""
    base = os.path.join(sysfs_root, 'devices/system/cpu')
    out = {}
    for cpu in sorted(online_cpus(sysfs_root)):
        topo = os.path.join(base, 'cpu%d' % cpu, 'topology')
        try:
            siblings = parse_cpu_list(
                _read(os.path.join(topo, 'thread_siblings_list')))
        except FileNotFoundError:
            siblings = {cpu}
        try:
            package = int(_read(os.path.join(topo, 'physical_package_id')))
        except (FileNotFoundError, ValueError):
            package = 0
        out[cpu] = (package, frozenset(siblings | {cpu}))
    return out


def allowed_cpus(cpu_dedicated_set=None, cpu_shared_set=None, online=()):
    """CPUs nova may run guests on: its dedicated and shared sets, or all.

    nova's ``[compute] cpu_dedicated_set`` / ``cpu_shared_set`` bound where
    guests run; the agent never moves a vCPU outside them.
    """
    given = set()
    for spec in (cpu_dedicated_set, cpu_shared_set):
        if spec:
            given |= parse_cpu_list(spec)
    online = set(online)
    return (given & online) if given else online


def build_topology(sysfs_root='/sys', cpu_dedicated_set=None,
                   cpu_shared_set=None):
    """A :class:`~vsmtio_agent.model.Topology` of the cores guests may use.

    A core is kept with the siblings nova allows; its id is its lowest
    logical CPU (core_id in sysfs repeats across packages). Siblings are
    ordered so :attr:`Core.cpu_thread` is the lowest-numbered thread.
    """
    siblings = read_siblings(sysfs_root)
    allowed = allowed_cpus(cpu_dedicated_set, cpu_shared_set, siblings)
    cores, seen = [], set()
    for cpu in sorted(siblings):
        group = siblings[cpu][1]
        if group in seen:
            continue
        seen.add(group)
        threads = tuple(sorted(group & allowed))
        if threads:
            cores.append(model.Core(min(group), threads))
    return model.Topology(tuple(cores))


def smt_enabled(sysfs_root='/sys'):
    """The kernel's SMT switch (``None`` where the file is absent)."""
    path = os.path.join(sysfs_root, 'devices/system/cpu/smt/active')
    try:
        return _read(path) == '1'
    except (FileNotFoundError, PermissionError):
        return None
