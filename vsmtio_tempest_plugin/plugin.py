"""The tempest plugin entry point (``tempest.test_plugins``: vsmtio)."""

import os

from tempest import config
from tempest.test_discover import plugins

from vsmtio_tempest_plugin import config as vsmtio_config


class VsmtioTempestPlugin(plugins.TempestPlugin):

    def load_tests(self):
        base_path = os.path.split(os.path.dirname(
            os.path.abspath(__file__)))[0]
        test_dir = 'vsmtio_tempest_plugin/tests'
        return os.path.join(base_path, test_dir), base_path

    def register_opts(self, conf):
        config.register_opt_group(conf, config.service_available_group,
                                  [vsmtio_config.service_option])
        config.register_opt_group(conf, vsmtio_config.group,
                                  vsmtio_config.opts)

    def get_opt_lists(self):
        return [(vsmtio_config.group.name, vsmtio_config.opts),
                ('service_available', [vsmtio_config.service_option])]
