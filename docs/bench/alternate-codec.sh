#!/usr/bin/env bash
# Runs AltsRecordCodecBenchmark's pinless, grpc-alts and bare native rows at one frame size as
# single forks in turn (pinless decode, grpc-alts decode, native decrypt, then the same for
# encoding), round after round, and prints each round's ratios: pinless over grpc-alts and
# pinless over the bare native call. On this shared machine the speed drifts over minutes, and
# one JMH run with -f N runs all of a row's forks before the next row's, so the rows of a round
# are compared with each other, and the median over the rounds is the figure.
#
#   mvn -q -Ptools,jmh -DskipTests package
#   bash docs/bench/alternate-codec.sh [rounds (6)] [frameSize (16384)]
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds="${1:-6}"
size="${2:-16384}"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT

# One fork of one row; prints its ops/s.
fork() {
  java -jar tools/target/benchmarks.jar "AltsRecordCodecBenchmark.$1\$" -p frameSize="$size" \
      -f 1 -rf csv -rff "$out/$1.csv" > "$out/$1.log" 2>&1
  awk -F, -v row="$1" '$1 ~ row"\"$" { print $5 }' "$out/$1.csv"
}

echo "frame $size B; ops/s per row, ratios pinless/grpc-alts and pinless/native"
echo "round  pinless  grpc-alts  native  dec-ratio  dec-of-native | pinless  grpc-alts  native  enc-ratio  enc-of-native"
for i in $(seq 1 "$rounds"); do
  pd=$(fork pinlessDecode); sd=$(fork stockDecode); nd=$(fork nativeDecrypt)
  pe=$(fork pinlessEncode); se=$(fork stockEncode); ne=$(fork nativeEncrypt)
  awk -v i="$i" -v pd="$pd" -v sd="$sd" -v nd="$nd" -v pe="$pe" -v se="$se" -v ne="$ne" '
    BEGIN {
      printf "%5d  %7.0f  %9.0f  %6.0f  %9.3f  %13.3f | %7.0f  %9.0f  %6.0f  %9.3f  %13.3f\n",
          i, pd, sd, nd, pd / sd, pd / nd, pe, se, ne, pe / se, pe / ne
    }'
done
