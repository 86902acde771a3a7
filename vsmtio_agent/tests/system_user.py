"""The ``libvirt-qemu`` system user that libvirt 9's QEMU driver needs.

Debian's ``libvirt-daemon-system`` creates it; these machines install only
``libvirt-daemon`` (no systemd), and libvirt 9.0 resolves the user before it
reads ``qemu.conf``, so every suite that opens a QEMU driver (the daemon's or
``qemu:///embed``) calls ``ensure()`` itself: no suite relies on another
having run first.  ``.ci/install-debian-packages`` creates it as well.
"""

import os
import pwd
import subprocess

NAME = 'libvirt-qemu'


def ensure(name=NAME):
    """Create the system user and group ``name`` if missing.

    Returns ``None`` when the user exists (or was created), else a sentence
    saying why it could not be (not root), for the caller's skip message.
    """
    try:
        pwd.getpwnam(name)
        return None
    except KeyError:
        pass
    if os.geteuid() != 0:
        return ('system user %s is missing and only root can create it '
                '(run .ci/install-debian-packages as root)' % name)
    subprocess.run(['useradd', '--system', '--user-group', '--no-create-home',
                    '--shell', '/usr/sbin/nologin', name],
                   check=True, capture_output=True, text=True)
    return None
