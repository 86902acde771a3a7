"""One search traced (``vsmtio-bench search``): its cost, table and page."""

import os

import fixtures
import testtools
import yaml

from vsmtio_agent.policy import bounds
from vsmtio_agent.policy import search as guard
from vsmtio_agent.policy import vocabulary
from vsmtio_bench import search
from vsmtio_bench.tests import test_oracle
from vsmtio_sim import scenario


def cand(index, timeout_us, **kw):
    return guard.Candidate(vocabulary.Config(timeouts=(
        ('web', timeout_us * 1000),)), index,
        (vocabulary.RETENTION, ('web',)), timeout_us * 1000,
        gain=bounds.Running(8), **kw)


def traced():
    kept = cand(2, 25, status=guard.DONE, safe=True, cleared=True)
    return {'periods': [(0.1, None), (0.2, 1), (0.3, 1), (0.4, None),
                        (0.5, 0), (0.6, 0), (0.7, None), (0.8, 2),
                        (0.9, -1), (1.0, 0)],
            'opened': {1: 0.1, 2: 0.4}, 'ended': {1: 0.5, 2: 0.8},
            'settled_s': 0.8, 'period_s': 0.1, 'kept': kept.config,
            'restarts': 0, 'since': 0.0,
            'reason': 'kept web 25us of 2 candidates',
            'candidates': (cand(1, 50, status=guard.OUT, lost=True,
                                reason='batch at most 0.9'), kept)}


class TestTable(testtools.TestCase):

    def test_the_cost_is_each_arms_share_until_it_settled(self):
        shares, n = search.cost(traced())
        self.assertEqual(8, n)
        self.assertEqual({search.CANDIDATE: 3 / 8.0, search.BARE: 2 / 8.0,
                          search.SETTLING: 3 / 8.0}, shares)

    def test_each_candidate_says_how_it_ended(self):
        rows = search.table_rows(traced())
        self.assertEqual(['1', 'web 50us', '0.1', '0.5', '8', 'floor', '1',
                          'batch at most 0.9'], rows[0])
        self.assertEqual('kept', rows[1][5])

    def test_the_page_states_the_cost_and_draws_the_picture(self):
        tmp = self.useFixture(fixtures.TempDir()).path
        png = os.path.join(tmp, 's.png')
        search.picture(traced(), 'a search', png)
        self.assertGreater(os.path.getsize(png), 1000)
        args = type('A', (), {'argv': ['--seed', '2', '--png', png],
                              'scenario': 'tiny', 'scheduler': 'cfs',
                              'seed': 2})()
        text = search.document(traced(), args, 60.0)
        self.assertIn('``vsmtio-bench search --seed 2``', text)
        self.assertIn('settled at 0.8 s of the simulated host (8 agent '
                      'periods of 0.1 s): 38% of them ran a candidate, 25% '
                      'the bare host and 38% settled after a switch', text)
        self.assertIn('It kept web 25us: kept web 25us of 2 candidates',
                      text)
        self.assertIn('No tenant changed during it.', text)


class TestTrace(testtools.TestCase):
    """The real agent on the tiny simulated host."""

    def test_a_search_cut_before_it_settles_says_so(self):
        path = test_oracle.tiny_scenario(self)
        got = search.trace(path, 'cfs', 1, after_s=0.0, max_s=8.0)
        self.assertIsNone(got['settled_s'])
        self.assertGreater(len(got['periods']), 40)
        # it was probing: candidates opened, and periods ran them
        self.assertTrue(got['opened'])
        self.assertTrue([a for _t, a in got['periods'] if a and a > 0])

    def test_a_search_started_over_is_counted_and_the_last_one_kept(self):
        # the alternator computes for good from 1 s on: that change cuts
        # the first search short, and once its class has held for the
        # wait, the search starts over
        doc = scenario.load_doc('adversarial_alternator')[0]
        alternator = [v for v in doc['vms'] if v['name'] == 'alternator'][0]
        alternator.pop('phase_cycle_s')
        alternator['phases'] = [{'at_s': 1.0, 'workload': 'computes'}]
        path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            'turns_once.yaml')
        with open(path, 'w') as f:
            yaml.safe_dump(dict(doc, name='turns_once'), f)
        got = search.trace(path, 'eevdf', 1, after_s=0.0, max_s=12.0)
        self.assertGreater(got['restarts'], 0)
        self.assertTrue(got['opened'])
        self.assertGreaterEqual(min(got['opened'].values()), got['since'])
        text = search.document(got, type('A', (), {
            'argv': [], 'scenario': 'adversarial_alternator',
            'scheduler': 'eevdf', 'seed': 1})(), 1.0)
        self.assertIn('A tenant changed %d times during it'
                      % got['restarts'], text)
        self.assertIn('had not settled at', text)

    def test_bad_arguments_are_refused_before_any_run(self):
        self.useFixture(fixtures.MockPatch('sys.stderr'))
        tr = self.useFixture(fixtures.MockPatchObject(search, 'trace')).mock
        for argv in (['--scenario', 'no_such'], ['--seed', '0'],
                     ['--after-s', 'nan'], ['--scheduler', 'bfs']):
            self.assertRaises(SystemExit, search.main, argv)
        tr.assert_not_called()
