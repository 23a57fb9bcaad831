//! `.npz` archives built here with the `zip` crate (NUMPY.md, ".npz rules"
//! and "Hostile inputs, by kind"): valid archives of stored and deflated
//! members, read like any checkpoint by every verb; and hostile ones (a
//! deflated bomb, declared sizes that lie, a wrong CRC-32, path traversal,
//! duplicate names, a text member named `.npy`, a broken central directory,
//! random bytes, a pickled object array), where every run ends with one
//! JSON document, writes nothing but its `-o` target, and never unpickles.
//!
//! Broken headers are made by writing a valid archive in memory and
//! patching the fields of its local file header and central directory
//! entry (no zip64 records: every archive here is small enough without).

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::io::{Cursor, Write};
use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use zip::write::SimpleFileOptions;
use zip::{CompressionMethod, ZipWriter};

use super::{
    ExportedNpy, Outcome, assert_error_document, assert_invalid, assert_refused_by_every_verb,
    diff, export, export_descr, f32_data, files_in, info, npy_file, read_exported_npy, resave,
    stats, validate, verb_in, write_file,
};

// ------------------------------------------------------------ building zips

/// How a member's bytes are kept in the archive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Method {
    Stored,
    Deflated,
}

use Method::{Deflated, Stored};

impl Method {
    fn options(self) -> SimpleFileOptions {
        let method = match self {
            Stored => CompressionMethod::Stored,
            Deflated => CompressionMethod::Deflated,
        };
        SimpleFileOptions::default().compression_method(method)
    }
}

/// An archive of `members` (`name`, method, bytes), in that order, as the
/// `zip` crate writes it to a seekable buffer: sizes and CRC-32 in the
/// local headers, no data descriptors, no zip64 records.
fn npz(members: &[(&str, Method, Vec<u8>)]) -> Vec<u8> {
    let mut zip = ZipWriter::new(Cursor::new(Vec::new()));
    for (name, method, bytes) in members {
        zip.start_file(*name, method.options())
            .unwrap_or_else(|e| panic!("start member {name}: {e}"));
        zip.write_all(bytes)
            .unwrap_or_else(|e| panic!("write member {name}: {e}"));
    }
    zip.finish().expect("finish the archive").into_inner()
}

fn u16_at(bytes: &[u8], at: usize) -> usize {
    usize::from(u16::from_le_bytes([bytes[at], bytes[at + 1]]))
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(bytes[at..at + 4].try_into().expect("four bytes"))
}

fn put_u32(bytes: &mut [u8], at: usize, value: u32) {
    bytes[at..at + 4].copy_from_slice(&value.to_le_bytes());
}

/// Where one member's records lie in an archive.
struct Entry {
    /// Its name, as the central directory spells it.
    name: Vec<u8>,
    /// The offset of its local file header (`PK\x03\x04`): CRC-32 at +14,
    /// compressed size at +18, uncompressed size at +22, name at +30.
    local: usize,
    /// The offset of its central directory entry (`PK\x01\x02`): CRC-32 at
    /// +16, compressed size at +20, uncompressed size at +24, name at +46.
    central: usize,
}

/// The members of an archive with no comment and no zip64 records, read
/// from its end record and central directory.
fn entries(zip: &[u8]) -> Vec<Entry> {
    let end = zip.len() - 22;
    assert_eq!(
        &zip[end..end + 4],
        b"PK\x05\x06",
        "an end record, no comment"
    );
    let count = u16_at(zip, end + 10);
    let mut at = u32_at(zip, end + 16) as usize;
    (0..count)
        .map(|_| {
            assert_eq!(&zip[at..at + 4], b"PK\x01\x02", "a central entry at {at}");
            assert!(
                u32_at(zip, at + 20) != u32::MAX && u32_at(zip, at + 24) != u32::MAX,
                "a zip64 entry: the patches here assume 32-bit sizes"
            );
            let name_len = u16_at(zip, at + 28);
            let local = u32_at(zip, at + 42) as usize;
            assert_eq!(
                &zip[local..local + 4],
                b"PK\x03\x04",
                "a local header at {local}"
            );
            let entry = Entry {
                name: zip[at + 46..at + 46 + name_len].to_vec(),
                local,
                central: at,
            };
            at += 46 + name_len + u16_at(zip, at + 30) + u16_at(zip, at + 32);
            entry
        })
        .collect()
}

/// The one member named `name`.
fn entry(zip: &[u8], name: &str) -> Entry {
    let mut found: Vec<Entry> = entries(zip)
        .into_iter()
        .filter(|e| e.name == name.as_bytes())
        .collect();
    assert_eq!(found.len(), 1, "members named {name}");
    found.remove(0)
}

/// Where a member's (compressed) bytes start: after its local header, its
/// name and its extra field.
fn data_start(zip: &[u8], e: &Entry) -> usize {
    e.local + 30 + u16_at(zip, e.local + 26) + u16_at(zip, e.local + 28)
}

/// The compressed size the central directory gives member `name`.
fn compressed_size(zip: &[u8], name: &str) -> u32 {
    u32_at(zip, entry(zip, name).central + 20)
}

/// The uncompressed size the central directory gives member `name`.
fn declared_size(zip: &[u8], name: &str) -> u32 {
    u32_at(zip, entry(zip, name).central + 24)
}

/// Makes member `name` declare other sizes, in its local header and its
/// central directory entry alike (so the two records agree, as a careful
/// forger would make them).
fn patch_sizes(zip: &mut [u8], name: &str, compressed: Option<u32>, uncompressed: Option<u32>) {
    let e = entry(zip, name);
    if let Some(size) = compressed {
        put_u32(zip, e.local + 18, size);
        put_u32(zip, e.central + 20, size);
    }
    if let Some(size) = uncompressed {
        put_u32(zip, e.local + 22, size);
        put_u32(zip, e.central + 24, size);
    }
}

/// Makes member `name` declare a wrong CRC-32, in both records.
fn patch_crc(zip: &mut [u8], name: &str) {
    let e = entry(zip, name);
    let wrong = u32_at(zip, e.central + 16) ^ 0xDEAD_BEEF;
    put_u32(zip, e.local + 14, wrong);
    put_u32(zip, e.central + 16, wrong);
}

/// Renames member `from` to `to` (same length), in both records: the way
/// to make two members of one name, which the writer refuses to write.
fn rename(zip: &mut [u8], from: &str, to: &str) {
    assert_eq!(from.len(), to.len(), "a rename in place keeps the length");
    let e = entry(zip, from);
    let n = to.len();
    zip[e.local + 30..e.local + 30 + n].copy_from_slice(to.as_bytes());
    zip[e.central + 46..e.central + 46 + n].copy_from_slice(to.as_bytes());
}

/// The length of a format 1.0 `.npy`'s magic, version, length and header:
/// where its data starts.
fn npy_data_offset(npy: &[u8]) -> usize {
    assert_eq!((npy[6], npy[7]), (1, 0), "a format 1.0 .npy");
    10 + u16_at(npy, 8)
}

// ------------------------------------------------------------ checking runs

/// `min`/`max`: exactly `want` (integers as exact JSON integers).
fn assert_exact(got: &Value, want: &Value, what: &str) {
    if want.is_f64() {
        assert_eq!(got.as_f64(), want.as_f64(), "{what}: {got} against {want}");
    } else {
        assert!(
            got.is_i64() || got.is_u64(),
            "{what}: {got} is not an exact integer (expected {want})"
        );
        assert_eq!(got.as_i64(), want.as_i64(), "{what}: {got} against {want}");
    }
}

/// The entry named `name` in a document's `tensors`.
fn named<'a>(doc: &'a Value, name: &str, what: &str) -> &'a Value {
    doc["tensors"]
        .as_array()
        .unwrap_or_else(|| panic!("{what}: no tensors in {doc}"))
        .iter()
        .find(|t| t["name"] == name)
        .unwrap_or_else(|| panic!("{what}: no tensor {name:?} in {doc}"))
}

/// The names in a document's `tensors`.
fn names_in(doc: &Value) -> BTreeSet<String> {
    doc["tensors"]
        .as_array()
        .map(|list| {
            list.iter()
                .filter_map(|t| t["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// What every verb made of one file, whatever its verdict.
struct Runs {
    info: Outcome,
    validate: Outcome,
    stats: Outcome,
    export: Outcome,
    /// The exported array, when `export` succeeded.
    exported: Option<ExportedNpy>,
    resave: Outcome,
    /// `diff` of the file against a byte-for-byte copy of itself (another
    /// path, so both sides are really read).
    diff: Outcome,
}

/// Runs every verb on `file` (`export` asks for `tensor`) and checks what
/// must hold whatever the verdict: each run finishes with exit 0, 1 or 2
/// and one JSON document (`tensorscope` checks there is no panic), exit 2
/// comes with an error document, `validate`'s `valid` agrees with its exit
/// code, and the output folder holds at most the `-o` target of an export
/// or resave that succeeded: no partial output, no temporary file.
fn every_verb(file: &Path, tensor: &str) -> Runs {
    let what = file.display().to_string();
    let out = tempfile::tempdir().expect("tempdir");
    let npy = out.path().join("out.npy");
    let st = out.path().join("out.safetensors");
    let copies = tempfile::tempdir().expect("tempdir");
    let copy = copies.path().join("copy.npz");
    std::fs::copy(file, &copy).expect("copy the archive");

    let runs = Runs {
        info: info(file),
        validate: validate(file),
        stats: stats(file, &[]),
        export: export(file, tensor, &npy),
        exported: None,
        resave: resave(file, &st),
        diff: diff(file, &copy),
    };
    for (verb, o) in [
        ("info", &runs.info),
        ("validate", &runs.validate),
        ("stats", &runs.stats),
        ("export", &runs.export),
        ("resave", &runs.resave),
        ("diff", &runs.diff),
    ] {
        assert!(
            (0..=2).contains(&o.code),
            "{what}: {verb} exit {}: {}",
            o.code,
            o.doc
        );
        if o.code == 2 && verb != "validate" {
            assert_error_document(o, &format!("{what}: {verb}"));
        }
    }
    if runs.validate.code == 0 {
        assert_eq!(
            runs.validate.doc["valid"], true,
            "{what}: {}",
            runs.validate.doc
        );
    } else {
        assert_invalid(&runs.validate, &what);
    }

    let mut allowed = BTreeSet::new();
    if runs.export.code == 0 {
        allowed.insert("out.npy".to_owned());
    } else {
        assert!(
            !npy.exists(),
            "{what}: a failed export left {}",
            npy.display()
        );
    }
    if runs.resave.code == 0 {
        allowed.insert("out.safetensors".to_owned());
    } else {
        assert!(
            !st.exists(),
            "{what}: a failed resave left {}",
            st.display()
        );
    }
    let left: BTreeSet<String> = files_in(out.path()).into_iter().collect();
    assert!(
        left.is_subset(&allowed),
        "{what}: files in the output folder: {left:?}"
    );
    Runs {
        exported: (runs.export.code == 0).then(|| read_exported_npy(&npy)),
        ..runs
    }
}

// ------------------------------------------------------------ valid archives

/// One array of the valid archives: its member, the tensor it is, and what
/// numpy reads from it.
struct Array {
    member: &'static str,
    tensor: &'static str,
    npy: Vec<u8>,
    dtype: &'static str,
    shape: Vec<u64>,
    /// The values in C order, little-endian.
    c_le: Vec<u8>,
    zeros: u64,
    min: Value,
    max: Value,
}

impl Array {
    fn count(&self) -> u64 {
        self.shape.iter().product()
    }
}

/// 300,000 F32 elements (1.2 MB): a deflated stream longer than one read
/// block, so chunked decoding is exercised across block boundaries.
const LONG: usize = 300_000;

fn valid_arrays() -> Vec<Array> {
    let i16s = [-3i16, 0, 7, i16::MAX];
    let i32s = [1i32, -2, 3, -4];
    vec![
        Array {
            member: "layer/0/weight.npy",
            tensor: "layer/0/weight",
            npy: npy_file("<f4", "(2, 3)", &f32_data(6)),
            dtype: "F32",
            shape: vec![2, 3],
            c_le: f32_data(6),
            zeros: 0,
            min: json!(0.5),
            max: json!(5.5),
        },
        Array {
            member: "a.b.c.npy",
            tensor: "a.b.c",
            npy: npy_file(
                "<i2",
                "(4,)",
                &i16s
                    .iter()
                    .flat_map(|x| x.to_le_bytes())
                    .collect::<Vec<u8>>(),
            ),
            dtype: "I16",
            shape: vec![4],
            c_le: i16s.iter().flat_map(|x| x.to_le_bytes()).collect(),
            zeros: 1,
            min: json!(-3),
            max: json!(32767),
        },
        Array {
            // np.savez's name for a positional array; big-endian data.
            member: "arr_0.npy",
            tensor: "arr_0",
            npy: npy_file(
                ">i4",
                "(2, 2)",
                &i32s
                    .iter()
                    .flat_map(|x| x.to_be_bytes())
                    .collect::<Vec<u8>>(),
            ),
            dtype: "I32",
            shape: vec![2, 2],
            c_le: i32s.iter().flat_map(|x| x.to_le_bytes()).collect(),
            zeros: 0,
            min: json!(-4),
            max: json!(3),
        },
        Array {
            member: "model/embed.weight.npy",
            tensor: "model/embed.weight",
            npy: npy_file("<f4", &format!("({LONG},)"), &f32_data(LONG)),
            dtype: "F32",
            shape: vec![LONG as u64],
            c_le: f32_data(LONG),
            zeros: 0,
            min: json!(0.5),
            max: json!(LONG as f64 - 0.5),
        },
    ]
}

/// A member that is not a `.npy`: never a tensor.
const README: &[u8] = b"Saved by a training script. Not an array.\n";

/// Every tensor of a valid archive, through every verb: `info` lists
/// exactly the `.npy` members, under their names less `.npy` (`/` and `.`
/// kept), with their dtypes, shapes and `format: "numpy"`, and
/// `data_offsets` the absolute byte range of a stored member's data, null
/// for a deflated one; `README.txt` is no tensor; `validate` accepts;
/// `stats` counts and bounds exactly; `export` gives back the exact values;
/// a resave holds the same bytes and `diff` finds every row identical.
/// How each member of a test archive is kept, by its position.
type MethodOf = fn(usize) -> Method;

/// For an archive of stored members, one of deflated members, and a mix.
#[test]
fn valid_archives_are_read_by_every_verb() {
    let dir = tempfile::tempdir().expect("tempdir");
    let arrays = valid_arrays();
    let layouts: [(&str, MethodOf); 3] = [
        ("stored", |_| Stored),
        ("deflated", |_| Deflated),
        ("mixed", |i| if i % 2 == 0 { Stored } else { Deflated }),
    ];
    for (label, method_of) in layouts {
        let what = label;
        let mut members: Vec<(&str, Method, Vec<u8>)> = arrays
            .iter()
            .enumerate()
            .map(|(i, a)| (a.member, method_of(i), a.npy.clone()))
            .collect();
        members.insert(2, ("README.txt", method_of(1), README.to_vec()));
        let zip = npz(&members);
        let path = write_file(dir.path(), &format!("{label}.npz"), &zip);

        let o = info(&path);
        assert_eq!(o.code, 0, "{what}: info: {}", o.doc);
        assert_eq!(o.doc["format"], "numpy", "{what}: {}", o.doc);
        let want: BTreeSet<String> = arrays.iter().map(|a| a.tensor.to_owned()).collect();
        assert_eq!(names_in(&o.doc), want, "{what}: {}", o.doc);
        assert_eq!(
            o.doc["tensors"].as_array().map(Vec::len),
            Some(arrays.len()),
            "{what}: README.txt is no tensor: {}",
            o.doc
        );
        for (i, a) in arrays.iter().enumerate() {
            let t = named(&o.doc, a.tensor, what);
            assert_eq!(t["dtype"], a.dtype, "{what}: {t}");
            assert_eq!(t["shape"], json!(a.shape), "{what}: {t}");
            if method_of(i) == Stored {
                let start =
                    (data_start(&zip, &entry(&zip, a.member)) + npy_data_offset(&a.npy)) as u64;
                let end = start + a.c_le.len() as u64;
                assert_eq!(t["data_offsets"], json!([start, end]), "{what}: {t}");
                assert!(
                    zip[start as usize..end as usize] == a.npy[npy_data_offset(&a.npy)..],
                    "{what}: {}: the range is not the stored data",
                    a.tensor
                );
            } else {
                assert!(t["data_offsets"].is_null(), "{what}: deflated: {t}");
            }
        }

        let o = validate(&path);
        assert_eq!(o.code, 0, "{what}: validate: {}", o.doc);
        assert_eq!(o.doc["valid"], true, "{what}: {}", o.doc);

        let o = stats(&path, &[]);
        assert_eq!(o.code, 0, "{what}: stats: {}", o.doc);
        assert_eq!(names_in(&o.doc), want, "{what}: {}", o.doc);
        for a in &arrays {
            let t = named(&o.doc, a.tensor, what);
            let at = format!("{what}: {}", a.tensor);
            assert_eq!(t["count"].as_u64(), Some(a.count()), "{at}: {t}");
            assert_eq!(t["zeros"].as_u64(), Some(a.zeros), "{at}: {t}");
            assert_eq!(t["nan"].as_u64(), Some(0), "{at}: {t}");
            assert_exact(&t["min"], &a.min, &format!("{at}: min"));
            assert_exact(&t["max"], &a.max, &format!("{at}: max"));
        }

        for (i, a) in arrays.iter().enumerate() {
            let out = dir.path().join(format!("{label}-{i}.npy"));
            let o = export(&path, a.tensor, &out);
            assert_eq!(o.code, 0, "{what}: export {}: {}", a.tensor, o.doc);
            let npy = read_exported_npy(&out);
            assert_eq!(npy.descr, export_descr(a.dtype), "{what}: {}", a.tensor);
            assert_eq!(npy.shape, a.shape, "{what}: {}", a.tensor);
            assert!(
                npy.data == a.c_le,
                "{what}: {}: exported values differ",
                a.tensor
            );
        }

        let out = dir.path().join(format!("{label}.safetensors"));
        let o = resave(&path, &out);
        assert_eq!(o.code, 0, "{what}: resave: {}", o.doc);
        let bytes = std::fs::read(&out).expect("read the resaved file");
        let st = safetensors::SafeTensors::deserialize(&bytes)
            .unwrap_or_else(|e| panic!("{what}: safetensors refuses the resave: {e}"));
        let resaved: BTreeSet<String> = st.names().into_iter().map(str::to_owned).collect();
        assert_eq!(resaved, want, "{what}: resaved names");
        for a in &arrays {
            let view = st.tensor(a.tensor).expect("the tensor");
            assert_eq!(view.dtype().to_string(), a.dtype, "{what}: {}", a.tensor);
            assert!(
                view.data() == a.c_le.as_slice(),
                "{what}: {}: resaved bytes differ",
                a.tensor
            );
        }

        let d = diff(&path, &out);
        assert_eq!(d.code, 0, "{what}: diff after resave: {}", d.doc);
        assert_eq!(d.doc["only_in_a"], json!([]), "{what}: {}", d.doc);
        assert_eq!(d.doc["only_in_b"], json!([]), "{what}: {}", d.doc);
        assert_eq!(d.doc["summary"]["same"], true, "{what}: {}", d.doc);
        let rows = d.doc["tensors"].as_array().expect("diff rows");
        assert_eq!(rows.len(), arrays.len(), "{what}: {}", d.doc);
        for row in rows {
            assert_eq!(row["status"], "identical", "{what}: {row}");
        }
    }
}

// ------------------------------------------------------------ hostile archives

/// F32 zeros in the bomb: 256 MiB of data, kept small enough for a debug
/// build (NUMPY.md's 1 GiB bomb is the same archive, four times longer).
const BOMB_ELEMENTS: u64 = 67_108_864;

/// One deflated member `zeros.npy` of `BOMB_ELEMENTS` F32 zeros, declared
/// honestly; the zeros are fed to the compressor a block at a time.
fn bomb() -> Vec<u8> {
    let mut zip = ZipWriter::new(Cursor::new(Vec::new()));
    zip.start_file("zeros.npy", Deflated.options())
        .expect("start the member");
    zip.write_all(&npy_file("<f4", &format!("({BOMB_ELEMENTS},)"), &[]))
        .expect("write the header");
    let block = vec![0u8; 1 << 20];
    for _ in 0..(BOMB_ELEMENTS * 4) >> 20 {
        zip.write_all(&block).expect("write zeros");
    }
    zip.finish().expect("finish the archive").into_inner()
}

/// A deflated bomb (256 MiB of zeros in a few hundred KB, sizes declared
/// honestly) is streamed, not refused: `info` and `validate` answer (exit
/// 0, valid), and `stats` gives the exact answer: every element counted,
/// every one a zero, min and max 0.
#[test]
fn a_deflated_bomb_is_streamed_to_the_exact_answer() {
    let dir = tempfile::tempdir().expect("tempdir");
    let zip = bomb();
    let header = npy_file("<f4", &format!("({BOMB_ELEMENTS},)"), &[]).len() as u64;
    assert_eq!(
        u64::from(declared_size(&zip, "zeros.npy")),
        header + BOMB_ELEMENTS * 4,
        "the bomb declares its real size"
    );
    assert!(
        zip.len() < 4 << 20,
        "256 MiB of zeros should deflate to little, not {} bytes",
        zip.len()
    );
    let path = write_file(dir.path(), "bomb.npz", &zip);

    let o = info(&path);
    assert_eq!(o.code, 0, "info: {}", o.doc);
    assert_eq!(o.doc["format"], "numpy", "{}", o.doc);
    let t = named(&o.doc, "zeros", "info");
    assert_eq!(t["dtype"], "F32", "{t}");
    assert_eq!(t["shape"], json!([BOMB_ELEMENTS]), "{t}");
    assert!(t["data_offsets"].is_null(), "deflated: {t}");

    let o = validate(&path);
    assert_eq!(o.code, 0, "validate: {}", o.doc);
    assert_eq!(o.doc["valid"], true, "{}", o.doc);

    let o = stats(&path, &[]);
    assert_eq!(o.code, 0, "stats: {}", o.doc);
    let t = named(&o.doc, "zeros", "stats");
    assert_eq!(t["count"].as_u64(), Some(BOMB_ELEMENTS), "{t}");
    assert_eq!(t["zeros"].as_u64(), Some(BOMB_ELEMENTS), "{t}");
    assert_eq!(t["nan"].as_u64(), Some(0), "{t}");
    assert_eq!(t["min"].as_f64(), Some(0.0), "{t}");
    assert_eq!(t["max"].as_f64(), Some(0.0), "{t}");
}

/// A member whose declared uncompressed size is smaller than its `.npy`
/// header and data need (nothing, the header alone, one byte short; and a
/// stored member one byte short in both sizes) makes every verb refuse the
/// archive: one error document each, no tensor listed, no output.
#[test]
fn a_member_declaring_fewer_bytes_than_its_array_needs_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let npy = npy_file("<f4", "(256,)", &f32_data(256));
    let needed = u32::try_from(npy.len()).expect("small");
    let header = u32::try_from(npy_data_offset(&npy)).expect("small");
    for (stem, method, declared) in [
        ("deflated_declares_nothing", Deflated, 0),
        ("deflated_declares_the_header_alone", Deflated, header),
        ("deflated_declares_one_byte_short", Deflated, needed - 1),
        ("stored_declares_one_byte_short", Stored, needed - 1),
    ] {
        let mut zip = npz(&[("w.npy", method, npy.clone())]);
        assert_eq!(declared_size(&zip, "w.npy"), needed, "{stem}");
        let compressed = (method == Stored).then_some(declared);
        patch_sizes(&mut zip, "w.npy", compressed, Some(declared));
        let path = write_file(dir.path(), &format!("{stem}.npz"), &zip);
        assert_refused_by_every_verb(&path, "w", None);
    }
}

/// Declared by the hostile members below: 4 GiB less two bytes (the most a
/// 32-bit field holds; 0xFFFFFFFF would point to a zip64 record).
const DECLARED_4_GIB: u32 = 0xFFFF_FFFE;

/// A deflated member of 1 KB of data that declares 4 GiB uncompressed (its
/// `.npy` header honest about its 256 elements): the declared size is never
/// allocated. Reading the real stream or refusing are both right, so every
/// verb must just finish, with one document and exit 0, 1 or 2; what is
/// read is the real data.
#[test]
fn a_declared_size_far_beyond_the_stream_is_never_allocated() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut zip = npz(&[("w.npy", Deflated, npy_file("<f4", "(256,)", &f32_data(256)))]);
    assert!(
        compressed_size(&zip, "w.npy") < 2048,
        "a stream of about 1 KB"
    );
    patch_sizes(&mut zip, "w.npy", None, Some(DECLARED_4_GIB));
    let path = write_file(dir.path(), "declares_4_gib.npz", &zip);

    let runs = every_verb(&path, "w");
    if runs.info.code == 0 {
        let t = named(&runs.info.doc, "w", "info");
        assert_eq!(t["shape"], json!([256]), "{t}");
    }
    if runs.stats.code == 0 {
        let t = named(&runs.stats.doc, "w", "stats");
        assert_eq!(t["count"].as_u64(), Some(256), "{t}");
        assert_eq!(t["min"].as_f64(), Some(0.5), "{t}");
        assert_eq!(t["max"].as_f64(), Some(255.5), "{t}");
    }
    if let Some(npy) = &runs.exported {
        assert_eq!(npy.shape, vec![256]);
        assert!(npy.data == f32_data(256), "exported values differ");
    }
}

/// A deflated member whose stream ends before the data its `.npy` header
/// declares (the header claims 4 GB and the zip declares 4 GiB over a 1 KB
/// stream; or the zip declares exactly what the header needs, 4 KB, over
/// 1 KB): nothing is allocated up front, and every verb that needs the
/// values refuses (`stats`, `export`, `resave`, `diff` exit 2 with an error
/// document and no output; `validate` says invalid). `info`, which reads
/// only the header, may answer or refuse.
#[test]
fn a_stream_that_ends_before_its_array_is_refused_when_read() {
    let dir = tempfile::tempdir().expect("tempdir");
    let huge = npy_file("<f4", "(1000000000,)", &f32_data(256));
    let huge_needs = npy_data_offset(&huge) as u64 + 4_000_000_000;
    assert!(huge_needs <= u64::from(DECLARED_4_GIB));
    let short = npy_file("<f4", "(1024,)", &f32_data(256));
    let short_needs = u32::try_from(npy_data_offset(&short) + 4096).expect("small");
    for (stem, npy, declared) in [
        ("header_claims_4_gb", huge, DECLARED_4_GIB),
        ("stream_ends_early", short, short_needs),
    ] {
        let mut zip = npz(&[("w.npy", Deflated, npy)]);
        assert!(compressed_size(&zip, "w.npy") < 2048, "{stem}: about 1 KB");
        patch_sizes(&mut zip, "w.npy", None, Some(declared));
        let path = write_file(dir.path(), &format!("{stem}.npz"), &zip);

        let runs = every_verb(&path, "w");
        assert!(
            runs.info.code == 0 || runs.info.code == 2,
            "{stem}: info: {}",
            runs.info.doc
        );
        assert_invalid(&runs.validate, stem);
        for (verb, o) in [
            ("stats", &runs.stats),
            ("export", &runs.export),
            ("resave", &runs.resave),
            ("diff", &runs.diff),
        ] {
            assert_eq!(o.code, 2, "{stem}: {verb}: {}", o.doc);
        }
    }
}

/// A deflated member whose CRC-32 is wrong (in both records) is caught when
/// its stream is read: `validate` exits 1 with `valid: false`, and `stats`,
/// `export`, `resave` and `diff` exit 2 with an error document and no
/// output. `info` reads only the header and may answer.
#[test]
fn a_deflated_member_with_a_wrong_crc_is_refused_when_read() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut zip = npz(&[
        ("ok.npy", Stored, npy_file("<i2", "(2,)", &[1, 0, 2, 0])),
        ("w.npy", Deflated, npy_file("<f4", "(256,)", &f32_data(256))),
    ]);
    patch_crc(&mut zip, "w.npy");
    let path = write_file(dir.path(), "bad_crc_deflated.npz", &zip);

    let runs = every_verb(&path, "w");
    assert_eq!(runs.validate.code, 1, "validate: {}", runs.validate.doc);
    assert_invalid(&runs.validate, "bad_crc_deflated");
    for (verb, o) in [
        ("stats", &runs.stats),
        ("export", &runs.export),
        ("resave", &runs.resave),
        ("diff", &runs.diff),
    ] {
        assert_eq!(o.code, 2, "{verb}: {}", o.doc);
    }
}

/// A stored member whose CRC-32 is wrong: `validate`, which reads every
/// member whole, exits 1 with `valid: false`. (Its data is a slice of the
/// file read in place, so the other verbs may read it; they must finish
/// with one document, and what they read is the data as stored.)
#[test]
fn a_stored_member_with_a_wrong_crc_is_invalid() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut zip = npz(&[("w.npy", Stored, npy_file("<f4", "(256,)", &f32_data(256)))]);
    patch_crc(&mut zip, "w.npy");
    let path = write_file(dir.path(), "bad_crc_stored.npz", &zip);

    let runs = every_verb(&path, "w");
    assert_eq!(runs.validate.code, 1, "validate: {}", runs.validate.doc);
    assert_invalid(&runs.validate, "bad_crc_stored");
    if runs.stats.code == 0 {
        let t = named(&runs.stats.doc, "w", "stats");
        assert_eq!(t["count"].as_u64(), Some(256), "{t}");
    }
    if let Some(npy) = &runs.exported {
        assert!(npy.data == f32_data(256), "exported values differ");
    }
}

/// Every file and folder under `root`, as paths relative to it.
fn tree(root: &Path) -> BTreeSet<PathBuf> {
    let mut out = BTreeSet::new();
    let mut folders = vec![root.to_path_buf()];
    while let Some(folder) = folders.pop() {
        for e in std::fs::read_dir(&folder).expect("read_dir") {
            let path = e.expect("entry").path();
            out.insert(path.strip_prefix(root).expect("under root").to_path_buf());
            if path.is_dir() {
                folders.push(path);
            }
        }
    }
    out
}

/// One archive holding `member` (a path-traversal or absolute name) and a
/// plain `ok.npy`, every verb run from a folder three levels down a fresh
/// temporary folder, on the archive by a relative path.
fn check_traversal(member: &str, tensor: &str) {
    let what = member;
    let root = tempfile::tempdir().expect("tempdir");
    let work = root.path().join("a/b/work");
    let out = root.path().join("out");
    std::fs::create_dir_all(&work).expect("mkdir work");
    std::fs::create_dir_all(&out).expect("mkdir out");
    let zip = npz(&[
        (member, Stored, npy_file("<f4", "(3,)", &f32_data(3))),
        ("ok.npy", Deflated, npy_file("<i2", "(2,)", &[1, 0, 2, 0])),
    ]);
    write_file(&work, "traversal.npz", &zip);
    let file = Path::new("traversal.npz");

    // Where an extraction would land, outside the temporary folder.
    let parent = root.path().parent().expect("a parent").to_path_buf();
    let watched: Vec<PathBuf> = [
        parent.join("x"),
        parent.join("x.npy"),
        PathBuf::from("/abs"),
        PathBuf::from("/x.npy"),
    ]
    .into_iter()
    .filter(|p| !p.exists())
    .collect();

    let mut expected: BTreeSet<PathBuf> = ["a", "a/b", "a/b/work", "a/b/work/traversal.npz", "out"]
        .into_iter()
        .map(PathBuf::from)
        .collect();

    let o = verb_in(Some(work.as_path()), "info", file, &[]);
    if o.code == 0 {
        // Read: the names are only names.
        let want: BTreeSet<String> = [tensor, "ok"].into_iter().map(str::to_owned).collect();
        assert_eq!(names_in(&o.doc), want, "{what}: {}", o.doc);

        let o = verb_in(Some(work.as_path()), "validate", file, &[]);
        assert_eq!(o.code, 0, "{what}: validate: {}", o.doc);
        assert_eq!(o.doc["valid"], true, "{what}: {}", o.doc);

        let o = verb_in(Some(work.as_path()), "stats", file, &[]);
        assert_eq!(o.code, 0, "{what}: stats: {}", o.doc);
        let t = named(&o.doc, tensor, what);
        assert_eq!(t["count"].as_u64(), Some(3), "{what}: {t}");
        assert_eq!(t["max"].as_f64(), Some(2.5), "{what}: {t}");

        let npy = out.join("out.npy");
        let o = verb_in(
            Some(work.as_path()),
            "export",
            file,
            &[OsStr::new(tensor), OsStr::new("-o"), npy.as_os_str()],
        );
        assert_eq!(o.code, 0, "{what}: export: {}", o.doc);
        assert!(
            read_exported_npy(&npy).data == f32_data(3),
            "{what}: exported values differ"
        );

        let st = out.join("out.safetensors");
        let o = verb_in(
            Some(work.as_path()),
            "resave",
            file,
            &[OsStr::new("-o"), st.as_os_str()],
        );
        assert_eq!(o.code, 0, "{what}: resave: {}", o.doc);

        let o = verb_in(Some(work.as_path()), "diff", file, &[st.as_os_str()]);
        assert_eq!(o.code, 0, "{what}: diff after resave: {}", o.doc);
        for row in o.doc["tensors"].as_array().expect("diff rows") {
            assert_eq!(row["status"], "identical", "{what}: {row}");
        }

        let written: BTreeSet<String> = files_in(&out).into_iter().collect();
        let targets: BTreeSet<String> = ["out.npy", "out.safetensors"]
            .into_iter()
            .map(str::to_owned)
            .collect();
        assert_eq!(written, targets, "{what}: export and resave wrote");
        expected.insert(PathBuf::from("out/out.npy"));
        expected.insert(PathBuf::from("out/out.safetensors"));
    } else {
        assert_refused_by_every_verb(file, tensor, Some(work.as_path()));
    }

    assert_eq!(
        tree(root.path()),
        expected,
        "{what}: files appeared in the temporary folder"
    );
    for path in watched {
        assert!(
            !path.exists(),
            "{what}: {} was created outside",
            path.display()
        );
    }
}

/// Member names that climb out of a folder (`../../x.npy`) or start at the
/// root (`/abs/x.npy`) are only names: the archive is read with tensors
/// `../../x` and `/abs/x`, or refused; either way nothing is extracted: no
/// file appears in the working folder, the temporary folder or its parent,
/// and `export` and `resave` write only their `-o` target.
#[test]
fn traversal_and_absolute_member_names_extract_nothing() {
    check_traversal("../../x.npy", "../../x");
    check_traversal("/abs/x.npy", "/abs/x");
}

/// Two members of one name make the archive ambiguous: refused by every
/// verb (stored, deflated, and one of each). The writer will not write
/// such an archive, so the second member is renamed in place.
#[test]
fn duplicate_member_names_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    for (stem, first, second) in [
        ("duplicate_stored", Stored, Stored),
        ("duplicate_deflated", Deflated, Deflated),
        ("duplicate_mixed", Stored, Deflated),
    ] {
        let mut zip = npz(&[
            ("a.npy", first, npy_file("<f4", "(2,)", &f32_data(2))),
            (
                "b.npy",
                second,
                npy_file("<i2", "(3,)", &[1, 0, 2, 0, 3, 0]),
            ),
        ]);
        rename(&mut zip, "b.npy", "a.npy");
        assert!(
            entries(&zip).iter().all(|e| e.name == b"a.npy"),
            "{stem}: two members named a.npy"
        );
        let path = write_file(dir.path(), &format!("{stem}.npz"), &zip);
        assert_refused_by_every_verb(&path, "a", None);
    }
}

/// A member named `weights.npy` that holds text, not a `.npy`, makes the
/// whole archive an error: nothing in it is listed, not even the good
/// member beside it, and every verb refuses (export of the good member
/// included).
#[test]
fn a_text_member_named_npy_refuses_the_whole_archive() {
    let dir = tempfile::tempdir().expect("tempdir");
    for method in [Stored, Deflated] {
        let zip = npz(&[
            ("good.npy", method, npy_file("<f4", "(2,)", &f32_data(2))),
            (
                "weights.npy",
                method,
                b"these are not weights, only a note\n".to_vec(),
            ),
        ]);
        let path = write_file(dir.path(), &format!("text_{method:?}.npz"), &zip);
        assert_refused_by_every_verb(&path, "good", None);
        assert_refused_by_every_verb(&path, "weights", None);
    }
}

/// `n` bytes from a fixed xorshift sequence.
fn random_bytes(n: usize) -> Vec<u8> {
    let mut state = 0x2545_F491_4F6C_DD1Du64;
    (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 24) as u8
        })
        .collect()
}

/// Archives that are not readable zips, each refused by every verb: the
/// last 30 bytes cut (the end record and the tail of the central
/// directory), the end record's signature overwritten, a central directory
/// entry's signature overwritten, 4 KB of random bytes named `x.npz`, and
/// an empty `x.npz`.
#[test]
fn unreadable_archives_are_refused() {
    let valid = npz(&[
        ("w.npy", Stored, npy_file("<f4", "(4,)", &f32_data(4))),
        ("v.npy", Deflated, npy_file("<f4", "(8,)", &f32_data(8))),
    ]);
    let n = valid.len();
    let truncated = valid[..n - 30].to_vec();
    let mut no_end_record = valid.clone();
    no_end_record[n - 22..n - 18].copy_from_slice(b"XXXX");
    let mut corrupt_directory = valid.clone();
    let second = entries(&valid)[1].central;
    corrupt_directory[second..second + 4].copy_from_slice(b"PK\x09\x09");
    let random = random_bytes(4096);
    assert!(
        !random.starts_with(b"\x93NUMPY")
            && !random.starts_with(b"PK")
            && !random.windows(4).any(|w| w == b"PK\x05\x06"),
        "the random bytes look like a known format"
    );

    for (folder, name, bytes) in [
        ("truncated", "w.npz", truncated),
        ("no_end_record", "w.npz", no_end_record),
        ("corrupt_directory", "w.npz", corrupt_directory),
        ("random", "x.npz", random),
        ("empty", "x.npz", Vec::new()),
    ] {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = write_file(dir.path(), name, &bytes);
        let tensor = name.trim_end_matches(".npz");
        let message = assert_refused_by_every_verb(&path, tensor, None);
        assert!(!message.is_empty(), "{folder}: an empty message");
    }
}

/// A pickle that, if loaded, runs `touch MARKER` in the working folder.
fn pickle_payload(marker: &str) -> Vec<u8> {
    let command = format!("touch {marker}");
    // PROTO 2, GLOBAL os.system, BINUNICODE command, TUPLE1, REDUCE, STOP.
    let mut p = b"\x80\x02cos\nsystem\n".to_vec();
    p.push(b'X');
    p.extend_from_slice(&u32::try_from(command.len()).expect("short").to_le_bytes());
    p.extend_from_slice(command.as_bytes());
    p.extend_from_slice(b"\x85R.");
    p
}

/// An `.npz` with an object-array member (descr `|O`, a pickle body that
/// would create a file in the working folder if loaded) beside a good
/// member, stored or deflated: refused by every verb, run in a fresh
/// working folder on the archive by absolute and by relative path, asking
/// `export` for either member; the message names the object type; and the
/// pickle never runs: the working folder holds only the archives.
#[test]
fn object_array_members_are_refused_and_never_unpickled() {
    const MARKER: &str = "PWNED_BY_NPZ_PICKLE";
    let work = tempfile::tempdir().expect("tempdir");
    let payload = npy_file("|O", "(2,)", &pickle_payload(MARKER));
    let good = npy_file("<f4", "(2,)", &f32_data(2));
    let mut archives = BTreeSet::new();
    for method in [Stored, Deflated] {
        let name = format!("payload_{method:?}.npz");
        let zip = npz(&[
            ("good.npy", method, good.clone()),
            ("payload.npy", method, payload.clone()),
        ]);
        let path = write_file(work.path(), &name, &zip);
        for file in [path.as_path(), Path::new(&name)] {
            for tensor in ["payload", "good"] {
                let message =
                    assert_refused_by_every_verb(file, tensor, Some(work.path())).to_lowercase();
                assert!(
                    message.contains("|o") || message.contains("object"),
                    "{name}: the message names no object type: {message}"
                );
            }
        }
        archives.insert(name);
    }
    assert!(
        !work.path().join(MARKER).exists(),
        "a pickle ran in the working folder"
    );
    let left: BTreeSet<String> = files_in(work.path()).into_iter().collect();
    assert_eq!(left, archives, "files in the working folder");
}
