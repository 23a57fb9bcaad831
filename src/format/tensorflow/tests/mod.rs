//! Bundles written in code (a small table writer below): good ones read
//! back exactly, and the hostile inputs FRAMEWORKS.md lists, each refused
//! with its kind; then the real fixtures TensorFlow wrote, against their
//! manifest.

mod fixtures;
mod good;
mod hostile;

use super::proto::write as pw;
use super::proto::{Entry, Extent, Header};
use super::*;
use crate::format::decode::{Data, DecodeError};
use crate::jobs::CancelToken;

fn varint(out: &mut Vec<u8>, v: u64) {
    pw::varint(out, v);
}

/// A block's contents: prefix-compressed entries, a restart point every
/// `interval` entries, the restart array and its count.
fn encode_block(entries: &[(Vec<u8>, Vec<u8>)], interval: usize) -> Vec<u8> {
    let mut out = Vec::new();
    let mut restarts = Vec::new();
    let mut prev: &[u8] = &[];
    for (i, (k, v)) in entries.iter().enumerate() {
        let shared = if i % interval == 0 {
            restarts.push(out.len() as u32);
            0
        } else {
            prev.iter().zip(k).take_while(|(a, b)| a == b).count()
        };
        varint(&mut out, shared as u64);
        varint(&mut out, (k.len() - shared) as u64);
        varint(&mut out, v.len() as u64);
        out.extend_from_slice(&k[shared..]);
        out.extend_from_slice(v);
        prev = k;
    }
    if restarts.is_empty() {
        restarts.push(0);
    }
    for r in &restarts {
        out.extend_from_slice(&r.to_le_bytes());
    }
    out.extend_from_slice(&(restarts.len() as u32).to_le_bytes());
    out
}

/// Appends a block and its trailer (type 0 and the masked CRC) to `file`;
/// returns its handle.
fn put_block(file: &mut Vec<u8>, contents: &[u8]) -> (u64, u64) {
    let at = file.len() as u64;
    file.extend_from_slice(contents);
    file.push(0);
    let c = crc::mask(crc::extend(crc::value(contents), &[0]));
    file.extend_from_slice(&c.to_le_bytes());
    (at, contents.len() as u64)
}

fn handle_bytes((o, s): (u64, u64)) -> Vec<u8> {
    let mut v = Vec::new();
    varint(&mut v, o);
    varint(&mut v, s);
    v
}

/// A table of raw data blocks, each with its index key.
fn table_of_blocks(blocks: &[(Vec<u8>, Vec<u8>)]) -> Vec<u8> {
    let mut file = Vec::new();
    let mut index = Vec::new();
    for (contents, sep) in blocks {
        let h = put_block(&mut file, contents);
        index.push((sep.clone(), handle_bytes(h)));
    }
    let meta = put_block(&mut file, &encode_block(&[], 16));
    let idx = put_block(&mut file, &encode_block(&index, 1));
    let mut footer = handle_bytes(meta);
    footer.extend(handle_bytes(idx));
    footer.resize(40, 0);
    footer.extend_from_slice(&MAGIC.to_le_bytes());
    file.extend(footer);
    file
}

/// A table of `entries` (as given, sorted or not), `per_block` a block.
fn table(entries: &[(Vec<u8>, Vec<u8>)], per_block: usize) -> Vec<u8> {
    let blocks: Vec<_> = entries
        .chunks(per_block.max(1))
        .map(|c| (encode_block(c, 3), c[c.len() - 1].0.clone()))
        .collect();
    table_of_blocks(&blocks)
}

/// A bundle being written: entries by key and the shards' bytes.
struct Writer {
    header: Header,
    entries: Vec<(Vec<u8>, Entry)>,
    shards: Vec<Vec<u8>>,
}

impl Writer {
    fn new(num_shards: usize) -> Self {
        Writer {
            header: Header {
                num_shards: num_shards as i32,
                producer: 1,
                ..Header::default()
            },
            entries: Vec::new(),
            shards: vec![Vec::new(); num_shards],
        }
    }

    /// Stores `bytes` in `shard` and an entry for them under `key`.
    fn add(&mut self, key: &[u8], dtype: i32, dims: &[i64], shard: usize, bytes: &[u8]) {
        let data = &mut self.shards[shard];
        let e = Entry {
            dtype,
            dims: dims.to_vec(),
            shard_id: shard as i32,
            offset: data.len() as i64,
            size: bytes.len() as i64,
            crc32c: crc::mask(crc::value(bytes)),
            ..Entry::default()
        };
        data.extend_from_slice(bytes);
        self.entries.push((key.to_vec(), e));
    }

    /// A partitioned tensor of the full `bytes` (C order of `dims`,
    /// `element` bytes each), cut in `cuts`: (start, length) per dimension.
    fn add_sliced(
        &mut self,
        name: &str,
        dtype: i32,
        dims: &[i64],
        element: usize,
        bytes: &[u8],
        cuts: &[Vec<(i64, i64)>],
    ) {
        let mut full = Entry {
            dtype,
            dims: dims.to_vec(),
            ..Entry::default()
        };
        for (k, cut) in cuts.iter().enumerate() {
            let extents: Vec<Extent> = cut
                .iter()
                .map(|&(s, l)| Extent {
                    start: s,
                    length: Some(l),
                })
                .collect();
            full.slices.push(extents.clone());
            let part = gather(dims, element, bytes, cut);
            let key = slices::slice_key(name.as_bytes(), &extents);
            let shape: Vec<i64> = cut.iter().map(|c| c.1).collect();
            self.add(&key, dtype, &shape, k % self.shards.len(), &part);
        }
        self.entries.push((name.as_bytes().to_vec(), full));
    }

    fn index(&self) -> Vec<u8> {
        let mut all: Vec<(Vec<u8>, Vec<u8>)> = vec![(Vec::new(), pw::header(&self.header))];
        all.extend(self.entries.iter().map(|(k, e)| (k.clone(), pw::entry(e))));
        all.sort();
        table(&all, 4)
    }
}

/// The C-order bytes of the block `cut` of a tensor.
fn gather(dims: &[i64], element: usize, bytes: &[u8], cut: &[(i64, i64)]) -> Vec<u8> {
    let n: i64 = cut.iter().map(|c| c.1).product();
    let mut out = Vec::new();
    for flat in 0..n {
        let mut rest = flat;
        let mut idx = vec![0i64; dims.len()];
        for d in (0..dims.len()).rev() {
            idx[d] = cut[d].0 + rest % cut[d].1;
            rest /= cut[d].1;
        }
        let mut off = 0i64;
        for d in 0..dims.len() {
            off = off * dims[d] + idx[d];
        }
        let at = off as usize * element;
        out.extend_from_slice(&bytes[at..at + element]);
    }
    out
}

fn open_with(index: &[u8], shards: &[Vec<u8>]) -> Result<Opened, TensorflowError> {
    let n = shards.len() as u32;
    open(index, "ckpt", &|name: &str| {
        (0..n)
            .find(|&i| data_file_name("ckpt", i, n) == name)
            .map(|i| shards[i as usize].len() as u64)
            .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::NotFound, name.to_owned()))
    })
}

fn read(t: &Tensor, index: &[u8], shards: &[Vec<u8>]) -> Result<Vec<u8>, DecodeError> {
    let mut files: Vec<&[u8]> = vec![index];
    files.extend(shards.iter().map(Vec::as_slice));
    let Data::Decoded(d) = &t.data else {
        panic!("every TensorFlow tensor is decoded");
    };
    let mut out = Vec::new();
    d.decode(&files, &CancelToken::new(), &mut |b| {
        out.extend_from_slice(b);
        Ok(())
    })?;
    Ok(out)
}

fn f32s(xs: impl IntoIterator<Item = f32>) -> Vec<u8> {
    xs.into_iter().flat_map(f32::to_le_bytes).collect()
}
