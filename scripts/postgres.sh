#!/usr/bin/env bash
# A throwaway PostgreSQL 15 for tests, benchmarks and harnesses.
#
#   source scripts/postgres.sh && pg_start   # exports IDEM_PG_DSN, IDEM_PG_BIN, IDEM_REQUIRE_PG=1
#   ...                                      # run what needs it
#   pg_stop                                  # stops the server, removes its files
#
# pg_start installs PostgreSQL from the OS packages if initdb is missing
# (as root, with apt-get), runs initdb as the postgres user when run as
# root (initdb refuses root), into a fresh mktemp directory, and listens
# only on a unix socket in that directory: nothing on the network. Call
# pg_stop from an EXIT trap.

pg_bin() {
  local d
  for d in "${PG_BIN:-}" /usr/lib/postgresql/15/bin /usr/lib/postgresql/*/bin; do
    if [ -n "$d" ] && [ -x "$d/initdb" ]; then echo "$d"; return 0; fi
  done
  if command -v initdb >/dev/null; then dirname "$(command -v initdb)"; return 0; fi
  return 1
}

# pgbouncer_bin prints the path of pgbouncer (the pgjournal tests run one
# in front of the test server, in transaction mode), installing it from the
# OS packages when missing and run as root with apt-get.
pgbouncer_bin() {
  local b
  for b in "${PGBOUNCER_BIN:-}" "$(command -v pgbouncer 2>/dev/null)" /usr/sbin/pgbouncer; do
    if [ -n "$b" ] && [ -x "$b" ]; then echo "$b"; return 0; fi
  done
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "installing pgbouncer (tests of the PostgreSQL journal behind a pooler)" >&2
    apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq pgbouncer >/dev/null || return 1
    # Only the binary is wanted: not a system service listening on 6432.
    if command -v systemctl >/dev/null; then systemctl disable --now pgbouncer >/dev/null 2>&1 || true; fi
    for b in "$(command -v pgbouncer 2>/dev/null)" /usr/sbin/pgbouncer; do
      if [ -n "$b" ] && [ -x "$b" ]; then echo "$b"; return 0; fi
    done
  fi
  echo "the PostgreSQL journal's tests need pgbouncer: install it (e.g. sudo apt-get install pgbouncer) or set IDEM_PGBOUNCER" >&2
  return 1
}

pg_start() {
  local bin
  if ! bin=$(pg_bin); then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
      echo "installing postgresql (tests of the PostgreSQL journal)"
      apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
      bin=$(pg_bin) || { echo "postgresql installed but initdb not found" >&2; return 1; }
    else
      echo "the PostgreSQL journal's tests need PostgreSQL: install it (e.g. sudo apt-get install postgresql) or set IDEM_PG_DSN" >&2
      return 1
    fi
  fi
  PG_DIR=$(mktemp -d /tmp/idem-pg.XXXXXX)
  local run=()
  if [ "$(id -u)" = 0 ]; then
    chown postgres "$PG_DIR"
    run=(runuser -u postgres --)
  fi
  "${run[@]}" "$bin/initdb" -D "$PG_DIR/data" -U postgres -A trust -E UTF8 --no-locale >"$PG_DIR/initdb.log" 2>&1 \
    || { cat "$PG_DIR/initdb.log" >&2; return 1; }
  # fsync stays on: the journal's durability is what the tests are about.
  "${run[@]}" "$bin/pg_ctl" -D "$PG_DIR/data" -l "$PG_DIR/server.log" -w -t 60 \
    -o "-c listen_addresses='' -c unix_socket_directories='$PG_DIR' -c max_connections=200" start >/dev/null \
    || { cat "$PG_DIR/server.log" >&2; return 1; }
  PG_CTL="$bin/pg_ctl"
  PG_RUN="${run[*]}"
  export IDEM_PG_DSN="postgres://postgres@/postgres?host=$PG_DIR&sslmode=disable"
  export IDEM_REQUIRE_PG=1
  # The restart test (pgjournal's TestPostgresRestart) starts and stops a
  # PostgreSQL of its own with these binaries.
  export IDEM_PG_BIN="$bin"
  if [ -z "${IDEM_PGBOUNCER:-}" ]; then
    IDEM_PGBOUNCER=$(pgbouncer_bin) || return 1
    export IDEM_PGBOUNCER
  fi
  echo "PostgreSQL running in $PG_DIR"
}

pg_stop() {
  if [ -n "${PG_DIR:-}" ] && [ -d "$PG_DIR" ]; then
    $PG_RUN "$PG_CTL" -D "$PG_DIR/data" -m fast -w stop >/dev/null 2>&1 || true
    rm -rf "$PG_DIR"
  fi
  PG_DIR=
}
