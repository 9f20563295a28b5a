#!/usr/bin/env bash
# Makes GPT-2 token shards of Jane Austen's six novels, offline once GPT-2's
# BPE ranks are at hand:
#
#   scripts/data/prepare_austen.sh OUTDIR [RANKS]
#
# OUTDIR/austen_train.bin, OUTDIR/austen_val.bin  llm.c's shard format (austen_shards.py)
# OUTDIR/gpt2.tiktoken                           the BPE ranks, for the C++ decoder
#
# The text is r-cran-janeaustenr's database (AUSTEN_DIR, by default the Debian
# package's data directory). RANKS (or $GPT2_TIKTOKEN) is a gpt2.tiktoken file
# or an openai-whisper sdist holding whisper/assets/gpt2.tiktoken; without one,
# OUTDIR/gpt2.tiktoken or $CACHE/gpt2.tiktoken is used, else the sdist is
# fetched with pip download into CACHE (LOCKSTEP_CACHE, by default
# ~/.cache/lockstep), which then keeps a copy of the ranks. The ranks are
# checked against their known SHA-256.
# Rerunning rewrites the same bytes. Errors are one line naming the input.
set -euo pipefail

PY=/usr/bin/python3
HERE="$(cd "$(dirname "$0")" && pwd)"
AUSTEN_DIR="${AUSTEN_DIR:-/usr/lib/R/site-library/janeaustenr/data}"
CACHE="${LOCKSTEP_CACHE:-$HOME/.cache/lockstep}"
WHISPER=openai-whisper==20250625
SDIST=openai_whisper-20250625.tar.gz
MEMBER=openai_whisper-20250625/whisper/assets/gpt2.tiktoken
SHA256=306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930  # tiktoken's r50k_base (GPT-2)

die() { echo "prepare_austen.sh: $*" >&2; exit 1; }

[[ $# -ge 1 && $# -le 2 ]] || die "usage: prepare_austen.sh OUTDIR [gpt2.tiktoken or $SDIST]"
OUT="$1"
SOURCE="${2:-${GPT2_TIKTOKEN:-}}"
[[ -x $PY ]] || die "$PY not found (Debian package python3)"
$PY -c "import regex" 2>/dev/null || die "$PY cannot import regex (Debian package python3-regex)"
for f in Rdata.rdx Rdata.rdb; do
  [[ -f $AUSTEN_DIR/$f ]] || die "$AUSTEN_DIR/$f not found (Debian package r-cran-janeaustenr, or set AUSTEN_DIR)"
done
mkdir -p "$OUT" 2>/dev/null || die "$OUT: cannot create"
RANKS="$OUT/gpt2.tiktoken"

ranks_ok() { [[ -f $1 && $(sha256sum < "$1" | cut -d' ' -f1) == "$SHA256" ]]; }

# Copies the ranks from a .tiktoken file or an sdist to $RANKS (via a temporary file).
take_ranks() {
  local src="$1"
  [[ -f $src ]] || die "$src not found (a gpt2.tiktoken file or $SDIST)"
  if [[ $src == *.tar.gz ]]; then
    tar -xzOf "$src" "$MEMBER" > "$RANKS.tmp" 2>/dev/null || die "$src: no $MEMBER in it"
  else
    cp "$src" "$RANKS.tmp"
  fi
  ranks_ok "$RANKS.tmp" || { rm -f "$RANKS.tmp"; die "$src: not GPT-2's ranks (SHA-256 differs)"; }
  mv "$RANKS.tmp" "$RANKS"
}

if [[ -n $SOURCE ]]; then
  [[ $(realpath -m "$SOURCE") == $(realpath -m "$RANKS") ]] && ranks_ok "$RANKS" || take_ranks "$SOURCE"
elif ranks_ok "$RANKS"; then
  :
elif ranks_ok "$CACHE/gpt2.tiktoken"; then
  take_ranks "$CACHE/gpt2.tiktoken"
else
  if [[ ! -f $CACHE/$SDIST ]]; then
    mkdir -p "$CACHE" 2>/dev/null || die "$CACHE: cannot create"
    echo "prepare_austen.sh: fetching $WHISPER's sdist into $CACHE (pip download)"
    $PY -m pip download -q --disable-pip-version-check --no-deps --no-binary :all: "$WHISPER" -d "$CACHE" >/dev/null 2>&1 ||
      die "$CACHE/$SDIST: pip download $WHISPER failed (give RANKS or GPT2_TIKTOKEN for an offline copy)"
  fi
  take_ranks "$CACHE/$SDIST"
fi
# A copy in the cache too, where the next OUTDIR and the tests (tests/data/) find it.
ranks_ok "$CACHE/gpt2.tiktoken" || { mkdir -p "$CACHE" && cp "$RANKS" "$CACHE/gpt2.tiktoken"; } 2>/dev/null || true

$PY "$HERE/gpt2_bpe.py" --self-check "$RANKS" >/dev/null || die "$RANKS: the BPE self-check fails"
$PY "$HERE/austen_shards.py" "$RANKS" "$OUT" --austen-dir "$AUSTEN_DIR"
