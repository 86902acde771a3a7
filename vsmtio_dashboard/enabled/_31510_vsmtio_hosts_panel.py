# Horizon plugin configuration: the hosts panel in Admin > vSMT-IO.
PANEL = 'vsmtio_hosts'
PANEL_DASHBOARD = 'admin'
PANEL_GROUP = 'vsmtio'

ADD_PANEL = 'vsmtio_dashboard.content.hosts.panel.Hosts'
