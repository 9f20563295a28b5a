#!/usr/bin/python3
"""Jane Austen's six novels from r-cran-janeaustenr's R lazy-load database, read without R.

The package keeps its data in DIR/Rdata.rdx (a gzip- or zlib-compressed R
serialization of list(variables = list(NAME = c(offset, length)), ...)) and
DIR/Rdata.rdb (at each offset: a 4-byte big-endian length, then a compressed
R serialization of the object). This file owns that container and the subset
of R's unserialize (XDR, versions 2 and 3) that data objects use: vectors,
strings with their encodings, pairlists with attributes and tags, symbols,
back-references, ALTREP compact sequences. Each novel is a character vector
of lines; text() joins them with "\\n".

    austen_text.py [--dir DIR] --list            # the six names and line counts
    austen_text.py [--dir DIR] NAME              # one novel's text on stdout
    austen_text.py [--dir DIR] --out OUTDIR      # OUTDIR/NAME.txt for all six
Damaged input: one line on stderr naming the file, exit 1.
"""
import argparse
import bz2
import gzip
import lzma
import os
import struct
import sys
import zlib

DEFAULT_DIR = "/usr/lib/R/site-library/janeaustenr/data"
NOVELS = ("emma", "mansfieldpark", "northangerabbey", "persuasion", "prideprejudice", "sensesensibility")


class RDataError(Exception):
    """Damaged or unsupported input; the message is one line."""


class RObject:
    """An R value: its SEXP type, its data (a list, or bytes for raw) and its attributes."""

    def __init__(self, rtype, value, attrs=None):
        self.rtype, self.value, self.attrs = rtype, value, attrs or {}


class Symbol(str):
    pass


NULL_TYPES = {254: None, 253: "<globalenv>", 252: "<unbound>", 251: "<missing>", 250: "<basenamespace>",
              242: "<emptyenv>", 241: "<baseenv>"}
NA_INTEGER = -(2 ** 31)


class Reader:
    """R's unserialize for the XDR format."""

    def __init__(self, data):
        self.data, self.pos, self.refs = data, 0, []
        self.native = "utf-8"
        if data[:2] != b"X\n":
            raise RDataError(f"not an XDR R serialization (starts {data[:2]!r})")
        self.pos = 2
        version = self.int()
        self.int(), self.int()  # writer's R version, oldest reader's
        if version == 3:
            self.native = self.bytes(self.int()).decode("ascii", "replace")
        elif version != 2:
            raise RDataError(f"serialization version {version} (this reader knows 2 and 3)")

    def bytes(self, n):
        if n < 0 or self.pos + n > len(self.data):
            raise RDataError(f"truncated: {n} bytes wanted at offset {self.pos} of {len(self.data)}")
        b = self.data[self.pos:self.pos + n]
        self.pos += n
        return b

    def int(self):
        return struct.unpack(">i", self.bytes(4))[0]

    def length(self):
        n = self.int()
        if n == -1:  # a long vector: two more ints
            hi, lo = self.int(), self.int()
            n = (hi << 32) + (lo & 0xFFFFFFFF)
        if n < 0 or n > len(self.data):
            raise RDataError(f"bad vector length {n} at offset {self.pos}")
        return n

    def attributes(self, has_attr):
        return self.pairs(self.item()) if has_attr else {}

    @staticmethod
    def pairs(o):
        """A pairlist's cells as {tag: value}."""
        if o is None:
            return {}
        if not isinstance(o, RObject) or o.rtype != 2:
            raise RDataError("attributes are not a pairlist")
        return {str(tag): v for tag, v in o.value}

    def charsxp(self, levels):
        n = self.int()
        if n == -1:
            return None  # NA_character_
        raw = self.bytes(n)
        if levels & 8:
            enc = "utf-8"
        elif levels & 4:
            enc = "latin-1"
        elif levels & 64:
            enc = "ascii"
        elif levels & 2:  # bytes
            enc = "latin-1"
        else:
            enc = self.native
        try:
            return raw.decode(enc)
        except (UnicodeDecodeError, LookupError):
            return raw.decode("latin-1")

    def item(self):
        flags = self.int()
        t, levels = flags & 0xFF, flags >> 12
        has_attr, has_tag = bool(flags & (1 << 9)), bool(flags & (1 << 10))
        if t in NULL_TYPES:
            return NULL_TYPES[t]
        if t == 255:  # REFSXP
            i = (flags >> 8) or self.int()
            if not 1 <= i <= len(self.refs):
                raise RDataError(f"back-reference {i} with {len(self.refs)} objects read")
            return self.refs[i - 1]
        if t == 1:  # SYMSXP
            s = Symbol(self.item() or "")
            self.refs.append(s)
            return s
        if t in (247, 248, 249):  # PERSISTSXP, PACKAGESXP, NAMESPACESXP: a string vector
            self.int()
            o = RObject(t, [self.item() for _ in range(self.length())])
            if t != 247:
                self.refs.append(o)
            return o
        if t == 4:  # ENVSXP
            o = RObject(4, None)
            self.refs.append(o)
            self.int()  # locked
            o.value = {"enclos": self.item(), "frame": self.item(), "hashtab": self.item()}
            o.attrs = self.pairs(self.item())
            return o
        if t in (2, 3, 5, 6, 17):  # LISTSXP, CLOSXP, PROMSXP, LANGSXP, DOTSXP: cons cells
            cells, attrs = [], None
            while True:  # along the cdrs (LISTSXP cells) without recursing
                a = self.attributes(has_attr)
                attrs = a if attrs is None else attrs
                tag = self.item() if has_tag else None
                cells.append((tag, self.item()))
                nxt = self.int()
                if (nxt & 0xFF) == 2:
                    has_attr, has_tag = bool(nxt & (1 << 9)), bool(nxt & (1 << 10))
                    continue
                self.pos -= 4
                tail = self.item()
                if tail is not None:  # a dotted pair
                    cells.append((None, tail))
                return RObject(t, cells, attrs)
        if t == 9:  # CHARSXP
            return self.charsxp(levels)
        if t == 238:  # ALTREP_SXP
            info, state, attr = self.item(), self.item(), self.item()
            o = self.altrep(info, state)
            o.attrs = self.pairs(attr)
            return o
        if t in (10, 13):  # LGLSXP, INTSXP
            n = self.length()
            value = list(struct.unpack(f">{n}i", self.bytes(4 * n)))
        elif t == 14:  # REALSXP
            n = self.length()
            value = list(struct.unpack(f">{n}d", self.bytes(8 * n)))
        elif t == 15:  # CPLXSXP
            n = self.length()
            v = struct.unpack(f">{2 * n}d", self.bytes(16 * n))
            value = [complex(v[2 * i], v[2 * i + 1]) for i in range(n)]
        elif t == 24:  # RAWSXP
            value = self.bytes(self.length())
        elif t in (16, 19, 20):  # STRSXP, VECSXP, EXPRSXP
            value = [self.item() for _ in range(self.length())]
        elif t == 25:  # S4SXP
            value = None
        elif t in (7, 8):  # SPECIALSXP, BUILTINSXP
            value = self.bytes(self.int()).decode("ascii", "replace")
        elif t in (22, 23):  # EXTPTRSXP, WEAKREFSXP
            o = RObject(t, None)
            self.refs.append(o)
            if t == 22:
                o.value = (self.item(), self.item())
            o.attrs = self.attributes(has_attr)
            return o
        else:
            raise RDataError(f"unsupported R object type {t} at offset {self.pos - 4}")
        return RObject(t, value, self.attributes(has_attr))

    def altrep(self, info, state):
        cls = str(info.value[0][1]) if isinstance(info, RObject) and info.value else "?"
        if cls in ("compact_intseq", "compact_realseq"):
            n, first, inc = (int(x) for x in state.value[:3])
            return RObject(13 if cls == "compact_intseq" else 14, [first + i * inc for i in range(n)])
        if cls.startswith("wrap_"):
            return state.value[0]
        if cls == "deferred_string":
            arg = state.value[0][1] if isinstance(state.value[0], tuple) else state.value[0]
            return RObject(16, [str(x) for x in arg.value])
        raise RDataError(f"unsupported ALTREP class {cls}")


def to_python(o):
    """Plain Python: vectors as lists (scalars unwrapped), factors as level strings, lists and
    data frames as dicts when named."""
    if not isinstance(o, RObject):
        return o
    if o.rtype == 13 and "levels" in o.attrs:
        levels = o.attrs["levels"].value
        return [None if i == NA_INTEGER else levels[i - 1] for i in o.value]
    if o.rtype in (2, 19):  # a pairlist or a list (a data frame is a list of columns)
        if o.rtype == 2:
            vals, names = [to_python(v) for _, v in o.value], [t for t, _ in o.value]
        else:
            vals, names = [to_python(v) for v in o.value], to_python(o.attrs.get("names"))
        if names and all(names):
            return dict(zip((str(n) for n in names), vals))
        return vals
    if o.rtype == 10:
        return [None if x == NA_INTEGER else bool(x) for x in o.value]
    return o.value


def decompress_file(blob):
    """An .rds-style file: gzip, bzip2, xz or plain."""
    for magic, f in ((b"\x1f\x8b", gzip.decompress), (b"BZh", bz2.decompress), (b"\xfd7zXZ", lzma.decompress),
                     (b"x", zlib.decompress)):
        if blob.startswith(magic):
            return f(blob)
    return blob


def decompress_entry(blob):
    """One .rdb entry: a plain serialization, or a 4-byte big-endian length then zlib data (or, from
    compress = 2 or 3, a type byte Z/2/X/0 then zlib, bzip2, xz or stored data)."""
    if blob.startswith(b"X\n"):
        return blob
    if len(blob) < 6:
        raise RDataError(f"{len(blob)} bytes, too short for a compressed object")
    want = struct.unpack(">I", blob[:4])[0]
    methods = {b"Z": zlib.decompress, b"2": bz2.decompress, b"X": lzma.decompress, b"0": bytes}
    kind = blob[4:5]
    out = methods[kind](blob[5:]) if kind in methods else zlib.decompress(blob[4:])
    if len(out) != want:
        raise RDataError(f"{len(out)} bytes decompressed, the entry says {want}")
    return out


def read_database(data_dir=DEFAULT_DIR):
    """Every variable in DIR/Rdata.{rdx,rdb}, as plain Python values."""
    base = os.path.join(data_dir, "Rdata")
    path, what = base + ".rdx", "the index"
    try:
        with open(path, "rb") as f:
            index = to_python(Reader(decompress_file(f.read())).item())
        variables = index["variables"]
        path = base + ".rdb"
        with open(path, "rb") as f:
            db = f.read()
        out = {}
        for what, (offset, length) in variables.items():
            blob = db[int(offset):int(offset) + int(length)]
            if len(blob) != int(length):
                raise RDataError(f"{length} bytes at offset {int(offset)}, the file has {len(db)}")
            out[what] = to_python(Reader(decompress_entry(blob)).item())
        return out
    except OSError as e:
        raise RDataError(f"{path}: cannot read ({e.strerror or e})") from None
    except RDataError as e:
        raise RDataError(f"{path}: {what}: {e}") from None
    except (zlib.error, lzma.LZMAError, EOFError) as e:
        raise RDataError(f"{path}: {what}: damaged compressed data ({e})") from None
    except (ValueError, KeyError, TypeError, IndexError, AttributeError, struct.error) as e:
        raise RDataError(f"{path}: {what}: not the R objects expected ({type(e).__name__}: {e})") from None


def read_novels(data_dir=DEFAULT_DIR):
    """{name: list of lines} for the six novels, in NOVELS order."""
    db = read_database(data_dir)
    missing = [n for n in NOVELS if n not in db]
    if missing:
        raise RDataError(f"{os.path.join(data_dir, 'Rdata.rdx')}: no {', '.join(missing)} in the database")
    for n in NOVELS:
        if not isinstance(db[n], list) or not all(isinstance(x, (str, type(None))) for x in db[n]):
            raise RDataError(f"{os.path.join(data_dir, 'Rdata.rdb')}: {n} is not a character vector")
    return {n: ["" if x is None else x for x in db[n]] for n in NOVELS}


def text(lines):
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--dir", default=DEFAULT_DIR, help="the package's data directory (Rdata.rdx, Rdata.rdb)")
    p.add_argument("--list", action="store_true", help="print the novels' names and line counts")
    p.add_argument("--out", help="write OUT/NAME.txt for every novel")
    p.add_argument("name", nargs="?", choices=NOVELS)
    a = p.parse_args()
    try:
        novels = read_novels(a.dir)
    except RDataError as e:
        sys.exit(f"austen_text.py: {e}")
    if a.list:
        for n, lines in novels.items():
            print(f"{n}\t{len(lines)} lines\t{len(text(lines))} characters")
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        for n, lines in novels.items():
            with open(os.path.join(a.out, n + ".txt"), "w", encoding="utf-8") as f:
                f.write(text(lines))
    if a.name:
        sys.stdout.write(text(novels[a.name]))
    if not (a.list or a.out or a.name):
        p.error("give --list, --out OUTDIR or a NAME")


if __name__ == "__main__":
    main()
