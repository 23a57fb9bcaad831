//! A minimal HDF5 writer for the tests: superblock version 0, groups as
//! symbol tables (one B-tree leaf, one symbol node, a local heap), version
//! 1 object headers, datasets contiguous, compact or chunked (a version 1
//! B-tree leaf), with a filter pipeline and a fill value when asked.

/// The undefined address.
pub const UNDEF: u64 = u64::MAX;

/// A file being built: structures appended, addresses returned.
pub struct W {
    pub buf: Vec<u8>,
}

fn u16le(v: &mut Vec<u8>, x: u16) {
    v.extend_from_slice(&x.to_le_bytes());
}
fn u32le(v: &mut Vec<u8>, x: u32) {
    v.extend_from_slice(&x.to_le_bytes());
}
fn u64le(v: &mut Vec<u8>, x: u64) {
    v.extend_from_slice(&x.to_le_bytes());
}

impl W {
    /// A file with room for its superblock (96 bytes).
    pub fn new() -> W {
        W { buf: vec![0; 96] }
    }

    /// Appends `bytes` at an 8-byte boundary; their address.
    pub fn put(&mut self, bytes: &[u8]) -> u64 {
        while !self.buf.len().is_multiple_of(8) {
            self.buf.push(0);
        }
        let at = self.buf.len() as u64;
        self.buf.extend_from_slice(bytes);
        at
    }

    /// Overwrites 8 bytes at `at`.
    pub fn patch(&mut self, at: u64, value: u64) {
        self.buf[at as usize..at as usize + 8].copy_from_slice(&value.to_le_bytes());
    }

    /// A version 1 object header holding `msgs` (type, body).
    pub fn header(&mut self, msgs: &[(u16, Vec<u8>)]) -> u64 {
        let mut body = Vec::new();
        for (kind, data) in msgs {
            let mut d = data.clone();
            while !d.len().is_multiple_of(8) {
                d.push(0);
            }
            u16le(&mut body, *kind);
            u16le(&mut body, d.len() as u16);
            body.extend_from_slice(&[0, 0, 0, 0]);
            body.extend_from_slice(&d);
        }
        let mut h = vec![1, 0];
        u16le(&mut h, msgs.len() as u16);
        u32le(&mut h, 1);
        u32le(&mut h, body.len() as u32);
        u32le(&mut h, 0);
        h.extend_from_slice(&body);
        self.put(&h)
    }

    /// A group of `entries` (name, object header address): its object
    /// header's address, and the address of each entry's header field
    /// (to patch a link made before its target).
    pub fn group(&mut self, entries: &[(&str, u64)]) -> (u64, Vec<u64>) {
        // Local heap data: "" at 0, then the names.
        let mut data = vec![0u8; 8];
        let mut offsets = Vec::new();
        for (name, _) in entries {
            offsets.push(data.len() as u64);
            data.extend_from_slice(name.as_bytes());
            data.push(0);
            while !data.len().is_multiple_of(8) {
                data.push(0);
            }
        }
        let data_at = self.put(&data);
        let mut heap = b"HEAP".to_vec();
        heap.extend_from_slice(&[0, 0, 0, 0]);
        u64le(&mut heap, data.len() as u64);
        u64le(&mut heap, UNDEF);
        u64le(&mut heap, data_at);
        let heap_at = self.put(&heap);
        let mut snod = b"SNOD".to_vec();
        snod.extend_from_slice(&[1, 0]);
        u16le(&mut snod, entries.len() as u16);
        let snod_at = self.buf.len().next_multiple_of(8) as u64;
        let mut fields = Vec::new();
        for ((_, addr), off) in entries.iter().zip(&offsets) {
            u64le(&mut snod, *off);
            fields.push(snod_at + snod.len() as u64);
            u64le(&mut snod, *addr);
            snod.extend_from_slice(&[0; 24]);
        }
        let snod_at2 = self.put(&snod);
        assert_eq!(snod_at, snod_at2);
        let mut tree = b"TREE".to_vec();
        tree.extend_from_slice(&[0, 0]);
        u16le(&mut tree, 1);
        u64le(&mut tree, UNDEF);
        u64le(&mut tree, UNDEF);
        u64le(&mut tree, 0);
        u64le(&mut tree, snod_at);
        u64le(&mut tree, offsets.last().copied().unwrap_or(0));
        let tree_at = self.put(&tree);
        let mut st = Vec::new();
        u64le(&mut st, tree_at);
        u64le(&mut st, heap_at);
        (self.header(&[(0x11, st)]), fields)
    }

    /// The file, its superblock pointing at the root group's header.
    pub fn finish(mut self, root: u64) -> Vec<u8> {
        let len = self.buf.len() as u64;
        let mut sb = b"\x89HDF\r\n\x1a\n".to_vec();
        sb.extend_from_slice(&[0, 0, 0, 0, 0, 8, 8, 0]);
        u16le(&mut sb, 4);
        u16le(&mut sb, 16);
        u32le(&mut sb, 0);
        u64le(&mut sb, 0);
        u64le(&mut sb, UNDEF);
        u64le(&mut sb, len);
        u64le(&mut sb, UNDEF);
        u64le(&mut sb, 0);
        u64le(&mut sb, root);
        u32le(&mut sb, 0);
        u32le(&mut sb, 0);
        sb.extend_from_slice(&[0; 16]);
        assert_eq!(sb.len(), 96);
        self.buf[..96].copy_from_slice(&sb);
        self.buf
    }

    /// A version 1 B-tree leaf of chunks: (origin, address, stored size,
    /// filter mask) each, for a dataset of rank `rank`.
    pub fn chunk_tree(&mut self, rank: usize, chunks: &[(Vec<u64>, u64, u32, u32)]) -> u64 {
        let mut t = b"TREE".to_vec();
        t.extend_from_slice(&[1, 0]);
        u16le(&mut t, chunks.len() as u16);
        u64le(&mut t, UNDEF);
        u64le(&mut t, UNDEF);
        let key = |t: &mut Vec<u8>, size: u32, mask: u32, origin: &[u64]| {
            u32le(t, size);
            u32le(t, mask);
            for &o in origin {
                u64le(t, o);
            }
            u64le(t, 0);
        };
        for (origin, addr, size, mask) in chunks {
            key(&mut t, *size, *mask, origin);
            u64le(&mut t, *addr);
        }
        key(&mut t, 0, 0, &vec![u64::MAX >> 1; rank]);
        self.put(&t)
    }
}

/// A simple dataspace message (version 1).
pub fn space(dims: &[u64]) -> Vec<u8> {
    let mut v = vec![1, dims.len() as u8, 0, 0, 0, 0, 0, 0];
    for &d in dims {
        u64le(&mut v, d);
    }
    v
}

/// A fixed-point datatype message.
pub fn int(size: u32, signed: bool, big: bool) -> Vec<u8> {
    let bits = u8::from(big) | if signed { 8 } else { 0 };
    let mut v = vec![0x10, bits, 0, 0];
    u32le(&mut v, size);
    u16le(&mut v, 0);
    u16le(&mut v, (size * 8) as u16);
    v
}

/// The IEEE float32 datatype message (little- or big-endian).
pub fn f32t(big: bool) -> Vec<u8> {
    let mut v = vec![0x11, 0x20 | u8::from(big), 31, 0];
    u32le(&mut v, 4);
    u16le(&mut v, 0);
    u16le(&mut v, 32);
    v.extend_from_slice(&[23, 8, 0, 23]);
    u32le(&mut v, 127);
    v
}

/// A string datatype (no tensor).
pub fn string(size: u32) -> Vec<u8> {
    let mut v = vec![0x13, 0, 0, 0];
    u32le(&mut v, size);
    v
}

/// A contiguous layout message (version 3).
pub fn contiguous(addr: u64, size: u64) -> Vec<u8> {
    let mut v = vec![3, 1];
    u64le(&mut v, addr);
    u64le(&mut v, size);
    v
}

/// A compact layout message (version 3).
pub fn compact(data: &[u8]) -> Vec<u8> {
    let mut v = vec![3, 0];
    u16le(&mut v, data.len() as u16);
    v.extend_from_slice(data);
    v
}

/// A chunked layout message (version 3, B-tree index).
pub fn chunked(tree: u64, chunk: &[u32], element: u32) -> Vec<u8> {
    let mut v = vec![3, 2, chunk.len() as u8 + 1];
    u64le(&mut v, tree);
    for &c in chunk {
        u32le(&mut v, c);
    }
    u32le(&mut v, element);
    v
}

/// A filter pipeline message (version 2): (id, client data) each.
pub fn filters(list: &[(u16, Vec<u32>)]) -> Vec<u8> {
    let mut v = vec![2, list.len() as u8];
    for (id, client) in list {
        u16le(&mut v, *id);
        if *id >= 256 {
            u16le(&mut v, 0);
        }
        u16le(&mut v, 0);
        u16le(&mut v, client.len() as u16);
        for &c in client {
            u32le(&mut v, c);
        }
    }
    v
}

/// A fill value message (version 2) defining `value`.
pub fn fill(value: &[u8]) -> Vec<u8> {
    let mut v = vec![2, 2, 2, 1];
    u32le(&mut v, value.len() as u32);
    v.extend_from_slice(value);
    v
}

/// A dataset's object header: dataspace, datatype, layout, and more.
pub fn dataset(
    w: &mut W,
    dims: &[u64],
    dtype: Vec<u8>,
    layout: Vec<u8>,
    more: &[(u16, Vec<u8>)],
) -> u64 {
    let mut msgs = vec![(1u16, space(dims)), (3, dtype)];
    msgs.extend(more.iter().cloned());
    msgs.push((8, layout));
    w.header(&msgs)
}

/// zlib-compresses `data` (for deflate chunks).
pub fn zlib(data: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

/// Shuffles `data` of `size`-byte elements (the shuffle filter).
pub fn shuffle(data: &[u8], size: usize) -> Vec<u8> {
    let n = data.len() / size;
    let mut out = vec![0; data.len()];
    for i in 0..n {
        for j in 0..size {
            out[j * n + i] = data[i * size + j];
        }
    }
    out[n * size..].copy_from_slice(&data[n * size..]);
    out
}

/// Appends HDF5's Fletcher-32 (little-endian) to `data`.
pub fn with_fletcher(data: &[u8]) -> Vec<u8> {
    let mut v = data.to_vec();
    v.extend_from_slice(&super::io::fletcher32(data).to_le_bytes());
    v
}
