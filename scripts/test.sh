#!/usr/bin/env bash
# The test command of the README: everything, on a fresh machine, in one
# command. It installs what the tests need from the OS packages (strace,
# for the syscall fault-injection tests), then checks formatting, vets
# every module, and runs every test with the race detector.
set -euo pipefail
cd "$(dirname "$0")/.."

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

unformatted=$(gofmt -l $(git ls-files '*.go'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi
go vet ./...
(cd bench && go vet ./...)
go test -race "$@" ./...
# Nested modules with their own dependencies (OpenTelemetry, Prometheus).
for m in idemotel examples/service; do
  (cd "$m" && go vet ./... && go test -race "$@" ./...)
done
