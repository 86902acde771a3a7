"""Real-time scheduling of vCPU threads, and the budget it runs on (MIST).

MIST's CPU protection moves a reserved VM's vCPU threads from CFS to
SCHED_RR (paper §IV: proportional shares did not isolate under heavy load).
An RT thread runs before every CFS thread, so the agent uses it only where
the host bounds what RT threads may take:

* with RT group scheduling (``CONFIG_RT_GROUP_SCHED``: the thread's cpu
  cgroup has ``cpu.rt_runtime_us``) a thread may be RT only if its group
  has runtime; the agent grants each protected vCPU's cgroup
  ``mist_rt_runtime_us`` per period, and its ancestors what their
  children need (:class:`CgroupRtRuntime`, :func:`grants`). That grant is
  the budget, and the paper's own knob (§V);
* without it the host-wide ``kernel.sched_rt_runtime_us`` (95% of each CPU
  by default) bounds all RT threads; a host where it is -1 has no bound
  and gets no RT from the agent (:func:`rt_mode`).

Both knobs are actuators (read, record once, write, restore). Their
originals carry an identity (the thread's start time; nothing for a
cgroup, whose path names the domain's run) so that a restore after a
crash never touches a thread that merely reuses an id.
"""

import errno
import os

from vsmtio_agent.actuators import base
from vsmtio_agent.actuators import checkpoint
from vsmtio_agent.linux import kernel_knobs

RT_FILE = 'cpu.rt_runtime_us'
_CPU_CONTROLLERS = ('cpu', 'cpu,cpuacct', 'cpuacct,cpu')


def _read_int(path):
    with open(path) as f:
        return int(f.read().strip())


def thread_start(procfs_root, pid, tid):
    """The thread's start time (``stat`` field 22), or None if gone."""
    try:
        with open(os.path.join(procfs_root, str(pid), 'task', str(tid),
                               'stat')) as f:
            text = f.read()
    except OSError:
        return None
    fields = text[text.rfind(')') + 2:].split()
    try:
        return int(fields[19])
    except (IndexError, ValueError):
        return None


def cpu_cgroup(procfs_root, pid, tid):
    """The thread's cgroup v1 cpu-controller path (``machine/.../vcpu0``).

    None on a cgroup v2 host (``0::`` only) or if unreadable.
    """
    try:
        with open(os.path.join(procfs_root, str(pid), 'task', str(tid),
                               'cgroup')) as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    for line in lines:
        parts = line.split(':', 2)
        if len(parts) == 3 and 'cpu' in parts[1].split(','):
            return parts[2].strip('/')
    return None


def cpu_controller_root(cgroup_root):
    """The cgroup v1 cpu controller's mount under ``cgroup_root``."""
    for name in _CPU_CONTROLLERS:
        path = os.path.join(cgroup_root, name)
        if os.path.isdir(path):
            return path
    return None


def rt_mode(procfs_root, cgroup_root, cgroup_path):
    """('group' | 'global' | None, why) for a thread in ``cgroup_path``.

    ``group``: RT group scheduling, the agent must grant runtime;
    ``global``: RT bounded host-wide by ``kernel.sched_rt_runtime_us``;
    None: the host gives RT threads no bound (or no runtime at all).
    """
    try:
        runtime = _read_int(os.path.join(procfs_root,
                                         'sys/kernel/sched_rt_runtime_us'))
    except (OSError, ValueError) as exc:
        return None, 'kernel.sched_rt_runtime_us unreadable (%s)' % exc
    if runtime < 0:
        return None, ('kernel.sched_rt_runtime_us is -1: real-time threads '
                      'are not bounded on this host')
    if runtime == 0:
        return None, 'kernel.sched_rt_runtime_us is 0: no real-time runtime'
    root = cpu_controller_root(cgroup_root)
    # a thread in the root group runs on the host-wide budget itself
    if root and cgroup_path and os.path.exists(os.path.join(root, RT_FILE)):
        return 'group', ('real-time group scheduling: runtime granted per '
                         'vCPU cgroup under %s' % root)
    return 'global', ('real-time runtime bounded host-wide at %d us per '
                      'period' % runtime)


class ThreadPolicy(base.Actuator):
    """A thread's scheduling policy and RT priority.

    Keys are ``"<pid>/<tid>"``; values ``{'policy': int, 'priority': int}``
    (``os.SCHED_*``), originals also ``'start'``: a restore skips a thread
    that is gone or is another thread with the same id.
    """

    kind = checkpoint.SCHED_POLICY

    def __init__(self, record, procfs_root='/proc'):
        super().__init__(record)
        self.procfs_root = procfs_root

    @staticmethod
    def _ids(key):
        pid, tid = key.split('/')
        return int(pid), int(tid)

    def read(self, key):
        pid, tid = self._ids(key)
        try:
            policy = os.sched_getscheduler(tid)
            priority = os.sched_getparam(tid).sched_priority
        except OSError as exc:
            raise base.ActuatorError('cannot read the policy of thread %s: '
                                     '%s' % (key, exc))
        return {'policy': policy, 'priority': priority,
                'start': thread_start(self.procfs_root, pid, tid)}

    def _set(self, key, value):
        pid, tid = self._ids(key)
        start = value.get('start')
        if start is not None and thread_start(self.procfs_root, pid,
                                              tid) != start:
            return      # restoring a thread that is gone: nothing of ours
        try:
            os.sched_setscheduler(tid, value['policy'],
                                  os.sched_param(value['priority']))
        except OSError as exc:
            raise base.ActuatorError(
                'cannot set the policy of thread %s: %s' % (key, exc),
                denied=exc.errno in (errno.EPERM, errno.EACCES))


class CgroupRtRuntime(base.Actuator):
    """``cpu.rt_runtime_us`` of one cgroup v1 cpu group.

    Keys are paths below the cpu controller (``machine/<domain>/vcpu0``).
    A child's runtime may not exceed its parent's, so grants are written
    from the top down and restored from the bottom up.
    """

    kind = checkpoint.RT_RUNTIME

    def __init__(self, record, controller_root):
        super().__init__(record)
        self.root = controller_root

    def _dir(self, key):
        """The group's directory; ``ActuatorError`` if it leaves the root."""
        if not key:
            return self.root
        try:
            return kernel_knobs.confined(self.root, key)
        except kernel_knobs.KnobError as exc:
            raise base.ActuatorError(str(exc), denied=True)

    def _file(self, key):
        return os.path.join(self._dir(key), RT_FILE)

    def read(self, key):
        try:
            return _read_int(self._file(key))
        except (OSError, ValueError) as exc:
            raise base.ActuatorError('cannot read %s: %s'
                                     % (self._file(key), exc))

    def _set(self, key, value):
        if not os.path.isdir(self._dir(key)):
            if self.recorded(key):
                return      # the group went with its domain: nothing left
            raise base.ActuatorError('no cgroup %s' % key)
        try:
            with open(self._file(key), 'w') as f:
                f.write('%d\n' % value)
        except OSError as exc:
            raise base.ActuatorError(
                'cannot write %d to %s: %s' % (value, self._file(key), exc),
                denied=exc.errno in (errno.EPERM, errno.EACCES))

    def original_or_current(self, key):
        try:
            return self.record.original(self.kind, key)
        except KeyError:
            return self.read(key)

    def restore_all(self):
        """Restore every kept group, children before their parents."""
        failed = []
        for key in sorted(self.record.keys(self.kind),
                          key=lambda k: (-k.count('/'), k)):
            try:
                self.restore(key)
            except base.ActuatorError as exc:
                failed.append((key, exc))
        return failed

    def children(self, key):
        """Child groups of ``key`` (directories with the RT file)."""
        base_dir = os.path.join(self.root, key)
        try:
            names = os.listdir(base_dir)
        except OSError:
            return []
        return [os.path.join(key, n) if key else n for n in names
                if os.path.exists(os.path.join(base_dir, n, RT_FILE))]


def ancestors(path):
    """``a``, ``a/b`` for ``a/b/c``: the groups above ``path``, top first."""
    parts = path.split('/')
    return ['/'.join(parts[:i]) for i in range(1, len(parts))]


def grants(actuator, leaves, runtime_us):
    """Top-down ``[(group, runtime)]`` giving each leaf ``runtime_us``.

    Every group above a leaf gets at least the sum of what its children
    hold after the change, never less than its original (a group the
    agent releases goes back to its original through restore, not here).
    """
    want = {leaf: runtime_us for leaf in leaves}
    inner = {a for leaf in leaves for a in ancestors(leaf)}
    for group in sorted(inner, key=lambda g: -g.count('/')):
        need = 0
        for child in actuator.children(group):
            if child in want:
                need += want[child]
            else:
                need += actuator.original_or_current(child)
        want[group] = max(actuator.original_or_current(group), need)
    return sorted(want.items(), key=lambda kv: (kv[0].count('/'), kv[0]))
