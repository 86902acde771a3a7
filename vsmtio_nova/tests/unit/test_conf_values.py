"""``[vsmtio]`` values in nova.conf: a number is a finite number in bounds.

Read from real files through oslo.config, as nova reads nova.conf; the
filter and weigher are loaded by nova itself in a child process, so that
"refused" means what nova-scheduler's start would do.
"""

import math
import os
import subprocess
import sys
import tempfile

import hypothesis
from hypothesis import strategies as st
from oslo_config import cfg
import testtools

from vsmtio_nova import conf as vsmtio_conf

FLOATS = [opt.dest for opt in vsmtio_conf.vsmtio_opts
          if isinstance(opt, cfg.FloatOpt)]

NOVA_LOADS = '''
import sys
import nova.conf
CONF = nova.conf.CONF
CONF(['--config-file', sys.argv[1]], project='nova', default_config_files=[])
from vsmtio_nova.scheduler import filters, weights
for cls in (filters.WorkloadMixFilter, weights.WorkloadMixWeigher):
    try:
        cls()
        print('%s: loaded' % cls.__name__)
    except ValueError as exc:
        print('%s: %s' % (cls.__name__, exc))
'''


def conf_from(text):
    """A ConfigOpts with the ``[vsmtio]`` options, read from ``text``."""
    fd, path = tempfile.mkstemp(suffix='.conf')
    with os.fdopen(fd, 'w') as f:
        f.write(text)
    conf = cfg.ConfigOpts()
    conf.register_group(cfg.OptGroup(vsmtio_conf.vsmtio_group.name))
    for _group, opts in vsmtio_conf.list_opts():
        conf.register_opts(opts, group=vsmtio_conf.vsmtio_group.name)
    conf(['--config-file', path], project='vsmtio-test',
         default_config_files=[])
    os.unlink(path)
    return conf


class FiniteOptionsTest(testtools.TestCase):

    def test_every_float_option_is_bounded(self):
        for opt in vsmtio_conf.vsmtio_opts:
            if isinstance(opt, cfg.FloatOpt):
                self.assertIsNotNone(opt.type.min, opt.dest)
                self.assertIsNotNone(opt.type.max, opt.dest)

    def test_nan_and_infinities_are_refused_naming_the_option(self):
        self.assertEqual(['target_io_fraction', 'min_io_fraction',
                          'max_io_fraction', 'weight_multiplier'], FLOATS)
        for name in FLOATS:
            for value in ('nan', 'NaN', 'inf', '-inf', '1e999', '-1e999'):
                conf = conf_from('[vsmtio]\n%s = %s\n' % (name, value))
                exc = self.assertRaises(ValueError, vsmtio_conf.check, conf)
                self.assertTrue(str(exc).startswith('[vsmtio] %s: ' % name),
                                str(exc))
                self.assertNotIn('\n', str(exc))

    def test_a_good_file_passes(self):
        conf = conf_from('[vsmtio]\ntarget_io_fraction = 0.4\n'
                         'weight_multiplier = 1000000\n')
        vsmtio_conf.check(conf)
        self.assertEqual(1e6, conf.vsmtio.weight_multiplier)

    def test_nova_does_not_load_the_filter_or_weigher(self):
        for value, why in (('nan', 'finite number, not nan'),
                           ('-inf', 'greater than or equal to 0'),
                           ('2e6', 'less than or equal to 1e+06')):
            fd, path = tempfile.mkstemp(suffix='.conf')
            self.addCleanup(os.unlink, path)
            with os.fdopen(fd, 'w') as f:
                f.write('[vsmtio]\nweight_multiplier = %s\n' % value)
            out = subprocess.run([sys.executable, '-c', NOVA_LOADS, path],
                                 capture_output=True, text=True)
            self.assertEqual(0, out.returncode, out.stderr[-2000:])
            lines = out.stdout.splitlines()
            self.assertEqual(2, len(lines), out.stdout)
            for line in lines:
                self.assertIn(': [vsmtio] weight_multiplier: ', line)
                self.assertIn(why, line)

    @hypothesis.settings(max_examples=300, deadline=None)
    @hypothesis.given(name=st.sampled_from(FLOATS),
                      value=st.one_of(
                          st.floats().map(repr),
                          st.text(alphabet=st.characters(
                              blacklist_categories=('Cs',),
                              blacklist_characters='\n\r'), max_size=12),
                          st.sampled_from(['nan', '+inf', '-0', '1_0',
                                           '0x1', '1e308', '.5', ''])))
    def test_any_value_is_a_finite_number_in_bounds_or_one_line(
            self, name, value):
        try:
            conf = conf_from('[vsmtio]\n%s = %s\n' % (name, value))
        except cfg.ParseError:
            return      # not an ini line at all: oslo.config says where
        try:
            vsmtio_conf.check(conf)
        except ValueError as exc:
            self.assertTrue(str(exc).startswith('[vsmtio] '), str(exc))
            self.assertIn(name, str(exc))
            self.assertNotIn('\n', str(exc))
            return
        got = getattr(conf.vsmtio, name)
        opt = [o for o in vsmtio_conf.vsmtio_opts if o.dest == name][0]
        self.assertTrue(math.isfinite(got), (name, value, got))
        self.assertTrue(opt.type.min <= got <= opt.type.max,
                        (name, value, got))
