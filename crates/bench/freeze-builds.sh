#!/bin/sh
# Runs a benchmark command with every other build on this machine paused (on a shared
# 2-core machine a build beside the run would skew its figures): SIGSTOP to each cargo,
# rustc, cc1*, ld*, clippy-driver, rustdoc and
# cargo-nextest process that exists when it starts, SIGCONT to the same processes when the
# command ends (or this script is interrupted). Processes started later are not touched.
#   crates/bench/freeze-builds.sh target/release/lease-bench --only anchors
set -u
[ "$#" -gt 0 ] || { echo "usage: $0 COMMAND [ARGS]..." >&2; exit 2; }
self=$$
pids=""
# Process names as the kernel keeps them (at most 15 characters; pgrep refuses longer patterns).
builds=$(ps -eo pid=,comm= | awk '$2 ~ /^(cargo|rustc|cc1|cc1plus|ld|ld\.bfd|ld\.gold|ld\.lld|clippy-driver|rustdoc|cargo-nextest)$/ { print $1 }')
for pid in $builds; do
    [ "$pid" = "$self" ] && continue
    kill -STOP "$pid" 2>/dev/null && pids="$pids $pid"
done
resume() {
    for pid in $pids; do kill -CONT "$pid" 2>/dev/null; done
}
trap resume EXIT
trap 'exit 130' INT TERM
echo "freeze-builds: paused$(echo "$pids" | wc -w | sed 's/^/ /') processes; load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
"$@"
