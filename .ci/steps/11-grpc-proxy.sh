#!/usr/bin/env bash
# Apache RocketMQ's gRPC proxy 5.3.3 (org.apache.rocketmq:rocketmq-proxy from Maven Central), the
# reference beside serve's gRPC endpoint: its runtime classpath in tests/interop/proxy/target/classpath.txt.
# Java and Maven come from 10-interop.sh. Offline first (~/.m2), else Maven Central (twice).
set -euo pipefail
cd "$(dirname "$0")/../../tests/interop/proxy"
goals=(-q -B dependency:build-classpath)
mvn -o "${goals[@]}" >/dev/null 2>&1 || mvn "${goals[@]}" || { sleep 5; mvn "${goals[@]}"; }
test -s target/classpath.txt
echo "grpc proxy classpath ready" >&2
