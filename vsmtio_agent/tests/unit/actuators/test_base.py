"""The actuator contract on real files: record once, restore, keep misses."""

import os
import tempfile

import testtools

from vsmtio_agent.actuators import base


class FileActuator(base.Actuator):
    """The simplest real knob: one text file per key in a directory."""

    kind = 'files'

    def __init__(self, record, root):
        super().__init__(record)
        self.root = root

    def read(self, key):
        try:
            with open(os.path.join(self.root, key)) as f:
                return f.read()
        except OSError as exc:
            raise base.ActuatorError(str(exc))

    def _set(self, key, value):
        path = os.path.join(self.root, key)
        if not os.path.exists(path):
            raise base.ActuatorError('%s is gone' % path)
        with open(path, 'w') as f:
            f.write(value)


class TestActuator(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.root = tempfile.mkdtemp()
        self.addCleanup(lambda: [os.unlink(os.path.join(self.root, n))
                                 for n in os.listdir(self.root)])
        for name in ('a', 'b'):
            with open(os.path.join(self.root, name), 'w') as f:
                f.write('orig-' + name)
        self.record = base.MemoryRecord()
        self.act = FileActuator(self.record, self.root)

    def test_the_first_original_wins(self):
        self.act.write('a', 'one')
        self.act.write('a', 'two')
        self.assertEqual('two', self.act.read('a'))
        self.assertEqual('orig-a', self.record.original('files', 'a'))

    def test_restore_puts_back_and_forgets(self):
        self.act.write('a', 'one')
        self.act.write('b', 'one')
        self.assertEqual([], self.act.restore_all())
        self.assertEqual('orig-a', self.act.read('a'))
        self.assertEqual('orig-b', self.act.read('b'))
        self.assertEqual([], self.record.keys('files'))
        self.assertEqual({}, self.record.kept)

    def test_a_failed_restore_stays_recorded(self):
        self.act.write('a', 'one')
        self.act.write('b', 'one')
        os.unlink(os.path.join(self.root, 'b'))
        failed = self.act.restore_all()
        self.assertEqual(['b'], [key for key, _exc in failed])
        self.assertEqual(['b'], self.record.keys('files'))
        self.assertEqual('orig-a', self.act.read('a'))

    def test_an_unreadable_knob_is_not_written(self):
        self.assertRaises(base.ActuatorError, self.act.write, 'c', 'x')
        self.assertEqual([], self.record.keys('files'))
        self.assertFalse(os.path.exists(os.path.join(self.root, 'c')))

    def test_restore_without_a_record_is_a_no_op(self):
        self.act.restore('a')
        self.assertEqual('orig-a', self.act.read('a'))
