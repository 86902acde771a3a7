"""The generated page is valid RST, as Sphinx reads it, and says where it
came from, never when."""

import docutils.core
import docutils.nodes
import testtools

from vsmtio_bench import document
from vsmtio_bench import documents
from vsmtio_bench import figures
from vsmtio_bench import yardstick


def parse(text):
    """The doctree and every warning docutils raised on ``text``."""
    return docutils.core.publish_doctree(
        text, settings_overrides={'report_level': 2, 'halt_level': 5,
                                  'warning_stream': False})


def warnings(tree):
    return [m.astext() for m in tree.findall(docutils.nodes.system_message)
            if m['level'] >= 2]


class RstTableTest(testtools.TestCase):

    def test_a_row_with_an_empty_first_cell_stays_a_row(self):
        # a scenario's later kernels leave its name cell empty; in a
        # simple table that would fold them into the row above
        rows = [['fig5_x', 'van', '1.00'], ['', 'poll', '1.51'],
                ['', 'vsmtio', '1.02']]
        tree = parse(document.rst_table(['scenario', 'kernel', 'I/O'],
                                        rows))
        self.assertEqual([], warnings(tree))
        body = next(tree.findall(docutils.nodes.tbody))
        self.assertEqual(3, len(body.children))
        self.assertEqual(['fig5_x', '', ''],
                         [row.children[0].astext() for row in body.children])

    def test_a_marked_shipped_value_is_text_not_emphasis(self):
        tree = parse(document.rst_table(
            ['input', 'values (shipped \\*)'], [['costs.x', 'x0.5 x1* x2']]))
        self.assertEqual([], warnings(tree))
        self.assertEqual([], list(tree.findall(docutils.nodes.emphasis)))


class ProvenanceTest(testtools.TestCase):

    def test_the_commit_is_the_checkouts_or_unknown(self):
        found = documents.commit()
        self.assertTrue(found == 'unknown' or (
            4 <= len(found) <= 40 and
            all(c in '0123456789abcdef' for c in found)), found)

    def test_the_header_names_the_command_and_the_commit_and_no_date(self):
        head = document.HEAD.split('\n\n')[1]
        self.assertIn('{printed}', head)
        self.assertIn('``vsmtio-bench sim``', document.printed())
        self.assertIn('at commit ``%s``' % documents.commit(),
                      document.printed())
        self.assertNotIn('{date}', document.HEAD + yardstick.DOC_HEAD)

    def test_the_command_can_be_run_as_printed(self):
        self.assertEqual(
            "vsmtio-bench sim --sensitivity-only --sensitivity-cliff ''",
            documents.command('sim', ['--sensitivity-only', '--out', 'x',
                                      '--sensitivity-cliff', ''],
                              ('--out',)))
        # as a literal on a page, an empty argument leaves no space before
        # the closing backquotes
        text = '``%s``' % documents.command('sim', ['--sensitivity', ''])
        self.assertEqual([], warnings(parse(text)))

    def test_the_yardstick_page_is_valid_rst(self):
        runs = [{'scenario': 'a', 'scheduler': 'cfs', 'seed': s, 'io': io,
                 'cpu': 1.0, 'ok': True, 'below': [], 'kept': {}}
                for s, io in ((1, 1.1), (2, 1.2))]
        oracle = {'label': 'vsmtio: web x2', 'io_by_seed': {'1': 1.2,
                                                            '2': 1.3},
                  'margin': {'label': 'vsmtio: all off',
                             'io_by_seed': {'1': 1.0, '2': 1.0}}}
        rows = yardstick.by_scenario(runs, {'cfs': {'a': oracle}})
        args = type('Args', (), {'argv': ['--quick'], 'seeds': (1, 2)})
        text = yardstick.document(rows, args, 60.0)
        self.assertEqual([], warnings(parse(text)))
        self.assertIn('``vsmtio-bench yardstick --quick`` at commit', text)
        # seed 1: 0.1 / 0.2, seed 2: 0.2 / 0.3
        self.assertIn('gains 5% or more: 58% [', text)


class StudyTest(testtools.TestCase):
    """The opening says whether the sensitivity study ran with the runs."""

    def test_left_out_or_run(self):
        args = type('Args', (), {'png': 'simulator.png',
                                 'map_png': 'breakeven.png'})
        for study, said in ((True, 'map and the sensitivity study, took'),
                            (False, 'map (the sensitivity study left out), '
                                    'took')):
            text = document.document({}, {}, [], 60.0, 120.0, None, args,
                                     study=study)
            self.assertIn(said, ' '.join(text.split()))


class PrintedTest(testtools.TestCase):
    """The first line says at which commit the runs were printed."""

    def test_a_run_a_rewrite_and_a_rewrite_of_an_unknown_commit(self):
        now = documents.commit()
        self.assertEqual('Printed by ``tox -e bench`` (``vsmtio-bench sim``) '
                         'at commit ``%s``.' % now, document.printed())
        again = document.printed('abc1234', True)
        self.assertIn('at commit ``abc1234``; written again from its JSON',
                      again)
        self.assertTrue(again.endswith('at commit ``%s``.' % now))
        self.assertIn('a commit its JSON did not record',
                      document.printed(None, True))


class MapPictureTest(testtools.TestCase):
    """The break-even map shows the picture ``--map-png`` wrote."""

    def test_the_map_names_its_picture(self):
        args = type('Args', (), {'png': 'simulator_cfs.png',
                                 'map_png': 'breakeven_cfs.png'})
        grid = {(r, p): (1.0, 1.0) for r in figures.REFILL_US
                for p in figures.PAIR_MAX}
        text = document.document({}, grid, [], 60.0, 120.0, None, args)
        self.assertEqual([], warnings(parse(text)))
        self.assertIn('.. image:: breakeven_cfs.png', text)
        self.assertIn('.. image:: simulator_cfs.png', text)
        self.assertNotIn('breakeven.png', text)


class SchedulerTest(testtools.TestCase):
    """The opening paragraph names the host scheduler every run was under."""

    def opening(self, scheduler, policies):
        args = type('Args', (), {'png': 'simulator.png',
                                 'map_png': 'breakeven.png'})
        text = document.document({}, {}, [], 60.0, 120.0, None, args,
                                 scheduler, policies)
        self.assertEqual([], warnings(parse(text)))
        return ' '.join(text.split('\n\n')[1].split())

    def test_the_title_names_the_one_scheduler(self):
        self.assertIn('benchmark at steady state under CFS\n',
                      document.page_title('cfs', {'a': 'cfs'}))
        self.assertIn('under EEVDF\n',
                      document.page_title(None, {'a': 'eevdf'}))
        both = document.page_title(None, {'a': 'eevdf', 'b': 'cfs'})
        self.assertNotIn('under', both)
        self.assertNotIn('under', document.page_title(None, None))
        rule, text, _rule = both.split('\n')
        self.assertEqual(len(rule), len(text))

    def test_the_scheduler_asked_for(self):
        head = self.opening('cfs', {'fig5_x': 'cfs'})
        self.assertIn('Every run is under the host scheduler ``cfs`` '
                      '(Linux 5.3\'s CFS, the paper\'s kernel), as '
                      '``--scheduler cfs`` asked', head)
        self.assertIn('break-even map', head)
        self.assertNotIn('eevdf', head)

    def test_the_scenarios_own(self):
        head = self.opening(None, {'fig5_x': 'eevdf', 'fig4_y': 'eevdf'})
        self.assertIn('Every run is under the host scheduler ``eevdf`` '
                      '(EEVDF, the scheduler of Linux 6.6 and later), the '
                      'scenarios\' own ``scheduler.policy``', head)

    def test_scenarios_of_two_schedulers_each_named(self):
        head = self.opening(None, {'a': 'eevdf', 'b': 'cfs', 'c': 'eevdf'})
        self.assertIn('``cfs`` (Linux 5.3\'s CFS, the paper\'s kernel) on '
                      'b; ``eevdf`` (EEVDF, the scheduler of Linux 6.6 and '
                      'later) on a, c', head)

    def test_a_run_that_recorded_none_says_so(self):
        head = self.opening(None, None)
        self.assertIn('its scenario\'s own host scheduler '
                      '(``scheduler.policy``), which this run did not '
                      'record', head)
