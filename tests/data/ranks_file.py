"""Where the data tests find GPT-2's ranks: $GPT2_TIKTOKEN (a gpt2.tiktoken file or
the openai-whisper sdist), else gpt2.tiktoken or the sdist in the cache that
scripts/data/prepare_austen.sh fills (LOCKSTEP_CACHE, by default ~/.cache/lockstep)."""
import os
import tarfile

SDIST = "openai_whisper-20250625.tar.gz"
MEMBER = "openai_whisper-20250625/whisper/assets/gpt2.tiktoken"
SCRIPTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "data")


def find_ranks(tmpdir):
    """A path to gpt2.tiktoken (extracted into tmpdir from an sdist), or None."""
    cache = os.environ.get("LOCKSTEP_CACHE") or os.path.expanduser("~/.cache/lockstep")
    for p in (os.environ.get("GPT2_TIKTOKEN"), os.path.join(cache, "gpt2.tiktoken"), os.path.join(cache, SDIST)):
        if not p or not os.path.isfile(p):
            continue
        if not p.endswith(".tar.gz"):
            return p
        with tarfile.open(p) as t:
            out = os.path.join(tmpdir, "gpt2.tiktoken")
            with open(out, "wb") as f:
                f.write(t.extractfile(MEMBER).read())
            return out
    return None
