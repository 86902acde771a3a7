"""What a compute host tells placement, as nova's provider config.

nova-compute merges the YAML files of ``[compute] provider_config_location``
into its compute nodes' resource providers at every resource update: the
supported way for code outside nova to add custom traits and inventories,
with no virt driver method overridden. vsmtio puts two things there, in one
file it owns (:data:`FILENAME`):

* the trait :data:`~vsmtio_nova.capability.TRAIT`, when this host runs the
  vsmtio libvirt driver and can retain contexts
  (:func:`vsmtio_nova.capability.host_can_retain`);
* the reserved-I/O inventory of ``[vsmtio] io_reservation_capacity_*``
  (:func:`vsmtio_nova.io_inventory.inventory`).

nova reads the files once, when nova-compute starts, so :func:`write` runs
at deploy time (``vsmtio-nova-conf provider-config``) and again whenever
what it reads changes (a new kernel needs a reboot, which restarts
nova-compute: run it before, e.g. as the unit's ``ExecStartPre``). nova
only ever adds what a file says, so the vsmtio driver takes a stale trait
away itself (:class:`vsmtio_nova.virt.traits.RetentionTraitMixin`).
"""

import glob
import os
import shutil
import tempfile

from nova.compute import provider_config as nova_provider_config
from nova import exception
import yaml

from vsmtio_nova import capability
from vsmtio_nova import io_inventory

FILENAME = 'vsmtio.yaml'
#: ``[DEFAULT] compute_driver`` of a host that runs the vsmtio libvirt
#: driver, as nova resolves it once :func:`vsmtio_nova.virt.register` made
#: the driver ``nova.virt.vsmtio``: only such a host advertises
#: :data:`~vsmtio_nova.capability.TRAIT`.
COMPUTE_DRIVER = 'vsmtio.VsmtioLibvirtDriver'
HEADER = ('# Written by vsmtio-nova-conf provider-config; it rewrites or '
          'removes this file.\n')


class Error(ValueError):
    """A provider config that nova would refuse, or a file not ours."""


def _path(conf):
    return os.path.join(conf.compute.provider_config_location, FILENAME)


def document(conf):
    """``(provider config dict or None, why)`` for this host's nova.conf.

    ``None`` when there is nothing to say (nova warns about an empty
    provider entry, so then no file is written).
    """
    traits, whys = [], []
    if conf.compute_driver != COMPUTE_DRIVER:
        whys.append('no retention trait: compute_driver is %s, not %s'
                    % (conf.compute_driver, COMPUTE_DRIVER))
    else:
        retains, why = capability.host_can_retain(
            conf.libvirt.virt_type, conf.vsmtio.sysfs_root)
        whys.append('%s retention trait: %s'
                    % ('the' if retains else 'no', why))
        if retains:
            traits.append(capability.TRAIT)
    inventories = [{rc: inv} for rc, inv in
                   sorted(io_inventory.inventory(conf).items())]
    whys.append('reserved-I/O inventory: %s'
                % (', '.join('%s %d' % (rc, inv['total'])
                             for item in inventories
                             for rc, inv in item.items()) or 'none'))
    if not traits and not inventories:
        return None, '; '.join(whys)
    provider = {'identification': {'uuid': '$COMPUTE_NODE'}}
    if traits:
        provider['traits'] = {'additional': traits}
    if inventories:
        provider['inventories'] = {'additional': inventories}
    return ({'meta': {'schema_version': '1.0'}, 'providers': [provider]},
            '; '.join(whys))


def _check_with_nova(directory, text):
    """Refuse what nova-compute would refuse to start with.

    Runs nova's own loader on a copy of the directory as it would be, so
    a conflict with an operator's file (a second ``$COMPUTE_NODE`` entry)
    is found now, not when nova-compute fails to start.
    """
    with tempfile.TemporaryDirectory() as trial:
        for other in glob.glob(os.path.join(directory, '*.yaml')):
            if os.path.basename(other) != FILENAME:
                shutil.copy(other, trial)
        with open(os.path.join(trial, FILENAME), 'w') as f:
            f.write(text)
        try:
            nova_provider_config.get_provider_configs(trial)
        except exception.ProviderConfigException as e:
            raise Error('%s: nova would refuse it: %s'
                        % (directory, str(e).replace(trial, directory)))


def _ours(path):
    try:
        with open(path, encoding='utf-8') as f:
            return f.readline() == HEADER
    except FileNotFoundError:
        return True


def write(conf, dry_run=False):
    """Write (or remove) :data:`FILENAME`; ``(path, text or None, why)``.

    Nothing is written when nova would refuse the result or when a file of
    that name is not ours.
    """
    doc, why = document(conf)
    path = _path(conf)
    text = None if doc is None else HEADER + yaml.safe_dump(
        doc, default_flow_style=False, sort_keys=False)
    if not _ours(path):
        raise Error('%s exists and was not written by vsmtio-nova-conf; '
                    'move it away first' % path)
    directory = os.path.dirname(path)
    if text is not None:
        _check_with_nova(directory, text)
    if dry_run:
        return path, text, why
    if text is None:
        remove(conf)
        return path, None, why
    os.makedirs(directory, mode=0o755, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix='.' + FILENAME + '.')
    try:
        with os.fdopen(fd, 'w', encoding='utf-8') as f:
            f.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
    return path, text, why


def remove(conf):
    """Remove our file (never another's); True if there was one."""
    path = _path(conf)
    if not os.path.exists(path) or not _ours(path):
        return False
    os.unlink(path)
    return True


def advertised_traits(conf):
    """The traits our file gives this host (empty when there is none)."""
    try:
        with open(_path(conf), encoding='utf-8') as f:
            doc = yaml.safe_load(f) or {}
    except (OSError, yaml.YAMLError):
        return set()
    return {trait for provider in doc.get('providers') or ()
            for trait in (provider.get('traits') or {}).get('additional')
            or ()}
