# Fails one primary of a throwaway Redis Cluster (xtask/src/services/cluster_failover.rs)
# over to its replica: the primary that serves a KEY's slot when KEYs are given, the keys
# taken in turn (failover n takes key n mod count: the torture controller names its
# namespace's home key and each partition's, so every failover hits the namespace and, with
# partitions spread over the primaries, every primary serving it is failed over in turn),
# else the primaries take turns (round robin in port order); the primary is
# killed with SIGKILL, the cluster notices (cluster-node-timeout) and the replica wins the
# election; then the old primary is started again (empty: no persistence) and rejoins as
# the new primary's replica.
#
# Usage: failover [LAG_MS [KEY...]]
#   LAG_MS > 0: first the replica's link is cut for that long, as a stalled link would:
#   the replica is given a wrong `masterauth` and the primary drops it (`CLIENT KILL TYPE
#   replica`), so it cannot resync, and the primary acknowledges writes the replica never
#   receives. (Stopping the replica with SIGSTOP would lose nothing: the kernel's socket
#   buffers hand it everything once it runs again.)
#
# Set by the generated header: CLUSTER_DIR, REDIS_CLI, a start_node PORT function.
set -eu
lag_ms=${1:-0}
if [ "$#" -gt 0 ]; then shift; fi
key=
cli() { "$REDIS_CLI" -p "$@"; }
port_of() { awk '{ split($2, a, "[:@]"); print a[2] }'; }
pid_of() { cli "$1" info server | awk -F: '/^process_id/ { print $2 }' | tr -d '\r'; }
wait_for() {
    # wait_for SECONDS COMMAND...: polls every 0.1 s
    tries=$(( $1 * 10 )); shift
    while [ "$tries" -gt 0 ]; do
        if "$@" >/dev/null 2>&1; then return 0; fi
        tries=$(( tries - 1 )); sleep 0.1
    done
    return 1
}
is_master() { cli "$1" role | head -n 1 | grep -q master; }
link_up() { cli "$1" info replication | grep -q 'master_link_status:up'; }
state_ok() { cli "$1" cluster info | grep -q 'cluster_state:ok'; }
# note LINE: the cluster's log, and stdout (the torture run's failover.log)
note() { echo "$(date +%s.%N) $*" | tee -a "$CLUSTER_DIR/failovers.log"; }
any=$(cat "$CLUSTER_DIR/ports" | head -n 1)
for p in $(cat "$CLUSTER_DIR/ports"); do
    if cli "$p" ping >/dev/null 2>&1; then any=$p; break; fi
done
n=$(cat "$CLUSTER_DIR/failovers" 2>/dev/null || echo 0)
masters=$(cli "$any" cluster nodes | awk '$3 ~ /master/ && $3 !~ /fail/' | port_of | sort -n)
count=$(echo "$masters" | wc -l)
primary=$(echo "$masters" | sed -n "$(( n % count + 1 ))p")
if [ "$#" -gt 0 ]; then
    i=$(( n % $# + 1 ))
    eval "key=\${$i}"
fi
if [ -n "$key" ]; then
    slot=$(cli "$any" cluster keyslot "$key" | tr -d '\r')
    primary=$(cli "$any" cluster nodes | awk -v s="$slot" '$3 ~ /master/ && $3 !~ /fail/ {
        for (i = 9; i <= NF; i++) {
            if ($i !~ /^[0-9]+(-[0-9]+)?$/) continue
            n = split($i, r, "-"); lo = r[1] + 0; hi = (n == 2 ? r[2] : r[1]) + 0
            if (s >= lo && s <= hi) { split($2, a, "[:@]"); print a[2] }
        }
    }' | head -n 1)
    if [ -z "$primary" ]; then echo "no primary serves slot $slot of $key" >&2; exit 1; fi
fi
id=$(cli "$primary" cluster myid | tr -d '\r')
replica=$(cli "$primary" cluster nodes | awk -v id="$id" '$4 == id && $3 ~ /slave/ && $3 !~ /fail/' | port_of | head -n 1)
if [ -z "$replica" ]; then echo "no replica of $primary" >&2; exit 1; fi
ppid=$(pid_of "$primary")
# A replica cut off for longer than cluster-replica-validity-factor (default 10) node
# timeouts refuses to stand for election and the shard stays down; the nemesis wants the
# lagged replica promoted (that is the loss it measures), so any replica may stand.
cli "$replica" config set cluster-replica-validity-factor 0 >/dev/null
if [ "$lag_ms" -gt 0 ]; then
    cli "$replica" config set masterauth lease-xtask-link-cut >/dev/null
    cli "$primary" client kill type replica >/dev/null
    sleep "$(awk "BEGIN { print $lag_ms / 1000 }")"
fi
kill -KILL "$ppid"
if [ "$lag_ms" -gt 0 ]; then cli "$replica" config set masterauth "" >/dev/null; fi
if ! wait_for 30 is_master "$replica"; then echo "replica $replica was not promoted" >&2; exit 1; fi
echo $(( n + 1 )) > "$CLUSTER_DIR/failovers"
note "failover: primary $primary killed, replica $replica promoted, lag ${lag_ms} ms${key:+, key $key (slot $slot)}"
start_node "$primary"
wait_for 30 link_up "$primary" || { echo "$primary did not rejoin as a replica" >&2; exit 1; }
wait_for 30 state_ok "$replica" || { echo "cluster state not ok" >&2; exit 1; }
note "rejoined: $primary replicates $replica"
