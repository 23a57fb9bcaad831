#!/usr/bin/env python3
"""Checks a macOS bundle laid out by scripts/bundle-macos, and the Windows
icon beside it, without a Mac: the Info.plist is well-formed and says what
the bundle holds; every extension Tensorscope opens
(format::CHECKPOINT_EXTENSIONS, read from src/format/mod.rs) reaches a
CFBundleDocumentTypes entry, its own types through their exported UTIs,
types other programs own (HDF5) through imported UTIs, and the generic
ones (.bin, .json) through public.data and public.json; the identifiers of
the lists agree; a type is at rank Owner only when it is exported and not
all its extensions are shared with other programs (platform::desktop::
CONTAINERS' shared_extensions, read from src/platform/desktop/mod.rs),
else at Alternate; the icon files hold the PNGs they declare. Standard
library only.

Usage: scripts/check_macos_bundle.py APP_DIR (the Tensorscope.app folder).
Exits 1 with one line per problem.
"""

import plistlib
import re
import struct
import sys
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Extensions too generic to declare a type for: the type that covers them.
GENERIC = {"bin": "public.data", "json": "public.json"}
# Content types a document type may list besides the exported ones.
GENERIC_TYPES = {"public.data", "public.json", "public.folder"}
# ICNS element types holding a PNG, and the side each holds.
ICNS_SIDES = {
    b"icp4": 16, b"icp5": 32, b"icp6": 64, b"ic07": 128, b"ic08": 256,
    b"ic09": 512, b"ic10": 1024, b"ic11": 32, b"ic12": 64, b"ic13": 256,
    b"ic14": 512,
}


def checkpoint_extensions():
    """format::CHECKPOINT_EXTENSIONS, from its source."""
    source = (ROOT / "src/format/mod.rs").read_text()
    m = re.search(r"CHECKPOINT_EXTENSIONS: &\[&str\] = &\[(.*?)\];", source, re.S)
    if not m:
        raise SystemExit("check_macos_bundle: CHECKPOINT_EXTENSIONS not found in src/format/mod.rs")
    return re.findall(r'"([^"]+)"', m.group(1))


def shared_extensions():
    """Every platform::desktop::CONTAINERS entry's shared_extensions."""
    source = (ROOT / "src/platform/desktop/mod.rs").read_text()
    lists = re.findall(r"shared_extensions: &\[(.*?)\]", source, re.S)
    if not lists:
        raise SystemExit("check_macos_bundle: no shared_extensions in src/platform/desktop/mod.rs")
    return {ext for body in lists for ext in re.findall(r'"([^"]+)"', body)}


def cargo_version():
    m = re.search(r'^version = "([^"]+)"$', (ROOT / "Cargo.toml").read_text(), re.M)
    return m.group(1) if m else None


def png_side(data, what, problems):
    """The side of a square RGBA PNG whose chunks and pixels check out."""
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        problems.append(f"{what}: not a PNG")
        return None
    at, idat, size = 8, b"", None
    while at + 12 <= len(data):
        (n,) = struct.unpack(">I", data[at:at + 4])
        kind, body = data[at + 4:at + 8], data[at + 8:at + 8 + n]
        (crc,) = struct.unpack(">I", data[at + 8 + n:at + 12 + n])
        if zlib.crc32(kind + body) & 0xFFFFFFFF != crc:
            problems.append(f"{what}: bad CRC in {kind!r}")
            return None
        if kind == b"IHDR":
            size = struct.unpack(">II", body[:8])
        elif kind == b"IDAT":
            idat += body
        at += 12 + n
    if size is None or size[0] != size[1]:
        problems.append(f"{what}: not a square image")
        return None
    try:
        pixels = zlib.decompress(idat)
    except zlib.error as e:
        problems.append(f"{what}: image data does not inflate ({e})")
        return None
    if len(pixels) != (4 * size[0] + 1) * size[1]:
        problems.append(f"{what}: {len(pixels)} bytes of pixels for {size[0]}x{size[1]} RGBA")
        return None
    return size[0]


def check_icns(path, problems):
    data = path.read_bytes()
    if data[:4] != b"icns" or struct.unpack(">I", data[4:8])[0] != len(data):
        problems.append(f"{path}: not an ICNS file of its length")
        return
    at, seen = 8, set()
    while at < len(data):
        kind = data[at:at + 4]
        (n,) = struct.unpack(">I", data[at + 4:at + 8])
        if n < 8 or at + n > len(data):
            problems.append(f"{path}: element {kind!r} runs past the end")
            return
        if kind in ICNS_SIDES:
            side = png_side(data[at + 8:at + n], f"{path} {kind.decode()}", problems)
            if side is not None and side != ICNS_SIDES[kind]:
                problems.append(f"{path}: {kind.decode()} is {side} px, not {ICNS_SIDES[kind]}")
            seen.add(kind)
        at += n
    for kind in (b"icp4", b"ic07", b"ic08", b"ic09", b"ic10"):
        if kind not in seen:
            problems.append(f"{path}: no {kind.decode()} image")


def check_ico(path, problems):
    data = path.read_bytes()
    reserved, kind, count = struct.unpack("<HHH", data[:6])
    if (reserved, kind) != (0, 1) or count == 0:
        problems.append(f"{path}: not an ICO file")
        return
    sides = []
    for i in range(count):
        w, h, _, _, planes, bits, size, offset = struct.unpack(
            "<BBBBHHII", data[6 + 16 * i:22 + 16 * i])
        side = png_side(data[offset:offset + size], f"{path} #{i}", problems)
        declared = w or 256
        if side is not None and (side != declared or (h or 256) != declared):
            problems.append(f"{path} #{i}: {side} px declared as {w}x{h}")
        sides.append(declared)
    if 256 not in sides or 16 not in sides:
        problems.append(f"{path}: needs 16 and 256 px images, has {sides}")


def main():
    if len(sys.argv) != 2:
        raise SystemExit("usage: check_macos_bundle.py APP_DIR")
    app = Path(sys.argv[1])
    contents = app / "Contents"
    problems = []

    with open(contents / "Info.plist", "rb") as f:
        info = plistlib.load(f)  # raises on a malformed file
    expect = {
        "CFBundleExecutable": "tensorscope",
        "CFBundleIdentifier": "org.tensorscope.Tensorscope",
        "CFBundlePackageType": "APPL",
        "CFBundleShortVersionString": cargo_version(),
        "CFBundleVersion": cargo_version(),
        "NSHighResolutionCapable": True,
    }
    for key, value in expect.items():
        if info.get(key) != value:
            problems.append(f"Info.plist: {key} is {info.get(key)!r}, not {value!r}")
    if not re.fullmatch(r"\d+\.\d+(\.\d+)?", str(info.get("LSMinimumSystemVersion", ""))):
        problems.append("Info.plist: no LSMinimumSystemVersion")
    executable = contents / "MacOS" / info.get("CFBundleExecutable", "")
    if not executable.is_file():
        problems.append(f"the executable {executable} is missing")
    if (contents / "PkgInfo").read_bytes() != b"APPL????":
        problems.append("PkgInfo is not APPL????")
    icon = contents / "Resources" / info.get("CFBundleIconFile", "")
    if not icon.name.endswith(".icns"):
        icon = icon.with_name(icon.name + ".icns")
    if icon.is_file():
        check_icns(icon, problems)
    else:
        problems.append(f"the icon {icon} is missing")
    check_ico(ROOT / "assets/windows/tensorscope.ico", problems)

    # The exported types: unique identifiers, data, with extensions.
    exported = {}
    for decl in info.get("UTExportedTypeDeclarations", []):
        uti = decl.get("UTTypeIdentifier", "")
        if not uti.startswith("org.tensorscope.") or uti in exported:
            problems.append(f"exported type {uti!r}: not a unique org.tensorscope identifier")
        if "public.data" not in decl.get("UTTypeConformsTo", []):
            problems.append(f"exported type {uti}: does not conform to public.data")
        tags = decl.get("UTTypeTagSpecification", {}).get("public.filename-extension", [])
        if not tags:
            problems.append(f"exported type {uti}: no filename extension")
        exported[uti] = [t.lower() for t in tags]

    # The imported types (other programs own them): unique, not ours,
    # data, with extensions, each shared with other programs.
    shared = shared_extensions()
    imported = {}
    for decl in info.get("UTImportedTypeDeclarations", []):
        uti = decl.get("UTTypeIdentifier", "")
        if not uti or uti.startswith("org.tensorscope.") or uti in exported or uti in imported:
            problems.append(f"imported type {uti!r}: not a unique identifier of another owner")
        if "public.data" not in decl.get("UTTypeConformsTo", []):
            problems.append(f"imported type {uti}: does not conform to public.data")
        tags = decl.get("UTTypeTagSpecification", {}).get("public.filename-extension", [])
        if not tags:
            problems.append(f"imported type {uti}: no filename extension")
        for ext in tags:
            if ext.lower() not in shared:
                problems.append(f"imported type {uti}: .{ext} is not a shared extension")
        imported[uti] = [t.lower() for t in tags]

    # The document types: each lists exported, imported or generic types,
    # all as a Viewer; ours at rank Owner unless every extension of the
    # type is shared, the others at Alternate.
    handled = {}
    for doc in info.get("CFBundleDocumentTypes", []):
        if doc.get("CFBundleTypeRole") != "Viewer":
            problems.append(f"document type {doc.get('CFBundleTypeName')}: role is not Viewer")
        for uti in doc.get("LSItemContentTypes", []):
            rank = doc.get("LSHandlerRank")
            if uti in exported:
                want = "Alternate" if set(exported[uti]) <= shared else "Owner"
            elif uti in imported or uti in GENERIC_TYPES:
                want = "Alternate"
            else:
                problems.append(f"document type lists {uti}, neither exported nor generic")
                continue
            if rank != want:
                problems.append(f"document type of {uti}: rank {rank}, not {want}")
            handled[uti] = rank
    for uti in [*exported, *imported]:
        if uti not in handled:
            problems.append(f"declared type {uti} has no document type")

    # Every extension the explorer opens reaches a document type.
    declared = {ext: uti for uti, exts in [*exported.items(), *imported.items()] for ext in exts}
    for ext in checkpoint_extensions():
        uti = declared.get(ext) or GENERIC.get(ext)
        if uti is None:
            problems.append(f".{ext}: opened by Tensorscope but declared by no type")
        elif uti not in handled:
            problems.append(f".{ext}: its type {uti} has no document type")
    for ext in declared:
        if ext not in checkpoint_extensions():
            problems.append(f".{ext}: declared but not in CHECKPOINT_EXTENSIONS")

    for p in problems:
        print(f"check_macos_bundle: {p}", file=sys.stderr)
    if problems:
        sys.exit(1)
    print(f"check_macos_bundle: {app} is good ({len(exported)} exported types, "
          f"{len(imported)} imported, "
          f"{len(checkpoint_extensions())} extensions covered)")


if __name__ == "__main__":
    main()
