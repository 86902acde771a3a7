"""Any checkpoint file: restored, refused, or records dropped; one line each.

A property test: generated checkpoints (records of every kind with values
of every size and sign, keys that are paths, numbers or neither, files that
are not JSON or nest deep) are recovered by the libvirt driver as the
daemon's start and ``vsmtio-agent restore`` recover them: libvirt's
``test:///default`` with a domain of its own, a fake sysfs and a fake
procfs (the host's knobs, IRQs and threads must not move in a unit test;
the fake procfs has no thread files, so no real thread's policy is ever
written). Never a traceback, never a hang, and nothing written outside
the fake trees.
"""

import datetime
import json
import os

import fixtures
import hypothesis
from hypothesis import strategies as st
import testtools

from vsmtio_agent.actuators import checkpoint
from vsmtio_agent.drivers import base
from vsmtio_agent.drivers import libvirt as libvirt_driver
from vsmtio_agent.tests.unit.actuators import test_mist_actuators as acts
from vsmtio_agent.tests.unit.host import fixtures as host_fixtures
from vsmtio_agent.tests.unit.host import test_libvirt_driver as tld

INTS = st.one_of(st.integers(-3, 300), st.integers(-2 ** 70, 2 ** 70),
                 st.sampled_from([2 ** 31, 2 ** 32, 2 ** 63, 2 ** 64,
                                  10 ** 20, -1, 0, 1]))
NUMBER_KEYS = st.one_of(INTS.map(str), st.sampled_from(
    ['', '0\n', '01', '-1', '1e3', '٣', '9' * 30]))
CPU_TEXT = st.one_of(
    st.lists(st.sampled_from(['0', '1', '3', '7', '8', '0-3', '2-1',
                              '0-100000000000', '9' * 25, '', '^1']),
             max_size=4).map(','.join),
    st.text(alphabet='0123456789,-^ x\n', max_size=12))
VALUES = st.one_of(INTS, st.none(), st.booleans(), CPU_TEXT,
                   st.lists(INTS, max_size=3),
                   st.dictionaries(st.text(max_size=4), INTS, max_size=2))
KNOB_KEYS = st.one_of(
    st.sampled_from(['module/kvm/parameters/halt_poll_ns',
                     'module/kvm/parameters/ctx_retention_timeout_ns',
                     'kernel/vsmtio/rass_io_cpus',
                     'module/kvm/parameters/halt_poll_ns\n',
                     'kernel/vsmtio/../../etc', '/etc/passwd']),
    st.text(alphabet='abcz_019/.\n', max_size=20).map(
        lambda t: 'module/kvm/parameters/' + t))
POLICIES = st.fixed_dictionaries(
    {'policy': st.one_of(st.integers(-1, 7), INTS),
     'priority': st.one_of(st.integers(0, 100), INTS)},
    optional={'start': st.one_of(st.none(), INTS)})
THREADS = st.tuples(NUMBER_KEYS, NUMBER_KEYS).map('/'.join)
IRQS = st.one_of(CPU_TEXT, st.fixed_dictionaries(
    {'cpus': CPU_TEXT, 'actions': st.sampled_from(
        ['virtio1-req.0', '', 'eth0'])}))


@st.composite
def checkpoints(draw, uuid, dom_id):
    """A checkpoint file's bytes."""
    kind = draw(st.sampled_from(
        ['records'] * 6 + ['json', 'bytes', 'deep']))
    if kind == 'bytes':
        return draw(st.binary(max_size=100))
    if kind == 'deep':
        depth = draw(st.integers(1, 100000))
        return ('{"version": 3, "knobs": ' + '[' * depth
                + ']' * depth + '}').encode()
    if kind == 'json':
        return json.dumps(draw(st.recursive(
            VALUES, lambda inner: st.lists(inner, max_size=3)
            | st.dictionaries(st.text(max_size=5), inner, max_size=3),
            max_leaves=8))).encode()
    record = {'id': draw(st.one_of(st.just(dom_id), INTS)),
              'name': draw(st.one_of(st.none(), st.text(max_size=8)))}
    for kind_name, keys in (('pins', NUMBER_KEYS), ('rass', NUMBER_KEYS)):
        if draw(st.booleans()):
            record[kind_name] = draw(st.dictionaries(keys, VALUES,
                                                     max_size=3))
    if draw(st.booleans()):
        record['cpu_shares'] = draw(VALUES)
    if draw(st.booleans()):
        record['blkio_weight'] = {'weight': draw(VALUES)}
    data = {'version': draw(st.sampled_from([1, 2, 3, 3, 3, 4])),
            'boot_id': None,
            'domains': {draw(st.sampled_from([uuid, uuid, 'x' * 65,
                                              '../x'])): record},
            'knobs': draw(st.dictionaries(KNOB_KEYS, VALUES, max_size=3)),
            'host': {
                'mist_sched_policy': draw(st.dictionaries(
                    THREADS, POLICIES, max_size=3)),
                'mist_rt_runtime': draw(st.dictionaries(
                    st.sampled_from(['machine', 'a/b', '../x', '']), INTS,
                    max_size=2)),
                'mist_irq_affinity': draw(st.dictionaries(
                    st.one_of(st.sampled_from(['36', '38']), NUMBER_KEYS),
                    IRQS, max_size=3))}}
    return json.dumps(data).encode()


class TestCheckpointFiles(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(fixtures.Timeout(240, gentle=True))
        self.useFixture(fixtures.FakeLogger())
        self.sysfs = self.useFixture(host_fixtures.FakeSysfs(cores=4))
        self.procfs = self.useFixture(acts.FakeIrqs())
        self.dom = self.useFixture(tld.TestDomain())
        self.conf = host_fixtures.make_conf(
            self, sysfs_root=self.sysfs.root, procfs_root=self.procfs.root)
        self.path = self.conf.vsmtio_agent.checkpoint_path
        self.trees = (self.sysfs.root, self.procfs.root)

    def files(self):
        return {os.path.join(d, f) for root in self.trees
                for d, _dirs, names in os.walk(root) for f in names}

    @hypothesis.settings(max_examples=300, database=None, deadline=None,
                         suppress_health_check=[
                             hypothesis.HealthCheck.too_slow,
                             hypothesis.HealthCheck.data_too_large])
    @hypothesis.given(data=st.data())
    def test_a_checkpoint_file_is_restored_refused_or_dropped(self, data):
        content = data.draw(checkpoints(self.dom.uuid, self.dom.dom.ID()))
        directory = os.path.dirname(self.path)
        for name in os.listdir(directory):
            os.unlink(os.path.join(directory, name))
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, 'wb') as f:
            f.write(content)
        before = self.files()
        drv = libvirt_driver.LibvirtHostDriver(self.conf)
        try:
            started = datetime.datetime.now()
            done = drv.recover()
            took = datetime.datetime.now() - started
        finally:
            drv.close()
        self.assertIsInstance(done, base.Restored)
        self.assertLess(took, datetime.timedelta(seconds=30))
        if done.refused:
            self.assertNotIn('\n', done.refused)
            self.assertTrue(done.refused.startswith(
                'checkpoint %s is ' % self.path), done.refused)
        else:
            self.assertGreaterEqual(done.recorded,
                                    done.remaining + done.dropped)
            # left recorded: only what could not be written back
            left = checkpoint.Checkpoint(self.path)
            self.assertEqual(bool(done.remaining), left.load())
        for path in self.files() - before:
            # a knob file a record named (real sysfs creates none)
            self.assertNotIn('\n', path)
            self.assertTrue(path.startswith(self.trees), path)
