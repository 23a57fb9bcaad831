//! Torch files built byte by byte, as `torch.save` writes them: the pickle
//! opcodes of a state dict (protocol 2), zips of its entries (stored or
//! deflated) and the legacy format; and the run of a verb in a bounded
//! child process.

use crate::exe::OutputOnceMore as _;
use std::io::Write as _;
use std::path::Path;
use std::process::Command;

use serde_json::Value;

/// `SHORT_BINUNICODE s` (or `BINUNICODE` when longer than 255 bytes).
pub fn su(s: &str) -> Vec<u8> {
    let mut v = if let Ok(n) = u8::try_from(s.len()) {
        vec![0x8c, n]
    } else {
        let mut v = vec![b'X'];
        v.extend_from_slice(&(s.len() as u32).to_le_bytes());
        v
    };
    v.extend_from_slice(s.as_bytes());
    v
}

/// An integer as a pickle writes it: `BININT1`, `BININT2`, `BININT`, or
/// `LONG1` with as many bytes as it needs (two's complement).
pub fn int(v: i128) -> Vec<u8> {
    if let Ok(b) = u8::try_from(v) {
        return vec![b'K', b];
    }
    if let Ok(w) = u16::try_from(v) {
        let mut out = vec![b'M'];
        out.extend_from_slice(&w.to_le_bytes());
        return out;
    }
    if let Ok(d) = i32::try_from(v) {
        let mut out = vec![b'J'];
        out.extend_from_slice(&d.to_le_bytes());
        return out;
    }
    let mut bytes = v.to_le_bytes().to_vec();
    // Drop sign-extension bytes the value does not need.
    while bytes.len() > 1 {
        let last = bytes[bytes.len() - 1];
        let next = bytes[bytes.len() - 2];
        if (last == 0 && next & 0x80 == 0) || (last == 0xff && next & 0x80 != 0) {
            bytes.pop();
        } else {
            break;
        }
    }
    let mut out = vec![0x8a, bytes.len() as u8];
    out.extend_from_slice(&bytes);
    out
}

/// `MARK items… TUPLE`.
pub fn tuple(items: &[i128]) -> Vec<u8> {
    let mut out = vec![b'('];
    for &x in items {
        out.extend(int(x));
    }
    out.push(b't');
    out
}

/// A tensor as `_rebuild_tensor_v2` rebuilds it, over the persistent id
/// `('storage', torch.<class>, key, 'cpu', numel)`.
#[derive(Clone)]
pub struct T<'a> {
    pub key: &'a str,
    pub class: &'a str,
    pub numel: i128,
    pub offset: i128,
    pub size: Vec<i128>,
    pub stride: Vec<i128>,
}

impl<'a> T<'a> {
    /// A C-contiguous F32 tensor of `size` over storage `key`, whole.
    pub fn f32(key: &'a str, size: &[i128]) -> Self {
        let mut stride = vec![1i128; size.len()];
        for d in (0..size.len().saturating_sub(1)).rev() {
            stride[d] = stride[d + 1] * size[d + 1];
        }
        T {
            key,
            class: "FloatStorage",
            numel: size.iter().product(),
            offset: 0,
            size: size.to_vec(),
            stride,
        }
    }

    /// Its opcodes.
    pub fn pickle(&self) -> Vec<u8> {
        [
            &b"ctorch._utils\n_rebuild_tensor_v2\n(("[..],
            &su("storage"),
            format!("ctorch\n{}\n", self.class).as_bytes(),
            &su(self.key),
            &su("cpu"),
            &int(self.numel),
            b"tQ",
            &int(self.offset),
            &tuple(&self.size),
            &tuple(&self.stride),
            b"\x89ccollections\nOrderedDict\n)RtR",
        ]
        .concat()
    }
}

/// `PROTO 2`, a dict of `(key, value opcodes)`, `STOP`.
pub fn state_dict(pairs: &[(&str, Vec<u8>)]) -> Vec<u8> {
    let mut out = b"\x80\x02}(".to_vec();
    for (k, v) in pairs {
        out.extend(su(k));
        out.extend_from_slice(v);
    }
    out.extend_from_slice(b"u.");
    out
}

/// F32 values `0, 1, …, n - 1`, little-endian.
pub fn f32s(n: usize) -> Vec<u8> {
    (0..n).flat_map(|i| (i as f32).to_le_bytes()).collect()
}

/// A zip of `entries`, each stored, or deflated when `deflate`.
pub fn zip_of(entries: &[(&str, Vec<u8>)], deflate: bool) -> Vec<u8> {
    let mut z = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let method = if deflate {
        zip::CompressionMethod::Deflated
    } else {
        zip::CompressionMethod::Stored
    };
    let options = zip::write::SimpleFileOptions::default().compression_method(method);
    for (name, bytes) in entries {
        z.start_file(*name, options).expect("entry");
        z.write_all(bytes).expect("write");
    }
    z.finish().expect("finish").into_inner()
}

/// A torch zip under `archive/`: `data.pkl`, `byteorder`, the storages
/// `data/<key>`, `version`.
pub fn torch_zip(pickle: &[u8], storages: &[(&str, Vec<u8>)]) -> Vec<u8> {
    let mut entries = vec![
        ("archive/data.pkl".to_owned(), pickle.to_vec()),
        ("archive/byteorder".to_owned(), b"little".to_vec()),
    ];
    for (key, bytes) in storages {
        entries.push((format!("archive/data/{key}"), bytes.clone()));
    }
    entries.push(("archive/version".to_owned(), b"3\n".to_vec()));
    let refs: Vec<(&str, Vec<u8>)> = entries
        .iter()
        .map(|(n, b)| (n.as_str(), b.clone()))
        .collect();
    zip_of(&refs, false)
}

/// A legacy `torch.save` file: the five pickles, then each storage's
/// element count and elements. `object` is pickle 4, `keys` pickle 5.
pub fn legacy(
    little_endian: bool,
    object: &[u8],
    keys: &[u8],
    storages: &[(u64, Vec<u8>)],
) -> Vec<u8> {
    let mut out = b"\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19.".to_vec();
    out.extend_from_slice(b"\x80\x02M\xe9\x03.");
    out.extend(
        [
            &b"\x80\x02}("[..],
            &su("protocol_version"),
            b"M\xe9\x03",
            &su("little_endian"),
        ]
        .concat(),
    );
    out.push(if little_endian { 0x88 } else { 0x89 });
    out.extend(su("type_sizes"));
    out.extend_from_slice(b"}u.");
    out.extend_from_slice(object);
    out.extend_from_slice(keys);
    for (count, data) in storages {
        out.extend_from_slice(&count.to_le_bytes());
        out.extend_from_slice(data);
    }
    out
}

/// A legacy pickle of `tensors`: each persistent id with its sixth field
/// (`view_metadata`, `None`).
pub fn legacy_object(tensors: &[(&str, T<'_>)]) -> Vec<u8> {
    let pairs: Vec<(&str, Vec<u8>)> = tensors
        .iter()
        .map(|(name, t)| {
            let five = t.pickle();
            let at = five
                .windows(2)
                .position(|w| w == b"tQ")
                .expect("the persistent id");
            (*name, [&five[..at], b"N", &five[at..]].concat())
        })
        .collect();
    state_dict(&pairs)
}

/// The storage-key list pickle of a legacy file.
pub fn legacy_keys(keys: &[&str]) -> Vec<u8> {
    let mut out = b"\x80\x02](".to_vec();
    for k in keys {
        out.extend(su(k));
    }
    out.extend_from_slice(b"e.");
    out
}

/// What one run printed and how it ended.
pub struct Run {
    pub code: i32,
    pub doc: Value,
}

/// Address space a verb may use on a hostile file: PICKLE.md §7's 1 GiB of
/// peak memory, with room for thread stacks and allocator arenas, which
/// are reserved, not used. A run over it fails its allocation and dies by
/// a signal, which fails the test.
const ADDRESS_SPACE_KIB: u64 = 3 << 20;

/// Runs `tensorscope ARGS --json` in `cwd` under [`ADDRESS_SPACE_KIB`]
/// (`ulimit -v`): it must end by an exit code, not a signal or a panic,
/// with exactly one JSON document on stdout.
pub fn run(cwd: &Path, args: &[&str]) -> Run {
    let out = run_once(cwd, args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    let code = out
        .status
        .code()
        .unwrap_or_else(|| panic!("{args:?}: ended by a signal ({:?}): {stderr}", out.status));
    let doc = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!("{args:?}: exit code {code}, not one JSON document ({e}): {stderr}")
    });
    Run { code, doc }
}

fn run_once(cwd: &Path, args: &[&str]) -> std::process::Output {
    // Another system's build runs in its emulator, which needs more
    // address space than the limit: there it runs without one.
    let mut cmd = if crate::exe::foreign() {
        crate::exe::command()
    } else {
        let mut sh = Command::new("sh");
        sh.arg("-c")
            .arg(format!("ulimit -v {ADDRESS_SPACE_KIB}; exec \"$0\" \"$@\""))
            .arg(env!("CARGO_BIN_EXE_tensorscope"));
        sh
    };
    cmd.args(args)
        .arg("--json")
        .current_dir(cwd)
        .output_once_more()
        .expect("run")
}
