"""Unit tests of the Horizon plugin (``tox -e dashboard``).

They need Horizon installed; Django is set up here, once, with the test
settings and a test database, so that stestr (plain unittest discovery)
runs Horizon's test cases as Django's runner would.
"""

import os

os.environ.setdefault('DJANGO_SETTINGS_MODULE',
                      'vsmtio_dashboard.tests.settings')

import django  # noqa: E402
from django.test import utils  # noqa: E402

django.setup()
utils.setup_test_environment()
utils.setup_databases(verbosity=0, interactive=False)
