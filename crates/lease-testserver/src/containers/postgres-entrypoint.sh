#!/bin/sh
# Entrypoint of the locally built PostgreSQL test image (lease-testserver, see
# docs/decisions/0047-workspace-tests-and-release.md). It follows the official image's contract as
# far as testcontainers-modules' `Postgres` relies on it:
#   POSTGRES_USER (default postgres), POSTGRES_PASSWORD, POSTGRES_DB (default: the user),
#   POSTGRES_HOST_AUTH_METHOD (trust, or password auth with POSTGRES_PASSWORD);
#   arguments starting with `-` are options of `postgres`;
#   the first start initialises PGDATA and runs a temporary server on the Unix socket only,
#   whose log goes to stdout, then the real server logs to stderr: the module waits for
#   "database system is ready to accept connections" on both.
# Only shell builtins and the PostgreSQL binaries are used (the image has nothing else).
# TCP: 127.0.0.1 only (listen_addresses below); the port comes from `-p PORT`.
set -eu

: "${PGDATA:=/var/lib/postgresql/data}"
export PGDATA
user=${POSTGRES_USER:-postgres}
db=${POSTGRES_DB:-$user}
auth=${POSTGRES_HOST_AUTH_METHOD:-scram-sha-256}
sockets=/var/lib/postgresql

case "${1:-}" in
    -*|'') set -- postgres "$@" ;;
esac

if [ "$1" = postgres ] && [ ! -s "$PGDATA/PG_VERSION" ]; then
    if [ "$auth" = trust ]; then
        initdb -D "$PGDATA" -U "$user" -A trust -E UTF8 --no-locale --no-sync
    else
        if [ -z "${POSTGRES_PASSWORD:-}" ]; then
            echo "POSTGRES_PASSWORD is required unless POSTGRES_HOST_AUTH_METHOD=trust" >&2
            exit 1
        fi
        printf '%s\n' "$POSTGRES_PASSWORD" > "$sockets/pwfile"
        initdb -D "$PGDATA" -U "$user" --pwfile="$sockets/pwfile" --auth-local=trust \
            --auth-host="$auth" -E UTF8 --no-locale --no-sync
        : > "$sockets/pwfile"
    fi
    {
        echo "listen_addresses = '127.0.0.1'"
        echo "unix_socket_directories = '$sockets'"
        echo "jit = off"
    } >> "$PGDATA/postgresql.conf"
    # The temporary server: no TCP at all; its log (pg_ctl without -l) goes to stdout.
    pg_ctl -D "$PGDATA" -o "-c listen_addresses=''" -w -t 60 start
    if [ "$db" != postgres ]; then
        psql -X -v ON_ERROR_STOP=1 -h "$sockets" -U "$user" -d postgres \
            -c "CREATE DATABASE \"$db\""
    fi
    pg_ctl -D "$PGDATA" -m fast -w -t 60 stop
fi

exec "$@"
