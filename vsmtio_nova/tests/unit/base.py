"""Builders of real nova objects for the unit tests."""

from oslo_utils import uuidutils

from nova import objects
from nova.tests.unit.scheduler import fakes

from vsmtio_contract import workload


def flavor(cls=None, vcpus=2, name=None):
    specs = {} if cls is None else {workload.EXTRA_SPEC_WORKLOAD: cls}
    return objects.Flavor(
        id=1, flavorid=name or '%s%d' % (cls, vcpus), name=name or 'f',
        vcpus=vcpus, memory_mb=512, root_gb=1, ephemeral_gb=0, swap=0,
        extra_specs=specs)


def instance(cls=None, vcpus=2, uuid=None, with_flavor=True):
    """An Instance as HostState holds it: with a flavor, or a stub."""
    inst = objects.Instance(uuid=uuid or uuidutils.generate_uuid())
    if with_flavor:
        inst.flavor = flavor(cls, vcpus)
    return inst


def host(name, instances=(), **attrs):
    """A real HostState (nova's FakeHostState: no compute node needed)."""
    attrs.setdefault('num_instances', len(instances))
    return fakes.FakeHostState(name, name, attrs, instances=list(instances))


def loaded(name, io=0, cpu=0, vcpus=2, **attrs):
    """A host holding ``io`` I/O and ``cpu`` CPU instances of ``vcpus``."""
    insts = [instance('io', vcpus) for _ in range(io)]
    insts += [instance('cpu', vcpus) for _ in range(cpu)]
    return host(name, insts, **attrs)


def spec(cls=None, vcpus=2, instance_uuid=None, num_instances=1, **kw):
    return objects.RequestSpec(
        flavor=flavor(cls, vcpus), num_instances=num_instances,
        instance_uuid=instance_uuid or uuidutils.generate_uuid(),
        pci_requests=None, numa_topology=None, **kw)


def aggregate(**metadata):
    return objects.Aggregate(id=1, name='agg', hosts=[], metadata=metadata)
