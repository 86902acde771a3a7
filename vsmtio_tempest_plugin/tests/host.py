"""The compute host as whitebox-tempest-plugin sees it: libvirt and shell.

Domain XML is read through libvirt (``[vsmtio] libvirt_uri``), as
whitebox reads ``virsh dumpxml`` on the host; the agent is stopped and
started with the configured commands.
"""

import json
import subprocess
import xml.etree.ElementTree as ET

from tempest import config

CONF = config.CONF
QEMU_NS = 'http://libvirt.org/schemas/domain/qemu/1.0'


def domain_xml(instance_name):
    import libvirt  # libvirt-python, in tempest's environment
    conn = libvirt.openReadOnly(CONF.vsmtio.libvirt_uri)
    try:
        return ET.fromstring(conn.lookupByName(instance_name).XMLDesc(0))
    finally:
        conn.close()


def live_pins(instance_name):
    """``{vcpu index: sorted cpus}`` of the running domain."""
    import libvirt
    conn = libvirt.openReadOnly(CONF.vsmtio.libvirt_uri)
    try:
        dom = conn.lookupByName(instance_name)
        return {i: sorted(c for c, on in enumerate(cpus) if on)
                for i, cpus in enumerate(dom.vcpuPinInfo(
                    libvirt.VIR_DOMAIN_AFFECT_LIVE))}
    finally:
        conn.close()


def qemu_args(root):
    return [a.get('value') for a in root.iter('{%s}arg' % QEMU_NS)]


def run(command):
    return subprocess.run(command, shell=True, check=True,
                          capture_output=True, text=True, timeout=300)


def checkpoint():
    try:
        with open(CONF.vsmtio.agent_checkpoint_path) as f:
            return json.load(f)
    except FileNotFoundError:
        return {}
