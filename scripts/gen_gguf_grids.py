#!/usr/bin/env python3
"""The GGUF lookup tables of Tensorscope's block decoders, from ggml's source.

Reads ggml's `src/ggml-common.h` (GGUF.md, "Lookup tables") and writes the
tables the IQ, IQ4 and FP4 decoders use as Rust `static` arrays, in the words
ggml writes them (u64 grid rows of 8 bytes, u32 rows of 4 bytes), into

    src/format/gguf/dequant/grids.rs       iq2xxs_grid, iq2xs_grid, iq2s_grid,
                                           iq3xxs_grid, iq3s_grid, ksigns_iq2xs,
                                           kmask_iq2xs, kvalues_iq4nl, kvalues_mxfp4
    src/format/gguf/dequant/grids_iq1s.rs  iq1s_grid

(two files: the source-file size limit of the house rules). The header of
each names the source repository, path and commit.

Where gguf-py is importable (run it with the venv of make_gguf_fixtures.py),
every table is also checked against gguf-py's own: the grids gguf-py decodes
from its bit-packed `grid_hex`/`grid_map`, its `ksigns` and its `kvalues`.
A difference is an error (exit 1) and nothing is written.

Plain python3, no dependencies. Usage, from anywhere (paths are relative to
this file):

    # a clone (or bare git directory) of ggml: reads HEAD:src/ggml-common.h
    python3 scripts/gen_gguf_grids.py --git-dir PATH/TO/ggml/.git
    # or a copy of the header, naming its commit
    python3 scripts/gen_gguf_grids.py --header ggml-common.h --commit SHA

    --repo (default ggml-org/ggml) and --path (default src/ggml-common.h) name
    the source in the header; for llama.cpp use --repo ggml-org/llama.cpp
    --path ggml/src/ggml-common.h. --check compares the files on disk with
    what would be written (exit 1 when they differ) instead of writing.
"""

from __future__ import annotations

import argparse
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT_DIR = ROOT / "src" / "format" / "gguf" / "dequant"

# (C name, Rust name, C element type, expected length, words per line, doc)
TABLES = {
    "grids.rs": [
        ("iq2xxs_grid", "IQ2XXS_GRID", "uint64_t", 256, 4,
         "IQ2_XXS: 256 rows of 8 unsigned bytes (0x08, 0x19, 0x2b)."),
        ("iq2xs_grid", "IQ2XS_GRID", "uint64_t", 512, 4,
         "IQ2_XS: 512 rows of 8 unsigned bytes (0x08, 0x19, 0x2b)."),
        ("iq2s_grid", "IQ2S_GRID", "uint64_t", 1024, 4,
         "IQ2_S: 1024 rows of 8 unsigned bytes (0x08, 0x19, 0x2b)."),
        ("iq3xxs_grid", "IQ3XXS_GRID", "uint32_t", 256, 8,
         "IQ3_XXS: 256 rows of 4 unsigned bytes (0x04 to 0x3e)."),
        ("iq3s_grid", "IQ3S_GRID", "uint32_t", 512, 8,
         "IQ3_S: 512 rows of 4 unsigned bytes (0x01 to 0x0f)."),
        ("ksigns_iq2xs", "KSIGNS_IQ2XS", "uint8_t", 128, 16,
         "The sign bytes of a 7-bit sign index (bit 7 makes the count of set bits even)."),
        ("kmask_iq2xs", "KMASK_IQ2XS", "uint8_t", 8, 8,
         "The bit of element `j` of a sign byte."),
        ("kvalues_iq4nl", "KVALUES_IQ4NL", "int8_t", 16, 16,
         "The 16 non-linear values of IQ4_NL and IQ4_XS."),
        ("kvalues_fp4", "KVALUES_MXFP4", "int8_t", 16, 16,
         "The 16 e2m1 values, doubled, of MXFP4 and NVFP4 (ggml's kvalues_mxfp4)."),
    ],
    "grids_iq1s.rs": [
        ("iq1s_grid", "IQ1S_GRID", "uint64_t", 2048, 4,
         "IQ1_S and IQ1_M: 2048 rows of 8 signed bytes (-1, 0, 1)."),
    ],
}
RUST_TYPE = {"uint64_t": "u64", "uint32_t": "u32", "uint8_t": "u8", "int8_t": "i8"}
WIDTH = {"uint64_t": 16, "uint32_t": 8}  # hex digits of a grid word


def read_source(args) -> tuple[str, str]:
    """The header's text and its commit."""
    if args.git_dir:
        git = ["git", "--git-dir", args.git_dir]
        commit = subprocess.run(git + ["rev-parse", args.rev], check=True,
                                capture_output=True, text=True).stdout.strip()
        text = subprocess.run(git + ["show", f"{commit}:{args.path}"], check=True,
                              capture_output=True, text=True).stdout
        return text, commit
    if not args.commit:
        sys.exit("--header needs --commit (the commit the header was taken from)")
    return pathlib.Path(args.header).read_text(encoding="utf-8"), args.commit


def parse_tables(text: str) -> dict[str, tuple[str, list[int]]]:
    """Every `GGML_TABLE_BEGIN(type, name, size) ... GGML_TABLE_END()` of the
    header: name -> (C type, values), the size checked."""
    defines = dict(re.findall(r"^#define\s+(\w+)\s+(\d+)\s*$", text, re.M))
    text = re.sub(r"//[^\n]*", "", text)
    tables: dict[str, tuple[str, list[int]]] = {}
    pattern = re.compile(
        r"^GGML_TABLE_BEGIN\(\s*(\w+)\s*,\s*(\w+)\s*,\s*(\w+)\s*\)(.*?)^GGML_TABLE_END\(\)",
        re.M | re.S)
    for ctype, name, size, body in pattern.findall(text):
        size = int(defines.get(size, size), 0)
        values = [int(v, 0) for v in re.findall(r"-?(?:0x[0-9a-fA-F]+|\d+)", body)]
        if len(values) != size:
            sys.exit(f"{name}: {len(values)} values for a size of {size}")
        if name in tables and tables[name] != (ctype, values):
            sys.exit(f"{name}: defined twice, differently")
        tables[name] = (ctype, values)
    return tables


def unpack(ctype: str, values: list[int]) -> list[list[int]]:
    """A grid's rows as the decoders read them: byte k of a word is element k
    (signed for the IQ1 grid's 0xff = -1)."""
    width = WIDTH[ctype] // 2
    return [[(w >> (8 * k)) & 0xFF for k in range(width)] for w in values]


def check_against_gguf_py(tables) -> list[str] | None:
    """The differences from gguf-py's own tables, or None without gguf-py."""
    try:
        import numpy as np
        from gguf import quants
    except ImportError:
        return None
    problems = []
    grids = [("iq2xxs_grid", quants.IQ2_XXS), ("iq2xs_grid", quants.IQ2_XS),
             ("iq2s_grid", quants.IQ2_S), ("iq3xxs_grid", quants.IQ3_XXS),
             ("iq3s_grid", quants.IQ3_S), ("iq1s_grid", quants.IQ1_S),
             ("iq1s_grid", quants.IQ1_M)]
    for name, cls in grids:
        cls.init_grid()
        theirs = np.asarray(cls.grid, dtype=np.float32).reshape(cls.grid_shape)
        ctype, values = tables[name]
        rows = unpack(ctype, values)
        if name == "iq1s_grid":
            rows = [[b - 256 if b >= 128 else b for b in r] for r in rows]
        ours = np.array(rows, dtype=np.float32)
        if ours.shape != theirs.shape or ours.tobytes() != theirs.tobytes():
            problems.append(f"{name} differs from gguf-py's {cls.__name__} grid")
    if bytes(tables["ksigns_iq2xs"][1]) != quants.IQ2_XXS.ksigns:
        problems.append("ksigns_iq2xs differs from gguf-py's IQ2_XXS.ksigns")
    if tables["kmask_iq2xs"][1] != [1 << j for j in range(8)]:
        problems.append("kmask_iq2xs is not the 8 single bits gguf-py shifts out")
    if tuple(tables["kvalues_iq4nl"][1]) != tuple(quants.IQ4_NL.kvalues):
        problems.append("kvalues_iq4nl differs from gguf-py's IQ4_NL.kvalues")
    for cls in (quants.MXFP4, quants.NVFP4):
        if tuple(tables["kvalues_fp4"][1]) != tuple(cls.kvalues):
            problems.append(f"kvalues_fp4 differs from gguf-py's {cls.__name__}.kvalues")
    return problems


def render(file: str, tables, source: str) -> str:
    lines = [
        "//! Lookup tables of the GGUF block decoders (GGUF.md, \"Lookup tables\"),",
        "//! the words exactly as ggml's `ggml-common.h` writes them: byte `k` of",
        "//! a grid word (`word >> (8 * k)`) is element `k` of its row.",
        "//!",
        f"//! Source: {source[0]},",
        f"//! {source[1]}.",
        "//! Generated by scripts/gen_gguf_grids.py, do not edit.",
        "",
        "#![allow(clippy::unreadable_literal)]",
    ]
    for cname, rname, ctype, length, per_line, doc in TABLES[file]:
        got_type, values = tables[cname]
        if got_type != ctype or len(values) != length:
            sys.exit(f"{cname}: {got_type}[{len(values)}], expected {ctype}[{length}]")
        rtype = RUST_TYPE[ctype]
        if ctype in WIDTH:
            words = [f"0x{v:0{WIDTH[ctype]}x}" for v in values]
        else:
            words = [str(v) for v in values]
        lines += ["", f"/// ggml's `{cname}`. {doc}", "#[rustfmt::skip]",
                  f"pub(super) static {rname}: [{rtype}; {length}] = ["]
        for at in range(0, length, per_line):
            lines.append("    " + ", ".join(words[at:at + per_line]) + ",")
        lines.append("];")
    return "\n".join(lines) + "\n"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--git-dir", help="ggml's git directory (reads REV:PATH)")
    src.add_argument("--header", help="a copy of ggml-common.h (needs --commit)")
    p.add_argument("--rev", default="HEAD")
    p.add_argument("--commit")
    p.add_argument("--repo", default="ggml-org/ggml")
    p.add_argument("--path", default="src/ggml-common.h")
    p.add_argument("--check", action="store_true")
    args = p.parse_args()

    text, commit = read_source(args)
    if not re.fullmatch(r"[0-9a-f]{40}", commit):
        sys.exit(f"not a full commit id: {commit!r}")
    tables = parse_tables(text)
    missing = [t[0] for ts in TABLES.values() for t in ts if t[0] not in tables]
    if missing:
        sys.exit(f"not in the header: {', '.join(missing)}")

    problems = check_against_gguf_py(tables)
    if problems is None:
        print("gguf-py not importable: tables not checked against it", file=sys.stderr)
    elif problems:
        for line in problems:
            print(line, file=sys.stderr)
        return 1
    else:
        print("every table equals gguf-py's", file=sys.stderr)

    source = (f"https://github.com/{args.repo}, {args.path}", f"commit {commit}")
    stale = []
    for file in TABLES:
        out = OUT_DIR / file
        text = render(file, tables, source)
        if args.check:
            if not out.exists() or out.read_text(encoding="utf-8") != text:
                stale.append(str(out.relative_to(ROOT)))
        else:
            out.write_text(text, encoding="utf-8")
            print(f"wrote {out.relative_to(ROOT)}", file=sys.stderr)
    for name in stale:
        print(f"{name} differs from what the header gives", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
