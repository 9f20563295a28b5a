#!/usr/bin/env bash
# Installs every Debian package lockstep needs to build, test and train on the CPU.
# Idempotent: prints nothing and touches nothing when everything is already there.
# The CUDA toolkit (nvcc, cuDNN, NCCL) is not a Debian package here; it is found
# under /usr/local/cuda when present and is optional (LOCKSTEP_CUDA=AUTO).
set -euo pipefail

# python3-torch (PyTorch 1.13 CPU) is the reference for the interop test
# (PyTorch loads our safetensors weights) and the side-by-side benchmarks.
PACKAGES=(
  build-essential cmake pkg-config git
  openmpi-bin libopenmpi-dev
  libspdlog-dev libfmt-dev libcxxopts-dev catch2
  libopenblas-dev zlib1g-dev nlohmann-json3-dev
  dataset-fashion-mnist
  python3 python3-numpy python3-venv python3-torch
  openssh-server openssh-client iproute2 util-linux procps   # cluster tests: namespace hosts with sshd
  slurm-wlm slurm-wlm-basic-plugins munge libpmix2            # cluster tests: a local SLURM (srun --mpi=pmix)
  clang libclang-rt-dev libomp-dev                            # fuzzing (scripts/fuzz.sh): clang, libFuzzer, OpenMP
  r-cran-janeaustenr python3-regex                            # GPT-2 tokens of Austen's novels (scripts/data/): the text, the BPE regex
)
# A virtual environment over Debian's python3 (so it sees python3-torch) with
# the reference `safetensors` package and `tensorboard` from PyPI (neither is
# packaged by Debian). The interop tests load our weights and read our event
# files with them; nothing else needs them.
PYENV="$(cd "$(dirname "$0")/.." && pwd)/.pyenv"

pyenv_ready() {
  [[ -x "$PYENV/bin/python" ]] && "$PYENV/bin/python" -c "import safetensors, tensorboard, torch" 2>/dev/null
}

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [[ ${#missing[@]} -eq 0 ]] && pyenv_ready; then exit 0; fi

SUDO=""
if [[ ${#missing[@]} -gt 0 && $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "setup.sh: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  SUDO="sudo"
fi
if [[ ${#missing[@]} -gt 0 ]]; then
  echo "setup.sh: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
if ! pyenv_ready; then
  echo "setup.sh: creating $PYENV with safetensors and tensorboard"
  /usr/bin/python3 -m venv --system-site-packages "$PYENV"
  "$PYENV/bin/pip" install -q --disable-pip-version-check safetensors tensorboard
fi
echo "setup.sh: done"
