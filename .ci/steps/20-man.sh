#!/usr/bin/env bash
# man(1) and groff, so tests/inspect/test_man.py can check that `man -l` renders the pages.
set -euo pipefail
if command -v man >/dev/null 2>&1 && command -v groff >/dev/null 2>&1; then
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq --no-install-recommends man-db groff-base >/dev/null
