#!/usr/bin/env bash
# scripts/gpu/check.sh's plans (CHECK_PLAN) and scripts/gpu/call.sh, without a
# GPU: the plans tests, train, targets and rest split every step but the
# profiles between them (none left out, none run twice), targets holds the
# rows the GPU targets are judged by, CHECK_STEPS narrows a plan, and bad
# plan names or a missing bundle end with one line and a non-zero exit.
# usage: gpu_plans.sh CHECK_SH   (call.sh is found beside it)
set -euo pipefail
CHECK=$1
CALL="$(dirname "$CHECK")/call.sh"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
list() { CHECK_PLAN="$1" bash "$CHECK" --list; }

bash "$CHECK" --list | sort > "$WORK/all"
[[ $(wc -l < "$WORK/all") -ge 60 ]] || fail "check.sh --list lists $(wc -l < "$WORK/all") steps"
[[ -z $(uniq -d "$WORK/all") ]] || fail "step names used twice: $(uniq -d "$WORK/all")"
for p in tests train targets rest; do
  list $p | sort > "$WORK/$p"
  [[ -s "$WORK/$p" ]] || fail "plan $p selects nothing"
done
sort "$WORK"/{tests,train,targets,rest} > "$WORK/union"
[[ -z $(uniq -d "$WORK/union") ]] || fail "steps in two plans: $(uniq -d "$WORK/union" | tr '\n' ' ')"
diff "$WORK/all" "$WORK/union" || fail "the plans do not cover every step (diff above)"

[[ $(cat "$WORK/tests") == gpu_tests ]] || fail "plan tests: $(cat "$WORK/tests")"
for s in nccl.np1 staged.np2 nccl_timeout.np1 consumer.gpu.np1 train.cpu.references train.lenet.cuda \
         train.device.auto train.layout.auto train.lenet.graph train.keras.graph.vs.eager compare.lenet compare.clip; do
  grep -qx "$s" "$WORK/train" || fail "plan train lacks $s"
done
printf '%s\n' bench.floor bench.convnet.lockstep.bf16.nhwc bench.convnet.lockstep.bf16.nhwc.graph \
  bench.convnet.torch.eager.bf16 bench.convnet.torch.eager.bf16.nhwc bench.resnet50.lockstep.bf16.nhwc \
  bench.resnet50.lockstep.bf16.nhwc.graph bench.resnet50.torch.eager.bf16 bench.resnet50.torch.eager.bf16.nhwc |
  sort > "$WORK/targets.want"
diff "$WORK/targets.want" "$WORK/targets" || fail "plan targets (diff above: want, got)"
[[ $(list profile | sort | tr '\n' ' ') == "profile.resnet50.lockstep.bf16.nhwc profile.resnet50.torch.bf16.nhwc " ]] ||
  fail "plan profile: $(list profile | tr '\n' ' ')"

# CHECK_STEPS narrows a plan.
CHECK_STEPS='fp16' list rest > "$WORK/rest.fp16"
[[ -s "$WORK/rest.fp16" ]] || fail "rest with CHECK_STEPS=fp16 selects nothing"
while read -r s; do
  [[ $s == *fp16* ]] && grep -qx "$s" "$WORK/rest" || fail "rest with CHECK_STEPS=fp16 selects $s"
done < "$WORK/rest.fp16"

# Bad plan names: one line, exit 2.
set +e
out=$(CHECK_PLAN=bogus bash "$CHECK" --list 2>&1); rc=$?
set -e
[[ $rc -eq 2 && $(wc -l <<< "$out") -eq 1 && $out == *"CHECK_PLAN=bogus: not a plan"* ]] || fail "check.sh bogus plan: rc $rc: $out"
for args in "bogus" "$WORK/r verify bogus" "--list bogus"; do
  set +e
  # shellcheck disable=SC2086
  out=$(bash "$CALL" $args 2>&1); rc=$?
  set -e
  [[ $rc -eq 2 && $(wc -l <<< "$out") -eq 1 ]] || fail "call.sh $args: rc $rc: $out"
done
[[ ! -e "$WORK/r" ]] || fail "call.sh with a bad plan made its results directory"

# call.sh --list: a call plan's steps, verify being tests and train.
bash "$CALL" --list verify targets > "$WORK/call.list"
[[ $(grep -c '^verify: ' "$WORK/call.list") -eq $(($(wc -l < "$WORK/tests") + $(wc -l < "$WORK/train"))) ]] ||
  fail "call.sh --list verify: $(grep -c '^verify: ' "$WORK/call.list") steps"
[[ $(grep -c '^targets: ' "$WORK/call.list") -eq 9 ]] || fail "call.sh --list targets"

# No bundle: both halves of verify fail at start, saying so; call.sh exits
# non-zero and still leaves its results file.
set +e
out=$(CHECK_BUNDLE="$WORK/no-bundle" bash "$CALL" "$WORK/results" verify 2>&1); rc=$?
set -e
echo "$out"
[[ $rc -ne 0 ]] || fail "call.sh without a bundle exited 0"
[[ $(grep -c "check.sh: no bundle at $WORK/no-bundle" <<< "$out") -eq 2 ]] || fail "the missing bundle is not named twice"
[[ -s "$WORK/results/results-verify.tgz" ]] || fail "no results file"
echo "ok"
