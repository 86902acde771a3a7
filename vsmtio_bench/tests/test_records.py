"""The committed records (``oracle.json``, ``yardstick.json``)."""

import json
import multiprocessing
import os

import fixtures
import testtools

from vsmtio_bench import records

IDENTITY = {'model_version': 'm1', 'commit': 'abc'}


def _put_many(path, lane, n):
    for i in range(n):
        records.put(path, IDENTITY, ('cfs', 'lane%d' % lane, str(i)), i)


class TestRecords(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                                 'r.json')

    def test_nothing_recorded_reads_empty(self):
        self.assertEqual({}, records.read(self.path, IDENTITY))

    def test_results_merge_and_another_commit_keeps_them(self):
        records.put(self.path, IDENTITY, ('cfs', 'a'), 1)
        records.put(self.path, dict(IDENTITY, commit='def'), ('eevdf', 'a'),
                    2)
        self.assertEqual({'cfs': {'a': 1}, 'eevdf': {'a': 2}},
                         records.read(self.path, IDENTITY))
        with open(self.path) as f:
            self.assertEqual('def', json.load(f)['commit'])

    def test_another_codes_results_are_neither_read_nor_kept(self):
        records.put(self.path, IDENTITY, ('cfs', 'a'), 1)
        other = dict(IDENTITY, model_version='m2')
        self.assertEqual({}, records.read(self.path, other))
        records.put(self.path, other, ('cfs', 'b'), 2)
        self.assertEqual({'cfs': {'b': 2}}, records.read(self.path, other))
        self.assertEqual({}, records.read(self.path, IDENTITY))

    def test_a_field_the_reader_has_and_the_record_lacks_is_another(self):
        records.put(self.path, IDENTITY, ('cfs', 'a'), 1)
        self.assertEqual({}, records.read(
            self.path, dict(IDENTITY, judge_version='j')))

    def test_lanes_recording_at_once_lose_nothing(self):
        procs = [multiprocessing.Process(target=_put_many,
                                         args=(self.path, lane, 25))
                 for lane in range(3)]
        for p in procs:
            p.start()
        for p in procs:
            p.join()
            self.assertEqual(0, p.exitcode)
        got = records.read(self.path, IDENTITY)['cfs']
        self.assertEqual({'lane0', 'lane1', 'lane2'}, set(got))
        for lane in got.values():
            self.assertEqual({str(i): i for i in range(25)}, lane)
        self.assertEqual(['r.json'], os.listdir(os.path.dirname(self.path)))
