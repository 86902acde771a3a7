# Horizon plugin configuration: copy into
# openstack_dashboard/local/enabled/ (with the panel's file beside it).
from django.utils.translation import gettext_lazy as _

PANEL_GROUP = 'vsmtio'
PANEL_GROUP_NAME = _('vSMT-IO')
PANEL_GROUP_DASHBOARD = 'admin'

ADD_INSTALLED_APPS = ['vsmtio_dashboard']
AUTO_DISCOVER_STATIC_FILES = False
