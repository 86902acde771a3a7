from django.utils.translation import gettext_lazy as _
import horizon


class Hosts(horizon.Panel):
    """Admin only: the agents' figures describe every tenant's VMs."""

    name = _('Hosts')
    slug = 'vsmtio_hosts'
    policy_rules = (('identity', 'admin_required'),)
