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
"""Sphinx configuration of vsmtio's release notes (``tox -e releasenotes``).

reno's directive reads the notes from git (``releasenotes/notes/``).
"""

extensions = [
    'openstackdocstheme',
    'reno.sphinxext',
]

# openstackdocstheme
openstackdocs_repo_name = 'x/vsmtio'
openstackdocs_use_storyboard = False
openstackdocs_bug_project = 'vsmtio'
openstackdocs_bug_tag = 'releasenotes'
openstackdocs_auto_name = False

project = 'vsmtio Release Notes'
copyright = 'The vsmtio developers'

master_doc = 'index'
source_suffix = '.rst'
exclude_patterns = []
pygments_style = 'native'

html_theme = 'openstackdocs'
html_static_path = ['_static']
templates_path = ['_templates']
