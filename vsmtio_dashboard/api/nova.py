"""What the mix filter's table asks nova and placement, as the user.

Each answer is turned into :mod:`vsmtio_dashboard.mixfilter`'s plain
records, so that what a row says is a pure function of them. Servers come
from the compute API at the newest microversion both sides know (from
2.47 nova embeds each server's flavor, extra specs included, as the filter
reads it), every page and every project; compute nodes from the
hypervisor API at the last microversion that reports their vCPUs (2.87,
as Horizon's hypervisors panel asks); allocation ratios from placement's
``VCPU`` inventories of root providers, which are named as nova names its
nodes.
"""

from openstack_dashboard import api
# the openstacksdk compute proxy Horizon's own nova calls use
from openstack_dashboard.api import _nova

from vsmtio_dashboard import mixfilter


def servers(request):
    """Every server of every project: :class:`mixfilter.Server` records."""
    out = []
    for server in _nova.computeclient(request).servers(
            details=True, all_projects=True):
        flavor = server.flavor
        out.append(mixfilter.Server(
            server.compute_host, server.hypervisor_hostname,
            mixfilter.Flavor(getattr(flavor, 'original_name', None),
                             getattr(flavor, 'vcpus', 0) or 0,
                             getattr(flavor, 'extra_specs', None) or {})))
    return out


def vcpu_allocation_ratios(request):
    """``{node name: VCPU allocation ratio}`` from placement."""
    ratios = {}
    for provider in api.placement.resource_providers(request):
        if provider.get('parent_provider_uuid'):
            continue
        vcpu = api.placement.resource_provider_inventories(
            request, provider['uuid']).get('VCPU')
        if vcpu is not None:
            ratios[provider['name']] = vcpu.get('allocation_ratio')
    return ratios


def nodes(request, ratios):
    """Every compute node: :class:`mixfilter.Node` records.

    ``ratios`` are :func:`vcpu_allocation_ratios`' (empty where placement
    did not answer: each node's ratio is then None).
    """
    out = []
    for hypervisor in api.nova.hypervisor_list(request):
        service = getattr(hypervisor, 'service_details', None) or {}
        out.append(mixfilter.Node(
            service.get('host') or hypervisor.name, hypervisor.name,
            hypervisor.vcpus or 0, hypervisor.vcpus_used or 0,
            ratios.get(hypervisor.name)))
    return out


def aggregates(request):
    """Every host aggregate: :class:`mixfilter.Aggregate` records."""
    return [mixfilter.Aggregate(a.name, tuple(a.hosts or ()),
                                dict(a.metadata or {}))
            for a in api.nova.aggregate_details_list(request)]
