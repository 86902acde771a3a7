"""A domain's QEMU is named by libvirt's state, never by what a process says.

A process any local user starts with ``-uuid <the domain's UUID>`` on its
command line and threads it names ``CPU 0/KVM`` must never be adopted as
the domain's QEMU: MIST would make its threads real-time, RASS would write
their class, and its counters would be the domain's measurements.

The trees of pid files, cgroups and procfs are fake (under a temporary
directory: this machine's libvirt run directory and cgroups cannot be
made to hold an impostor), except where real processes show what the
kernel lets a root agent without ``CAP_SYS_PTRACE`` read of a QEMU of
another user (``TestRealProcesses``, root only).
"""

import os
import shutil
import subprocess
import sys
import textwrap
import uuid as uuid_mod
from xml.etree import ElementTree

import fixtures
import testtools

from vsmtio_agent.drivers.libvirt import domains as domains_mod
from vsmtio_agent.drivers.libvirt import qemu_identity
from vsmtio_agent import model
from vsmtio_agent.tests.unit.host import fixtures as host_fixtures
from vsmtio_agent.tests.unit.host import test_libvirt_driver as drv_tests

QEMU_UID = host_fixtures.QEMU_UID
NOBODY = 65534
QEMU_EXE = '/usr/bin/qemu-system-x86_64'
VCPU_THREADS = ('CPU 0/KVM', 'CPU 1/KVM')


class FakeLibvirtHost(fixtures.Fixture):
    """libvirt's run directory, cgroup trees and procfs, under one root."""

    def _setUp(self):
        self.root = self.useFixture(fixtures.TempDir()).path
        self.procfs = os.path.join(self.root, 'proc')
        self.run_dir = os.path.join(self.root, 'run/libvirt/qemu')
        self.cgroup_root = os.path.join(self.root, 'sys/fs/cgroup')
        for path in (self.procfs, self.run_dir, self.cgroup_root):
            os.makedirs(path, mode=0o755)
        for dirpath, _dirs, _files in os.walk(self.root):
            os.chmod(dirpath, 0o755)

    def finder(self, machine='qemu-'):
        return qemu_identity.QemuFinder(self.run_dir, machine,
                                        self.cgroup_root, self.procfs)

    def process(self, pid, uid=QEMU_UID, exe=QEMU_EXE, uuid=None,
                threads=VCPU_THREADS, args=None):
        """A process; by default the QEMU libvirt starts for ``uuid``."""
        if args is None:
            args = [exe, '-name', 'guest=x,debug-threads=on', '-uuid', uuid]
        host_fixtures.fake_process(self.procfs, pid, uid, exe, args, threads)
        return pid

    def impostor(self, pid, uuid, uid=NOBODY, exe=QEMU_EXE):
        """A process made to look like the domain's QEMU by name alone.

        ``-uuid`` on its command line, threads named ``CPU n/KVM``.
        """
        return self.process(pid, uid, exe, args=[
            'qemu-system-x86_64', '-uuid', uuid, '-name', 'guest=x'])

    def pidfile(self, name, pid, mode=0o644):
        path = os.path.join(self.run_dir, name + '.pid')
        host_fixtures.write(path, '%d' % pid)
        os.chmod(path, mode)
        return path

    def cgroup(self, dom_id, name, pids, layout='v1', extra=()):
        """The domain's cgroup holding ``pids`` (in its ``emulator``).

        ``v1``: libvirt's own layout in the cpu hierarchy, as on a host
        without systemd (these machines); ``v2``: systemd's machine scope
        in a cgroup v2 tree, threads below ``libvirt/``. ``extra``: pids
        listed in the domain's cgroup itself (libvirt's helpers).
        """
        if layout == 'v1':
            top = os.path.join(self.cgroup_root, 'cpu', 'machine',
                               'qemu-%d-%s.libvirt-qemu' % (dom_id, name))
            leaf = os.path.join(top, 'emulator')
        else:
            host_fixtures.write(os.path.join(self.cgroup_root,
                                             'cgroup.controllers'), 'cpu\n')
            top = os.path.join(
                self.cgroup_root, 'machine.slice', 'machine-%s.scope'
                % ('qemu-%d-%s' % (dom_id, name)).replace('-', '\\x2d'))
            leaf = os.path.join(top, 'libvirt')
            os.makedirs(os.path.join(leaf, 'vcpu0'))
        host_fixtures.write(os.path.join(leaf, 'cgroup.procs'),
                            ''.join('%d\n' % p for p in pids))
        host_fixtures.write(os.path.join(top, 'cgroup.procs'),
                            ''.join('%d\n' % p for p in extra))
        for dirpath, _dirs, _files in os.walk(self.cgroup_root):
            os.chmod(dirpath, 0o755)
        return top


class TestImpostorsAreNeverAdopted(testtools.TestCase):
    """(1) A process that only looks like QEMU is never the domain's."""

    def setUp(self):
        super().setUp()
        self.host = self.useFixture(FakeLibvirtHost())
        self.uuid = str(uuid_mod.uuid4())
        self.finder = self.host.finder()

    def find(self, dom_id=3, name='instance-0000002a'):
        return self.finder.find(self.uuid, name, dom_id, QEMU_UID)

    def test_nothing_of_libvirts_names_it(self):
        # the case the command-line scan adopted: no pid file (another
        # URI, a stale one), no cgroup; named like QEMU, even running its
        # binary, as another user and as QEMU's own user
        self.host.impostor(100, self.uuid)
        self.host.impostor(101, self.uuid, uid=QEMU_UID)
        found = self.find()
        self.assertIsNone(found.pid)
        self.assertIn('no cgroup of machine qemu-3', found.why)

    def test_a_pid_file_naming_another_users_process(self):
        # a stale pid file whose pid a local user's process now has
        self.host.pidfile('instance-0000002a', self.host.impostor(
            100, self.uuid))
        found = self.find()
        self.assertIsNone(found.pid)
        self.assertIn('runs as uid 65534/65534/65534/65534, and libvirt runs '
                      'this domain\'s QEMU as %d' % QEMU_UID, found.why)

    def test_a_process_of_qemus_user_that_does_not_run_qemu(self):
        for exe in ('/usr/bin/python3', '/home/u/qemu-system-x86_64.sh'):
            self.host = self.useFixture(FakeLibvirtHost())
            self.finder = self.host.finder()
            self.host.pidfile('instance-0000002a', self.host.impostor(
                100, self.uuid, uid=QEMU_UID, exe=exe))
            found = self.find()
            self.assertIsNone(found.pid)
            self.assertIn('runs %s, not QEMU' % exe, found.why)

    def test_a_process_outside_the_domains_cgroup(self):
        # the pid file names a process the domain's cgroup does not hold
        qemu = self.host.process(200, uuid=self.uuid)
        self.host.cgroup(3, 'instance-0000002a', [qemu])
        self.host.pidfile('instance-0000002a', self.host.impostor(
            100, self.uuid, uid=QEMU_UID))
        found = self.find()
        self.assertIsNone(found.pid)
        self.assertIn('pid 100 is not in the domain\'s cgroup', found.why)

    def test_in_the_cgroup_only_the_qemu_of_this_domain(self):
        # libvirt's helpers share the cgroup (swtpm, virtiofsd, as QEMU's
        # user or root); another domain's QEMU would name its own UUID
        qemu = self.host.process(200, uuid=self.uuid)
        helper = self.host.process(201, exe='/usr/bin/swtpm', threads=(),
                                   args=['swtpm', 'socket'])
        other = self.host.process(202, uuid=str(uuid_mod.uuid4()))
        self.host.impostor(100, self.uuid)
        self.host.cgroup(3, 'instance-0000002a', [qemu, other],
                         extra=[helper])
        self.assertEqual(qemu, self.find().pid)

    def test_state_another_user_could_have_written(self):
        impostor = self.host.impostor(100, self.uuid)
        # a pid file writable by others, in a run directory writable by
        # others, a cgroup directory writable by others
        path = self.host.pidfile('instance-0000002a', impostor, 0o666)
        self.assertIn('%s is owned by uid %d with mode 666'
                      % (path, os.geteuid()), self.find().why)
        os.unlink(path)
        self.host.pidfile('instance-0000002a', impostor)
        os.chmod(self.host.run_dir, 0o777)
        self.assertIn('%s is owned by uid %d with mode 777' % (
            self.host.run_dir, os.geteuid()), self.find().why)
        os.unlink(path)
        top = self.host.cgroup(3, 'instance-0000002a', [impostor])
        os.chmod(top, 0o777)
        found = self.find()
        self.assertIsNone(found.pid)
        self.assertIn('%s is owned by uid %d with mode 777'
                      % (top, os.geteuid()), found.why)
        # whatever the uid the process has: the state is not libvirt's
        os.chmod(top, 0o755)
        os.chmod(os.path.join(top, 'emulator'), 0o777)
        self.assertIsNone(self.find().pid)

    def test_a_symbolic_link_for_a_pid_file(self):
        target = os.path.join(self.host.root, 'elsewhere.pid')
        host_fixtures.write(target, '%d' % self.host.impostor(
            100, self.uuid, uid=QEMU_UID))
        os.symlink(target, os.path.join(self.host.run_dir,
                                        'instance-0000002a.pid'))
        self.assertIsNone(self.find().pid)

    def test_a_pid_file_of_another_owner(self):
        if os.geteuid() != 0:
            self.skipTest('changing a file\'s owner needs root')
        path = self.host.pidfile('instance-0000002a', self.host.impostor(
            100, self.uuid, uid=QEMU_UID))
        os.chown(path, NOBODY, NOBODY)
        found = self.find()
        self.assertIsNone(found.pid)
        self.assertIn('owned by uid 65534', found.why)

    def test_garbage_in_libvirts_state_is_no_pid(self):
        for text in ('', 'x', '-1', '0', '99999999999', '1 2'):
            host_fixtures.write(os.path.join(
                self.host.run_dir, 'instance-0000002a.pid'), text)
            self.assertIsNone(self.find().pid)
        for name in ('../x', '.hidden', ''):
            self.assertIsNone(self.find(name=name).pid)


class TestLibvirtsQemuIsAdopted(testtools.TestCase):
    """(2) The QEMU libvirt's pid file or cgroup names is the domain's."""

    def setUp(self):
        super().setUp()
        self.host = self.useFixture(FakeLibvirtHost())
        self.uuid = str(uuid_mod.uuid4())

    def find(self, finder=None):
        return (finder or self.host.finder()).find(
            self.uuid, 'instance-0000002a', 3, QEMU_UID)

    def test_through_the_pid_file(self):
        qemu = self.host.process(200, uuid=self.uuid)
        self.host.impostor(100, self.uuid)
        path = self.host.pidfile('instance-0000002a', qemu)
        found = self.find()
        self.assertEqual((qemu, 'from the pid file %s' % path, False), found)
        # and where the domain's cgroup is there too, it holds the process
        self.host.cgroup(3, 'instance-0000002a', [qemu])
        self.assertEqual(qemu, self.find().pid)

    def test_through_the_cgroup_without_systemd(self):
        qemu = self.host.process(200, uuid=self.uuid)
        self.host.impostor(100, self.uuid)
        self.host.cgroup(3, 'instance-0000002a', [qemu])
        found = self.find(self.host.finder())
        self.assertEqual(qemu, found.pid)
        self.assertEqual('from the cgroup of machine qemu-3', found.why)

    def test_through_systemds_machine_scope(self):
        qemu = self.host.process(200, uuid=self.uuid)
        self.host.cgroup(3, 'instance-0000002a', [qemu], layout='v2')
        self.assertEqual(qemu, self.find().pid)

    def test_an_embedded_drivers_machine(self):
        qemu = self.host.process(200, uuid=self.uuid)
        self.host.cgroup(3, 'instance-0000002a', [qemu])
        os.rename(os.path.join(self.host.cgroup_root, 'cpu/machine',
                               'qemu-3-instance-0000002a.libvirt-qemu'),
                  os.path.join(self.host.cgroup_root, 'cpu/machine',
                               'qemu-embed-a920f839-3-instance-0000002a'
                               '.libvirt-qemu'))
        self.assertIsNone(self.find().pid)
        self.assertEqual(qemu, self.find(
            self.host.finder('qemu-embed-a920f839-')).pid)

    def test_a_qemu_upgraded_while_it_runs(self):
        qemu = self.host.process(200, uuid=self.uuid,
                                 exe=QEMU_EXE + ' (deleted)')
        self.host.pidfile('instance-0000002a', qemu)
        self.assertEqual(qemu, self.find().pid)


class TestWhereLibvirtKeepsItsState(testtools.TestCase):

    def test_per_uri(self):
        system = qemu_identity.QemuFinder.for_uri('qemu:///system', '/s')
        self.assertEqual(('/run/libvirt/qemu', 'qemu-', '/s/fs/cgroup'),
                         (system.run_dir, system.machine,
                          system.cgroup_root))
        # the hash libvirt 9 gave the machine of this root (seen here)
        embed = qemu_identity.QemuFinder.for_uri(
            'qemu:///embed?root=/tmp/qid/root-libvirt-qemu')
        self.assertEqual(('/tmp/qid/root-libvirt-qemu/run/qemu',
                          'qemu-embed-a920f839-'),
                         (embed.run_dir, embed.machine))
        for uri in ('qemu:///session', 'qemu+ssh://other/system',
                    'test:///default', 'qemu:///embed?root=relative',
                    'qemu:///embed'):
            finder = qemu_identity.QemuFinder.for_uri(uri)
            self.assertEqual((None, None), (finder.run_dir, finder.machine))
            self.assertIsNone(finder.find('u', 'n', 1, 0).pid)

    def test_the_user_libvirt_runs_qemu_as(self):
        def uid(label):
            return qemu_identity.dac_uid(ElementTree.fromstring(
                "<domain><seclabel type='selinux' model='selinux'>"
                "<label>+1:+1</label></seclabel>%s</domain>" % label))

        self.assertEqual((64055, None), uid(
            "<seclabel type='dynamic' model='dac' relabel='yes'>"
            "<label>+64055:+64055</label></seclabel>"))
        self.assertEqual((0, None), uid(
            "<seclabel model='dac'><label>root:root</label></seclabel>"))
        self.assertEqual((None, 'its live XML has no DAC label, which '
                          'libvirt writes for the QEMU it starts'), uid(''))
        self.assertIsNone(uid("<seclabel model='dac'><label>no-such-user"
                              ":x</label></seclabel>")[0])
        self.assertIsNone(uid("<seclabel model='dac'/>")[0])


class TestUnestablishedDomainsAreLeftAlone(drv_tests.DriverTestCase):
    """(3) Through the driver: no thread of it touched, said once."""

    def setUp(self):
        super().setUp()
        self.sysfs = self.useFixture(host_fixtures.FakeSysfs(patched=True))
        self.dom = self.useFixture(drv_tests.TestDomain())
        # the fake QEMU of the domain, whose pid file is not there: the
        # process is what the command-line scan would have adopted
        self.qemu = self.useFixture(host_fixtures.FakeQemuProcfs(
            self.dom.uuid, pid=4242))
        self.useFixture(fixtures.MonkeyPatch(
            'vsmtio_agent.drivers.libvirt.domains.PID_RETRY_S', 0.0))

    def plan(self):
        return model.Decision(200000, {
            model.VcpuRef(self.dom.uuid, 0): drv_tests.placement(
                0, model.Role.IO, 4),
            model.VcpuRef(self.dom.uuid, 1): drv_tests.placement(
                0, model.Role.CPU, 0, 4)})

    def test_no_thread_read_or_written(self):
        drv = self.driver(qemu=self.qemu)
        for _ in range(3):
            snap = drv.sample()
            drv.apply(self.plan())
        # no counter of the impostor's threads: libvirt's figures
        self.assertEqual({}, drv.vcpu_threads())
        for index in range(2):
            self.assertIsNone(snap.vcpus[model.VcpuRef(
                self.dom.uuid, index)].voluntary_switches)
        # no RASS class written to its threads, none recorded
        self.assertEqual(('none', 'none'), (self.qemu.sched_rass(0),
                                            self.qemu.sched_rass(1)))
        self.assertEqual({}, self.checkpoint_data()['domains'][
            self.dom.uuid].get('rass', {}))
        # once libvirt's pid file names it, it is the domain's QEMU
        host_fixtures.write(os.path.join(
            self.qemu.run_dir, self.dom.name + '.pid'), '4242')
        drv.sample()
        drv.apply(self.plan())
        self.assertEqual(2, len(drv.vcpu_threads()))
        self.assertEqual(('io', 'cpu'), (self.qemu.sched_rass(0),
                                         self.qemu.sched_rass(1)))

    def test_said_once_in_the_log_and_in_check(self):
        drv = self.driver(qemu=self.qemu)
        pidfile = os.path.join(self.qemu.run_dir, self.dom.name + '.pid')
        # check, before any sample: said, and nothing logged
        line = ('QEMU of domain %s not established (%s: No such file or '
                'directory): its threads are left alone'
                % (self.dom.name, pidfile))
        self.assertIn(line, drv.describe().missing)
        self.assertNotIn('not established by libvirt', self.log.output)
        for _ in range(3):
            drv.sample()
        # said once, though looked for every period
        self.assertEqual(1, self.log.output.count(
            'Domain %s (%s): its QEMU process is not established'
            % (self.dom.name, self.dom.uuid)), self.log.output)
        self.assertIn(line, drv.describe().missing)
        host_fixtures.write(pidfile, '4242')
        drv.sample()
        self.assertIn('QEMU is pid 4242, from the pid file %s' % pidfile,
                      self.log.output)
        mode = drv.describe()
        self.assertNotIn(line, mode.missing)
        self.assertIn('established for 1 of 2 running domain(s)', ' '.join(
            mode.capabilities))

    def test_a_domain_without_a_dac_label(self):
        # the test driver's own domain ("test") has no seclabel
        drv = self.driver(qemu=self.qemu)
        drv.sample()
        self.assertIn('Domain test (', self.log.output)
        self.assertIn('its live XML has no DAC label', self.log.output)

    def test_a_restore_after_a_crash_finds_the_same_qemu(self):
        # the record of a crashed agent's RASS classes is put back on the
        # threads of the QEMU libvirt names: the entry is rebuilt without
        # its XML, so its DAC label is read then
        host_fixtures.write(os.path.join(
            self.qemu.run_dir, self.dom.name + '.pid'), '4242')
        drv = self.driver(qemu=self.qemu)
        drv.sample()
        drv.apply(self.plan())
        self.assertEqual('io', self.qemu.sched_rass(0))
        drv.domains.clear()
        drv.restore()
        self.assertEqual(('none', 'none'), (self.qemu.sched_rass(0),
                                            self.qemu.sched_rass(1)))

    def test_the_uri_a_driver_is_given_decides_where_it_looks(self):
        domains = domains_mod.Domains('qemu:///system', '/proc',
                                      self.sysfs.root)
        self.assertEqual(('/run/libvirt/qemu', 'qemu-',
                          self.sysfs.root + '/fs/cgroup'),
                         (domains.qemu.run_dir, domains.qemu.machine,
                          domains.qemu.cgroup_root))
        # the test driver's domains have no QEMU of root's
        drv = self.driver()
        self.assertEqual((None, None), (drv.domains.qemu.run_dir,
                                        drv.domains.qemu.machine))


# A Python other users can run (this one may be below root's home)
PYTHON = '/usr/bin/python3'


def _root_with(binary):
    """Why a real-process test cannot run here, or None."""
    if os.geteuid() != 0:
        return 'starting processes as other users needs root'
    if not shutil.which('setpriv'):
        return 'setpriv (util-linux) is missing'
    if binary and not os.path.exists(binary):
        return '%s is not installed' % binary
    return None


IMPOSTOR = textwrap.dedent('''
    import sys, threading
    def vcpu(i):
        with open('/proc/self/task/%d/comm' % threading.get_native_id(),
                  'w') as f:
            f.write('CPU %d/KVM' % i)
        threading.Event().wait()
    with open('/proc/self/comm', 'w') as f:
        f.write('qemu-system-x86')
    for i in range(2):
        threading.Thread(target=vcpu, args=(i,), daemon=True).start()
    print('ready', flush=True)
    sys.stdin.read()
''')
FIND = textwrap.dedent('''
    import sys
    from vsmtio_agent.drivers.libvirt import qemu_identity
    run_dir, uuid, uid = sys.argv[1:]
    print(repr(tuple(qemu_identity.QemuFinder(run_dir).find(
        uuid, 'dom', 1, int(uid)))))
''')


class TestRealProcesses(testtools.TestCase):
    """Real processes of other users, read through this machine's procfs.

    Under the hardened unit the agent is root without ``CAP_SYS_PTRACE``,
    and the kernel then refuses it ``/proc/<pid>/exe`` of another user's
    process: :data:`FIND` runs the finder so (``setpriv`` drops the
    capability), and with it, against a real QEMU (paused, no guest) and a
    real impostor, each as a user of its own.
    """

    def setUp(self):
        super().setUp()
        self.run_dir = self.useFixture(fixtures.TempDir()).path
        os.chmod(self.run_dir, 0o755)
        self.uuid = str(uuid_mod.uuid4())

    def start(self, uid, argv, ready='ready'):
        """``argv`` as ``uid``, once its first line begins ``ready``."""
        proc = subprocess.Popen(
            ['setpriv', '--reuid=%d' % uid, '--regid=%d' % uid,
             '--clear-groups'] + argv, stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.addCleanup(proc.wait)
        self.addCleanup(proc.kill)
        line = proc.stdout.readline()
        self.assertTrue(line.startswith(ready), line)
        return proc

    def find(self, pid, uid, ptrace):
        with open(os.path.join(self.run_dir, 'dom.pid'), 'w') as f:
            f.write('%d' % pid)
        argv = [sys.executable, '-c', FIND, self.run_dir, self.uuid,
                str(uid)]
        if not ptrace:
            argv = ['setpriv', '--bounding-set=-sys_ptrace'] + argv
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
        out = subprocess.run(argv, capture_output=True, text=True, env=env,
                             check=True, timeout=60).stdout
        return qemu_identity.Found(*eval(out))

    def test_an_impostor_of_another_user(self):
        why = _root_with(PYTHON)
        if why:
            self.skipTest(why)
        proc = self.start(NOBODY, [PYTHON, '-c', IMPOSTOR,
                                   '-uuid', self.uuid])
        for ptrace in (True, False):
            found = self.find(proc.pid, QEMU_UID, ptrace)
            self.assertIsNone(found.pid)
            self.assertIn('runs as uid 65534', found.why)
        # as QEMU's own user, it is not QEMU either where the kernel
        # shows its executable
        proc = self.start(QEMU_UID, [PYTHON, '-c', IMPOSTOR,
                                     '-uuid', self.uuid])
        found = self.find(proc.pid, QEMU_UID, True)
        self.assertIn('not QEMU', found.why)

    def test_a_real_qemu_with_and_without_cap_sys_ptrace(self):
        why = _root_with(QEMU_EXE)
        if why:
            self.skipTest(why)
        proc = self.start(QEMU_UID, [
            QEMU_EXE, '-machine', 'pc', '-accel', 'tcg', '-m', '32',
            '-smp', '2', '-nodefaults', '-display', 'none', '-S',
            '-name', 'guest=dom,debug-threads=on', '-uuid', self.uuid,
            '-monitor', 'stdio'], ready='QEMU ')
        with open('/proc/%d/status' % proc.pid) as f:
            self.assertIn('Uid:\t%d' % QEMU_UID, f.read())
        found = self.find(proc.pid, QEMU_UID, True)
        self.assertEqual((proc.pid, False), (found.pid, found.by_name),
                         found.why)
        # the kernel refuses /proc/<pid>/exe: the exec name stands in
        found = self.find(proc.pid, QEMU_UID, False)
        self.assertEqual((proc.pid, True), (found.pid, found.by_name),
                         found.why)
        # and the user must still be libvirt's
        self.assertIn('runs as uid %d' % QEMU_UID, self.find(
            proc.pid, NOBODY, False).why)
