# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.
"""Sphinx configuration of vsmtio's documentation (``tox -e docs``)."""

import os
import sys

# doc/source/_exts holds this project's own Sphinx extensions.
sys.path.insert(0, os.path.join(os.path.abspath(os.path.dirname(__file__)),
                                '_exts'))

extensions = [
    'openstackdocstheme',
    'vsmtio_refcheck',
]

# openstackdocstheme
openstackdocs_repo_name = 'x/vsmtio'
openstackdocs_use_storyboard = False
openstackdocs_bug_project = 'vsmtio'
openstackdocs_bug_tag = 'doc'
openstackdocs_auto_name = False

project = 'vsmtio'
copyright = 'The vsmtio developers'

master_doc = 'index'
source_suffix = '.rst'
exclude_patterns = ['_build']
pygments_style = 'native'

html_theme = 'openstackdocs'
# The images live beside the pages that show them; nothing else is static.
html_static_path = []

# The reference check (_exts/vsmtio_refcheck.py) also reads these files,
# which are not part of this build: the README and the release notes.
vsmtio_refcheck_extra = [
    'README.rst',
    'releasenotes/notes/*.yaml',
]
