#!/usr/bin/env bash
# The gRPC references of tests/interop/test_grpc.py, from Maven Central, all pinned:
#  - Apache RocketMQ's gRPC proxy 5.3.3 (rocketmq-proxy): its runtime classpath in
#    tests/interop/proxy/target/classpath.txt (run as ProxyStartup -pm cluster);
#  - Apache's Java 5.x SDK (rocketmq-client-java 5.2.0, the newest 5.x) and JavaSdkSuite in
#    tests/interop/grpc-java/target.
# Java and Maven come from 10-interop.sh. Offline first (~/.m2), else Maven Central (twice).
set -euo pipefail
cd "$(dirname "$0")/../../tests/interop"
build() {  # dir goals...
  local dir=$1; shift
  (cd "$dir" && { mvn -o -q -B "$@" >/dev/null 2>&1 || mvn -q -B "$@" || { sleep 5; mvn -q -B "$@"; }; }
   test -s target/classpath.txt)
}
build proxy dependency:build-classpath
build grpc-java compile dependency:build-classpath
echo "gRPC references ready" >&2
