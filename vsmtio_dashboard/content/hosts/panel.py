from django.conf import settings
from django.utils.translation import gettext_lazy as _
import horizon

from vsmtio_dashboard.api import prometheus


class Hosts(horizon.Panel):
    """Admin only: the agents' figures describe every tenant's VMs."""

    name = _('Hosts')
    slug = 'vsmtio_hosts'
    policy_rules = (('identity', 'admin_required'),)

    @property
    def permissions(self):
        """Where the panel has figures to read from.

        Without Aetos the panel could only say that it has nothing to read,
        so, as Horizon's own panels do with their services, it asks for
        Aetos's service type in the user's catalogue (in the user's
        region): the navigation leaves the panel out, and its empty
        vSMT-IO group with it, and its URLs refuse. An operator who named
        Aetos in ``VSMTIO_METRICS_ENDPOINT`` has said where it is, so the
        catalogue is not asked then. A property, not Horizon's usual class
        attribute, only for that setting; Horizon reads it for every
        sidebar it draws but once for the URLs, which is the same answer
        since settings do not change while Horizon runs.
        """
        if getattr(settings, 'VSMTIO_METRICS_ENDPOINT', None):
            return ()
        return ('openstack.services.%s' % prometheus.SERVICE_TYPE,)
