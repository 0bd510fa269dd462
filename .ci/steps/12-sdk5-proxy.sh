#!/usr/bin/env bash
# The 5.x Java SDK (rocketmq-client-java 5.2.0) and Apache's proxy 5.3.3 and 5.5.0 (the newest on Maven Central)
# for tests/interop/test_pop_proxy.py, into tests/interop/sdk5/target (classpath.txt, proxy-classpath.txt,
# proxy-latest-classpath.txt). Needs the JDK and
# Maven that 10-interop.sh installs. Idempotent; offline first (a second run reuses ~/.m2).
set -euo pipefail
cd "$(dirname "$0")/../../tests/interop/sdk5"
t0=$(date +%s)
build() {  # mvn arguments
  mvn -o -q -B "$@" >/dev/null 2>&1 || mvn -q -B "$@" || { sleep 5; mvn -q -B "$@"; }
}
build compile dependency:build-classpath
build -f proxy.xml dependency:build-classpath
build -f proxy.xml -Drocketmq.version=5.5.0 -Dclasspath.name=proxy-latest-classpath.txt dependency:build-classpath
test -s target/classpath.txt && test -s target/proxy-classpath.txt && test -s target/proxy-latest-classpath.txt
echo "SDK 5.x and proxy ready in $(( $(date +%s) - t0 )) s" >&2
