"""The ledger's rule: one writer a knob, MIST before RASS before LTCR."""

import testtools

from vsmtio_agent.actuators import ledger

SHARES = ('cpu_shares', 'uuid-1', 'cpu_shares')


class TestOwners(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.owners = ledger.Owners()

    def test_a_free_knob_goes_to_whoever_claims_it(self):
        self.assertIsNone(self.owners.holder(*SHARES))
        self.assertTrue(self.owners.claim(ledger.LTCR, *SHARES))
        self.assertEqual(ledger.LTCR, self.owners.holder(*SHARES))
        self.assertTrue(self.owners.claim(ledger.LTCR, *SHARES))

    def test_a_higher_rank_takes_a_knob_over(self):
        self.assertTrue(self.owners.claim(ledger.RASS, *SHARES))
        self.assertTrue(self.owners.claim(ledger.MIST, *SHARES))
        self.assertEqual(ledger.MIST, self.owners.holder(*SHARES))

    def test_a_lower_rank_is_refused_and_changes_nothing(self):
        self.owners.claim(ledger.MIST, *SHARES)
        self.assertFalse(self.owners.may(ledger.RASS, *SHARES))
        self.assertFalse(self.owners.claim(ledger.RASS, *SHARES))
        self.assertFalse(self.owners.claim(ledger.LTCR, *SHARES))
        self.assertEqual(ledger.MIST, self.owners.holder(*SHARES))

    def test_only_the_holder_releases(self):
        self.owners.claim(ledger.MIST, *SHARES)
        self.owners.release(ledger.RASS, *SHARES)
        self.assertEqual(ledger.MIST, self.owners.holder(*SHARES))
        self.owners.release(ledger.MIST, *SHARES)
        self.assertTrue(self.owners.claim(ledger.RASS, *SHARES))

    def test_letting_go_of_a_domain_keeps_the_others_claims(self):
        self.owners.claim(ledger.MIST, *SHARES)
        self.owners.claim(ledger.MIST, 'blkio_weight', 'uuid-1', 'weight')
        self.owners.claim(ledger.RASS, 'pins', 'uuid-1', '0')
        self.owners.release_all(ledger.MIST, 'uuid-1')
        self.assertIsNone(self.owners.holder(*SHARES))
        self.assertIsNone(self.owners.holder('blkio_weight', 'uuid-1',
                                             'weight'))
        self.assertEqual(ledger.RASS,
                         self.owners.holder('pins', 'uuid-1', '0'))

    def test_knobs_are_told_apart_by_kind_domain_and_key(self):
        self.owners.claim(ledger.MIST, *SHARES)
        self.assertTrue(self.owners.claim(ledger.RASS, 'cpu_shares',
                                          'uuid-2', 'cpu_shares'))
        self.assertTrue(self.owners.claim(ledger.RASS, 'pins', 'uuid-1',
                                          '0'))
        self.owners.drop('uuid-1')
        self.assertIsNone(self.owners.holder(*SHARES))
        self.assertIsNone(self.owners.holder('pins', 'uuid-1', '0'))
        self.assertEqual(ledger.RASS, self.owners.holder(
            'cpu_shares', 'uuid-2', 'cpu_shares'))
        self.owners.drop()
        self.assertIsNone(self.owners.holder('cpu_shares', 'uuid-2',
                                             'cpu_shares'))
