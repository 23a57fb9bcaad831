//! NumPy `.npy`/`.npz` through the command line, as `../shared/NUMPY.md`
//! specifies it: the fixtures numpy itself wrote (`tests/data/numpy`, made by
//! `scripts/make_numpy_fixtures.py`, described by its `MANIFEST.json`) and
//! hostile inputs built here from bytes. Every check runs the binary with
//! `--json`; no test needs Python.
//!
//! This file holds the shared helpers: running a verb, the manifest, the
//! checks every refusal must pass, a minimal `.npy` reader and writer.

pub(crate) mod fixtures;
mod folder;
mod hostile;
mod layouts;
mod refused;
mod zips;

use crate::exe::OutputOnceMore as _;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde_json::Value;

/// What one run of the binary gave: its exit code and its one JSON document.
struct Outcome {
    code: i32,
    doc: Value,
}

/// Runs `tensorscope ARGS` (in `cwd` when given). Every run must end without
/// a panic and print exactly one JSON document on stdout.
fn tensorscope(cwd: Option<&Path>, args: &[&OsStr]) -> Outcome {
    let mut cmd = crate::exe::command();
    cmd.args(args);
    if let Some(dir) = cwd {
        cmd.current_dir(dir);
    }
    let out = cmd.output_once_more().expect("run tensorscope");
    let shown = args
        .iter()
        .map(|a| a.to_string_lossy())
        .collect::<Vec<_>>()
        .join(" ");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains("panicked"),
        "tensorscope {shown} panicked: {stderr}"
    );
    let doc = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!("tensorscope {shown}: stdout is not one JSON document ({e}): {stdout:?} / {stderr}")
    });
    Outcome {
        code: out.status.code().unwrap_or(-1),
        doc,
    }
}

/// `tensorscope VERB FILE REST... --json`.
fn verb_in(cwd: Option<&Path>, verb: &str, file: &Path, rest: &[&OsStr]) -> Outcome {
    let mut args: Vec<&OsStr> = vec![OsStr::new(verb), file.as_os_str()];
    args.extend_from_slice(rest);
    args.push(OsStr::new("--json"));
    tensorscope(cwd, &args)
}

fn info(file: &Path) -> Outcome {
    verb_in(None, "info", file, &[])
}

fn validate(file: &Path) -> Outcome {
    verb_in(None, "validate", file, &[])
}

fn stats(file: &Path, options: &[&str]) -> Outcome {
    let rest: Vec<&OsStr> = options.iter().map(OsStr::new).collect();
    verb_in(None, "stats", file, &rest)
}

fn export(file: &Path, tensor: &str, out: &Path) -> Outcome {
    verb_in(
        None,
        "export",
        file,
        &[OsStr::new(tensor), OsStr::new("-o"), out.as_os_str()],
    )
}

fn resave(file: &Path, out: &Path) -> Outcome {
    verb_in(None, "resave", file, &[OsStr::new("-o"), out.as_os_str()])
}

fn diff(a: &Path, b: &Path) -> Outcome {
    verb_in(None, "diff", a, &[b.as_os_str()])
}

// ------------------------------------------------------------ the manifest

/// The folder of the numpy-made fixtures.
fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/numpy")
}

/// `tests/data/numpy/MANIFEST.json`, read once.
fn manifest() -> &'static Value {
    static MANIFEST: OnceLock<Value> = OnceLock::new();
    MANIFEST.get_or_init(|| {
        let path = data_dir().join("MANIFEST.json");
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        serde_json::from_str(&text).expect("MANIFEST.json is JSON")
    })
}

/// The manifest's file entries that Tensorscope must read (`refused` false)
/// or refuse (`refused` true).
fn manifest_files(refused: bool) -> Vec<&'static Value> {
    let files: Vec<&Value> = manifest()["files"]
        .as_array()
        .expect("files")
        .iter()
        .filter(|f| f["refused"].as_bool() == Some(refused))
        .collect();
    assert!(!files.is_empty(), "the manifest lists no such file");
    files
}

/// The path of a manifest file entry.
fn fixture_path(entry: &Value) -> PathBuf {
    data_dir().join(entry["file"].as_str().expect("file"))
}

/// The arrays of a manifest file entry.
fn arrays(entry: &Value) -> &[Value] {
    entry["arrays"].as_array().expect("arrays")
}

/// The names Tensorscope may give a manifest array: its `name`, and the
/// `also_accepted_names` where NUMPY.md leaves room.
fn accepted_names(array: &Value) -> Vec<&str> {
    let mut names = vec![array["name"].as_str().expect("name")];
    if let Some(more) = array["also_accepted_names"].as_array() {
        names.extend(more.iter().filter_map(Value::as_str));
    }
    names
}

/// The entry of `list` (objects with a `name`) that is manifest array `array`.
fn find_named<'a>(list: &'a Value, array: &Value, what: &str) -> &'a Value {
    let names = accepted_names(array);
    list.as_array()
        .unwrap_or_else(|| panic!("{what}: no list in {list}"))
        .iter()
        .find(|t| t["name"].as_str().is_some_and(|n| names.contains(&n)))
        .unwrap_or_else(|| panic!("{what}: no tensor named {names:?} in {list}"))
}

/// The array's bytes in C order, little-endian, when the manifest holds them
/// (`c_le_hex`, for arrays under 4 KB).
fn expected_bytes(array: &Value) -> Option<Vec<u8>> {
    array["c_le_hex"].as_str().map(unhex)
}

pub(crate) fn unhex(hex: &str) -> Vec<u8> {
    assert!(hex.len().is_multiple_of(2), "odd hex length");
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex digit"))
        .collect()
}

/// A manifest shape as `u64`s.
fn shape_of(array: &Value) -> Vec<u64> {
    array["shape"]
        .as_array()
        .expect("shape")
        .iter()
        .map(|d| d.as_u64().expect("dimension"))
        .collect()
}

/// A document's `shape` as `u64`s.
fn doc_shape(v: &Value) -> Vec<u64> {
    v["shape"]
        .as_array()
        .unwrap_or_else(|| panic!("no shape in {v}"))
        .iter()
        .map(|d| d.as_u64().expect("dimension"))
        .collect()
}

/// The `.npy` descr an export of `dtype` must have: little-endian, BOOL as
/// `bool`, C64 as `complex64`, the others their own type.
pub(crate) fn export_descr(dtype: &str) -> &'static str {
    match dtype {
        "BOOL" => "|b1",
        "U8" => "|u1",
        "I8" => "|i1",
        "U16" => "<u2",
        "U32" => "<u4",
        "U64" => "<u8",
        "I16" => "<i2",
        "I32" => "<i4",
        "I64" => "<i8",
        "F16" => "<f2",
        "F32" => "<f4",
        "F64" => "<f8",
        "C64" => "<c8",
        other => panic!("no numpy dtype for {other}"),
    }
}

// ------------------------------------------------------------ .npy bytes

/// An exported `.npy`, read minimally: its descr, shape and data.
pub(crate) struct ExportedNpy {
    pub(crate) descr: String,
    pub(crate) shape: Vec<u64>,
    pub(crate) data: Vec<u8>,
}

fn text_between<'a>(text: &'a str, start: &str, end: &str) -> &'a str {
    let i = text
        .find(start)
        .unwrap_or_else(|| panic!("no {start:?} in {text:?}"))
        + start.len();
    let j = text[i..]
        .find(end)
        .unwrap_or_else(|| panic!("no {end:?} after {start:?} in {text:?}"))
        + i;
    &text[i..j]
}

/// Reads an exported `.npy`: magic, version 1.0 or 2.0, a C-order header with
/// a little-endian (or byte-order-free) descr.
pub(crate) fn read_exported_npy(path: &Path) -> ExportedNpy {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(bytes.len() >= 12, "{}: too short", path.display());
    assert_eq!(&bytes[..6], b"\x93NUMPY", "{}: magic", path.display());
    let (len, start) = match (bytes[6], bytes[7]) {
        (1, 0) => (usize::from(u16::from_le_bytes([bytes[8], bytes[9]])), 10),
        (2, 0) => (
            u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
            12,
        ),
        other => panic!("{}: version {other:?}", path.display()),
    };
    let end = start + len;
    let text = std::str::from_utf8(&bytes[start..end]).expect("ASCII header");
    assert!(
        text.contains("'fortran_order': False"),
        "{}: not C order: {text}",
        path.display()
    );
    let descr = text_between(text, "'descr': '", "'").to_owned();
    assert!(
        descr.starts_with('<') || descr.starts_with('|'),
        "{}: descr {descr}",
        path.display()
    );
    let shape = text_between(text, "'shape': (", ")")
        .split(',')
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .map(|d| d.parse().expect("dimension"))
        .collect();
    ExportedNpy {
        descr,
        shape,
        data: bytes[end..].to_vec(),
    }
}

/// A `.npy` image: magic, `version`, the header length in the width the
/// version uses (2 bytes for 1.x, 4 otherwise), `header` as given, `data`.
fn npy_bytes(version: (u8, u8), header: &[u8], data: &[u8]) -> Vec<u8> {
    let mut out = b"\x93NUMPY".to_vec();
    out.extend_from_slice(&[version.0, version.1]);
    if version.0 == 1 {
        out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    } else {
        out.extend_from_slice(&(header.len() as u32).to_le_bytes());
    }
    out.extend_from_slice(header);
    out.extend_from_slice(data);
    out
}

/// A well-formed `.npy` as numpy writes it: format 1.0, the dict padded with
/// spaces and a newline so that the data starts on a 64-byte boundary.
fn npy_file(descr: &str, shape: &str, data: &[u8]) -> Vec<u8> {
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    while !(10 + header.len() + 1).is_multiple_of(64) {
        header.push(' ');
    }
    header.push('\n');
    npy_bytes((1, 0), header.as_bytes(), data)
}

/// `n` little-endian f32 values 0.5, 1.5, 2.5, ...
fn f32_data(n: usize) -> Vec<u8> {
    (0..n)
        .flat_map(|i| (i as f32 + 0.5).to_le_bytes())
        .collect()
}

// --------------------------------------------------------- refusals

/// The files directly in `dir`.
fn files_in(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .expect("read_dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect()
}

/// `{"error": {"kind", "message", "path"}}`.
fn assert_error_document(o: &Outcome, what: &str) {
    let e = &o.doc["error"];
    assert!(
        e["kind"].is_string() && e["message"].is_string() && e["path"].is_string(),
        "{what}: not an error document {{kind, message, path}}: {}",
        o.doc
    );
}

/// `validate`'s answer for a file it refuses: exit 1 or 2, `valid: false`,
/// an error with a kind and a message. Returns the message.
fn assert_invalid(o: &Outcome, what: &str) -> String {
    assert!(
        o.code == 1 || o.code == 2,
        "{what}: validate exit {}: {}",
        o.code,
        o.doc
    );
    assert_eq!(o.doc["valid"], false, "{what}: {}", o.doc);
    let e = &o.doc["error"];
    assert!(
        e["kind"].is_string() && e["message"].is_string(),
        "{what}: validate error {{kind, message}}: {}",
        o.doc
    );
    assert!(
        e["path"].is_string() || o.doc["path"].is_string(),
        "{what}: validate names no path: {}",
        o.doc
    );
    e["message"].as_str().unwrap_or_default().to_owned()
}

/// Runs every verb on `file` (in `cwd` when given) and checks what NUMPY.md
/// asks of a refusal: one error document each, exit 2 (`validate` 1 or 2
/// with `valid: false`), no tensor listed, and no output file nor temporary
/// file left in the output folder. `tensor` is the name `export` is asked
/// for. Returns `validate`'s message.
fn assert_refused_by_every_verb(file: &Path, tensor: &str, cwd: Option<&Path>) -> String {
    let what = file.display().to_string();
    let out_dir = tempfile::tempdir().expect("tempdir");
    let good = data_dir().join("le_f4.npy");

    let o = verb_in(cwd, "info", file, &[]);
    assert_eq!(o.code, 2, "{what}: info: {}", o.doc);
    assert_error_document(&o, &format!("{what}: info"));
    assert!(
        o.doc["tensors"].as_array().is_none_or(Vec::is_empty),
        "{what}: info lists tensors of a refused file: {}",
        o.doc
    );

    let message = assert_invalid(&verb_in(cwd, "validate", file, &[]), &what);

    let o = verb_in(cwd, "stats", file, &[]);
    assert_eq!(o.code, 2, "{what}: stats: {}", o.doc);
    assert_error_document(&o, &format!("{what}: stats"));

    let npy = out_dir.path().join("out.npy");
    let o = verb_in(
        cwd,
        "export",
        file,
        &[OsStr::new(tensor), OsStr::new("-o"), npy.as_os_str()],
    );
    assert_eq!(o.code, 2, "{what}: export: {}", o.doc);
    assert_error_document(&o, &format!("{what}: export"));

    let st = out_dir.path().join("out.safetensors");
    let o = verb_in(cwd, "resave", file, &[OsStr::new("-o"), st.as_os_str()]);
    assert_eq!(o.code, 2, "{what}: resave: {}", o.doc);
    assert_error_document(&o, &format!("{what}: resave"));

    let o = verb_in(cwd, "diff", file, &[good.as_os_str()]);
    assert_eq!(o.code, 2, "{what}: diff: {}", o.doc);
    assert_error_document(&o, &format!("{what}: diff"));
    let o = verb_in(cwd, "diff", &good, &[file.as_os_str()]);
    assert_eq!(o.code, 2, "{what}: diff (second): {}", o.doc);
    assert_error_document(&o, &format!("{what}: diff (second)"));

    assert!(
        !npy.exists() && !st.exists(),
        "{what}: an output was written"
    );
    let left = files_in(out_dir.path());
    assert!(left.is_empty(), "{what}: files left behind: {left:?}");
    message
}

/// Writes `bytes` to `dir/name` and returns the path.
fn write_file(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    path
}
