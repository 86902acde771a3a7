"""The message catalogue template against the code.

Translators work from ``vsmtio_dashboard/locale/django.pot``; a string
marked for translation that it lacks stays in English in every language,
and one it holds that the code dropped is work wasted. The code is
extracted here as ``tox -e extract-messages`` extracts it (the same
``babel-django.cfg``, Babel's default keywords), so a change to a marked
string fails until that command is rerun.
"""

import os
import unittest

from babel.messages import extract
from babel.messages import frontend
from babel.messages import pofile

import vsmtio_dashboard

PACKAGE = os.path.dirname(vsmtio_dashboard.__file__)
CONFIG = os.path.join(os.path.dirname(PACKAGE), 'babel-django.cfg')
POT = os.path.join(PACKAGE, 'locale', 'django.pot')


def _marked():
    """``(msgid, context)`` of every string the code marks."""
    with open(CONFIG) as f:
        method_map, options_map = frontend.parse_mapping_cfg(f)
    return {(message, context) for _path, _line, message, _comments, context
            in extract.extract_from_dir(PACKAGE, method_map, options_map)}


def _catalogue():
    """``(msgid, context)`` of every message of the template."""
    with open(POT, 'rb') as f:
        return {(m.id, m.context) for m in pofile.read_po(f) if m.id}


class CatalogueTest(unittest.TestCase):
    def test_catalogue_is_the_codes(self):
        marked, catalogue = _marked(), _catalogue()
        self.assertEqual(set(), marked - catalogue,
                         'marked for translation but not in %s: run '
                         'tox -e extract-messages' % POT)
        self.assertEqual(set(), catalogue - marked,
                         'in %s but no longer in the code: run '
                         'tox -e extract-messages' % POT)

    def test_templates_are_read(self):
        # the Django template extractor is Horizon's: without it the
        # templates' strings would be missing from both sides
        self.assertIn(('Over the last %(window)s', None), _marked())
