#!/usr/bin/env bash
# scripts/gpu/race_summary.py (check.sh's summary of the convolution races) on
# a log written here in the trainer's format (ops/conv/conv2d_cuda.cu's report
# lines among other output): per direction the races, the plans that won, the
# engines left out (disagreeing or not running) and the legacy time against
# the kept one (an engine entering twice with other knobs; a line from before
# the kept time was logged, read by the race's least-time rule; the legacy
# algorithm left out by the accurate reference, a plan kept); every
# outcome (a plan kept, the legacy kept, every plan left out, no plan, a
# retry, no memory) counted; a race timed without the host gate counted;
# and a one-line answer when no log has race lines.
# usage: race_summary.sh SCRIPT
set -euo pipefail
SCRIPT=$1
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

L='conv2d (cuda) [1024, 128, 28, 28] -> [128, 28, 28], kernel 5x5 stride 1 pad 2, bf16 nhwc'
cat > "$WORK/bench.convnet.lockstep.bf16.nhwc.log" <<LOG
model: 1,014,922 parameters
$L, forward: legacy algorithm 1 2 ms; engine 7 0.5 ms; engine 9 1.5 ms; engine 7 0.75 ms; kept engine 7 (0.5 ms)
$L, backward filter: legacy algorithm 3 5.92 ms; engine 17 left out (disagreement 0.0625); engine 20 0.93 ms; engine 5 left out (did not run: CUDNN_STATUS_NOT_SUPPORTED); engine 20 1.4 ms; kept engine 20
$L, backward data: legacy algorithm 1 1 ms; engine 4 1.25 ms; timed with the host's launch cost (a run waited for the stream); kept the legacy algorithm (1 ms)
$L, forward: reference algorithm 1, legacy algorithm 0 3 ms; engine 8 2.5 ms; the legacy algorithm left out (disagreement 0.139); kept engine 8 (2.5 ms)
$L, backward data: legacy algorithm 1; engine 4 left out (disagreement inf); kept the legacy algorithm
$L, forward: legacy algorithm 0; no graph-API plan passes the rules
$L, backward filter: legacy algorithm 3 gave an inf or NaN; the next call races again
$L, forward: legacy algorithm 1; no memory to race the plans (out of GPU memory on cuda:0 ...)
benchmark: convnet ...
LOG
echo "no races here" > "$WORK/bench.convnet.torch.eager.log"

out=$(python3 "$SCRIPT" "$WORK")
echo "$out"
[[ $out == "bench.convnet.lockstep.bf16.nhwc:"* ]] || fail "no heading for the lockstep log"
[[ $out != *"torch.eager"* ]] || fail "a log without race lines got a section"
grep -qE '^  forward +4 races, a plan won +2,  1 left out,  2 untimed; legacy +5\.000 ms -> kept +3\.000 ms$' <<< "$out" ||
  fail "forward line"
grep -qE '^  backward data +2 races, a plan won +0,  1 left out,  1 untimed; legacy +1\.000 ms -> kept +1\.000 ms$' <<< "$out" ||
  fail "backward data line"
grep -qE '^  backward filter +2 races, a plan won +1,  2 left out,  1 untimed; legacy +5\.920 ms -> kept +0\.930 ms$' <<< "$out" ||
  fail "backward filter line"
grep -qE '^  all +8 races, a plan won +3,  4 left out,  4 untimed; legacy +11\.920 ms -> kept +4\.930 ms$' <<< "$out" ||
  fail "total line"
grep -qE "^  1 race timed with the host's launch cost \(the gate timed out\)$" <<< "$out" || fail "ungated line"

rm "$WORK/bench.convnet.lockstep.bf16.nhwc.log"
out=$(python3 "$SCRIPT" "$WORK")
[[ $out == "race_summary.py: no convolution race lines"* ]] || fail "no race lines: $out"
set +e; out=$(python3 "$SCRIPT" "$WORK/missing" 2>&1); rc=$?; set -e
[[ $rc -ne 0 && $out == *"usage: race_summary.py"* ]] || fail "a missing directory (exit $rc): $out"
echo "ok"
