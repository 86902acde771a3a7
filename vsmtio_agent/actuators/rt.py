"""Real-time scheduling of a reserved VM's threads, and its budget (MIST).

MIST's CPU protection moves a reserved VM's QEMU threads from CFS to
SCHED_RR (paper §IV: proportional shares did not isolate under heavy load).
An RT thread runs before every CFS thread, so the agent uses it only where
the host bounds what *each VM's* RT threads may take, and never so that
they may take a whole period:

* with RT group scheduling (``CONFIG_RT_GROUP_SCHED``: the thread's cpu
  cgroup has ``cpu.rt_runtime_us``) a thread may be RT only if its group
  has runtime. Each protected domain gets a budget sized to its
  reservation (:func:`budget_us`), split evenly over its cgroups that hold
  RT threads, and their ancestors what their children need
  (:class:`CgroupRtRuntime`, :func:`grants`): the paper's own knob (§V),
  bounded per reservation. This is the only mode MIST makes threads RT
  in (:func:`rt_mode` says ``group``);
* without it (Debian's kernels: ``global``) only the host-wide
  ``kernel.sched_rt_runtime_us`` bounds RT threads, all of them together:
  one protected VM could take all of it from every other VM's and the
  host's RT threads, whatever it reserved. No VM is made RT there; MIST
  falls back to cpu shares. A host where the bound is -1 (none), 0, or
  leaves other tasks less than ``min_other_share`` of each period gets no
  RT either (None).

Both knobs are actuators (read, record once, write, restore). Their
originals carry an identity (the thread's start time; nothing for a
cgroup, whose path names the domain's run) so that a restore after a
crash never touches a thread that merely reuses an id.
"""

import errno
import math
import os

from vsmtio_agent.actuators import base
from vsmtio_agent.actuators import bounds
from vsmtio_agent.actuators import checkpoint
from vsmtio_agent.linux import kernel_knobs

RT_FILE = 'cpu.rt_runtime_us'
PERIOD_FILE = 'cpu.rt_period_us'
MIB = 1 << 20
# Below this a grant is a throttle, not a protection: an RT thread that
# exhausts its group's runtime waits for the next period (it does not fall
# back to CFS), so one millisecond per period is the least worth granting.
MIN_GRANT_US = 1000
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


def rt_mode(procfs_root, cgroup_root, cgroup_path, min_other_share=0.05):
    """('group' | 'global' | None, why) for a thread in ``cgroup_path``.

    ``group``: RT group scheduling, the agent must grant runtime, and each
    VM's runtime is its own (:func:`per_vm_budget`);
    ``global``: RT bounded only host-wide by ``kernel.sched_rt_runtime_us``
    (which leaves at least ``min_other_share`` of each period to
    SCHED_OTHER), shared by every RT thread: no budget of one VM's;
    None: the host gives RT threads no such bound (or no runtime at all).
    """
    sysctl = os.path.join(procfs_root, 'sys/kernel')
    try:
        runtime = _read_int(os.path.join(sysctl, 'sched_rt_runtime_us'))
        if runtime < 0:
            return None, ('kernel.sched_rt_runtime_us is -1: real-time '
                          'threads are not bounded on this host')
        if runtime == 0:
            return None, ('kernel.sched_rt_runtime_us is 0: no real-time '
                          'runtime')
        period = _read_int(os.path.join(sysctl, 'sched_rt_period_us'))
    except (OSError, ValueError) as exc:
        return None, ('kernel.sched_rt_runtime_us or _period_us unreadable '
                      '(%s)' % exc)
    if period <= 0 or runtime > period * (1.0 - min_other_share):
        return None, ('kernel.sched_rt_runtime_us %d of %d us per period '
                      'leaves other tasks less than %.0f%% '
                      '(mist_rt_min_other_share)'
                      % (runtime, period, 100 * min_other_share))
    root = cpu_controller_root(cgroup_root)
    # a thread in the root group runs on the host-wide budget itself
    if root and cgroup_path and os.path.exists(os.path.join(root, RT_FILE)):
        return 'group', ('real-time group scheduling: a runtime sized to '
                         'each reservation, granted to its cgroups under %s'
                         % root)
    return 'global', ('no real-time group scheduling (no %s in the cpu '
                      'cgroups): kernel.sched_rt_runtime_us bounds all '
                      'real-time threads together at %d of %d us per '
                      'period, no VM\'s on its own' % (RT_FILE, runtime,
                                                       period))


def per_vm_budget(procfs_root, cgroup_root, cgroup_path,
                  min_other_share=0.05):
    """(whether a VM's RT threads can be given a budget of their own, why).

    True only in :func:`rt_mode`'s ``group`` mode. ``why`` says what the
    host has: in ``global`` mode, that the host-wide bound is no VM's.
    """
    mode, why = rt_mode(procfs_root, cgroup_root, cgroup_path,
                        min_other_share)
    if mode == 'group':
        return True, why
    return False, 'no per-VM real-time budget: %s' % why


def period_us(procfs_root, group_dir=None):
    """The RT period a group's runtime is counted in (µs).

    The group's own ``cpu.rt_period_us`` where it has one, else the
    host's ``kernel.sched_rt_period_us``; ``ValueError``/``OSError`` if
    neither can be read.
    """
    if group_dir is not None:
        try:
            return _read_int(os.path.join(group_dir, PERIOD_FILE))
        except (OSError, ValueError):
            pass
    return _read_int(os.path.join(procfs_root,
                                  'sys/kernel/sched_rt_period_us'))


def budget_us(reservation, period, us_per_request, us_per_mib, cap,
              min_other_share):
    """A protected domain's RT runtime per ``period`` µs, from its reservation.

    The time its threads must run to serve what it reserved: every
    request costs the VM's threads some CPU (the guest's I/O path on its
    vCPU, QEMU's submission and completion on its emulator or I/O thread)
    and every byte some more, so the need is ``iops * us_per_request +
    MiB/s * us_per_mib`` µs a second, scaled to the period. Bounded by
    ``cap`` (an operator's ceiling per domain) and by the period less
    ``min_other_share`` (never the whole period), and at least
    :data:`MIN_GRANT_US`. Returns ``(budget, need)``: what is granted and
    what the reservation asked for, both µs per period.
    """
    per_s = ((reservation.iops or 0) * us_per_request
             + (reservation.bytes_per_s or 0) / MIB * us_per_mib)
    need = int(math.ceil(per_s * period / 1e6))
    ceiling = min(cap, int(period * (1.0 - min_other_share)))
    return max(MIN_GRANT_US, min(need, ceiling)), need


class ThreadPolicy(base.Actuator):
    """A thread's scheduling policy and RT priority.

    Keys are ``"<pid>/<tid>"``; values ``{'policy': int, 'priority': int}``
    (``os.SCHED_*``), originals also ``'start'``: a restore skips a thread
    that is gone or is another thread with the same id. A thread whose
    start time cannot be read is not changed (nothing could tell it from a
    later thread with its id), and an original without one is dropped,
    never written to whatever thread has that id now.
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
        start = thread_start(self.procfs_root, pid, tid)
        if start is None:
            raise base.ActuatorError(
                'cannot read the start time of thread %s: not changed, '
                'its original could not be told from a later thread\'s'
                % key)
        return {'policy': policy, 'priority': priority, 'start': start}

    def invalid(self, key, original):
        """Ids Linux has, a policy and priority it takes, a start time."""
        pid, _, tid = key.partition('/')
        why = (bounds.number_key(pid, bounds.PID_MAX, 'pid')
               or bounds.number_key(tid, bounds.PID_MAX, 'tid'))
        if why:
            return why
        if not isinstance(original, dict):
            return 'not a policy: %r' % (original,)
        policy, priority = original.get('policy'), original.get('priority')
        if policy in bounds.RT_POLICIES:
            why = bounds.integer(priority, *bounds.RT_PRIORITY,
                                 what='real-time priority')
        elif policy in bounds.NORMAL_POLICIES:
            why = bounds.integer(priority, 0, 0, what='priority')
        else:
            why = 'policy %r is not one Linux has' % (policy,)
        if why:
            return why
        if original.get('start') is None:
            return ('no start time: the thread it was recorded for cannot '
                    'be told from one that took its id since')
        return bounds.integer(original['start'], 0, 2 ** 64 - 1,
                              what='start time')

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

    def path(self, key):
        """The group's directory (``ActuatorError`` if it leaves the root)."""
        return self._dir(key)

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

    def invalid(self, key, original):
        return bounds.integer(original, *bounds.RT_RUNTIME_US,
                              what=RT_FILE)

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


def grants(actuator, want):
    """Top-down ``[(group, runtime)]`` giving each leaf of ``want`` its own.

    ``want`` maps leaf groups to the runtime each must hold. Every group
    above a leaf gets at least the sum of what its children hold after the
    change, never less than its original (a group the agent releases goes
    back to its original through restore, not here).
    """
    want = dict(want)
    inner = {a for leaf in want for a in ancestors(leaf)}
    for group in sorted(inner, key=lambda g: -g.count('/')):
        need = 0
        for child in actuator.children(group):
            if child in want:
                need += want[child]
            else:
                need += actuator.original_or_current(child)
        want[group] = max(actuator.original_or_current(group), need)
    return sorted(want.items(), key=lambda kv: (kv[0].count('/'), kv[0]))
