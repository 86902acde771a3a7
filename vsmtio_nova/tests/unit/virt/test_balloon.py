"""The CPU balloon's host side: the flavor key and the domain XML.

The driver under test is the real ``LibvirtDriver`` subclass on nova's
own fixtures (see ``test_libvirt_driver``); the last case has libvirt's
real QEMU driver parse and keep the OEM strings.
"""

from lxml import etree

from nova.api.validation.extra_specs import validators
from nova import exception
from nova import objects
from nova import test

from vsmtio_nova import balloon
from vsmtio_nova.tests.unit.virt import test_libvirt_driver as base
from vsmtio_nova.virt.libvirt import balloon as balloon_xml

CAPPED = {'vsmtio:cpu_balloon': 'true', 'quota:cpu_quota': '50000',
          'quota:cpu_period': '100000'}


def oem(xml):
    return [e.text for e in
            etree.fromstring(xml).findall("sysinfo/oemStrings/entry")]


class TestFlavorKey(test.NoDBTestCase):

    def test_nova_api_takes_booleans_only(self):
        for value in ('true', 'false', 'True', '1', '0'):
            validators.validate('vsmtio:cpu_balloon', value)
        for value in ('maybe', '50', ''):
            self.assertRaises(exception.ValidationError,
                              validators.validate, 'vsmtio:cpu_balloon',
                              value)

    def _flavor(self, **specs):
        return objects.Flavor(extra_specs=specs)

    def test_cap_from_nova_s_quota_keys(self):
        self.assertEqual((50000, 100000), balloon.cap(self._flavor(**{
            'quota:cpu_quota': '50000', 'quota:cpu_period': '100000'})))
        # libvirt leaves the kernel's 100 ms period when only a quota is set
        self.assertEqual((20000, 100000), balloon.cap(self._flavor(**{
            'quota:cpu_quota': '20000'})))
        self.assertEqual(['vsmtio:cpu_cap=20000/100000'],
                         balloon.oem_strings(self._flavor(**{
                             'quota:cpu_quota': '20000'})))

    def test_no_quota_or_unlimited_is_no_cap(self):
        for specs in ({}, {'quota:cpu_period': '100000'},
                      {'quota:cpu_quota': '-1'}, {'quota:cpu_quota': '0'},
                      {'quota:cpu_shares': '512'}):
            self.assertIsNone(balloon.cap(self._flavor(**specs)), specs)
            self.assertEqual([], balloon.oem_strings(self._flavor(**specs)))

    def test_garbled_values_refused_naming_the_key(self):
        e = self.assertRaises(exception.InvalidInput, balloon.requested,
                              self._flavor(**{'vsmtio:cpu_balloon': 'on?'}))
        self.assertIn('vsmtio:cpu_balloon', str(e))
        e = self.assertRaises(exception.InvalidInput, balloon.cap,
                              self._flavor(**{'quota:cpu_quota': 'half'}))
        self.assertIn('quota:cpu_quota', str(e))


class TestDomainXML(base.DomainXMLTestCase):

    def test_capped_flavor_tells_the_guest_its_cap(self):
        xml = self.xml(CAPPED)
        self.assertEqual(['vsmtio:cpu_cap=50000/100000'], oem(xml))
        root = etree.fromstring(xml)
        # nova's own sysinfo and cputune are kept: one sysinfo, used.
        [sysinfo] = root.findall('sysinfo')
        self.assertEqual('smbios', sysinfo.get('type'))
        self.assertIsNotNone(sysinfo.find('system'))
        self.assertEqual('sysinfo', root.find('os/smbios').get('mode'))
        self.assertEqual('50000', root.findtext('cputune/quota'))
        self.assertEqual('100000', root.findtext('cputune/period'))

    def test_without_the_key_nothing_is_passed(self):
        specs = dict(CAPPED)
        del specs['vsmtio:cpu_balloon']
        self.assertEqual([], oem(self.xml(specs)))
        specs['vsmtio:cpu_balloon'] = 'false'
        self.assertEqual([], oem(self.xml(specs)))

    def test_uncapped_flavor_passes_nothing(self):
        self.assertEqual([], oem(self.xml({'vsmtio:cpu_balloon': 'true'})))

    def test_with_context_retention_too(self):
        specs = dict(CAPPED, **{'vsmtio:context_retention': 'true',
                                'hw:cpu_policy': 'dedicated'})
        xml = self.xml(specs)
        self.assertRetains(xml)
        self.assertEqual(['vsmtio:cpu_cap=50000/100000'], oem(xml))

    def test_bad_value_refused_at_spawn(self):
        e = self.assertRaises(exception.InvalidInput, self.xml,
                              {'vsmtio:cpu_balloon': 'sometimes'})
        self.assertIn('vsmtio:cpu_balloon', str(e))


class TestAddToDomain(test.NoDBTestCase):

    DOMAIN = ("<domain type='kvm'><name>d</name><os><type>hvm</type></os>"
              "<devices/></domain>")

    def test_creates_sysinfo_and_smbios_mode_when_missing(self):
        root = etree.fromstring(balloon_xml.add_to_domain(
            self.DOMAIN, ['vsmtio:cpu_cap=1/2']))
        self.assertEqual(['name', 'sysinfo', 'os', 'devices'],
                         [child.tag for child in root])
        self.assertEqual('sysinfo', root.find('os/smbios').get('mode'))
        self.assertEqual(['vsmtio:cpu_cap=1/2'],
                         [e.text for e in root.iter('entry')])

    def test_idempotent_and_nothing_to_add_changes_nothing(self):
        once = balloon_xml.add_to_domain(self.DOMAIN, ['a', 'b'])
        self.assertEqual(once, balloon_xml.add_to_domain(once, ['a', 'b']))
        self.assertEqual(self.DOMAIN,
                         balloon_xml.add_to_domain(self.DOMAIN, []))


class TestRealLibvirt(base.TestRealLibvirt):
    """libvirt 9's QEMU driver validates and keeps the OEM strings."""

    # The inherited retention case runs once, in test_libvirt_driver.
    test_libvirt_keeps_both_elements = None

    def test_libvirt_keeps_the_oem_string(self):
        kept = self._define(self.xml(CAPPED))
        self.assertEqual(['vsmtio:cpu_cap=50000/100000'], oem(kept))
        self.assertEqual('sysinfo', etree.fromstring(kept).find(
            'os/smbios').get('mode'))
