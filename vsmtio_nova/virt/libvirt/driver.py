"""nova's libvirt driver, plus context retention for the guests that ask.

Select it with ``compute_driver = vsmtio.VsmtioLibvirtDriver`` and run
``vsmtio-nova-compute`` (see :mod:`vsmtio_nova.virt`).  It behaves exactly
like ``libvirt.LibvirtDriver`` except that the domain XML of an instance
whose flavor grants context retention lets the guest MWAIT
(:mod:`vsmtio_nova.virt.libvirt.retention`); that of an instance whose
flavor asks for the CPU balloon tells the guest its CPU cap
(:mod:`vsmtio_nova.balloon`). A host able to give retention says so to
placement through nova's provider config (:mod:`vsmtio_nova.provider_config`,
which also carries the reserved-I/O inventory); a host that cannot refuses
such an instance rather than start it without
(:mod:`vsmtio_nova.virt.traits`): nova then tries the request's other
hosts, and fails it if none can. nova's reschedule keeps the refusal's
reason only in the compute's log (the final fault reads ``Exhausted all
hosts``, the build event ``Success``), so the driver also records it as a
failed ``vsmtio_context_retention`` event of the instance's action, where
``openstack server event show`` shows it.

``_get_guest_xml`` is private to nova's libvirt driver, but nova has no
supported way to add to a guest's domain XML: doc/source/nova_seams.rst
lists it with the nova versions it was tested with, and
``vsmtio_nova/tests/unit/test_nova_seams.py`` fails, naming it, when nova
changes it.
"""

import sys

from oslo_log import log as logging

import nova.conf
from nova import exception
from nova import objects
from nova.virt.libvirt import driver as libvirt_driver

from vsmtio_nova import balloon
from vsmtio_nova import capability
from vsmtio_nova import faults
from vsmtio_nova.virt.libvirt import balloon as balloon_xml
from vsmtio_nova.virt.libvirt import retention
from vsmtio_nova.virt import traits

CONF = nova.conf.CONF
LOG = logging.getLogger(__name__)
#: The instance action event a refusal of this driver is recorded as.
REFUSAL_EVENT = 'vsmtio_context_retention'


class VsmtioLibvirtDriver(traits.RetentionTraitMixin,
                          libvirt_driver.LibvirtDriver):
    """LibvirtDriver whose guests may hold their hyperthread with MWAIT."""

    def _get_guest_xml(self, context, instance, network_info, disk_info,
                       image_meta, *args, **kwargs):
        # Checked first, so a refusal fails the build before any work.
        wanted = retention.requested(instance)
        if wanted:
            self._check_dedicated(instance)
        if wanted and not self.retention[0]:
            # Never start it without what it asked for: at build time nova
            # reschedules to another of the request's hosts.
            try:
                raise exception.ComputeResourcesUnavailable(
                    reason='vsmtio: context retention asked for, but host '
                           '%s cannot give it (%s)' % (CONF.host,
                                                       self.retention[1]))
            except exception.ComputeResourcesUnavailable as refusal:
                self._record_refusal(context, instance, refusal,
                                     sys.exc_info()[2])
                raise
        ballooned = balloon.requested(instance.flavor)
        xml = super()._get_guest_xml(context, instance, network_info,
                                     disk_info, image_meta, *args, **kwargs)
        # --- CPU balloon (xBalloon): tell the guest its cap. ---
        if ballooned:
            xml = self._add_balloon_cap(xml, instance)
        # --- end CPU balloon ---
        if not wanted:
            return xml
        xml = retention.add_to_domain(xml)
        LOG.debug('Context retention: MWAIT exits disabled (%s), '
                  'hint-dedicated on', ' '.join(retention.QEMU_ARGS),
                  instance=instance)
        return xml

    @staticmethod
    def _record_refusal(context, instance, exc, tb):
        """A failed event of the instance's current action, naming ``exc``.

        The action (``create``, ``reboot``...) is the one nova opened for
        the request. Best effort: where it cannot be recorded (no action,
        the conductor unreachable) the log alone says it, and the refusal
        itself goes on to nova unchanged.
        """
        try:
            objects.InstanceActionEvent.event_start(
                context, instance.uuid, REFUSAL_EVENT, want_result=False,
                host=CONF.host)
            objects.InstanceActionEvent.event_finish_with_failure(
                context, instance.uuid, REFUSAL_EVENT, exc_val=exc,
                exc_tb=tb, want_result=False)
        except Exception as err:   # the refusal matters, not its record
            LOG.debug('Refusal not recorded as an instance action event: '
                      '%s', err, instance=instance)
        LOG.warning('%s', exc.format_message(), instance=instance)

    @staticmethod
    def _check_dedicated(instance):
        """Refuse retention on shared CPUs (a flavor past the filter).

        The scheduler's ContextRetentionFilter refuses such a flavor; this
        holds where it is not enabled. Not rescheduled: no host can honour
        the flavor, so nova aborts the build with this reason as the fault.
        """
        topology = (instance.numa_topology
                    if instance.obj_attr_is_set('numa_topology') else None)
        pinned = topology is not None and topology.cpu_policy == \
            capability.DEDICATED
        if pinned and capability.flavor_dedicates_cpus(
                instance.flavor.extra_specs):
            return
        raise exception.InvalidInput(reason=faults.reason_within(
            exception.InvalidInput,
            'vsmtio: context retention refused: needs dedicated CPUs '
            '(%s=%s in the flavor) for %s=true: a retaining guest holds '
            'its CPUs while idle' % (capability.CPU_POLICY_SPEC,
                                     capability.DEDICATED,
                                     retention.EXTRA_SPEC),
            'flavor %s' % instance.flavor.name))

    # --- CPU balloon (xBalloon) ---
    @staticmethod
    def _add_balloon_cap(xml, instance):
        strings = balloon.oem_strings(instance.flavor)
        if not strings:
            LOG.info('CPU balloon asked for without quota:cpu_quota: the '
                     'guest sizes it from steal time alone.',
                     instance=instance)
            return xml
        LOG.debug('CPU balloon: SMBIOS OEM string %s', strings,
                  instance=instance)
        return balloon_xml.add_to_domain(xml, strings)
    # --- end CPU balloon ---
