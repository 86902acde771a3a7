"""Which process is a domain's QEMU, from what libvirt owns alone.

The agent gives a domain's QEMU threads real-time priority (MIST), writes
their RASS class, and measures the domain by their counters. A process
that any local user can start, with the domain's UUID on its command line
and threads it names ``CPU 0/KVM``, must never be taken for that QEMU: the
UUIDs are no secret (the status file and the metrics name them), and a
process's name, command line and thread names are its own to choose.

So the process is named by state only libvirt (root) can write, and
checked against what libvirt says it started:

* the candidate comes from libvirt's pid file of the domain
  (``<run dir>/<name>.pid``, ``/run/libvirt/qemu`` for ``qemu:///system``)
  or, where there is none, from the domain's own cgroup
  (``cgroup.procs`` below ``machine.slice/machine-qemu\\x2d<id>\\x2d...
  .scope`` under systemd, ``machine/qemu-<id>-....libvirt-qemu``
  without, in the cgroup v2 tree or the v1 ``cpu``/``cpuset``
  hierarchies). The file and the directories leading to it must be owned
  by root (or the agent's own user) and writable by nobody else;
* the candidate must run as the user libvirt runs the domain's QEMU as:
  the DAC label of the domain's live XML (``<seclabel model='dac'>
  <label>+64055:+64055</label>``, libvirt's own record of ``qemu.conf``'s
  ``user`` or the domain's override), never what the process says of
  itself: all four of its uids (``/proc/<pid>/status``) must be that one;
* its executable (``/proc/<pid>/exe``) must be a QEMU binary
  (``qemu-system-<arch>``, ``qemu-kvm``). Reading that link needs ptrace
  access, which the kernel grants root over a process of another user only
  with ``CAP_SYS_PTRACE``; the hardened unit does not have it, and then
  the name the kernel gave the process at ``exec`` stands in (a process
  of QEMU's user in libvirt's pid file or the domain's cgroup is QEMU or
  one of libvirt's own helpers, which never take QEMU's name);
* its command line names the domain's UUID, so a pid file or cgroup of
  another domain (a stale one) is never taken for this one's;
* where the domain's cgroup was found, the pid file's process is in it.

A domain whose QEMU cannot be established this way keeps its threads to
itself: the driver reads no counter of, and writes nothing to, any
thread of it, and says so once (:class:`~.domains.Domains`).
"""

import hashlib
import os
import pwd
import re
import stat
from typing import NamedTuple
from typing import Optional
import urllib.parse

# Linux's PID_MAX_LIMIT
PID_MAX = 4 * 1024 * 1024
# qemu-system-x86_64, qemu-system-aarch64, ...; RHEL's /usr/libexec/qemu-kvm
QEMU_EXE = re.compile(r'^(qemu-system-[A-Za-z0-9_]+|qemu-kvm)$')
# The same, as the kernel names a process at exec: the file's name cut to
# 15 characters (TASK_COMM_LEN), "qemu-system-x86" for qemu-system-x86_64.
QEMU_COMM = re.compile(r'^(qemu-system-[A-Za-z0-9_]*|qemu-kvm)$')
SYSTEM_RUN_DIR = '/run/libvirt/qemu'
# Below a domain's cgroup, libvirt's own: libvirt/, emulator, vcpuN, ...
_CGROUP_DEPTH = 3
# The cgroup hierarchies a domain's cgroup is looked for in: the v2 tree
# (pure, or a hybrid host's "unified"), and v1 cpu and cpuset.
_HIERARCHIES = ('', 'unified', 'cpu', 'cpu,cpuacct', 'cpuset')
_DELETED = ' (deleted)'


class Found(NamedTuple):
    """The domain's QEMU pid and how it was established, or why not."""

    pid: Optional[int]
    why: str
    # the executable was judged by its exec name, /proc/<pid>/exe refused
    by_name: bool = False


def dac_uid(xml):
    """``(uid, None)`` libvirt runs the domain's QEMU as, or ``(None, why)``.

    ``xml`` is the domain's live XML (an ElementTree element): libvirt
    writes its DAC label (``+uid:+gid``; a static label may name the user)
    when it starts the domain.
    """
    for label in xml.findall('seclabel'):
        if label.get('model') != 'dac':
            continue
        text = (label.findtext('label') or '').strip()
        user = text.split(':', 1)[0]
        if user.startswith('+') and user[1:].isdigit():
            return int(user[1:]), None
        if user.isdigit():
            return int(user), None
        if user:
            try:
                return pwd.getpwnam(user).pw_uid, None
            except KeyError:
                return None, ('its DAC label names user %r, unknown here'
                              % user)
        return None, 'its DAC seclabel has no label'
    return None, ('its live XML has no DAC label, which libvirt writes for '
                  'the QEMU it starts')


def _trusted(st):
    """Whether a file's owner and mode leave it to root (or the agent)."""
    return st.st_uid in (0, os.geteuid()) and not st.st_mode & 0o022


def _untrusted_why(path, st):
    return '%s is owned by uid %d with mode %o' % (
        path, st.st_uid, stat.S_IMODE(st.st_mode))


def _trusted_dir(path):
    """None if ``path`` is a directory only root can change, else why."""
    try:
        st = os.lstat(path)
    except OSError as exc:
        return '%s: %s' % (path, exc.strerror or exc)
    if not stat.S_ISDIR(st.st_mode):
        return '%s is not a directory' % path
    if not _trusted(st):
        return _untrusted_why(path, st)
    return None


def _read_trusted(path, limit):
    """``(bytes, None)`` of a file only root can change, else why.

    ``(None, why)`` where it cannot be read, ``(b'', why)`` where it is
    not such a file (another owner, writable by others, not regular).
    Opened without following a symbolic link.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
                     | os.O_NONBLOCK)
    except OSError as exc:
        return None, '%s: %s' % (path, exc.strerror or exc)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return b'', '%s is not a regular file' % path
        if not _trusted(st):
            return b'', _untrusted_why(path, st)
        chunks = []
        while limit > 0:
            chunk = os.read(fd, min(limit, 65536))
            if not chunk:
                break
            chunks.append(chunk)
            limit -= len(chunk)
        return b''.join(chunks), None
    except OSError as exc:
        return None, '%s: %s' % (path, exc.strerror or exc)
    finally:
        os.close(fd)


def _read_text(path, limit=8192):
    with open(path, 'rb') as f:
        return f.read(limit).decode('utf-8', 'replace')


class QemuFinder:
    """Finds a domain's QEMU process in libvirt's state of one URI.

    ``run_dir``: libvirt's directory of pid files (None: none read);
    ``machine``: the prefix libvirt gives the domain's machine name before
    its id (``qemu-``, ``qemu-embed-<hash>-``; None: no cgroup read).
    """

    def __init__(self, run_dir=None, machine=None,
                 cgroup_root='/sys/fs/cgroup', procfs_root='/proc'):
        self.run_dir = run_dir
        self.machine = machine
        self.cgroup_root = cgroup_root
        self.procfs_root = procfs_root

    @classmethod
    def for_uri(cls, uri, sysfs_root='/sys', procfs_root='/proc'):
        """Where libvirt keeps the state of ``uri``'s QEMU processes.

        ``qemu:///system``: its run directory and the ``qemu-<id>-``
        machines; ``qemu:///embed?root=R``: ``R/run/qemu`` and machines
        named with the hash of ``R`` (libvirt's
        ``virDomainDriverGenerateMachineName``). Any other URI (a session
        daemon, whose QEMU runs as its user; a remote host; the test
        driver) names no state of root's: its domains are left alone.
        """
        cgroup_root = os.path.join(sysfs_root, 'fs/cgroup')
        parts = urllib.parse.urlsplit(uri)
        if parts.scheme not in ('qemu', 'qemu+unix') or parts.netloc:
            return cls(cgroup_root=cgroup_root, procfs_root=procfs_root)
        if parts.path == '/system':
            return cls(SYSTEM_RUN_DIR, 'qemu-', cgroup_root, procfs_root)
        root = urllib.parse.parse_qs(parts.query).get('root')
        if parts.path == '/embed' and root and os.path.isabs(root[0]):
            digest = hashlib.sha256(root[0].encode()).hexdigest()[:8]
            return cls(os.path.join(root[0], 'run/qemu'),
                       'qemu-embed-%s-' % digest, cgroup_root, procfs_root)
        return cls(cgroup_root=cgroup_root, procfs_root=procfs_root)

    def describe(self):
        """Where it looks, in one line (``vsmtio-agent check``)."""
        where = []
        if self.run_dir:
            where.append('pid files in %s' % self.run_dir)
        if self.machine:
            where.append('cgroups of machines %s<id>-* under %s'
                         % (self.machine, self.cgroup_root))
        return ' and '.join(where) or 'nothing (no local QEMU state for ' \
            'this libvirt URI)'

    def find(self, uuid, name, dom_id, uid):
        """:class:`Found`: domain ``uuid``'s QEMU, which runs as ``uid``.

        ``name`` and ``dom_id`` are libvirt's name and id of the domain:
        what its pid file and cgroup are named by.
        """
        if self.run_dir is None and self.machine is None:
            return Found(None, 'libvirt\'s state of this URI is not '
                         'local to the agent')
        members, cgroup_why = self._cgroup_pids(dom_id)
        pid, pidfile_why = self._pidfile_pid(name)
        if pid is not None:
            candidates, source = [pid], 'pid file %s' % os.path.join(
                self.run_dir, name + '.pid')
        elif members:
            candidates, source = sorted(members), 'cgroup of machine %s%d' % (
                self.machine, dom_id)
        else:
            return Found(None, '; '.join(w for w in (pidfile_why, cgroup_why)
                                         if w))
        found, refused = [], []
        for candidate in candidates:
            if members is not None and candidate not in members:
                refused.append('pid %d is not in the domain\'s cgroup'
                               % candidate)
                continue
            why, by_name = self._check(candidate, uid, uuid)
            if why:
                refused.append('pid %d %s' % (candidate, why))
            else:
                found.append((candidate, by_name))
        if len(found) == 1:
            return Found(found[0][0], 'from the %s' % source, found[0][1])
        if found:
            return Found(None, 'the %s holds %d QEMU processes of domain %s'
                         % (source, len(found), uuid))
        return Found(None, 'the %s names no QEMU of it: %s'
                     % (source, '; '.join(refused[:3])))

    # -- the candidates ---------------------------------------------------

    def _pidfile_pid(self, name):
        """``(pid, None)`` from libvirt's pid file, or ``(None, why)``."""
        if self.run_dir is None:
            return None, None
        if not name or '/' in name or name.startswith('.'):
            return None, 'domain name %r names no pid file' % name
        why = _trusted_dir(self.run_dir)
        if why:
            return None, why
        path = os.path.join(self.run_dir, name + '.pid')
        text, why = _read_trusted(path, 64)
        if why:
            return None, why
        try:
            pid = int(text.strip())
        except ValueError:
            return None, '%s holds no pid' % path
        if not 0 < pid <= PID_MAX:
            return None, '%s holds no pid' % path
        return pid, None

    def _cgroup_dirs(self, dom_id):
        """The directories of the domain's cgroup, in every hierarchy."""
        if self.machine is None:
            return []
        machine = '%s%d' % (self.machine, dom_id)
        # (partition, how the domain's directory begins and ends)
        layouts = (
            ('machine.slice',
             'machine-' + machine.replace('-', '\\x2d'), '.scope'),
            ('machine', machine, '.libvirt-qemu'))
        found = []
        for hierarchy in _HIERARCHIES:
            base = os.path.join(self.cgroup_root, hierarchy)
            if hierarchy == '' and not os.path.exists(
                    os.path.join(base, 'cgroup.controllers')):
                continue    # not a v2 tree: v1 hierarchies below it
            for partition, head, tail in layouts:
                part = os.path.join(base, partition)
                try:
                    names = os.listdir(part)
                except OSError:
                    continue
                for entry in names:
                    # "<head>-<its name>" or, a name with no valid
                    # character, "<head>" alone
                    if entry.endswith(tail) and (
                            entry == head + tail or entry.startswith(
                                head + ('\\x2d' if tail == '.scope'
                                        else '-'))):
                        found.append((part, os.path.join(part, entry)))
        return found

    def _cgroup_pids(self, dom_id):
        """``(set of pids, None)`` of the domain's cgroup, or (None, why).

        Every process below the domain's cgroup directory (libvirt moves
        QEMU's threads to ``emulator``, ``vcpuN``, ``libvirt/...``), in
        directories only root can change.
        """
        dirs = self._cgroup_dirs(dom_id)
        if not dirs:
            if self.machine is None:
                return None, None
            return None, 'no cgroup of machine %s%d under %s' % (
                self.machine, dom_id, self.cgroup_root)
        pids, whys = set(), []
        for partition, top in dirs:
            why = _trusted_dir(partition) or _trusted_dir(top)
            if why:
                whys.append(why)
                continue
            self._walk(top, 0, pids, whys)
        if not pids:
            return None, '; '.join(whys) or 'the cgroup of machine %s%d ' \
                'holds no process' % (self.machine, dom_id)
        return pids, None

    def _walk(self, path, depth, pids, whys):
        # a v2 threaded cgroup (vcpuN) lists no process: its threads'
        # process is listed by the threaded domain above it
        text, why = _read_trusted(os.path.join(path, 'cgroup.procs'),
                                  1 << 20)
        if why and text is not None:
            whys.append(why)
        for line in (text or b'').split():
            if line.isdigit() and 0 < int(line) <= PID_MAX:
                pids.add(int(line))
        if depth >= _CGROUP_DEPTH:
            return
        try:
            subdirs = sorted(e.name for e in os.scandir(path)
                             if e.is_dir(follow_symlinks=False))
        except OSError:
            return
        for sub in subdirs:
            child = os.path.join(path, sub)
            why = _trusted_dir(child)
            if why:
                whys.append(why)
            else:
                self._walk(child, depth + 1, pids, whys)

    # -- the candidate itself ----------------------------------------------

    def _check(self, pid, uid, uuid):
        """``(None, by_name)``: ``pid`` is the domain's QEMU.

        Else ``(why, False)``.
        """
        base = os.path.join(self.procfs_root, str(pid))
        try:
            status = _read_text(os.path.join(base, 'status'))
        except OSError:
            return 'is not running', False
        fields = dict(line.split(':', 1) for line in status.splitlines()
                      if ':' in line)
        try:
            uids = [int(u) for u in fields['Uid'].split()]
        except (KeyError, ValueError):
            return 'has no uids in its status', False
        if len(uids) != 4 or set(uids) != {uid}:
            return ('runs as uid %s, and libvirt runs this domain\'s QEMU '
                    'as %d' % ('/'.join(map(str, uids)), uid)), False
        by_name = False
        try:
            exe = os.readlink(os.path.join(base, 'exe'))
            if exe.endswith(_DELETED):    # QEMU upgraded while it runs
                exe = exe[:-len(_DELETED)]
            if not QEMU_EXE.match(os.path.basename(exe)):
                return 'runs %s, not QEMU' % exe, False
        except PermissionError:
            # no ptrace access (the hardened unit, QEMU of another user)
            comm = fields.get('Name', '').strip()
            if not QEMU_COMM.match(comm):
                return 'is named %r, not QEMU' % comm, False
            by_name = True
        except OSError:
            return 'has no executable', False
        try:
            args = _read_text(os.path.join(base, 'cmdline'), 1 << 20)
        except OSError:
            return 'has no command line', False
        want = uuid.lower()
        if not any(a.lower() == want or 'uuid=' + want in a.lower()
                   for a in args.split('\0')):
            return 'does not run domain %s' % uuid, False
        return None, by_name
