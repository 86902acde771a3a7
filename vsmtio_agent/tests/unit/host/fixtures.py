"""Fake host trees for tests: an SMT sysfs and procfs-like files.

This machine has no SMT siblings, so the 2-thread-per-core host the agent
is meant for can only be presented as a sysfs tree. The layout mirrors
Linux on Intel: siblings of CPU ``c`` are ``c`` and ``c + cores``.
"""

import os

import fixtures

from vsmtio_agent.conf import agent as agent_conf
from vsmtio_agent.conf import host as host_conf
from vsmtio_agent.conf import mist as mist_conf


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, 'w') as f:
        f.write(text)


class FakeSysfs(fixtures.Fixture):
    """A sysfs root with ``cores`` x ``threads`` CPUs and a KVM knob."""

    def __init__(self, cores=4, threads=2, halt_poll_ns=200000,
                 knob_writable=True, patched=False):
        super().__init__()
        self.patched = patched
        self.cores, self.threads = cores, threads
        self.halt_poll_ns = halt_poll_ns
        self.knob_writable = knob_writable

    def _setUp(self):
        self.root = self.useFixture(fixtures.TempDir()).path
        n = self.cores * self.threads
        base = os.path.join(self.root, 'devices/system/cpu')
        write(os.path.join(base, 'online'), '0-%d\n' % (n - 1))
        for cpu in range(n):
            core = cpu % self.cores
            sibs = ','.join(str(core + t * self.cores)
                            for t in range(self.threads))
            topo = os.path.join(base, 'cpu%d' % cpu, 'topology')
            write(os.path.join(topo, 'thread_siblings_list'), sibs + '\n')
            write(os.path.join(topo, 'core_id'), '%d\n' % core)
            write(os.path.join(topo, 'physical_package_id'), '0\n')
        self.knob = os.path.join(self.root,
                                 'module/kvm/parameters/halt_poll_ns')
        write(self.knob, '%d\n' % self.halt_poll_ns)
        if self.patched:
            # host_kernel_patches/ABI.rst, version 1.
            write(os.path.join(self.root, 'kernel/vsmtio/abi_version'),
                  '1\n')
            write(os.path.join(self.root, 'kernel/vsmtio/rass_io_cpus'),
                  '\n')
            self.knob = os.path.join(
                self.root, 'module/kvm/parameters/ctx_retention_timeout_ns')
            write(self.knob, '200000\n')
        if not self.knob_writable:
            # Root ignores the modes of ordinary files. A read-only sysctl
            # refuses even root with EACCES, as a read-only module
            # parameter (kvm.halt_poll_ns on these machines) does.
            os.unlink(self.knob)
            os.symlink('/proc/sys/kernel/ngroups_max', self.knob)

    def read_knob(self):
        with open(self.knob) as f:
            return int(f.read())


def private_conf():
    """A ConfigOpts with the agent's options and nothing shared.

    ``ConfigOpts.register_group`` makes a shallow copy of the module's
    OptGroup, whose option table (overrides included) is then shared by
    every ConfigOpts registered from it: a fresh group per object keeps one
    test's overrides out of the next.
    """
    from oslo_config import cfg

    conf = cfg.ConfigOpts()
    conf.register_group(cfg.OptGroup(agent_conf.agent_group.name))
    conf.register_opts(agent_conf.list_opts()[agent_conf.agent_group],
                       group=agent_conf.agent_group.name)
    conf.register_opts(host_conf.ALL_OPTS, group=agent_conf.agent_group.name)
    conf.register_opts(mist_conf.ALL_OPTS, group=agent_conf.agent_group.name)
    return conf


def make_conf(test, **overrides):
    """A private ConfigOpts with the agent's options, tmp checkpoint."""
    from oslo_config import fixture as cfg_fixture

    conf = private_conf()
    test.useFixture(cfg_fixture.Config(conf))
    tmp = test.useFixture(fixtures.TempDir()).path
    defaults = {'libvirt_uri': 'test:///default',
                'checkpoint_path': os.path.join(tmp, 'ckpt.json'),
                'status_path': os.path.join(tmp, 'status.json'),
                # never the machine's own nova.conf
                'nova_config_file': os.path.join(tmp, 'nova.conf'),
                'libvirt_retry_initial': 0.1,
                'libvirt_retry_max': 0.4}
    defaults.update(overrides)
    conf([], project='vsmtio-test')
    for key, value in defaults.items():
        conf.set_override(key, value, group='vsmtio_agent')
    return conf


# The uid libvirt runs the fake QEMU as (Debian's libvirt-qemu is a system
# uid like it), and the DAC label libvirt writes in its live XML for it.
QEMU_UID = 64055
DAC_SECLABEL = ("<seclabel type='static' model='dac' relabel='no'>"
                "<label>+%d:+%d</label></seclabel>" % (QEMU_UID, QEMU_UID))


def fake_process(root, pid, uid, exe, args, threads=()):
    """A process under procfs ``root``: what identifies it, its threads.

    ``threads`` are the names its threads give themselves (``comm``),
    tids ``pid + 1`` on; returns ``{name: tid}``.
    """
    base = os.path.join(root, str(pid))
    write(os.path.join(base, 'status'),
          'Name:\t%s\nUid:\t%d\t%d\t%d\t%d\nGid:\t%d\t%d\t%d\t%d\n'
          % ((os.path.basename(exe)[:15],) + (uid,) * 8))
    write(os.path.join(base, 'cmdline'), '\0'.join(list(args) + ['']))
    os.symlink(exe, os.path.join(base, 'exe'))
    tids = {}
    for n, name in enumerate(threads):
        tid = tids[name] = pid + 1 + n
        write(os.path.join(base, 'task', str(tid), 'comm'), name + '\n')
    return tids


class FakeQemuProcfs(fixtures.Fixture):
    """A procfs tree holding one QEMU process of domain ``uuid``.

    Its vCPU threads carry the patched kernel's per-thread ``sched_rass``
    file, which no process on this machine has. With the domain's
    ``name``, libvirt's pid file of it is written in :attr:`run_dir`
    (:meth:`finder` looks there): the driver adopts a process only where
    libvirt's state names it, and the test driver has none of its own.
    Its domain's XML must carry :data:`DAC_SECLABEL`.
    """

    def __init__(self, uuid, vcpus=2, pid=4242, name=None):
        super().__init__()
        self.uuid, self.vcpus, self.pid = uuid, vcpus, pid
        self.name = name

    def _setUp(self):
        self.root = self.useFixture(fixtures.TempDir()).path
        base = os.path.join(self.root, str(self.pid))
        self.tids = {index: tid for index, tid in enumerate(fake_process(
            self.root, self.pid, QEMU_UID, '/usr/bin/qemu-system-x86_64',
            ['/usr/bin/qemu-system-x86_64', '-uuid', self.uuid],
            ['CPU %d/KVM' % i for i in range(self.vcpus)]).values())}
        for index, tid in self.tids.items():
            task = os.path.join(base, 'task', str(tid))
            write(os.path.join(task, 'status'),
                  'voluntary_ctxt_switches:\t%d\n'
                  'nonvoluntary_ctxt_switches:\t3\n' % (10 * index))
            write(os.path.join(task, 'sched_rass'), 'none\n')
            write(os.path.join(task, 'schedstat'), '%d 5 7\n' % (index + 1))
            write(os.path.join(task, 'stat'), '%d (CPU %d/KVM) S %s\n' % (
                tid, index, ' '.join(['0'] * 35 + [str(index)] + ['0'] * 8)))
        self.run_dir = os.path.join(self.root, 'run-libvirt-qemu')
        os.makedirs(self.run_dir, mode=0o755)
        os.chmod(self.run_dir, 0o755)
        if self.name:
            write(os.path.join(self.run_dir, self.name + '.pid'),
                  '%d\n' % self.pid)

    def finder(self):
        """A QEMU finder reading this tree's pid files and procfs."""
        from vsmtio_agent.drivers.libvirt import qemu_identity
        return qemu_identity.QemuFinder(self.run_dir,
                                        procfs_root=self.root)

    def sched_rass(self, index):
        with open(os.path.join(self.root, str(self.pid), 'task',
                               str(self.tids[index]), 'sched_rass')) as f:
            return f.read().strip()
