#!/usr/bin/env bash
# The test command of the README: everything, on a fresh machine, in one
# command. It installs what the tests need from the OS packages (strace,
# for the syscall fault-injection tests; PostgreSQL, for the pgjournal
# module, started throwaway by scripts/postgres.sh unless IDEM_PG_DSN is
# set; pgbouncer, which one pgjournal test runs in front of it), then
# checks formatting, vets every module (bench/ too, whose benchmarks run only
# by hand: BENCHMARKS.md), and runs every test with the race
# detector.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/modules.sh

if ! command -v strace >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "installing strace (fault-injection tests)"
    apt-get update -qq >/dev/null && apt-get install -y -qq strace >/dev/null
  else
    echo "the fault-injection tests need strace: install it (e.g. sudo apt-get install strace) and run again" >&2
    exit 1
  fi
fi
# A missing strace or a refused ptrace fails those tests instead of
# skipping them.
export IDEM_REQUIRE_STRACE=1

# The PostgreSQL journal's tests need a server: a throwaway one unless
# IDEM_PG_DSN names one. Either way they must run, not skip.
if [ -z "${IDEM_PG_DSN:-}" ]; then
  source scripts/postgres.sh
  trap pg_stop EXIT
  pg_start
fi
export IDEM_REQUIRE_PG=1
# The restart test starts a PostgreSQL of its own: it needs the binaries
# even when IDEM_PG_DSN names an existing server.
if [ -z "${IDEM_PG_BIN:-}" ]; then
  source scripts/postgres.sh
  if b=$(pg_bin); then export IDEM_PG_BIN="$b"; fi
fi
# So does the PgBouncer test, with a pgbouncer of its own.
if [ -z "${IDEM_PGBOUNCER:-}" ]; then
  source scripts/postgres.sh
  IDEM_PGBOUNCER=$(pgbouncer_bin)
  export IDEM_PGBOUNCER
fi

unformatted=$(gofmt -l $(git ls-files '*.go'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi
go vet ./...
(cd bench && go vet ./...)
for m in $NESTED_MODULES; do (cd "$m" && go vet ./...); done

# The nested modules (their own dependencies: OpenTelemetry, Prometheus,
# pgx; PostgreSQL's tests use the server started above) are tested beside
# the root module, not after it: pgjournal's tests, 7 minutes alone, spend
# most of it waiting (call bounds, caller deadlines, lock and statement
# timeouts, leases, PostgreSQL servers of their own stopped and started),
# which left the CPUs idle for minutes of every run. Their log is held
# back and printed after the root module's, whole, so neither interleaves
# with the other; the first module that fails still stops the rest, and
# any failure fails the run.
# -timeout 30m: go test's default 10 minutes is the root package's own
# run time on a loaded 2-CPU runner (it timed out once, healthy).
nested_log=$(mktemp)
(
  for m in $NESTED_MODULES; do
    (cd "$m" && go test -race -timeout 30m "$@" ./...) || exit 1
  done
) >"$nested_log" 2>&1 &
nested=$!
root_rc=0
go test -race -timeout 30m "$@" ./... || root_rc=$?
nested_rc=0
wait "$nested" || nested_rc=$?
cat "$nested_log"
rm -f "$nested_log"
if [ "$root_rc" != 0 ] || [ "$nested_rc" != 0 ]; then exit 1; fi
