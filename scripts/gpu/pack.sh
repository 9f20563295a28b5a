#!/usr/bin/env bash
# Packs what scripts/gpu/check.sh needs on a GPU machine that has CUDA, cmake
# and PyTorch (with cuDNN/NCCL/cuBLAS in its Python packages) but none of our
# Debian dependencies and no package registry. Run on a development machine:
#
#   scripts/gpu/pack.sh [BUNDLE_DIR]      (default: .gpu-bundle, git-ignored)
#
# The directory is packed into BUNDLE_DIR/bundle.tar.xz next to an unpacked
# check.sh; only that file need travel (carry BUNDLE_DIR): check.sh unpacks it.
#
# It builds the GPU binaries for Hopper (sm_90) in build-gpu/, then copies into
# the bundle: bin/ (the binaries), lib/ (every shared library they load except
# glibc's own and the CUDA libraries, which come from the GPU machine), and
# openmpi/ (mpirun, orted, the MCA and PMIx plugins and help files in Open MPI's
# own relative layout, relocated there with OPAL_PREFIX), and data/: Fashion-MNIST
# (30 MB, already compressed) for the training runs. The bundle must stay under the 64 MiB
# a device call may carry; the script prints its size and fails above 48 MiB.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
BUNDLE="${1:-$ROOT/.gpu-bundle}"
BUILD="${BUILD_DIR:-$ROOT/build-gpu}"
ARCHS="${CUDA_ARCHS:-90}"
TARGETS=(gpu_tests gpu_mpi_tests trainer compare_weights consumer)

mkdir -p "$BUILD"
cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DLOCKSTEP_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$ARCHS" \
  > "$BUILD/configure.log" 2>&1 || { cat "$BUILD/configure.log" >&2; exit 1; }
cmake --build "$BUILD" -j "$(nproc)" --target "${TARGETS[@]}" > "$BUILD/build.log" 2>&1 \
  || { tail -50 "$BUILD/build.log" >&2; exit 1; }

rm -rf "$BUNDLE"
mkdir -p "$BUNDLE/bin" "$BUNDLE/lib"
for t in "${TARGETS[@]}"; do
  f="$(find "$BUILD" -type f -name "$t" -perm -u+x | head -1)"
  [[ -n "$f" ]] || { echo "pack.sh: built target $t not found under $BUILD" >&2; exit 1; }
  cp "$f" "$BUNDLE/bin/"
  strip --strip-unneeded "$BUNDLE/bin/$t"
done

# Open MPI in its installed relative layout (see `ompi_info --path all`).
MPI_LIBDIR=/usr/lib/x86_64-linux-gnu/openmpi/lib
PMIX_DIR=/usr/lib/x86_64-linux-gnu/pmix2
O="$BUNDLE/openmpi"
mkdir -p "$O/bin" "$O/lib/x86_64-linux-gnu/openmpi/lib" "$O/lib/x86_64-linux-gnu/pmix2/lib" "$O/share" "$O/etc"
cp -L /usr/bin/mpirun /usr/bin/orted "$O/bin/"
cp -a "$MPI_LIBDIR/openmpi3" "$O/lib/x86_64-linux-gnu/openmpi/lib/"
cp -a "$PMIX_DIR/lib/pmix" "$O/lib/x86_64-linux-gnu/pmix2/lib/"
cp -a /usr/share/openmpi "$O/share/"
[[ -d /usr/share/pmix ]] && cp -a /usr/share/pmix "$O/share/"
cp -a /etc/openmpi "$O/etc/"

# Shared libraries: the closure of the binaries, mpirun/orted and the plugins,
# minus glibc (the GPU machine's is newer) and CUDA's (its own driver and
# PyTorch's cuDNN/NCCL/cuBLAS are used).
skip='^(linux-vdso|ld-linux|libc\.so|libm\.so|libpthread|libdl\.so|librt\.so|libcuda\.so|libcudnn|libcublas|libnccl|libcudart|libnvidia)'
mapfile -t objs < <(find "$BUNDLE/bin" "$O/bin" "$O/lib" -type f \( -perm -u+x -o -name '*.so*' \))
for obj in "${objs[@]}"; do
  ldd "$obj" 2>/dev/null | awk '$3 ~ /^\// {print $1, $3}' | while read -r name path; do
    [[ "$name" =~ $skip ]] && continue
    [[ -e "$BUNDLE/lib/$name" ]] || cp -L "$path" "$BUNDLE/lib/$name"
  done
done

cp "$ROOT/scripts/gpu/check.sh" "$BUNDLE/"
# Fashion-MNIST for the GPU training runs (already gzip-compressed: kept out of the tar).
mkdir -p "$BUNDLE/data/fashion-mnist"
cp /usr/share/datasets/fashion-mnist/*-ubyte.gz "$BUNDLE/data/fashion-mnist/"
git -C "$ROOT" rev-parse HEAD > "$BUNDLE/COMMIT" 2>/dev/null || echo unknown > "$BUNDLE/COMMIT"

# One compressed file travels (OpenBLAS alone is 36 MB unpacked).
tar -C "$BUNDLE" -cJf "$BUNDLE.tar.xz.tmp" bin lib openmpi COMMIT
rm -rf "${BUNDLE:?}/bin" "$BUNDLE/lib" "$BUNDLE/openmpi"
mv "$BUNDLE.tar.xz.tmp" "$BUNDLE/bundle.tar.xz"
size_kb=$(du -sk "$BUNDLE" | cut -f1)
echo "pack.sh: $BUNDLE is $((size_kb / 1024)) MiB packed (commit $(cut -c1-12 "$BUNDLE/COMMIT"))"
if (( size_kb > 48 * 1024 )); then
  echo "pack.sh: bundle over 48 MiB: a device call carries at most 64 MiB with the working tree" >&2
  exit 1
fi
