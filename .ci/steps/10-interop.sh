#!/usr/bin/env bash
# Third-party software the interop tests (tests/interop) run against, all pinned:
#  - Apache RocketMQ 5.3.3 from Maven Central (rocketmq-common/-client/-broker/-namesrv/-tools), built
#    into tests/interop/java/target with its classpath in target/classpath.txt, and 5.5.0 the same
#    way into target-5.5.0;
#  - npm ali-ons 3.12.0 (tests/interop/node, from package-lock.json);
#  - PyPI rocketmq 0.4.4 and rocketmq-python-cvs 2.1.0.3 (Apache's C++ client 1.x / 2.1.0, each with
#    its librocketmq.so), each in its own --target dir under tests/interop/pylib (both are `rocketmq`).
# Idempotent and non-interactive; a second run reuses ~/.m2, node_modules and pylib.
set -euo pipefail
cd "$(dirname "$0")/../.."
IOP=tests/interop
t0=$(date +%s)

need_apt=()
command -v java >/dev/null && command -v javac >/dev/null || need_apt+=(openjdk-17-jdk-headless)
command -v mvn >/dev/null || need_apt+=(maven)
command -v node >/dev/null || need_apt+=(nodejs)
command -v npm >/dev/null || need_apt+=(npm)
if [ ${#need_apt[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

# Java: offline first (CI reuses ~/.m2 on this machine), else fetch from Maven Central (twice).
(
  cd "$IOP/java"
  goals=(-q -B compile dependency:build-classpath)
  mvn -o "${goals[@]}" >/dev/null 2>&1 || mvn "${goals[@]}" || { sleep 5; mvn "${goals[@]}"; }
  test -s target/classpath.txt
  # the same programs against the newest 5.x whose artifacts Maven Central serves whole (5.5.1's
  # client is not served): target-5.5.0, for the replication tests (tests/interop/test_ha_interop.py)
  second=(-Drocketmq.version=5.5.0 "-Dinterop.build.dir=$PWD/target-5.5.0" "${goals[@]}")
  mvn -o "${second[@]}" >/dev/null 2>&1 || mvn "${second[@]}" || { sleep 5; mvn "${second[@]}"; }
  test -s target-5.5.0/classpath.txt
)

# ali-ons: exactly what package-lock.json says.
if [ "$(node -p "try{require('./$IOP/node/node_modules/ali-ons/package.json').version}catch(e){''}")" != "3.12.0" ]; then
  (cd "$IOP/node" && npm ci --no-audit --no-fund --loglevel=error)
fi

# C++ clients: wheels/sdists that ship librocketmq.so; no compiler needed.
install_cpp() {  # dir requirement distname
  if ! ls "$IOP/pylib/$1"/"$3"-*.dist-info >/dev/null 2>&1; then
    rm -rf "$IOP/pylib/$1"
    python3 -m pip install -q --no-deps --target "$IOP/pylib/$1" "$2"
  fi
}
install_cpp cpp1 rocketmq==0.4.4 rocketmq
install_cpp cpp2 rocketmq-python-cvs==2.1.0.3 rocketmq_python_cvs

echo "interop installs ready in $(( $(date +%s) - t0 )) s" >&2
