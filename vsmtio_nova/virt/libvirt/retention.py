"""Which instances may MWAIT, and the domain XML that lets them.

Context retention needs the guest's MWAIT to run on its hyperthread: QEMU
``-overcommit cpu-pm=on`` (no libvirt element exists for it, so it goes in
``<qemu:commandline>``) disables MWAIT exits (and HLT and PAUSE exits with
them), and ``<kvm><hint-dedicated>`` tells
the guest its vCPUs own their CPUs.  A guest started so holds its
hyperthread while idle, so it is granted per instance, by the flavor
(``vsmtio:context_retention``, validated by nova-api) or by the image
(``vsmtio_context_retention``, which nova keeps in the instance's system
metadata as ``image_vsmtio_context_retention``).
"""

from lxml import etree
from oslo_utils import strutils

from nova import exception

from vsmtio_nova import extra_specs

EXTRA_SPEC = extra_specs.EXTRA_SPEC_CONTEXT_RETENTION
IMAGE_PROPERTY = 'vsmtio_context_retention'
SYSMETA_KEY = 'image_' + IMAGE_PROPERTY
QEMU_NS = 'http://libvirt.org/schemas/domain/qemu/1.0'
QEMU_ARGS = ('-overcommit', 'cpu-pm=on')


def _parse(value):
    """True, False, or None when unset; ValueError when not a boolean."""
    if value is None:
        return None
    return strutils.bool_from_string(value, strict=True)


def requested(instance):
    """Whether this instance's flavor or image asks for context retention.

    Raises ``InvalidInput`` for a bad flavor value (one that predates the
    API validator) and ``ImageUnacceptable`` for a bad image value or a
    flavor and image that disagree; nova aborts the build on both.
    """
    try:
        by_flavor = _parse(instance.flavor.extra_specs.get(EXTRA_SPEC))
    except ValueError as e:
        raise exception.InvalidInput(
            reason='flavor extra spec %s: %s' % (EXTRA_SPEC, e))
    image_id = instance.system_metadata.get('image_base_image_ref') or \
        instance.image_ref
    try:
        by_image = _parse(instance.system_metadata.get(SYSMETA_KEY))
    except ValueError as e:
        raise exception.ImageUnacceptable(
            image_id=image_id,
            reason='image property %s: %s' % (IMAGE_PROPERTY, e))
    if None not in (by_flavor, by_image) and by_flavor != by_image:
        raise exception.ImageUnacceptable(
            image_id=image_id,
            reason='image property %s=%s conflicts with flavor extra spec '
                   '%s=%s' % (IMAGE_PROPERTY, by_image, EXTRA_SPEC,
                              by_flavor))
    return bool(by_flavor or by_image)


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
