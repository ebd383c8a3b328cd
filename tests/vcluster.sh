# vcluster.sh - a throw-away cluster on this one machine for the Slurm and campaign tests (sourced
# after lib.sh, which provides $WORK and removes it on exit).
#   vc_nodes_up N      N "nodes" n1..nN plus a login/controller node "ctl": each a network
#                      namespace with one veth fe0 (10.77.0.I/24, ctl .254), all bridged inside a
#                      namespace of their own; nothing is added to the root namespace. Up to
#                      16 nodes take under a second (253 at most: one address each).
#   VC_RATE=R vc_shape every node's link limited to R (tc's units: 200mbit) in both directions.
#                      Bandwidth only: a delay needs the netem qdisc, which kernels built
#                      without CONFIG_NET_SCH_NETEM lack.
#   vc_on NODE CMD...  runs CMD in NODE's network namespace with NODE as its host name
#   vc_slurm_up        munged, slurmctld on ctl, one slurmd per node; all state under $VC; batch
#                      jobs start without the scheduler's default 3 s delay (batch_sched_delay=0),
#                      so an array run one task at a time (%1) starts each within a second
#   vc_cli CMD...      a Slurm client command (sbatch, squeue, ...) on the login node ctl, for
#                      VC_TIMEOUT seconds at most (60 by default)
#   vc_down            stops Slurm and munge and deletes the namespaces; run by the EXIT trap,
#                      also when a test fails.
# Namespaces carry this shell's pid in their names, so parallel tests never share one. Every
# command that can hang is wrapped in timeout. Needs root, ip, nsenter, unshare; Slurm for
# vc_slurm_up. See ../shared/CLUSTER-TESTING.md for why each piece is as it is.

VC=$WORK/vc
VC_NS=dtb$$
VC_NODES=""
VC_NET=10.77.0
mkdir -p "$VC"
trap 'vc_down; rm -rf "$WORK"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Namespaces left by a test run that was killed outright (its shell's pid is gone).
for ns in $(ip netns list 2>/dev/null | sed -n 's/^dtb\([0-9][0-9]*\)[a-z].*/&/p' | cut -d' ' -f1); do
    pid=$(echo "$ns" | sed 's/^dtb\([0-9]*\).*/\1/')
    kill -0 "$pid" 2>/dev/null && continue
    for p in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$p" 2>/dev/null || true; done
    ip netns del "$ns" 2>/dev/null || true
done

# vc_require [PROGRAM...] : skip (exit 77) when this machine cannot host the cluster.
vc_require() {
    [ "$(id -u)" = 0 ] || { echo "SKIP: needs root for network namespaces"; exit 77; }
    for t in ip nsenter unshare "$@"; do
        command -v "$t" >/dev/null || { echo "SKIP: $t is not installed (scripts/setup.sh installs it)"; exit 77; }
    done
}

vc_ns() { echo "$VC_NS$1"; }

vc_on() {
    local node=$1
    shift
    timeout -k 5 "${VC_TIMEOUT:-300}" nsenter --net="/run/netns/$(vc_ns "$node")" unshare --uts \
        sh -c 'hostname "$0" && exec "$@"' "$node" "$@"
}

vc_addr() {
    case $1 in ctl) echo "$VC_NET.254" ;; n*) echo "$VC_NET.${1#n}" ;; esac
}

vc_nodes_up() {
    local n=$1 i node
    ip netns add "$(vc_ns br)"
    ip -n "$(vc_ns br)" link add br0 type bridge
    ip -n "$(vc_ns br)" link set br0 up
    VC_NODES=$(seq -f 'n%g' 1 "$n" | tr '\n' ' ')
    i=0
    for node in ctl $VC_NODES; do
        i=$((i + 1))
        ip netns add "$(vc_ns "$node")"
        ip -n "$(vc_ns "$node")" link add fe0 type veth peer name "v$i" netns "$(vc_ns br)"
        ip -n "$(vc_ns "$node")" addr add "$(vc_addr "$node")/24" dev fe0
        ip -n "$(vc_ns "$node")" link set lo up
        ip -n "$(vc_ns "$node")" link set fe0 up
        ip -n "$(vc_ns br)" link set "v$i" master br0 up
    done
    # Open MPI between the nodes: only over the bridge, launched through vc_agent instead of ssh.
    cat >"$VC/agent" <<EOF
#!/bin/sh
# called by mpirun as: agent HOST CMD... ; runs CMD on the emulated node HOST
host=\$1; shift
exec nsenter --net=/run/netns/$VC_NS\$host unshare --uts sh -c 'hostname "\$0" && exec sh -c "\$*"' "\$host" "\$@"
EOF
    chmod +x "$VC/agent"
    export OMPI_MCA_oob_tcp_if_include=$VC_NET.0/24 OMPI_MCA_btl_tcp_if_include=$VC_NET.0/24
    # Every pair of ranks connects inside MPI_Init. Without it Open MPI 4.1's TCP BTL crashed in
    # MPI_Init now and then (a fragment handed to an unset callback, a call through a null
    # pointer, no dtbench frame; "connect() ... failed: Operation now in progress" on the other
    # nodes): 12 of the 90 runs of a scaling study on 16 emulated nodes under srun, 4 of 20 jobs
    # of 8 nodes; with it, none in 48 such jobs and two studies of 94 runs.
    export OMPI_MCA_mpi_preconnect_mpi=1
}

# vc_shape RATE : every node's link (not ctl's) limited to RATE each way, as a full-duplex NIC
# is: a token bucket on fe0 (what the node sends) and one on its bridge port (what it receives).
# The bucket holds 128 kB and queues up to 100 ms of packets before dropping, so that TCP's
# bursts queue instead of being lost.
vc_shape() {
    local node dev i=1
    for node in $VC_NODES; do
        i=$((i + 1))
        for dev in "$(vc_ns "$node") fe0" "$(vc_ns br) v$i"; do
            # shellcheck disable=SC2086 # namespace and device
            set -- $dev
            ip -n "$1" link set "$2" txqueuelen 1000
            tc -n "$1" qdisc replace dev "$2" root tbf rate "$VC_RATE" burst 128kb latency 100ms
        done
    done
}

# vc_rx_bytes NODE : bytes received so far on NODE's veth.
vc_rx_bytes() {
    ip -n "$(vc_ns "$1")" -s -j link show fe0 |
        "$PYTHON" -c 'import json,sys; print(json.load(sys.stdin)[0]["stats64"]["rx"]["bytes"])'
}

vc_slurm_up() {
    local node
    mkdir -p "$VC/munge" "$VC/ctld" "$VC/log" "$VC/run"
    chmod 755 "$VC" "$VC/munge"
    for node in $VC_NODES; do mkdir -p "$VC/spool/$node" "$VC/tmp/$node"; done
    timeout 20 mungekey -c -k "$VC/munge/key" >/dev/null 2>&1 || timeout 20 mungekey -c -f -k "$VC/munge/key"
    timeout 20 munged --socket="$VC/munge/sock" --key-file="$VC/munge/key" \
        --pid-file="$VC/munge/pid" --log-file="$VC/munge/log" --seed-file="$VC/munge/seed" --force
    {
        echo "# slurm.conf for a throw-away test cluster (tests/vcluster.sh)"
        echo "ClusterName=dtbtest$$"
        echo "SlurmctldHost=ctl($(vc_addr ctl))"
        echo "AuthType=auth/munge"
        echo "CredType=cred/munge"
        echo "AuthInfo=socket=$VC/munge/sock"
        echo "SlurmUser=root"
        echo "SlurmdUser=root"
        echo "StateSaveLocation=$VC/ctld"
        echo "SlurmdSpoolDir=$VC/spool/%n"
        echo "SlurmctldPidFile=$VC/run/slurmctld.pid"
        echo "SlurmdPidFile=$VC/run/slurmd-%n.pid"
        echo "SlurmctldLogFile=$VC/log/slurmctld.log"
        echo "SlurmdLogFile=$VC/log/slurmd-%n.log"
        echo "TmpFS=$VC/tmp/%n"
        echo "ProctrackType=proctrack/linuxproc"
        echo "TaskPlugin=task/none"
        echo "SelectType=select/cons_tres"
        echo "SelectTypeParameters=CR_Core"
        echo "AccountingStorageType=accounting_storage/none"
        echo "JobAcctGatherType=jobacct_gather/none"
        echo "JobCompType=jobcomp/none"
        echo "MailProg=/bin/true"
        echo "ReturnToService=2"
        echo "SlurmdParameters=config_overrides"
        echo "MpiDefault=none"
        echo "KillWait=10"
        echo "MinJobAge=600"
        echo "SchedulerParameters=batch_sched_delay=0"
        for node in $VC_NODES; do
            echo "NodeName=$node NodeAddr=$(vc_addr "$node") NodeHostname=$node CPUs=${VC_CPUS:-2} State=UNKNOWN"
        done
        echo "PartitionName=test Nodes=$(echo $VC_NODES | tr ' ' ',') Default=YES MaxTime=INFINITE State=UP"
    } >"$VC/slurm.conf"
    export SLURM_CONF=$VC/slurm.conf
    VC_TIMEOUT=20 vc_on ctl slurmctld -f "$SLURM_CONF"
    for node in $VC_NODES; do
        VC_TIMEOUT=20 vc_on "$node" slurmd -f "$SLURM_CONF" -N "$node"
    done
    local i
    for i in $(seq 100); do
        [ "$(vc_cli sinfo -h -t idle -o %D 2>/dev/null)" = "$(echo $VC_NODES | wc -w)" ] && return 0
        sleep 0.2
    done
    echo "vcluster: Slurm nodes did not become idle:"
    vc_cli sinfo 2>&1 || true
    tail -5 "$VC"/log/*.log
    return 1
}

vc_cli() {
    timeout "${VC_TIMEOUT:-60}" nsenter --net="/run/netns/$(vc_ns ctl)" "$@"
}

# vc_kill_pidfile FILE : TERM, then KILL after 5 s, the daemon whose pid is in FILE.
vc_kill_pidfile() {
    local pid i
    [ -s "$1" ] || return 0
    pid=$(cat "$1")
    kill -TERM "$pid" 2>/dev/null || return 0
    for i in $(seq 50); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
}

vc_down() {
    local f node
    if [ -f "$VC/slurm.conf" ]; then
        vc_cli scancel --full -u root 2>/dev/null || true
        vc_cli scontrol shutdown >/dev/null 2>&1 || true
        sleep 0.5
        for f in "$VC"/run/slurmd-*.pid "$VC/run/slurmctld.pid"; do vc_kill_pidfile "$f"; done
        # Job processes that outlived their slurmd (a job killed while a test failed).
        for node in $VC_NODES; do
            for pid in $(ip netns pids "$(vc_ns "$node")" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null || true; done
        done
    fi
    [ -f "$VC/munge/pid" ] && vc_kill_pidfile "$VC/munge/pid"
    for node in ctl $VC_NODES br; do
        for pid in $(ip netns pids "$(vc_ns "$node")" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null || true; done
        ip netns del "$(vc_ns "$node")" 2>/dev/null || true
    done
}
