"""The libvirt host driver against libvirt's in-process test driver.

``test:///default`` is real libvirt (its API, errors, vcpupin state) with a
fake hypervisor: good for pinning, shares and error paths, useless for
counters (those are tested on a real qemu guest in the functional tests).
Its host has 8 CPUs; a fake sysfs presents them as 4 cores x 2 threads.
"""

import glob
import json
import os
import uuid

import fixtures
import libvirt
import testtools

from vsmtio_agent.drivers import base
from vsmtio_agent.drivers import libvirt as libvirt_driver
from vsmtio_agent import model
from vsmtio_agent.tests.unit.host import fixtures as host_fixtures

ALL = frozenset(range(8))
DOMAIN_XML = """<domain type='test'>
  <name>%(name)s</name><uuid>%(uuid)s</uuid>
  %(metadata)s
  <memory>65536</memory><vcpu%(cpuset)s>2</vcpu>
  <os><type>hvm</type></os>
  """ + host_fixtures.DAC_SECLABEL + """
</domain>"""


class TestDomain(fixtures.Fixture):
    """A transient running domain of the shared test:///default host.

    ``metadata`` is a function of the domain's name giving its
    ``<metadata>`` element (nova's, in the trust-domain tests).
    """

    def __init__(self, cpuset=None, metadata=None):
        super().__init__()
        self.cpuset = cpuset
        self.metadata = metadata

    def _setUp(self):
        self.conn = libvirt.open('test:///default')
        self.addCleanup(self.conn.close)
        self.uuid = str(uuid.uuid4())
        self.name = 'vsmtio-' + self.uuid[:8]
        cpuset = " cpuset='%s'" % self.cpuset if self.cpuset else ''
        self.dom = self.conn.createXML(DOMAIN_XML % {
            'name': self.name, 'uuid': self.uuid, 'cpuset': cpuset,
            'metadata': self.metadata(self.name) if self.metadata else ''})
        self.addCleanup(self._destroy)

    def _destroy(self):
        try:
            self.dom.destroy()
        except libvirt.libvirtError:
            pass

    def pins(self):
        return [frozenset(i for i, on in enumerate(m) if on)
                for m in self.dom.vcpuPinInfo(0)]


def placement(core, role, *threads):
    return model.Placement(core, role, threads[0], tuple(threads))


def host_state(conf, sysfs):
    """What a write to the host would change, to compare before/after.

    The knob's and the checkpoint's bytes and modification times (a
    write of the same value still moves the time), and the files beside
    the checkpoint (its lock, a moved-aside copy).
    """
    path = conf.vsmtio_agent.checkpoint_path
    state = {'files': sorted(os.listdir(os.path.dirname(path)))}
    for name in (path, sysfs.knob):
        try:
            with open(name, 'rb') as f:
                state[name] = (f.read(), os.stat(name).st_mtime_ns)
        except FileNotFoundError:
            state[name] = None
    return state


class DriverTestCase(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.log = self.useFixture(fixtures.FakeLogger())
        self.sysfs = self.useFixture(host_fixtures.FakeSysfs(cores=4))

    def driver(self, qemu=None, **overrides):
        """The driver, reading ``qemu``'s pid files and procfs if given.

        ``qemu``: a :class:`~host_fixtures.FakeQemuProcfs`.
        """
        overrides.setdefault('sysfs_root', self.sysfs.root)
        if qemu is not None:
            overrides['procfs_root'] = qemu.root
        self.conf = host_fixtures.make_conf(self, **overrides)
        drv = libvirt_driver.LibvirtHostDriver(self.conf)
        if qemu is not None:
            drv.domains.qemu = qemu.finder()
        self.addCleanup(drv.close)
        return drv

    def checkpoint_data(self):
        with open(self.conf.vsmtio_agent.checkpoint_path) as f:
            return json.load(f)


class TestSampleAndTopology(DriverTestCase):

    def test_topology_and_mode(self):
        drv = self.driver()
        self.assertEqual([(0, 4), (1, 5), (2, 6), (3, 7)],
                         [c.threads for c in drv.topology().cores])
        mode = drv.describe()
        self.assertEqual('stock', mode.mode)
        self.assertIn('libvirt test:///default reachable', ' '.join(
            mode.capabilities))
        self.assertIn('halt_poll_ns', ' '.join(mode.capabilities))

    def test_patched_kernel_mode_drives_its_timeout_knob(self):
        self.sysfs = self.useFixture(host_fixtures.FakeSysfs(patched=True))
        dom = self.useFixture(TestDomain())
        drv = self.driver()
        mode = drv.describe()
        self.assertEqual('patched', mode.mode)
        self.assertIn('ABI version 1', mode.reason)
        drv.sample()
        drv.apply(model.Decision(20000000, {
            model.VcpuRef(dom.uuid, 0): placement(0, model.Role.IO, 4)}))
        # Clamped to the ABI's range; halt polling left alone.
        self.assertEqual(10000000, self.sysfs.read_knob())
        with open(self.sysfs.root + '/module/kvm/parameters/'
                  'halt_poll_ns') as f:
            self.assertEqual('200000', f.read().strip())
        drv.restore()
        self.assertEqual(200000, self.sysfs.read_knob())

    def test_patched_kernel_rass_classes_and_io_cpus(self):
        self.sysfs = self.useFixture(host_fixtures.FakeSysfs(patched=True))
        dom = self.useFixture(TestDomain())
        qemu = self.useFixture(host_fixtures.FakeQemuProcfs(dom.uuid,
                                                            name=dom.name))
        drv = self.driver(qemu=qemu)
        snap = drv.sample()
        self.assertEqual(10, snap.vcpus[model.VcpuRef(dom.uuid, 1)]
                         .voluntary_switches)
        decision = model.Decision(200000, {
            model.VcpuRef(dom.uuid, 0): placement(0, model.Role.IO, 4),
            model.VcpuRef(dom.uuid, 1): placement(0, model.Role.CPU, 0, 4)})
        result = drv.apply(decision)
        self.assertEqual(0, result.failed, result.messages)
        self.assertEqual(('io', 'cpu'), (qemu.sched_rass(0),
                                         qemu.sched_rass(1)))
        io_cpus = os.path.join(self.sysfs.root, 'kernel/vsmtio/rass_io_cpus')
        with open(io_cpus) as f:
            self.assertEqual('4-7', f.read().strip())
        saved = self.checkpoint_data()
        self.assertEqual({'0': 'none', '1': 'none'},
                         saved['domains'][dom.uuid]['rass'])
        self.assertEqual('', saved['knobs']['kernel/vsmtio/rass_io_cpus'])
        self.assertEqual(0, drv.apply(decision).applied)
        drv.restore()
        self.assertEqual(('none', 'none'), (qemu.sched_rass(0),
                                            qemu.sched_rass(1)))
        with open(io_cpus) as f:
            self.assertEqual('', f.read().strip())
        self.assertEqual([ALL, ALL], dom.pins())

    def test_sample_lists_every_vcpu(self):
        dom = self.useFixture(TestDomain())
        snap = self.driver().sample()
        refs = [r for r in snap.vcpus if r.domain == dom.uuid]
        self.assertEqual([0, 1], sorted(r.index for r in refs))
        c = snap.vcpus[refs[0]]
        self.assertIsNotNone(c.run_ns)      # virDomainGetVcpus
        self.assertIsNone(c.retention_ns)   # not a kvm domain: missing
        self.assertIsNone(c.instructions)   # no PMU: missing


class TestApplyAndRestore(DriverTestCase):

    def test_a_probes_changes_are_logged_below_info(self):
        dom = self.useFixture(TestDomain())
        info = self.useFixture(fixtures.FakeLogger(
            name='vsmtio_agent.drivers.libvirt', level='INFO'))
        drv = self.driver()
        drv.sample()
        plan = {model.VcpuRef(dom.uuid, 0): placement(0, model.Role.CPU, 4)}
        result = drv.apply(model.Decision(50000, plan, trial=True))
        self.assertEqual(2, result.applied)     # the pin and the knob
        self.assertNotIn('Changed', info.output)
        drv.apply(model.Decision(100000, plan))
        self.assertIn('Changed retention timeout', info.output)

    def test_pins_shares_timeout_then_restores(self):
        dom = self.useFixture(TestDomain())
        drv = self.driver()
        drv.sample()
        d = model.Decision(timeout_ns=50000, placements={
            model.VcpuRef(dom.uuid, 0): placement(0, model.Role.IO, 4),
            model.VcpuRef(dom.uuid, 1): placement(1, model.Role.CPU, 1, 5)})
        result = drv.apply(d)
        # Two pins, the domain's shares (it has an I/O vCPU), the knob.
        self.assertEqual((4, 0), (result.applied, result.failed))
        self.assertEqual([{4}, {1, 5}], dom.pins())
        self.assertEqual(50000, self.sysfs.read_knob())
        self.assertEqual({}, drv.refusals())    # the host took it all
        saved = self.checkpoint_data()
        self.assertEqual({'0': list(range(8)), '1': list(range(8))},
                         saved['domains'][dom.uuid]['pins'])
        self.assertEqual(50, saved['domains'][dom.uuid]['cpu_shares'])
        self.assertEqual({'module/kvm/parameters/halt_poll_ns': 200000},
                         saved['knobs'])
        # The same plan again changes nothing.
        again = drv.apply(d)
        self.assertEqual((0, 3), (again.applied, again.unchanged))
        drv.restore()
        self.assertEqual([ALL, ALL], dom.pins())
        self.assertEqual(200000, self.sysfs.read_knob())
        self.assertFalse(os.path.exists(self.conf.vsmtio_agent
                                        .checkpoint_path))

    def test_what_the_guard_drops_goes_back(self):
        # no knob stays moved for a mechanism the agent does not keep;
        # the split's pins and shares and the timeout come back
        dom = self.useFixture(TestDomain())
        drv = self.driver()
        drv.sample()
        plan = {
            model.VcpuRef(dom.uuid, 0): placement(0, model.Role.IO, 4),
            model.VcpuRef(dom.uuid, 1): placement(1, model.Role.CPU, 1, 5)}
        drv.apply(model.Decision(timeout_ns=50000, placements=plan))
        self.assertEqual([{4}, {1, 5}], dom.pins())
        self.assertEqual(50000, self.sysfs.read_knob())
        drv.apply(model.Decision(timeout_ns=50000, placements=plan,
                                 split=False))
        self.assertEqual([ALL, ALL], dom.pins())
        self.assertEqual(50000, self.sysfs.read_knob())
        self.assertNotIn(dom.uuid, self.checkpoint_data()['domains'])
        drv.apply(model.Decision(timeout_ns=55000, placements=plan,
                                 retention=False, split=False))
        self.assertEqual(200000, self.sysfs.read_knob())
        # nothing left to restore: no checkpoint
        self.assertFalse(os.path.exists(self.conf.vsmtio_agent
                                        .checkpoint_path))
        # and a decision that keeps nothing never moves the knob
        fresh = self.driver()
        fresh.sample()
        fresh.apply(model.Decision(timeout_ns=70000, placements=plan,
                                   retention=False, split=False))
        self.assertEqual(200000, self.sysfs.read_knob())
        self.assertEqual([ALL, ALL], dom.pins())

    def test_a_split_of_part_of_the_host_pins_only_its_cores(self):
        # the graded split: core 0 split, core 1 not; a vCPU whose
        # core leaves the split goes back to where nova put it
        dom = self.useFixture(TestDomain())
        drv = self.driver()
        drv.sample()
        plan = {
            model.VcpuRef(dom.uuid, 0): placement(0, model.Role.IO, 4),
            model.VcpuRef(dom.uuid, 1): placement(1, model.Role.CPU, 1, 5)}
        drv.apply(model.Decision(timeout_ns=50000, placements=plan,
                                 split_cores=frozenset({0})))
        self.assertEqual([{4}, ALL], dom.pins())
        drv.apply(model.Decision(timeout_ns=50000, placements=plan,
                                 split_cores=frozenset({0, 1})))
        self.assertEqual([{4}, {1, 5}], dom.pins())
        drv.apply(model.Decision(timeout_ns=50000, placements=plan,
                                 split_cores=frozenset({1})))
        self.assertEqual([ALL, {1, 5}], dom.pins())
        drv.restore()
        self.assertEqual([ALL, ALL], dom.pins())

    def test_stays_inside_the_cpus_nova_gave(self):
        # nova pinned this guest to CPUs 1 and 5 (core 1).
        dom = self.useFixture(TestDomain(cpuset='1,5'))
        drv = self.driver()
        drv.sample()
        result = drv.apply(model.Decision(200000, {
            model.VcpuRef(dom.uuid, 0): placement(0, model.Role.IO, 4),
            model.VcpuRef(dom.uuid, 1): placement(1, model.Role.IO, 5)}))
        self.assertEqual([{1, 5}, {5}], dom.pins())
        self.assertIn('outside the CPUs nova gave it (1,5)',
                      ' '.join(result.messages))
        drv.restore()
        self.assertEqual([{1, 5}, {1, 5}], dom.pins())

    def test_crash_is_undone_at_next_start(self):
        dom = self.useFixture(TestDomain())
        first = self.driver()
        first.sample()
        first.apply(model.Decision(50000, {
            model.VcpuRef(dom.uuid, 0): placement(2, model.Role.CPU, 2)}))
        self.assertEqual([{2}, ALL], dom.pins())
        first.close()   # killed: no restore
        conf = self.conf
        second = libvirt_driver.LibvirtHostDriver(conf)
        self.addCleanup(second.close)
        second.recover()    # the daemon's first step
        self.assertEqual([ALL, ALL], dom.pins())
        self.assertEqual(200000, self.sysfs.read_knob())
        self.assertIn('did not undo', self.log.output)

    def test_observing_writes_nothing_recover_restores(self):
        # A dead agent left vCPU 0 pinned and the knob changed. A second
        # driver that only observes and describes (status, check, a dry
        # run) leaves all of it, and the checkpoint, exactly as it is.
        dom = self.useFixture(TestDomain())
        dead = self.driver()
        dead.sample()
        dead.apply(model.Decision(50000, {
            model.VcpuRef(dom.uuid, 0): placement(2, model.Role.CPU, 2)}))
        dead.close()        # killed: no restore
        before = host_state(self.conf, self.sysfs)
        observer = libvirt_driver.LibvirtHostDriver(self.conf)
        self.addCleanup(observer.close)
        observer.sample()
        observer.describe()
        observer.sample()
        observer.restore()  # what Agent.stop calls after a dry run
        observer.close()
        self.assertEqual(before, host_state(self.conf, self.sysfs))
        self.assertEqual([{2}, ALL], dom.pins())
        self.assertNotIn('did not undo', self.log.output)
        daemon = libvirt_driver.LibvirtHostDriver(self.conf)
        self.addCleanup(daemon.close)
        daemon.recover()
        self.assertEqual([ALL, ALL], dom.pins())
        self.assertEqual(200000, self.sysfs.read_knob())
        self.assertFalse(os.path.exists(self.conf.vsmtio_agent
                                        .checkpoint_path))

    def test_an_upgrade_restores_what_the_previous_version_left(self):
        # A version-1 checkpoint (the agent before the actuators) and the
        # changes it records: vCPU 1 pinned to CPU 3, the knob at 50000.
        dom = self.useFixture(TestDomain())
        self.driver()
        dom.dom.pinVcpu(1, tuple(c == 3 for c in range(8)))
        with open(self.sysfs.knob, 'w') as f:
            f.write('50000\n')
        path = self.conf.vsmtio_agent.checkpoint_path
        with open(path, 'w') as f:
            json.dump({
                'version': 1, 'boot_id': None,
                'domains': {dom.uuid: {
                    'id': dom.dom.ID(), 'name': dom.name,
                    'pins': {'1': list(range(8))}, 'cpu_shares': None,
                    'rass': {}}},
                'knobs': {'module/kvm/parameters/halt_poll_ns': 200000}}, f)
        upgraded = libvirt_driver.LibvirtHostDriver(self.conf)
        self.addCleanup(upgraded.close)
        upgraded.recover()
        self.assertEqual([ALL, ALL], dom.pins())
        self.assertEqual(200000, self.sysfs.read_knob())
        self.assertFalse(os.path.exists(path))

    def test_one_agent_per_host(self):
        dom = self.useFixture(TestDomain())
        first = self.driver()
        first.recover()     # a daemon started: it holds the host
        second = libvirt_driver.LibvirtHostDriver(self.conf)
        self.addCleanup(second.close)
        second.sample()
        result = second.apply(model.Decision(50000, {
            model.VcpuRef(dom.uuid, 0): placement(2, model.Role.CPU, 2)}))
        self.assertEqual(0, result.applied)
        self.assertEqual([ALL, ALL], dom.pins())


class TestFaults(DriverTestCase):

    def test_domain_destroyed_between_sample_and_apply(self):
        dom = self.useFixture(TestDomain())
        other = self.useFixture(TestDomain())
        drv = self.driver()
        drv.sample()
        dom.dom.destroy()
        result = drv.apply(model.Decision(200000, {
            model.VcpuRef(dom.uuid, 0): placement(2, model.Role.CPU, 2),
            model.VcpuRef(other.uuid, 0): placement(3, model.Role.CPU, 3)}))
        self.assertEqual((1, 0), (result.applied, result.failed))
        self.assertIn('disappeared before apply', self.log.output)
        self.assertNotIn(dom.uuid, self.checkpoint_data()['domains'])
        drv.sample()   # and the next period goes on without it
        drv.restore()
        self.assertEqual([ALL, ALL], other.pins())

    def test_unwritable_knob_degrades_with_a_warning(self):
        self.sysfs = self.useFixture(
            host_fixtures.FakeSysfs(knob_writable=False))
        dom = self.useFixture(TestDomain())
        drv = self.driver()
        drv.sample()
        # refused before any apply (its mode), and the same after: status
        # shows the reason, never the timeout as in force
        self.assertEqual(['retention'], list(drv.refusals()))
        self.assertIn('halt_poll_ns', drv.refusals()['retention'])
        result = drv.apply(model.Decision(50000, {
            model.VcpuRef(dom.uuid, 0): placement(2, model.Role.CPU, 2)}))
        self.assertEqual((1, 0), (result.applied, result.failed))
        self.assertIn('Retention timeout not applicable', self.log.output)
        self.assertIn('Permission denied', self.log.output)
        self.assertIn('retention timeout knob',
                      ' '.join(drv.describe().missing))
        self.assertIn('halt_poll_ns', drv.refusals()['retention'])
        self.assertEqual({}, self.checkpoint_data()['knobs'])
        drv.restore()
        self.assertEqual([ALL, ALL], dom.pins())

    def test_pinning_denied_degrades_with_a_warning(self):
        # A read-only libvirt connection is how libvirt refuses a client
        # that may look but not change: a real permission error.
        dom = self.useFixture(TestDomain())
        self.useFixture(fixtures.MonkeyPatch('libvirt.open',
                                             libvirt.openReadOnly))
        drv = self.driver()
        drv.sample()
        plan = model.Decision(200000, {
            model.VcpuRef(dom.uuid, 0): placement(2, model.Role.CPU, 2),
            model.VcpuRef(dom.uuid, 1): placement(3, model.Role.CPU, 3)})
        result = drv.apply(plan)
        self.assertEqual(1, result.failed)   # then pinning is given up
        self.assertIn('Degrading: vCPU pinning denied', self.log.output)
        self.assertIn('vCPU pinning denied', ' '.join(drv.describe().missing))
        self.assertEqual({'split'}, set(drv.refusals()))
        self.assertIn('vCPU pinning denied', drv.refusals()['split'])
        self.assertEqual([ALL, ALL], dom.pins())
        self.assertEqual(0, drv.apply(plan).failed)
        drv.restore()
        self.assertNotIn('Cannot restore', self.log.output)
        self.assertFalse(os.path.exists(self.conf.vsmtio_agent
                                        .checkpoint_path))

    def test_corrupt_checkpoint_is_reported_and_the_agent_goes_on(self):
        dom = self.useFixture(TestDomain())
        drv = self.driver()
        path = self.conf.vsmtio_agent.checkpoint_path
        with open(path, 'w') as f:
            f.write('{"version": 1, "domains": {"x": ')
        drv.recover()
        drv.sample()
        self.assertIn('is corrupt', self.log.output)
        self.assertTrue(glob.glob(path + '.corrupt-*'))
        drv.apply(model.Decision(200000, {
            model.VcpuRef(dom.uuid, 1): placement(2, model.Role.CPU, 2)}))
        self.assertEqual([ALL, {2}], dom.pins())
        drv.restore()
        self.assertEqual([ALL, ALL], dom.pins())

    def test_bad_nova_cpu_set_is_one_clear_error(self):
        # from the option's own type (vsmtio_agent.conf.types), which
        # vsmtio-agent reads at start: no driver ever sees it
        exc = self.assertRaises(ValueError, self.driver,
                                cpu_shared_set='0-3,x')
        self.assertIn("bad CPU id 'x'", str(exc))

    def test_kernel_abi_paths_match_abi_json(self):
        # The driver is written against host_kernel_patches/ABI.rst path by
        # path; abi.json is its machine-readable twin.
        root = os.path.dirname(os.path.dirname(os.path.dirname(
            os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
        path = os.path.join(root, 'host_kernel_patches', 'abi.json')
        if not os.path.exists(path):
            self.skipTest('host_kernel_patches/abi.json is not in this tree')
        with open(path) as f:
            abi = json.load(f)
        from vsmtio_contract import kernel_abi as k
        self.assertIn(abi['abi_version'], k.KNOWN_ABI_VERSIONS)
        entries = {e['path']: e for e in abi['entries']}
        for rel, kind in ((k.ABI_VERSION, 'stat'),
                          (k.RETENTION_TIMEOUT_NS, 'knob'),
                          (k.RASS_IO_CPUS, 'knob')):
            self.assertEqual(kind, entries['/sys/' + rel]['kind'])
        self.assertEqual(k.RETENTION_TIMEOUT_MAX_NS,
                         entries['/sys/' + k.RETENTION_TIMEOUT_NS]['max'])
        self.assertIn('/proc/<pid>/task/<tid>/' + k.SCHED_RASS, entries)
        for stat in libvirt_driver._PATCHED_STATS.values():
            name = stat[:-len('.sum')]
            self.assertIn('KVM_GET_STATS_FD:vcpu/' + name, entries)

    def test_unreachable_libvirt_backs_off(self):
        # a back-off longer than any pause between the two samples on a
        # loaded machine
        drv = self.driver(
            libvirt_uri='qemu+unix:///system?socket=/nonexistent/sock',
            libvirt_retry_initial=60.0)
        exc = self.assertRaises(base.HostDriverError, drv.sample)
        self.assertIn('cannot connect to libvirt', str(exc))
        exc = self.assertRaises(base.HostDriverError, drv.sample)
        self.assertIn('next attempt in', str(exc))
        self.assertIn('libvirt: ', ' '.join(drv.describe().missing))
        drv.restore()   # nothing recorded: nothing to do, no error


class TestWhatTheOperatorReads(DriverTestCase):
    """Server names, each change logged once, a dry run's list."""

    def nova_domain(self, server='web-1'):
        from vsmtio_agent.tests.unit.host import test_trust_libvirt
        return self.useFixture(TestDomain(metadata=lambda name: (
            test_trust_libvirt.NOVA_METADATA % {'name': server,
                                                'project': 'p1'})))

    def decision(self, dom):
        return model.Decision(timeout_ns=50000, placements={
            model.VcpuRef(dom.uuid, 0): placement(0, model.Role.IO, 4),
            model.VcpuRef(dom.uuid, 1): placement(1, model.Role.CPU, 1, 5)})

    def test_names_from_nova_metadata(self):
        dom = self.nova_domain()
        plain = self.useFixture(TestDomain())
        drv = self.driver()
        drv.sample()
        names = drv.domain_names()
        self.assertEqual('web-1 (%s)' % dom.name, names[dom.uuid])
        self.assertEqual(plain.name, names[plain.uuid])
        self.assertIn('Domain web-1 (%s) (%s) is running: 2 vCPU(s), not '
                      'type kvm' % (dom.name, dom.uuid), self.log.output)

    def test_each_change_logged_at_info_once(self):
        dom = self.nova_domain()
        drv = self.driver()
        drv.sample()
        for _ in range(3):
            drv.apply(self.decision(dom))
        lines = [line for line in self.log.output.splitlines()
                 if line.startswith('Changed ')]
        self.assertEqual(4, len(lines), lines)   # two pins, shares, knob
        self.assertIn('Changed vCPU 0 pins of web-1 (%s): 0-7 -> 4'
                      % dom.name, lines)
        self.assertIn('Changed retention timeout (module/kvm/parameters/'
                      'halt_poll_ns): 200000 -> 50000', lines)

    def test_preview_lists_the_changes_and_writes_nothing(self):
        dom = self.nova_domain()
        drv = self.driver()
        drv.sample()
        before = host_state(self.conf, self.sysfs)
        preview = drv.preview(self.decision(dom))
        self.assertEqual(before, host_state(self.conf, self.sysfs))
        self.assertEqual([ALL, ALL], dom.pins())
        self.assertEqual(sorted([
            'vCPU 0 pins of web-1 (%s): 0-7 -> 4' % dom.name,
            'vCPU 1 pins of web-1 (%s): 0-7 -> 1,5' % dom.name,
            'cpu shares of web-1 (%s): 50 -> 100' % dom.name,
            'retention timeout (module/kvm/parameters/halt_poll_ns): '
            '200000 -> 50000']), sorted(preview))
        # what an apply then does is what the preview said
        self.assertEqual(4, drv.apply(self.decision(dom)).applied)

    def test_check_claims_no_kvm_halt_statistics_without_kvm_guests(self):
        # test:///default's domains are type 'test', as TCG guests are
        # 'qemu': libvirt has KVM's halt statistics for neither.
        dom = self.useFixture(TestDomain())
        mode = self.driver().describe()     # check: nothing sampled yet
        self.assertNotIn('halt statistics', ' '.join(mode.capabilities))
        self.assertIn('KVM halt statistics: no running domain is type kvm',
                      ' '.join(mode.missing))
        self.assertIn(dom.name, ' '.join(mode.missing))
