"""The shipped sample configurations are the generated ones, up to date.

``etc/vsmtio/*.conf.sample`` are what ``tox -e genconfig``
(oslo-config-generator) writes from the options' own definitions; this
regenerates them in memory and compares. Only vsmtio's own groups are
compared: ``[DEFAULT]`` holds oslo.log's options, which change with the
installed oslo.log release, not with this project.
"""

import io
import os

from oslo_config import cfg
from oslo_config import generator
import testtools

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))


def own_groups(text):
    """The text from the first section after ``[DEFAULT]`` on."""
    start = text.index('\n[', text.index('[DEFAULT]'))
    return text[start:]


class SampleConfigTest(testtools.TestCase):

    def generate(self, name):
        conf = cfg.ConfigOpts()
        generator.register_cli_opts(conf)
        conf(['--config-file', os.path.join(
            ROOT, 'etc', 'oslo-config-generator', name)])
        out = io.StringIO()
        generator.generate(conf, output_file=out)
        return conf.output_file, out.getvalue()

    def check(self, name, groups):
        path, text = self.generate(name)
        with open(os.path.join(ROOT, path)) as f:
            shipped = f.read()
        for group in groups:
            self.assertIn('\n[%s]\n' % group, shipped)
        self.assertEqual(
            own_groups(text), own_groups(shipped),
            '%s is out of date: run tox -e genconfig' % path)

    def test_agent_sample_is_current(self):
        self.check('vsmtio-agent.conf', ['vsmtio_agent', 'vsmtio_sim'])

    def test_nova_sample_is_current(self):
        self.check('vsmtio-nova.conf', ['vsmtio'])
