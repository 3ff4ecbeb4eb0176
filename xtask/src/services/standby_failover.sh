# Fails a throwaway PostgreSQL pair (xtask/src/services/standby.rs) over: its primary is
# stopped with `pg_ctl stop -m immediate` (a crash: no shutdown checkpoint, no WAL handed
# on), the standby is promoted (`pg_ctl promote`), and a new standby is built from the new
# primary (`pg_basebackup -R`) on the old primary's port, so the multi-host URL stays valid.
#
# Usage: failover [LAG_MS]
#   LAG_MS > 0: first the primary's WAL sender is stopped (SIGSTOP) for that long, as a
#   stalled link to the standby would hold it back, so the primary commits while the
#   standby falls behind; with a synchronous standby those commits wait, with an
#   asynchronous one they are acknowledged and then lost in the failover.
#
# Set by the generated header: PAIR_DIR, PG_BIN, PAIR_AS (empty, or "runuser -u postgres --"
# as root), PAIR_OPTS (server options without the port).
set -eu
lag_ms=${1:-0}
primary=$(cat "$PAIR_DIR/primary")
if [ "$primary" = a ]; then standby=b; else standby=a; fi
pport=$(cat "$PAIR_DIR/$primary.port")
sport=$(cat "$PAIR_DIR/$standby.port")
sender=""
if [ "$lag_ms" -gt 0 ]; then
    # Stop the primary's WAL sender: WAL it has not sent stays in the primary (stopping
    # the receiver instead would not do: the kernel's socket buffers would still hand the
    # standby everything once it runs again).
    postmaster=$(head -n 1 "$PAIR_DIR/$primary/postmaster.pid")
    sender=$(ps -o pid=,args= --ppid "$postmaster" | awk '/walsender/ { print $1; exit }')
    if [ -n "$sender" ]; then kill -STOP "$sender"; fi
    sleep "$(awk "BEGIN { print $lag_ms / 1000 }")"
fi
if [ -n "$sender" ]; then
    # Immediate stop; the stopped sender is killed so it sends nothing more.
    $PAIR_AS "$PG_BIN/pg_ctl" -D "$PAIR_DIR/$primary" -m immediate -W stop >/dev/null
    kill -KILL "$sender" || true
    tries=600
    while kill -0 "$postmaster" 2>/dev/null && [ "$tries" -gt 0 ]; do
        tries=$(( tries - 1 )); sleep 0.05
    done
else
    $PAIR_AS "$PG_BIN/pg_ctl" -D "$PAIR_DIR/$primary" -m immediate -w -t 60 stop >/dev/null
fi
$PAIR_AS "$PG_BIN/pg_ctl" -D "$PAIR_DIR/$standby" -w -t 60 promote >/dev/null
echo "$standby" > "$PAIR_DIR/primary"
echo "$(date +%s.%N) failover: $primary (port $pport) stopped, $standby (port $sport) promoted, lag ${lag_ms} ms" >> "$PAIR_DIR/failovers.log"
# A new standby where the old primary was.
rm -rf "${PAIR_DIR:?}/$primary"
$PAIR_AS "$PG_BIN/pg_basebackup" -h 127.0.0.1 -p "$sport" -U postgres -D "$PAIR_DIR/$primary" \
    -R -X stream -c fast
$PAIR_AS "$PG_BIN/pg_ctl" -D "$PAIR_DIR/$primary" -l "$PAIR_DIR/$primary.log" -w -t 60 \
    -o "-p $pport $PAIR_OPTS" start >/dev/null
echo "$(date +%s.%N) rebuilt: $primary (port $pport) streams from $standby" >> "$PAIR_DIR/failovers.log"
