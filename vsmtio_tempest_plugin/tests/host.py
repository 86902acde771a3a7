"""The compute host, reached the way whitebox-tempest-plugin reaches it.

Tempest runs in its own environment, often on another machine than the
compute host, so it imports nothing of the host's (no ``libvirt``): like
whitebox, it runs the host's own tools on the host and reads their output
(``virsh dumpxml``, ``virsh vcpupin``, ``cat`` of the agent's checkpoint).
How a command reaches the host is configuration, ``[vsmtio] host_command``:
a command given the (simple) command line as its last argument, which it
runs on compute host ``{host}``: ``sh -c`` where tempest runs on the
compute host, as in a single-node devstack and the one-machine cloud
(``sudo sh -c`` where the agent's files are root's); ``ssh stack@{host}
sudo`` for others, since ssh hands its arguments to the host's shell, the
way whitebox runs its commands over SSH.

Everything done on a compute host goes through it, stopping and starting
the agent included: run where tempest runs, ``systemctl stop
devstack@vsmtio-agent`` would act on a controller that has no agent.
Unset, there is no way to the host, and the tests that need one skip
saying so (``missing_access``) instead of erroring on the wrong machine.
"""

import json
import shlex
import subprocess
import xml.etree.ElementTree as ET

from tempest import config

CONF = config.CONF
QEMU_NS = 'http://libvirt.org/schemas/domain/qemu/1.0'


class HostCommandFailed(Exception):
    pass


class NoHostAccess(Exception):
    """A test reached for a host with no ``host_command`` configured.

    Tests skip first (``missing_access``); this says which check forgot.
    """


def missing_access(*options):
    """Why a test that acts on a compute host cannot run here, or None.

    ``host_command`` always (it is the only way to the host), then each of
    the other ``[vsmtio]`` options the test needs, in the order given.
    """
    for option in ('host_command',) + options:
        if not getattr(CONF.vsmtio, option):
            if option == 'host_command':
                return ('[vsmtio] host_command is unset: tempest cannot '
                        'reach the compute hosts')
            return '[vsmtio] %s is unset' % option
    return None


def on_host(host, command):
    """``command``'s output, run by a shell on compute host ``host``."""
    if not CONF.vsmtio.host_command:
        raise NoHostAccess('%s on %s: [vsmtio] host_command is unset'
                           % (command, host))
    argv = shlex.split(CONF.vsmtio.host_command.format(host=host))
    proc = subprocess.run(argv + [command], capture_output=True, text=True,
                          timeout=300)
    if proc.returncode:
        raise HostCommandFailed('%s on %s failed (%d): %s' % (
            command, host, proc.returncode, proc.stderr.strip()[-500:]))
    return proc.stdout


def _virsh(host, *args):
    return on_host(host, ' '.join(
        ['virsh', '-c', shlex.quote(CONF.vsmtio.libvirt_uri)]
        + [shlex.quote(a) for a in args]))


def domain_xml(host, instance_name):
    """The running domain's XML, as ``virsh dumpxml`` gives it."""
    return ET.fromstring(_virsh(host, 'dumpxml', instance_name))


def parse_cpu_list(text):
    """``'0-2,5'`` -> ``[0, 1, 2, 5]`` (libvirt's CPU list syntax)."""
    cpus = set()
    for part in text.split(','):
        part = part.strip()
        if not part:
            continue
        first, _sep, last = part.partition('-')
        cpus.update(range(int(first), int(last or first) + 1))
    return sorted(cpus)


def parse_vcpupin(text):
    """``{vcpu index: sorted cpus}`` of ``virsh vcpupin``'s table."""
    pins = {}
    for line in text.splitlines():
        words = line.split()
        if len(words) == 2 and words[0].isdigit():
            pins[int(words[0])] = parse_cpu_list(words[1])
    return pins


def live_pins(host, instance_name):
    """``{vcpu index: sorted cpus}`` of the running domain."""
    return parse_vcpupin(_virsh(host, 'vcpupin', instance_name, '--live'))


def qemu_args(root):
    return [a.get('value') for a in root.iter('{%s}arg' % QEMU_NS)]


def agent_stop(host):
    """Stop the agent on ``host`` (``agent_stop_command``, run there)."""
    return on_host(host, CONF.vsmtio.agent_stop_command)


def agent_start(host):
    """Start the agent on ``host`` again (``agent_start_command``)."""
    return on_host(host, CONF.vsmtio.agent_start_command)


def run_here(command):
    """``command`` run where tempest runs, never on a compute host.

    Only for what is read from the control plane (``node_stats_command``
    queries the cell database); a compute host is reached by ``on_host``.
    """
    return subprocess.run(command, shell=True, check=True,
                          capture_output=True, text=True, timeout=300)


def checkpoint(host):
    """The agent's checkpoint on ``host``; {} while there is none."""
    try:
        text = on_host(host, 'cat %s' % shlex.quote(
            CONF.vsmtio.agent_checkpoint_path))
    except HostCommandFailed as exc:
        if 'No such file' in str(exc):
            return {}
        raise
    return json.loads(text) if text.strip() else {}
