#!/usr/bin/env bash
# Apache's Node.js 5.x SDK (npm rocketmq-client-nodejs 1.0.8) for tests/interop/test_grpc.py, in
# tests/interop/grpc-node, exactly what its package-lock.json says. (The proxy and the Java SDK that
# test_grpc.py also uses come from 12-sdk5-proxy.sh.) Node and npm come from 10-interop.sh.
set -euo pipefail
cd "$(dirname "$0")/../../tests/interop/grpc-node"
if [ "$(node -p "try{require('./node_modules/rocketmq-client-nodejs/package.json').version}catch(e){''}")" != "1.0.8" ]; then
  npm ci --no-audit --no-fund --loglevel=error
fi
echo "Node.js 5.x SDK ready" >&2
