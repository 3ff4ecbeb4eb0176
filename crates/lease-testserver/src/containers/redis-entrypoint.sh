#!/bin/sh
# Entrypoint of the locally built Redis test image (lease-testserver, see docs/decisions/0047-workspace-tests-and-release.md
# "Test servers and containers"). Arguments starting with `-` are options of redis-server,
# as in the official image. The server binds 127.0.0.1 unless the arguments say otherwise
# (the tests pass `--port PORT --bind 127.0.0.1`); it logs to stdout, where
# testcontainers-modules' `Redis` waits for "Ready to accept connections".
set -eu

case "${1:-}" in
    -*|'') set -- redis-server "$@" ;;
esac

if [ "$1" = redis-server ]; then
    shift
    exec /usr/bin/redis-server --bind 127.0.0.1 --protected-mode yes --dir /data "$@"
fi
exec "$@"
