"""Django settings of the plugin's unit tests: Horizon's own test settings
with this plugin's enabled files added, as Horizon plugins test."""

from horizon.test.settings import *  # noqa: F401,F403
from openstack_dashboard.test.settings import *  # noqa: F401,F403
from horizon.test.settings import settings_utils  # noqa: E402
from openstack_dashboard.test.settings import HORIZON_CONFIG  # noqa: E402

import openstack_dashboard.enabled  # noqa: E402

import vsmtio_dashboard.enabled  # noqa: E402

INSTALLED_APPS = [
    'django.contrib.contenttypes',
    'django.contrib.auth',
    'django.contrib.sessions',
    'django.contrib.staticfiles',
    'django.contrib.messages',
    'django.contrib.humanize',
    'openstack_auth',
    'compressor',
    'horizon',
    'openstack_dashboard',
]
settings_utils.update_dashboards(
    [vsmtio_dashboard.enabled, openstack_dashboard.enabled],
    HORIZON_CONFIG, INSTALLED_APPS)
VSMTIO_METRICS_ENDPOINT = None
