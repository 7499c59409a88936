#!/usr/bin/env bash
# Runs ReadPathBenchmark as single forks that alternate between the variants (pinless, stock,
# pinless, stock, ...) and prints, per pair, pinless's throughput over stock's and both variants'
# CPU and heap per payload byte. On a shared machine whose speed drifts over minutes, alternating
# forks compares each pinless fork with the stock fork beside it, where one JMH run with -f N
# runs all of pinless's forks before any of stock's.
#
#   mvn -q -Ptools,jmh -DskipTests package
#   bash docs/bench/alternate-forks.sh [pairs (4)] [messageBytes (1048576)] [more JMH options]
#
# WI=n sets the warm-up iterations (3 s each; default 3). On two cores the JIT is still compiling
# well after 9 s and takes CPU from the event loops; WI=10 gives it 30 s.
set -euo pipefail
cd "$(dirname "$0")/../.."
pairs="${1:-4}"
bytes="${2:-1048576}"
shift $(( $# > 2 ? 2 : $# ))
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT

# One fork of one variant; prints "payload-bytes/s cpu-ns/s heap-bytes/op" from JMH's CSV.
fork() {
  java -jar tools/target/benchmarks.jar ReadPathBenchmark -p variant="$1" -p messageBytes="$bytes" \
      -f 1 -wi "${WI:-3}" -i 4 -prof gc -rf csv -rff "$out/$1.csv" "${@:2}" > "$out/$1.log" 2>&1
  awk -F, '
    /downloadSixteenMebibytes:payloadBytes"/ { pay = $5 }
    /downloadSixteenMebibytes:cpuNanos"/ { cpu = $5 }
    /downloadSixteenMebibytes:gc.alloc.rate.norm"/ { heap = $5 }
    END { print pay, cpu, heap }' "$out/$1.csv"
}

echo "pair  pinless MB/s  stock MB/s  ratio  CPU ns/B pinless/stock  heap B/B pinless/stock"
for i in $(seq 1 "$pairs"); do
  read -r pp pc ph < <(fork pinless "$@")
  read -r sp sc sh < <(fork stock "$@")
  awk -v i="$i" -v pp="$pp" -v pc="$pc" -v ph="$ph" -v sp="$sp" -v sc="$sc" -v sh="$sh" '
    BEGIN {
      op = 16 * 1048576
      printf "%4d  %12.0f  %10.0f  %5.2f  %8.3f / %-8.3f  %8.5f / %.5f\n",
          i, pp / 1e6, sp / 1e6, pp / sp, pc / pp, sc / sp, ph / op, sh / op
    }'
done
