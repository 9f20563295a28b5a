#!/usr/bin/env bash
# The GPU checks, in one command, on a GPU machine without our Debian
# dependencies (the project's lent H100/H200: CUDA driver, nvcc, PyTorch 2.11
# whose Python packages carry cuDNN 9, NCCL 2 and cuBLAS; no package registry).
#
#   scripts/gpu/pack.sh                      (development machine: builds .gpu-bundle/)
#   scripts/gpu/check.sh OUT_DIR [BUNDLE]    (GPU machine, from the repository root)
#
# Uses the bundle's binaries, shared libraries and relocated Open MPI; finds the
# CUDA libraries in PyTorch's Python packages (or /usr/local/cuda). Runs the GPU
# tests (parity of every GPU op with its CPU op, the CUDA runtime layer), the
# NCCL tests at N=1 and the MPI-staged tests with 2 ranks sharing the GPU.
# Writes OUT_DIR/summary.txt (one line per step: PASS/FAIL/SKIP, seconds) and a
# log per step; exits non-zero when any step failed.
set -uo pipefail
OUT="${1:?usage: check.sh OUT_DIR [BUNDLE]}"
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
B="$(cd "${2:-$ROOT/.gpu-bundle}" 2>/dev/null && pwd)" || { echo "check.sh: no bundle at ${2:-$ROOT/.gpu-bundle} (run scripts/gpu/pack.sh on a development machine and carry it)" >&2; exit 2; }
mkdir -p "$OUT"
SUMMARY="$OUT/summary.txt"
# pack.sh leaves bundle.tar.xz: unpack it next to a scratch copy (the carried
# folder may be read-only).
if [[ -f "$B/bundle.tar.xz" ]]; then
  U="$(mktemp -d /tmp/lockstep-bundle.XXXXXX)"
  tar -C "$U" -xJf "$B/bundle.tar.xz" || { echo "check.sh: cannot unpack $B/bundle.tar.xz" >&2; exit 2; }
  B="$U"
fi
: > "$SUMMARY"

# CUDA libraries: the first directory holding each soname wins.
cuda_dirs=()
for so in libcudnn.so.9 libnccl.so.2 libcublas.so.13 libcublasLt.so.13; do
  d=""
  for base in /usr/local/cuda/lib64 $(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null); do
    f="$(find "$base/" -name "$so" 2>/dev/null | head -1)"
    if [[ -n "$f" ]]; then d="$(dirname "$f")"; break; fi
  done
  if [[ -z "$d" ]]; then echo "check.sh: $so not found (PyTorch's nvidia packages or /usr/local/cuda)" | tee -a "$SUMMARY" >&2; exit 2; fi
  [[ " ${cuda_dirs[*]} " == *" $d "* ]] || cuda_dirs+=("$d")
done
cuda_path="$(IFS=:; echo "${cuda_dirs[*]}")"

export LD_LIBRARY_PATH="$B/lib:$cuda_path${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export OPAL_PREFIX="$B/openmpi" PMIX_INSTALL_PREFIX="$B/openmpi"
export OMPI_MCA_mca_base_component_path="$B/openmpi/lib/x86_64-linux-gnu/openmpi/lib/openmpi3"
export PMIX_MCA_mca_base_component_path="$B/openmpi/lib/x86_64-linux-gnu/pmix2/lib/pmix"
export PATH="$B/openmpi/bin:$B/bin:$PATH"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none

{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit: $(cat "$B/COMMIT" 2>/dev/null || echo unknown)"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | sed 's/^/gpu: /'
  echo "cuda libraries: $cuda_path"
} | tee "$OUT/environment.txt"

failed=0
# step NAME COMMAND...: runs with a log; exit 77 counts as SKIP.
step() {
  local name="$1"; shift
  local t0=$SECONDS rc
  "$@" > "$OUT/$name.log" 2>&1
  rc=$?
  local verdict=PASS
  if (( rc == 77 )); then verdict=SKIP; elif (( rc != 0 )); then verdict="FAIL (exit $rc)"; failed=1; fi
  printf '%-28s %-16s %4ds\n' "$name" "$verdict" $((SECONDS - t0)) | tee -a "$SUMMARY"
}

step gpu_tests        gpu_tests --durations yes
step nccl.np1         mpirun -np 1 gpu_mpi_tests "[nccl]"
step staged.np2       mpirun -np 2 gpu_mpi_tests "[staged]"
step nccl_timeout.np1 mpirun -np 1 gpu_mpi_tests "[nccl_timeout]"

echo "check.sh: $(grep -c PASS "$SUMMARY") passed, $(grep -c FAIL "$SUMMARY") failed, $(grep -c SKIP "$SUMMARY") skipped; logs in $OUT" | tee -a "$SUMMARY"
exit $failed
