#!/bin/bash
# vsmtio devstack plugin: run as "plugin.sh <mode> [<phase>]" by devstack.
#
# stack install      install vsmtio into devstack's Python environment
#                    (nova's and Horizon's: the panel is vsmtio_dashboard)
#                    and osc-placement where placement runs; where
#                    Prometheus runs, give it a configuration that scrapes
#                    the agents
# stack post-config  add the vsmtio filter and weigher to $NOVA_CONF, the
#                    measured class's root secret where the scheduler
#                    runs, and the agent's nova policy where nova-api runs;
#                    where watcher's decision engine runs, the compute
#                    model's extended attributes (again in extra); where
#                    Horizon runs, link the panel's enabled files into it
# stack extra        load the metadefs into glance; define the retention
#                    trait in placement; create the agent's keystone user
#                    and role; on compute nodes give nova-compute this
#                    host's key, switch it to the vsmtio driver
#                    (VSMTIO_RETENTION) and start vsmtio-agent, publishing
#                    (VSMTIO_PUBLISH), its metrics on this host's service
#                    address where a Prometheus scrapes them
# stack test-config  tell tempest the vsmtio service is there, and how to
#                    reach the compute host and the agent
# unstack            stop the agent, take back the nova.conf edits, the
#                    provider config, the metadefs and the panel's
#                    enabled files
# clean              remove the agent's config and state (and the panel's
#                    enabled files, if unstack left any)
#
# nova.conf is edited only through vsmtio-nova-conf, which is idempotent
# and undoes exactly what it added (devstack's iniadd is not idempotent).

VSMTIO_XTRACE=$(set +o | grep xtrace)
set -o xtrace

function vsmtio_nova_conf {
    "$NOVA_BIN_DIR/vsmtio-nova-conf" "$@"
}

# The JSON files of etc/metadefs, one namespace each.
function vsmtio_metadef_namespaces {
    python3 -c 'import json, sys
print("\n".join(json.load(open(p))["namespace"] for p in sys.argv[1:]))' \
        "$VSMTIO_DIR"/etc/metadefs/*.json
}

function install_vsmtio {
    if [[ "$VSMTIO_RETENTION" == "True" && "$VIRT_DRIVER" != "libvirt" ]]; then
        die $LINENO "VSMTIO_RETENTION=True needs VIRT_DRIVER=libvirt"
    fi
    setup_develop "$VSMTIO_DIR"
    if is_service_enabled placement-api; then
        # "openstack trait create" (install.rst's command) is osc-placement's
        pip_install_gr osc-placement
    fi
}

function configure_vsmtio_nova {
    vsmtio_nova_conf enable "$NOVA_CONF"
    # The root secret every host's key derives from, for the scheduler
    # only: nova-compute gets its own host's key (configure_vsmtio_keys).
    if is_service_enabled n-sch; then
        iniset "$NOVA_CONF" vsmtio measured_class_secret \
            "$VSMTIO_MEASURED_CLASS_SECRET"
    fi
    # The agent's role may call the server metadata API (policy.d beside
    # nova's policy file, read by nova-api).
    if is_service_enabled n-api; then
        install -d "$NOVA_CONF_DIR/policy.d"
        install -m 0644 "$VSMTIO_DIR/etc/nova/policy.d/vsmtio.yaml" \
            "$NOVA_CONF_DIR/policy.d/vsmtio.yaml"
    fi
}

# nova's name of this compute host: what its measured classes are signed
# for.
function vsmtio_host {
    local host
    host=$(iniget "$NOVA_CPU_CONF" DEFAULT host)
    echo "${host:-$(hostname)}"
}

# This host's key: VSMTIO_MEASURED_CLASS_KEY, or derived from the root
# secret (on standard input: never on a command line).
function vsmtio_host_key {
    if [[ -n "${VSMTIO_MEASURED_CLASS_KEY:-}" ]]; then
        echo "$VSMTIO_MEASURED_CLASS_KEY"
        return
    fi
    printf '%s\n' "$VSMTIO_MEASURED_CLASS_SECRET" |
        vsmtio_nova_conf host-key --host "$(vsmtio_host)" -
}

# nova-compute verifies the classes of its instances with this host's key
# and holds no root secret (devstack copied $NOVA_CONF, which has it where
# the scheduler runs here too).
function configure_vsmtio_keys {
    local key
    key=$(vsmtio_host_key)
    [[ -n "$key" ]] || die $LINENO "no measured class key for this host"
    inidelete "$NOVA_CPU_CONF" vsmtio measured_class_secret
    iniset "$NOVA_CPU_CONF" vsmtio measured_class_host_keys "$key"
}
# install.rst's command (glance-manage db load_metadefs --path etc/metadefs),
# with devstack's glance configuration.
function load_vsmtio_metadefs {
    "$GLANCE_BIN_DIR/glance-manage" \
        --config-file "$GLANCE_CONF_DIR/glance-api.conf" \
        db load_metadefs --path "$VSMTIO_DIR/etc/metadefs"
}

# Before any flavor requires it (tempest's do): placement answers a request
# for a trait it has never heard of with an error, not NoValidHost.
function define_vsmtio_trait {
    openstack --os-cloud devstack-admin --os-placement-api-version 1.6 \
        trait create CUSTOM_VSMTIO_CONTEXT_RETENTION
}

# The user the agents publish the measured class as: no admin and no
# project of its own; the vsmtio-agent role in every project of the
# domain (inherited), which nova's policy (etc/nova/policy.d/vsmtio.yaml)
# lets read, set and delete server metadata and nothing else. The agent
# scopes a token to each instance's project.
function create_vsmtio_user {
    get_or_create_role "$VSMTIO_AGENT_ROLE"
    get_or_create_user "$VSMTIO_SERVICE_USER" "$SERVICE_PASSWORD" \
        "$SERVICE_DOMAIN_NAME"
    openstack --os-cloud devstack-system-admin role add --inherited \
        --user "$VSMTIO_SERVICE_USER" --user-domain "$SERVICE_DOMAIN_NAME" \
        --domain "$VSMTIO_AGENT_DOMAIN" "$VSMTIO_AGENT_ROLE"
}

function unload_vsmtio_metadefs {
    local namespace
    for namespace in $(vsmtio_metadef_namespaces); do
        openstack --os-cloud devstack-admin image metadef namespace delete \
            "$namespace" || warn $LINENO "metadef $namespace not removed"
    done
}

# nova-compute can load the vsmtio driver only as vsmtio-nova-compute:
# restart the n-cpu service devstack started, with the driver set and what
# this host tells placement (its retention trait, reserved I/O) written as
# nova's provider config, which nova-compute reads when it starts.
function start_vsmtio_compute {
    vsmtio_nova_conf enable --retention "$NOVA_CPU_CONF"
    vsmtio_nova_conf provider-config "$NOVA_CPU_CONF"
    stop_process n-cpu
    run_process n-cpu \
        "$NOVA_BIN_DIR/vsmtio-nova-compute --config-file $NOVA_CPU_CONF" \
        "$LIBVIRT_GROUP"
}

# The agent's metrics address: VSMTIO_METRICS_BIND_HOST where set, else
# this host's service address (nova's my_ip, devstack's NOVA_MY_IP) where
# Prometheus runs on this node, else the agent's own default, 127.0.0.1.
# Off loopback the endpoint is plain HTTP that anyone on the service
# network can read: the per-VM figures of this host, and nothing else. It
# is read-only and bounded (security.rst, "Metrics"): it answers only GET
# /metrics from the last period's record and changes nothing, takes at
# most 16 KiB of request, holds at most metrics_max_connections (16)
# connections, each with metrics_read_timeout (5 s), and renders on two
# threads, so a client can at worst keep scrapes out, never load the
# agent. That is a development cloud's trade; elsewhere the agent's TLS
# options with a client CA keep it to Prometheus.
function vsmtio_metrics_bind_host {
    if [[ -n "${VSMTIO_METRICS_BIND_HOST:-}" ]]; then
        echo "$VSMTIO_METRICS_BIND_HOST"
    elif is_service_enabled prometheus; then
        echo "$NOVA_MY_IP"
    else
        echo 127.0.0.1
    fi
}

# A scrape target, host:port, from a host, an address or either with a
# port (an IPv6 address in brackets).
function vsmtio_metrics_target {
    local host=$1
    case $host in
        \[*\]:*) echo "$host" ;;
        \[*\]) echo "$host:$VSMTIO_METRICS_PORT" ;;
        *:*:*) echo "[$host]:$VSMTIO_METRICS_PORT" ;;
        *:*) echo "$host" ;;
        *) echo "$host:$VSMTIO_METRICS_PORT" ;;
    esac
}

# Every agent this node's Prometheus scrapes: this node's own (where it
# runs one) and VSMTIO_METRICS_TARGETS.
function vsmtio_metrics_targets {
    local host
    if is_service_enabled n-cpu && is_service_enabled vsmtio-agent && \
            [[ "$VSMTIO_METRICS_PORT" != 0 ]]; then
        vsmtio_metrics_target "$(vsmtio_metrics_bind_host)"
    fi
    for host in ${VSMTIO_METRICS_TARGETS//,/ }; do
        vsmtio_metrics_target "$host"
    done
}

# devstack-plugin-prometheus copies PROMETHEUS_CONFIG_FILE (its own
# files/prometheus.yml unless local.conf names one) to
# /etc/prometheus/prometheus.yml in its post-config, and where
# PROMETHEUS_CUSTOM_SCRAPE_TARGETS is given, versions that know it build
# the configuration from that list instead. Run in install, before any
# plugin's post-config whatever local.conf's order: the configuration it
# is given is PROMETHEUS_CONFIG_FILE's with a "vsmtio" job scraping every
# agent (written as $VSMTIO_CONF_DIR/prometheus.yml: the plugin needs that
# base name), and the agents are added to the custom list where there is
# one. The agents label their own metrics with nova's host name (fqdn),
# so the job sets no label.
function configure_vsmtio_prometheus {
    local base=${PROMETHEUS_CONFIG_FILE:-}
    local conf=$VSMTIO_CONF_DIR/prometheus.yml
    local targets
    targets=$(vsmtio_metrics_targets)
    if [[ -z "$targets" ]]; then
        # one message: devstack's warn prints its second argument only
        local msg="Prometheus scrapes no vsmtio agent: no agent here"
        warn $LINENO "$msg and VSMTIO_METRICS_TARGETS is empty"
        return
    fi
    sudo install -d -o "$STACK_USER" "$VSMTIO_CONF_DIR"
    # shellcheck disable=SC2086
    "${PYTHON:-python3}" - "$base" "$conf" $targets <<'EOP'
import sys

import yaml

base, conf, targets = sys.argv[1], sys.argv[2], sys.argv[3:]
config = {}
if base:
    with open(base) as f:
        config = yaml.safe_load(f) or {}
jobs = [job for job in config.get('scrape_configs') or []
        if job.get('job_name') != 'vsmtio']
jobs.append({'job_name': 'vsmtio',
             'static_configs': [{'targets': targets}]})
config['scrape_configs'] = jobs
with open(conf, 'w') as f:
    f.write('# Written by the vsmtio devstack plugin from %s\n'
            % (base or 'nothing'))
    yaml.safe_dump(config, f, default_flow_style=False, sort_keys=False)
EOP
    PROMETHEUS_CONFIG_FILE=$conf
    if [[ -n "${PROMETHEUS_CUSTOM_SCRAPE_TARGETS:-}" ]]; then
        PROMETHEUS_CUSTOM_SCRAPE_TARGETS+=",${targets//$'\n'/,}"
    fi
}

function configure_vsmtio_agent {
    local dedicated shared
    dedicated=$(iniget "$NOVA_CPU_CONF" compute cpu_dedicated_set)
    shared=$(iniget "$NOVA_CPU_CONF" compute cpu_shared_set)
    sudo install -d -o "$STACK_USER" "$VSMTIO_CONF_DIR"
    sudo install -d "$VSMTIO_STATE_DIR"
    cat > "$VSMTIO_AGENT_CONF" <<EOC
# Written by the vsmtio devstack plugin.
[DEFAULT]
debug = $ENABLE_DEBUG_LOG_LEVEL

[vsmtio_agent]
host_driver = libvirt
libvirt_uri = qemu:///system
period = $VSMTIO_AGENT_PERIOD
dry_run = $VSMTIO_AGENT_DRY_RUN
checkpoint_path = $VSMTIO_STATE_DIR/agent-checkpoint.json
status_path = $VSMTIO_STATE_DIR/agent-status.json
metrics_port = $VSMTIO_METRICS_PORT
metrics_bind_host = $(vsmtio_metrics_bind_host)
nova_config_file = $NOVA_CPU_CONF
EOC
    # The agent moves vCPUs only inside the CPUs nova gives guests.
    if [[ -n "$dedicated" ]]; then
        echo "cpu_dedicated_set = $dedicated" >> "$VSMTIO_AGENT_CONF"
    fi
    if [[ -n "$shared" ]]; then
        echo "cpu_shared_set = $shared" >> "$VSMTIO_AGENT_CONF"
    fi
    configure_vsmtio_publish
}

# The class signed with this host's key for nova's name of this host, as
# the vsmtio user (a token per instance project: no project here).
function configure_vsmtio_publish {
    local key
    key=$(vsmtio_host_key)
    [[ -n "$key" ]] || die $LINENO "no measured class key for this host"
    cat >> "$VSMTIO_AGENT_CONF" <<EOC

[vsmtio_publish]
enabled = $VSMTIO_PUBLISH
interval = $VSMTIO_PUBLISH_INTERVAL
measured_class_key = $key
host = $(vsmtio_host)
token_scope = instance

[vsmtio_publish_auth]
auth_type = password
auth_url = $KEYSTONE_SERVICE_URI
username = $VSMTIO_SERVICE_USER
password = $SERVICE_PASSWORD
user_domain_name = $SERVICE_DOMAIN_NAME
region_name = $REGION_NAME
EOC
}

function start_vsmtio_agent {
    # Root: vCPU pinning through libvirt's system socket, sysfs knobs.
    run_process vsmtio-agent \
        "$NOVA_BIN_DIR/vsmtio-agent --config-file $VSMTIO_AGENT_CONF run" \
        "" root
}

function configure_vsmtio_tempest {
    local min_classified
    iniset "$TEMPEST_CONFIG" service_available vsmtio True
    iniset "$TEMPEST_CONFIG" vsmtio host_command "$VSMTIO_TEMPEST_HOST_COMMAND"
    iniset "$TEMPEST_CONFIG" vsmtio libvirt_uri qemu:///system
    iniset "$TEMPEST_CONFIG" vsmtio retention_capable \
        "$VSMTIO_RETENTION_CAPABLE"
    iniset "$TEMPEST_CONFIG" vsmtio measured_class_secret \
        "$VSMTIO_MEASURED_CLASS_SECRET"
    # three rounds of the agent's publishing and a minute
    iniset "$TEMPEST_CONFIG" vsmtio publish_timeout \
        $((3 * ${VSMTIO_PUBLISH_INTERVAL%.*} + 60))
    # Run on the server's compute host through host_command (as root
    # there), never where tempest runs: a controller has no agent.
    iniset "$TEMPEST_CONFIG" vsmtio agent_stop_command \
        "systemctl stop devstack@vsmtio-agent"
    iniset "$TEMPEST_CONFIG" vsmtio agent_start_command \
        "systemctl start devstack@vsmtio-agent"
    iniset "$TEMPEST_CONFIG" vsmtio agent_checkpoint_path \
        "$VSMTIO_STATE_DIR/agent-checkpoint.json"
    # The host's mix as nova-compute saved it, from the cell database: the
    # tenant edit test reads it before and after the tenant's edit.
    if [[ "${DATABASE_TYPE:-}" == "mysql" ]]; then
        local mysql query
        mysql="mysql -u$DATABASE_USER -p$DATABASE_PASSWORD -h$DATABASE_HOST"
        query="SELECT stats FROM compute_nodes WHERE host='{host}'"
        iniset "$TEMPEST_CONFIG" vsmtio node_stats_command \
            "$mysql -N -B nova_cell1 -e \"$query AND deleted=0\""
    fi
    min_classified=$(iniget "$NOVA_CONF" vsmtio filter_min_classified_vcpus)
    iniset "$TEMPEST_CONFIG" vsmtio filter_min_classified_vcpus \
        "${min_classified:-16}"
    configure_vsmtio_tempest_fleet
}

# The fleet tests: the zone whose hosts they fill (the default zone of a
# devstack, where every compute node is; with fewer than two hosts there
# they skip saying so), the band nova.conf gives the filter, and whether
# Watcher runs here for the repair test.
function configure_vsmtio_tempest_fleet {
    local option value watcher=False
    if [[ -n "$VSMTIO_TEMPEST_FLEET_ZONE" ]]; then
        iniset "$TEMPEST_CONFIG" vsmtio fleet_zone "$VSMTIO_TEMPEST_FLEET_ZONE"
    fi
    for option in min_io_fraction max_io_fraction; do
        value=$(iniget "$NOVA_CONF" vsmtio "$option")
        if [[ -n "$value" ]]; then
            iniset "$TEMPEST_CONFIG" vsmtio "$option" "$value"
        fi
    done
    if is_service_enabled watcher-api && \
            is_service_enabled watcher-decision-engine && \
            is_service_enabled watcher-applier; then
        watcher=True
    fi
    iniset "$TEMPEST_CONFIG" vsmtio watcher "$watcher"
}

# The mix repair strategy reads each instance's flavor extra specs, which
# Watcher's compute model holds only with [compute_model]
# enable_extended_attributes (false by default): without it every audit
# of the strategy fails. Set in post-config and again in extra, each time
# only once watcher.conf exists: watcher's own post-config rebuilds
# watcher.conf from scratch and its extra starts the decision engine, and
# plugins run in local.conf's order, so whichever plugin runs first the
# option is in the file the decision engine starts with.
function configure_vsmtio_watcher {
    local conf=${WATCHER_CONF:-/etc/watcher/watcher.conf}
    if [[ -f "$conf" ]]; then
        iniset "$conf" compute_model enable_extended_attributes True
    fi
}

# The panel's enabled files (the panel group and the hosts panel), as
# Horizon's plugins give theirs: watcher-dashboard's plugin copies its own
# into Horizon's local/enabled; these are links, so the panel a develop
# install runs is always the tree's. In post-config: stack.sh has written
# Horizon's local_settings (configure_horizon) before it and collects and
# compresses the static files (init_horizon) after it, with the panel's
# templates then in place.
function vsmtio_dashboard_enabled_files {
    local file
    for file in "$VSMTIO_DIR"/vsmtio_dashboard/enabled/_[0-9]*.py; do
        echo "${file##*/}"
    done
}

function configure_vsmtio_dashboard {
    local name
    for name in $(vsmtio_dashboard_enabled_files); do
        ln -sfn "$VSMTIO_DIR/vsmtio_dashboard/enabled/$name" \
            "$HORIZON_DIR/openstack_dashboard/local/enabled/$name"
    done
    configure_vsmtio_dashboard_options
}

# The panel judges what the mix filter would refuse with nova.conf's
# options, which Horizon cannot read: VSMTIO_NOVA_OPTIONS in Horizon's
# local_settings mirrors those nova.conf sets here (nova's defaults stand
# for the rest), written again on each stack.sh.
function configure_vsmtio_dashboard_options {
    local option value entries=""
    local settings=$HORIZON_DIR/openstack_dashboard/local/local_settings.py
    [[ -f "$settings" ]] || return 0
    for option in min_io_fraction max_io_fraction \
            filter_min_classified_vcpus; do
        value=$(iniget "$NOVA_CONF" vsmtio "$option")
        if [[ -n "$value" ]]; then
            entries+="'$option': '$value', "
        fi
    done
    sed -i '/^VSMTIO_NOVA_OPTIONS = /d' "$settings"
    echo "VSMTIO_NOVA_OPTIONS = {${entries%, }}" >> "$settings"
}

# Only the panel's own files: whatever else is in local/enabled stays.
function unconfigure_vsmtio_dashboard {
    local name enabled="$HORIZON_DIR/openstack_dashboard/local/enabled"
    if [[ -d "$enabled" ]]; then
        for name in $(vsmtio_dashboard_enabled_files); do
            rm -f "$enabled/$name"
        done
    fi
}

function unstack_vsmtio {
    stop_process vsmtio-agent
    rm -f "$NOVA_CONF_DIR/policy.d/vsmtio.yaml"
    if is_service_enabled n-cpu && [[ -f "$NOVA_CPU_CONF" ]]; then
        vsmtio_nova_conf disable "$NOVA_CPU_CONF"
    fi
    if [[ -f "$NOVA_CONF" ]]; then
        vsmtio_nova_conf disable "$NOVA_CONF"
    fi
    if is_service_enabled g-api; then
        unload_vsmtio_metadefs
    fi
    unconfigure_vsmtio_dashboard
}

function clean_vsmtio {
    unconfigure_vsmtio_dashboard
    sudo rm -rf "$VSMTIO_CONF_DIR" "$VSMTIO_STATE_DIR"
}

if [[ "$1" == "stack" && "$2" == "install" ]]; then
    echo_summary "Installing vsmtio"
    install_vsmtio
    if is_service_enabled prometheus; then
        configure_vsmtio_prometheus
    fi
elif [[ "$1" == "stack" && "$2" == "post-config" ]]; then
    if is_service_enabled nova; then
        echo_summary "Configuring nova for vsmtio"
        configure_vsmtio_nova
    fi
    if is_service_enabled watcher-decision-engine; then
        configure_vsmtio_watcher
    fi
    if is_service_enabled horizon; then
        echo_summary "Adding the vsmtio panel to Horizon"
        configure_vsmtio_dashboard
    fi
elif [[ "$1" == "stack" && "$2" == "extra" ]]; then
    if is_service_enabled watcher-decision-engine; then
        configure_vsmtio_watcher
    fi
    if is_service_enabled g-api; then
        load_vsmtio_metadefs
    fi
    if is_service_enabled placement-api; then
        define_vsmtio_trait
    fi
    if is_service_enabled key && [[ "$VSMTIO_PUBLISH" == "True" ]]; then
        create_vsmtio_user
    fi
    if is_service_enabled n-cpu; then
        configure_vsmtio_keys
        if [[ "$VSMTIO_RETENTION" == "True" ]]; then
            echo_summary "Starting nova-compute with the vsmtio driver"
            start_vsmtio_compute
        fi
        if is_service_enabled vsmtio-agent; then
            echo_summary "Starting vsmtio-agent"
            configure_vsmtio_agent
            start_vsmtio_agent
        fi
    fi
elif [[ "$1" == "stack" && "$2" == "test-config" ]]; then
    if is_service_enabled tempest; then
        configure_vsmtio_tempest
    fi
fi

if [[ "$1" == "unstack" ]]; then
    unstack_vsmtio
fi

if [[ "$1" == "clean" ]]; then
    clean_vsmtio
fi

$VSMTIO_XTRACE
