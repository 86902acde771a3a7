"""Which instances may MWAIT, and the domain XML that lets them.

Context retention needs the guest's MWAIT to run on its hyperthread: QEMU
``-overcommit cpu-pm=on`` (no libvirt element exists for it, so it goes in
``<qemu:commandline>``) disables MWAIT exits (and HLT and PAUSE exits with
them), and ``<kvm><hint-dedicated>`` tells
the guest its vCPUs own their CPUs.  A guest started so holds its
hyperthread while idle, so only the operator grants it: the flavor's
``vsmtio:context_retention`` (validated by nova-api), on a flavor that
dedicates CPUs (``hw:cpu_policy=dedicated``; the scheduler's
``ContextRetentionFilter`` refuses any other, and the driver refuses to
start one that got past it). The image property
``vsmtio_context_retention`` (kept by nova in the instance's system
metadata as ``image_vsmtio_context_retention``) is the tenant's: it may ask
and may decline (``false`` starts the guest without retention), but never
enables it.
"""

from lxml import etree
from oslo_log import log as logging

from vsmtio_contract import specs

LOG = logging.getLogger(__name__)

EXTRA_SPEC = specs.CONTEXT_RETENTION
IMAGE_PROPERTY = specs.IMAGE_CONTEXT_RETENTION
SYSMETA_KEY = 'image_' + IMAGE_PROPERTY
QEMU_NS = 'http://libvirt.org/schemas/domain/qemu/1.0'
QEMU_ARGS = ('-overcommit', 'cpu-pm=on')
#: What the driver already said about an instance's image property.
_SAID = specs.OnceEach()


def requested(instance):
    """Whether this instance gets context retention: the flavor's say.

    The flavor enables it; the image may only decline it. Values nova-api
    would refuse are ignored with one warning (as every reader does,
    :mod:`vsmtio_contract.specs`), never read as a request.
    """
    subject = 'instance %s' % instance.uuid
    by_flavor = specs.read(instance.flavor.extra_specs, EXTRA_SPEC,
                           'flavor %s' % instance.flavor.name, LOG)
    by_image = specs.read({IMAGE_PROPERTY: instance.system_metadata.get(
        SYSMETA_KEY)}, IMAGE_PROPERTY, subject, LOG,
        parsers=specs.IMAGE_PARSERS)
    if by_image and not by_flavor:
        if _SAID.first((instance.uuid, 'asks')):
            LOG.warning('The image property %s=true asks for context '
                        'retention, but only a flavor with %s=true enables '
                        'it: starting the guest without it.', IMAGE_PROPERTY,
                        EXTRA_SPEC, instance=instance)
        return False
    if by_flavor and by_image is False:
        if _SAID.first((instance.uuid, 'declines')):
            LOG.info('The image property %s=false declines the context '
                     'retention its flavor allows: starting the guest '
                     'without it.', IMAGE_PROPERTY, instance=instance)
        return False
    return bool(by_flavor)


def add_to_domain(xml):
    """The domain XML with MWAIT exits disabled and the dedicated hint.

    Idempotent: elements already there are not repeated.
    """
    # Blank text dropped so that pretty printing indents what we add.
    old = etree.fromstring(xml, etree.XMLParser(remove_blank_text=True))
    nsmap = dict(old.nsmap, qemu=QEMU_NS)
    root = etree.Element(old.tag, attrib=dict(old.attrib), nsmap=nsmap)
    root.text = old.text
    root.extend(list(old))

    features = root.find('features')
    if features is None:
        features = etree.Element('features')
        os_elem = root.find('os')
        if os_elem is not None:
            os_elem.addnext(features)
        else:
            root.append(features)
    kvm = features.find('kvm')
    if kvm is None:
        kvm = etree.SubElement(features, 'kvm')
    hint = kvm.find('hint-dedicated')
    if hint is None:
        hint = etree.SubElement(kvm, 'hint-dedicated')
    hint.set('state', 'on')

    qname = '{%s}%%s' % QEMU_NS
    cmdline = root.find(qname % 'commandline')
    if cmdline is None:
        cmdline = etree.SubElement(root, qname % 'commandline')
    have = [arg.get('value') for arg in cmdline.findall(qname % 'arg')]
    if not _contains(have, QEMU_ARGS):
        for value in QEMU_ARGS:
            etree.SubElement(cmdline, qname % 'arg', value=value)
    return etree.tostring(root, encoding='unicode', pretty_print=True)


def _contains(seq, sub):
    n = len(sub)
    return any(tuple(seq[i:i + n]) == sub for i in range(len(seq) - n + 1))
