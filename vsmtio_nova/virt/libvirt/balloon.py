"""Domain XML that tells a ballooning guest its CPU cap.

The cap travels as an SMBIOS type 11 OEM string (libvirt's
``<sysinfo type='smbios'><oemStrings>``, libvirt 4.1 and later): it needs
no device, no agent and no network, the guest reads it at boot from its
firmware tables (``dmi_walk()`` in the balloon module,
``/sys/firmware/dmi/entries/11-*/raw`` from user space), and nova already
gives every x86 guest an SMBIOS ``<sysinfo>``.  What the strings say is
decided in :mod:`vsmtio_nova.balloon`.
"""

from lxml import etree


def add_to_domain(xml, strings):
    """The domain XML with these OEM strings in its SMBIOS sysinfo.

    Keeps nova's ``<sysinfo type='smbios'>`` (creating it, and the
    ``<os><smbios mode='sysinfo'/>`` that makes QEMU use it, where
    missing); idempotent: a string already there is not repeated.
    """
    if not strings:
        return xml
    root = etree.fromstring(xml, etree.XMLParser(remove_blank_text=True))
    sysinfo = root.find("sysinfo[@type='smbios']")
    if sysinfo is None:
        sysinfo = etree.Element('sysinfo', type='smbios')
        anchor = root.find('os')
        if anchor is not None:
            anchor.addprevious(sysinfo)
        else:
            root.append(sysinfo)
    os_elem = root.find('os')
    if os_elem is not None and os_elem.find('smbios') is None:
        etree.SubElement(os_elem, 'smbios', mode='sysinfo')
    oem = sysinfo.find('oemStrings')
    if oem is None:
        oem = etree.SubElement(sysinfo, 'oemStrings')
    have = {entry.text for entry in oem.findall('entry')}
    for text in strings:
        if text not in have:
            etree.SubElement(oem, 'entry').text = text
    return etree.tostring(root, encoding='unicode', pretty_print=True)
