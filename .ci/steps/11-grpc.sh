#!/usr/bin/env bash
# The gRPC references of tests/interop/test_grpc.py, from Maven Central, all pinned:
#  - Apache RocketMQ's gRPC proxy 5.3.3 (rocketmq-proxy): its runtime classpath in
#    tests/interop/proxy/target/classpath.txt (run as ProxyStartup -pm cluster);
#  - Apache's Java 5.x SDK (rocketmq-client-java 5.2.0, the newest 5.x) and JavaSdkSuite in
#    tests/interop/grpc-java/target;
#  - Apache's Node.js 5.x SDK (npm rocketmq-client-nodejs 1.0.8) in tests/interop/grpc-node, exactly
#    what its package-lock.json says.
# Java, Maven and Node come from 10-interop.sh. Offline first (~/.m2), else Maven Central (twice).
set -euo pipefail
cd "$(dirname "$0")/../../tests/interop"
build() {  # dir goals...
  local dir=$1; shift
  (cd "$dir" && { mvn -o -q -B "$@" >/dev/null 2>&1 || mvn -q -B "$@" || { sleep 5; mvn -q -B "$@"; }; }
   test -s target/classpath.txt)
}
build proxy dependency:build-classpath
build grpc-java compile dependency:build-classpath
if [ "$(node -p "try{require('./grpc-node/node_modules/rocketmq-client-nodejs/package.json').version}catch(e){''}")" != "1.0.8" ]; then
  (cd grpc-node && npm ci --no-audit --no-fund --loglevel=error)
fi
echo "gRPC references ready" >&2
