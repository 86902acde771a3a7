#!/bin/bash
# vsmtio devstack plugin: run as "plugin.sh <mode> [<phase>]" by devstack.
#
# stack install      install vsmtio into nova's environment
# stack post-config  add the vsmtio filter and weigher to $NOVA_CONF
# stack extra        load the metadefs into glance; on compute nodes switch
#                    nova-compute to the vsmtio driver (VSMTIO_RETENTION)
#                    and start vsmtio-agent
# stack test-config  tell tempest the vsmtio service is there
# unstack            stop the agent, take back the nova.conf edits, the
#                    provider config and the metadefs
# clean              remove the agent's config and state
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
}

function configure_vsmtio_nova {
    vsmtio_nova_conf enable "$NOVA_CONF"
}

function load_vsmtio_metadefs {
    "$GLANCE_BIN_DIR/glance-manage" \
        --config-file "$GLANCE_CONF_DIR/glance-api.conf" \
        db_load_metadefs "$VSMTIO_DIR/etc/metadefs"
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
EOC
    # The agent moves vCPUs only inside the CPUs nova gives guests.
    if [[ -n "$dedicated" ]]; then
        echo "cpu_dedicated_set = $dedicated" >> "$VSMTIO_AGENT_CONF"
    fi
    if [[ -n "$shared" ]]; then
        echo "cpu_shared_set = $shared" >> "$VSMTIO_AGENT_CONF"
    fi
}

function start_vsmtio_agent {
    # Root: vCPU pinning through libvirt's system socket, sysfs knobs.
    run_process vsmtio-agent \
        "$NOVA_BIN_DIR/vsmtio-agent --config-file $VSMTIO_AGENT_CONF run" \
        "" root
}

function configure_vsmtio_tempest {
    iniset "$TEMPEST_CONFIG" service_available vsmtio True
}

function unstack_vsmtio {
    stop_process vsmtio-agent
    if is_service_enabled n-cpu && [[ -f "$NOVA_CPU_CONF" ]]; then
        vsmtio_nova_conf disable "$NOVA_CPU_CONF"
    fi
    if [[ -f "$NOVA_CONF" ]]; then
        vsmtio_nova_conf disable "$NOVA_CONF"
    fi
    if is_service_enabled g-api; then
        unload_vsmtio_metadefs
    fi
}

function clean_vsmtio {
    sudo rm -rf "$VSMTIO_CONF_DIR" "$VSMTIO_STATE_DIR"
}

if [[ "$1" == "stack" && "$2" == "install" ]]; then
    echo_summary "Installing vsmtio"
    install_vsmtio
elif [[ "$1" == "stack" && "$2" == "post-config" ]]; then
    if is_service_enabled nova; then
        echo_summary "Configuring nova for vsmtio"
        configure_vsmtio_nova
    fi
elif [[ "$1" == "stack" && "$2" == "extra" ]]; then
    if is_service_enabled g-api; then
        load_vsmtio_metadefs
    fi
    if is_service_enabled n-cpu; then
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
