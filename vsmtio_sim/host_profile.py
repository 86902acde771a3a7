"""A host profile: one measured host's costs and scheduler, as inputs.

The shipped inputs (``data/costs.yaml``, ``data/kernels.yaml``) describe
the paper's bare-metal host: ``intel_idle``'s Skylake-SP C-states, a
3 us context switch, Linux 5.3's CFS. A prediction for another host is
only as good as those inputs are for it. ``vsmtio-bench calibrate``
measures them on the host it runs on and writes a profile: a versioned
JSON document of what it measured (each figure with its spread over
repetitions), what it could not measure and why, and ``costs`` and
``scheduler`` sections shaped exactly as a scenario's own overrides, each
value with its source under ``sources``.

``[vsmtio_sim] profile`` (``vsmtio-sim run|compare --profile FILE``)
lays those sections over the scenario's own (:func:`load_scenario`): the
scenario's host and VMs, this host's costs. A profile is refused whole,
in one line, before anything runs (:class:`ProfileError`): a missing or
unreadable file, another document or version, a key nobody reads, a
non-finite or out-of-range number, a value without a source. A run with
a profile carries :meth:`Profile.provenance`, so its figures say whose
costs they stand on.
"""

import dataclasses
import json
import os

from vsmtio_sim import scenario as scenario_mod

#: What a profile calls itself, and the one version this release reads.
KIND = 'vsmtio-host-profile'
VERSION = 1
#: The groups of inputs a profile may set (a scenario's own sections).
GROUPS = ('costs', 'scheduler')

_TEXT = {'type': 'string', 'minLength': 1}

#: The profile document, apart from its inputs (which get a scenario's
#: checks, :func:`~vsmtio_sim.scenario.check_inputs`). ``measured`` and
#: ``cpuidle`` are the calibration's record, read by people and benches;
#: the model reads only the inputs.
SCHEMA = {
    'type': 'object',
    'required': ['kind', 'version', 'host', 'sources'] + list(GROUPS),
    'additionalProperties': False,
    'properties': {
        'kind': {'const': KIND},
        'version': {'const': VERSION},
        'host': {'type': 'object', 'required': ['name', 'measured_at'],
                 'properties': {'name': _TEXT, 'measured_at': _TEXT}},
        'command': {'type': 'string'},
        'commit': {'type': ['string', 'null']},
        'settings': {'type': 'object'},
        'cpuidle': {'type': 'object'},
        'measured': {'type': 'object'},
        'not_measured': {
            'type': 'array',
            'items': {'type': 'object', 'required': ['what', 'why'],
                      'properties': {'what': _TEXT, 'why': _TEXT},
                      'additionalProperties': False}},
        'costs': {'type': 'object'},
        'scheduler': {'type': 'object'},
        'sources': {'type': 'object', 'additionalProperties': _TEXT},
    },
}


class ProfileError(scenario_mod.ScenarioError):
    """A profile cannot be used; the message is one line."""


@dataclasses.dataclass(frozen=True)
class Profile:
    """A checked profile: its inputs and where each came from."""

    path: str
    host: dict
    inputs: dict
    sources: dict
    not_measured: list

    def provenance(self):
        """What a run's result says of the inputs it took from here."""
        return {'path': self.path, 'host': self.host['name'],
                'measured_at': self.host['measured_at'],
                'kernel_release': self.host.get('kernel_release'),
                'inputs': dict(self.sources),
                'not_measured': list(self.not_measured)}


def input_keys(inputs):
    """The dotted names of ``inputs``' values: ``costs.ipi_ns``, ..."""
    return sorted('%s.%s' % (g, k) for g, sec in inputs.items()
                  for k in sec)


def _constant(name):
    raise ValueError('%s is not a finite number' % name)


def read(path):
    """The JSON document at ``path``; ProfileError in one line."""
    try:
        with open(path) as f:
            # NaN and Infinity are refused while parsing: Python's JSON
            # reads them, and every bound lets NaN through
            return json.load(f, parse_constant=_constant)
    except OSError as e:
        raise ProfileError('cannot read host profile %s: %s'
                           % (path, e.strerror))
    except ValueError as e:
        raise ProfileError('%s: not a valid host profile (%s)'
                           % (path, str(e).splitlines()[0]))


def check(doc, source):
    """A :class:`Profile` of ``doc``, or ProfileError naming the field.

    The document's kind and version first, so a later release's profile
    is refused for what it is rather than for a field this one lacks.
    """
    if not isinstance(doc, dict):
        raise ProfileError('%s: a host profile is a JSON object' % source)
    if doc.get('kind') != KIND:
        raise ProfileError('%s: not a vsmtio host profile (kind %r, want '
                           '%r)' % (source, doc.get('kind'), KIND))
    if doc.get('version') != VERSION:
        raise ProfileError('%s: host profile version %r; this release '
                           'reads version %d (measure again with '
                           'vsmtio-bench calibrate)'
                           % (source, doc.get('version'), VERSION))
    try:
        scenario_mod.validate(doc, source, SCHEMA)
        inputs = {g: doc[g] for g in GROUPS}
        scenario_mod.check_inputs(inputs, source)
    except ProfileError:
        raise
    except scenario_mod.ScenarioError as e:
        raise ProfileError(str(e))
    keys = set(input_keys(inputs))
    missing = sorted(keys - set(doc['sources']))
    if missing:
        raise ProfileError('%s: sources: %s has no source (every input a '
                           'profile sets says where it came from)'
                           % (source, missing[0]))
    stray = sorted(set(doc['sources']) - keys)
    if stray:
        raise ProfileError('%s: sources: %s names no input the profile '
                           'sets' % (source, stray[0]))
    return Profile(path=source, host=dict(doc['host']), inputs=inputs,
                   sources=dict(doc['sources']),
                   not_measured=list(doc.get('not_measured') or []))


def load(path):
    """The checked profile at ``path``; ProfileError in one line."""
    return check(read(path), path)


def load_scenario(name_or_path, path=None):
    """The scenario ``name_or_path`` with the profile at ``path`` over it.

    Without ``path``, the scenario as it is. With it, the profile's
    ``costs`` and ``scheduler`` land over the scenario's own overrides
    (a value the profile does not set keeps the scenario's), and the
    result is validated as any scenario is.
    """
    if not path:
        return scenario_mod.load(name_or_path)
    prof = load(path)
    doc, source = scenario_mod.load_doc(name_or_path)
    return scenario_mod.from_dict(
        scenario_mod.with_inputs(doc, prof.inputs),
        source='%s with %s' % (source, os.path.basename(path)))
