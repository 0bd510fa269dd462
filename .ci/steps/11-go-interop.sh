#!/usr/bin/env bash
# Apache's Go client (rocketmq-client-go v2.1.2, from the Go module proxy, pinned by go.sum) for the
# request-reply interop test: tests/interop/go builds into tests/interop/go/target/rrgo.
# Idempotent; a second run reuses the module cache. Go itself from Debian when missing.
set -euo pipefail
cd "$(dirname "$0")/../.."
if ! command -v go >/dev/null; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq golang-go >/dev/null
fi
cd tests/interop/go
go build -mod=readonly -o target/rrgo . || { sleep 5; go build -mod=readonly -o target/rrgo .; }
test -x target/rrgo
