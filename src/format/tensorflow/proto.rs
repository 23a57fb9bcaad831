//! The two protobuf messages of a TensorBundle's table
//! (`tensor_bundle.proto`): `BundleHeaderProto` under the empty key and
//! `BundleEntryProto` under every other, with the `TensorShapeProto`,
//! `TensorSliceProto` and `VersionDef` they hold. A known field of the
//! wrong wire type is refused; unknown fields are skipped. Repeated
//! occurrences of a message field merge, as protobuf's parser does.

use super::wire::{self, Fields, Value, WireError};

/// TensorShape's largest rank.
pub const MAX_RANK: usize = 254;

/// `BundleHeaderProto`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Header {
    /// `num_shards` (1).
    pub num_shards: i32,
    /// `endianness` (2): 0 little, 1 big.
    pub endianness: i32,
    /// `version.producer`.
    pub producer: i32,
    /// `version.min_consumer`.
    pub min_consumer: i32,
    /// `version.bad_consumers`.
    pub bad_consumers: Vec<i32>,
}

/// One dimension's extent of a slice (`TensorSliceProto.Extent`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Extent {
    /// `start` (1).
    pub start: i64,
    /// `length` (2), absent for the whole dimension.
    pub length: Option<i64>,
}

/// `BundleEntryProto`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Entry {
    /// `dtype` (1), a `DataType` number.
    pub dtype: i32,
    /// `shape.dim[].size` (2).
    pub dims: Vec<i64>,
    /// `shape.unknown_rank`.
    pub unknown_rank: bool,
    /// `shard_id` (3).
    pub shard_id: i32,
    /// `offset` (4).
    pub offset: i64,
    /// `size` (5).
    pub size: i64,
    /// `crc32c` (6), masked.
    pub crc32c: u32,
    /// `slices` (7): each slice's extents.
    pub slices: Vec<Vec<Extent>>,
}

fn wrong(rule: &'static str) -> WireError {
    WireError { offset: 0, rule }
}

fn int32(v: Value<'_>, field: &'static str) -> Result<i32, WireError> {
    v.int32().ok_or(wrong(field))
}

fn int64(v: Value<'_>, field: &'static str) -> Result<i64, WireError> {
    v.int64().ok_or(wrong(field))
}

fn bytes<'a>(v: Value<'a>, field: &'static str) -> Result<&'a [u8], WireError> {
    match v {
        Value::Bytes(b) => Ok(b),
        _ => Err(wrong(field)),
    }
}

/// Parses a `BundleHeaderProto`.
pub fn header(buf: &[u8]) -> Result<Header, WireError> {
    let mut h = Header::default();
    for f in Fields::new(buf) {
        match f? {
            (1, v) => h.num_shards = int32(v, "num_shards is not an int32")?,
            (2, v) => h.endianness = int32(v, "endianness is not an enum")?,
            (3, v) => version(bytes(v, "version is not a message")?, &mut h)?,
            _ => {}
        }
    }
    Ok(h)
}

fn version(buf: &[u8], h: &mut Header) -> Result<(), WireError> {
    for f in Fields::new(buf) {
        match f? {
            (1, v) => h.producer = int32(v, "version.producer is not an int32")?,
            (2, v) => h.min_consumer = int32(v, "version.min_consumer is not an int32")?,
            (3, v) => {
                for x in wire::packed(v)? {
                    let x = i32::try_from(x as i64)
                        .map_err(|_| wrong("version.bad_consumers holds a value outside int32"))?;
                    h.bad_consumers.push(x);
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// Parses a `BundleEntryProto`.
pub fn entry(buf: &[u8]) -> Result<Entry, WireError> {
    let mut e = Entry::default();
    for f in Fields::new(buf) {
        match f? {
            (1, v) => e.dtype = int32(v, "dtype is not an enum")?,
            (2, v) => shape(bytes(v, "shape is not a message")?, &mut e)?,
            (3, v) => e.shard_id = int32(v, "shard_id is not an int32")?,
            (4, v) => e.offset = int64(v, "offset is not an int64")?,
            (5, v) => e.size = int64(v, "size is not an int64")?,
            (6, Value::Fixed32(c)) => e.crc32c = c,
            (6, _) => return Err(wrong("crc32c is not a fixed32")),
            (7, v) => e.slices.push(slice(bytes(v, "a slice is not a message")?)?),
            _ => {}
        }
    }
    Ok(e)
}

fn shape(buf: &[u8], e: &mut Entry) -> Result<(), WireError> {
    for f in Fields::new(buf) {
        match f? {
            (2, v) => {
                let mut size = 0i64;
                for g in Fields::new(bytes(v, "shape.dim is not a message")?) {
                    if let (1, v) = g? {
                        size = int64(v, "shape.dim.size is not an int64")?;
                    }
                }
                if e.dims.len() >= MAX_RANK {
                    return Err(wrong("the shape has more than 254 dimensions"));
                }
                e.dims.push(size);
            }
            (3, v) => e.unknown_rank = v.bool().ok_or(wrong("shape.unknown_rank is not a bool"))?,
            _ => {}
        }
    }
    Ok(())
}

fn slice(buf: &[u8]) -> Result<Vec<Extent>, WireError> {
    let mut out = Vec::new();
    for f in Fields::new(buf) {
        if let (1, v) = f? {
            let mut x = Extent {
                start: 0,
                length: None,
            };
            for g in Fields::new(bytes(v, "a slice's extent is not a message")?) {
                match g? {
                    (1, v) => x.start = int64(v, "extent.start is not an int64")?,
                    (2, v) => x.length = Some(int64(v, "extent.length is not an int64")?),
                    _ => {}
                }
            }
            if out.len() >= MAX_RANK {
                return Err(wrong("a slice has more than 254 extents"));
            }
            out.push(x);
        }
    }
    Ok(out)
}

#[cfg(test)]
pub mod write {
    //! Writing the messages, for tests.
    use super::{Entry, Header};

    /// A varint.
    pub fn varint(out: &mut Vec<u8>, mut v: u64) {
        while v >= 0x80 {
            out.push((v as u8) | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }

    fn tag(out: &mut Vec<u8>, field: u32, wire: u8) {
        varint(out, (u64::from(field) << 3) | u64::from(wire));
    }

    fn int(out: &mut Vec<u8>, field: u32, v: i64) {
        if v != 0 {
            tag(out, field, 0);
            varint(out, v as u64);
        }
    }

    fn message(out: &mut Vec<u8>, field: u32, m: &[u8]) {
        tag(out, field, 2);
        varint(out, m.len() as u64);
        out.extend_from_slice(m);
    }

    /// A `BundleHeaderProto`.
    pub fn header(h: &Header) -> Vec<u8> {
        let mut out = Vec::new();
        int(&mut out, 1, h.num_shards.into());
        int(&mut out, 2, h.endianness.into());
        let mut v = Vec::new();
        int(&mut v, 1, h.producer.into());
        int(&mut v, 2, h.min_consumer.into());
        for b in &h.bad_consumers {
            tag(&mut v, 3, 0);
            varint(&mut v, i64::from(*b) as u64);
        }
        message(&mut out, 3, &v);
        out
    }

    /// A `BundleEntryProto`.
    pub fn entry(e: &Entry) -> Vec<u8> {
        let mut out = Vec::new();
        int(&mut out, 1, e.dtype.into());
        let mut s = Vec::new();
        for d in &e.dims {
            let mut dim = Vec::new();
            int(&mut dim, 1, *d);
            message(&mut s, 2, &dim);
        }
        if e.unknown_rank {
            int(&mut s, 3, 1);
        }
        message(&mut out, 2, &s);
        int(&mut out, 3, e.shard_id.into());
        int(&mut out, 4, e.offset);
        int(&mut out, 5, e.size);
        tag(&mut out, 6, 5);
        out.extend_from_slice(&e.crc32c.to_le_bytes());
        for sl in &e.slices {
            let mut m = Vec::new();
            for x in sl {
                let mut ext = Vec::new();
                int(&mut ext, 1, x.start);
                if let Some(l) = x.length {
                    tag(&mut ext, 2, 0);
                    varint(&mut ext, l as u64);
                }
                message(&mut m, 1, &ext);
            }
            message(&mut out, 7, &m);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        let h = Header {
            num_shards: 3,
            endianness: 0,
            producer: 1,
            min_consumer: 0,
            bad_consumers: vec![5, -2],
        };
        assert_eq!(header(&write::header(&h)).unwrap(), h);
        let e = Entry {
            dtype: 1,
            dims: vec![4, 0, 7],
            unknown_rank: false,
            shard_id: 2,
            offset: 1 << 40,
            size: 112,
            crc32c: 0xdead_beef,
            slices: vec![vec![
                Extent {
                    start: 2,
                    length: Some(2),
                },
                Extent {
                    start: 0,
                    length: None,
                },
                Extent {
                    start: 0,
                    length: Some(0),
                },
            ]],
        };
        assert_eq!(entry(&write::entry(&e)).unwrap(), e);
    }

    #[test]
    fn wrong_wire_types_are_refused() {
        // dtype as bytes; crc32c as a varint; shape as a varint.
        for m in [&[0x0a, 0][..], &[0x30, 1], &[0x10, 1]] {
            assert!(entry(m).is_err(), "{m:?}");
        }
        // shard_id beyond int32.
        assert!(entry(&[0x18, 0x80, 0x80, 0x80, 0x80, 0x10]).is_err());
        // Unknown fields are skipped.
        assert_eq!(entry(&[0x78, 5, 0x08, 1]).unwrap().dtype, 1);
    }
}
