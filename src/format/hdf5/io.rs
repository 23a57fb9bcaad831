//! Bounded reads of an HDF5 file: addresses resolved against the base
//! address and checked against the file's end, a cursor whose reads are
//! checked against the structure's own bytes, and the two checksums HDF5
//! keeps (Jenkins lookup3 for metadata, Fletcher-32 for chunk data).

use super::error::Hdf5Error;

/// The undefined address (all bits set).
pub(super) const UNDEF: u64 = u64::MAX;

/// The file's bytes and its base address (the superblock's offset: every
/// address in the file is relative to it).
#[derive(Debug, Clone, Copy)]
pub(super) struct File<'a> {
    /// The whole file.
    pub bytes: &'a [u8],
    /// The absolute offset addresses are relative to.
    pub base: u64,
}

impl<'a> File<'a> {
    /// The file's length.
    pub fn len(&self) -> u64 {
        self.bytes.len() as u64
    }

    /// The absolute byte range of `n` bytes at relative address `addr`,
    /// checked against the file's end.
    pub fn range(&self, addr: u64, n: u64, what: &str) -> Result<(u64, u64), Hdf5Error> {
        let start = self.base.checked_add(addr);
        let end = start.and_then(|s| s.checked_add(n));
        match (start, end) {
            (Some(s), Some(e)) if e <= self.len() && addr != UNDEF => Ok((s, e)),
            _ => Err(Hdf5Error::Truncated {
                what: what.to_owned(),
                start: start.unwrap_or(u64::MAX),
                end: end.unwrap_or(u64::MAX),
                len: self.len(),
            }),
        }
    }

    /// The `n` bytes at relative address `addr`.
    pub fn at(&self, addr: u64, n: u64, what: &str) -> Result<&'a [u8], Hdf5Error> {
        let (s, e) = self.range(addr, n, what)?;
        Ok(&self.bytes[s as usize..e as usize])
    }

    /// The bytes from relative address `addr` to the file's end, at most
    /// `max` of them (for structures whose length is read as they go).
    pub fn tail(&self, addr: u64, max: u64, what: &'static str) -> Result<Cur<'a>, Hdf5Error> {
        let (s, _) = self.range(addr, 0, what)?;
        let n = (self.len() - s).min(max);
        Ok(Cur::new(&self.bytes[s as usize..(s + n) as usize], s, what))
    }

    /// A cursor over the `n` bytes at relative address `addr`.
    pub fn cursor(&self, addr: u64, n: u64, what: &'static str) -> Result<Cur<'a>, Hdf5Error> {
        let (s, _) = self.range(addr, n, what)?;
        Ok(Cur::new(self.at(addr, n, what)?, s, what))
    }
}

/// Reads over one structure's bytes, each checked against their end.
#[derive(Debug, Clone)]
pub(super) struct Cur<'a> {
    data: &'a [u8],
    pos: usize,
    /// The absolute offset of `data[0]`.
    at: u64,
    what: &'static str,
}

impl<'a> Cur<'a> {
    /// A cursor over `data`, which starts at absolute offset `at`.
    pub fn new(data: &'a [u8], at: u64, what: &'static str) -> Self {
        Cur {
            data,
            pos: 0,
            at,
            what,
        }
    }

    /// The absolute offset of the next byte.
    pub fn abs(&self) -> u64 {
        self.at + self.pos as u64
    }

    /// Bytes read so far.
    pub fn pos(&self) -> usize {
        self.pos
    }

    /// Bytes left.
    pub fn remaining(&self) -> usize {
        self.data.len() - self.pos
    }

    /// The structure's bytes.
    pub fn data(&self) -> &'a [u8] {
        self.data
    }

    /// An error about this structure at the current position.
    pub fn err(&self, message: impl Into<String>) -> Hdf5Error {
        Hdf5Error::malformed(self.what, self.abs(), message)
    }

    /// The next `n` bytes.
    pub fn bytes(&mut self, n: usize) -> Result<&'a [u8], Hdf5Error> {
        if n > self.remaining() {
            return Err(self.err(format!(
                "{n} bytes needed but only {} remain of it",
                self.remaining()
            )));
        }
        let out = &self.data[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    /// Skips `n` bytes.
    pub fn skip(&mut self, n: usize) -> Result<(), Hdf5Error> {
        self.bytes(n).map(|_| ())
    }

    /// A little-endian unsigned integer of `n` (at most 8) bytes.
    pub fn uint(&mut self, n: usize) -> Result<u64, Hdf5Error> {
        let b = self.bytes(n)?;
        Ok(le(b))
    }

    pub fn u8(&mut self) -> Result<u8, Hdf5Error> {
        Ok(self.bytes(1)?[0])
    }

    pub fn u16(&mut self) -> Result<u16, Hdf5Error> {
        Ok(self.uint(2)? as u16)
    }

    pub fn u32(&mut self) -> Result<u32, Hdf5Error> {
        Ok(self.uint(4)? as u32)
    }

    pub fn u64(&mut self) -> Result<u64, Hdf5Error> {
        self.uint(8)
    }

    /// Checks the 4-byte signature `sig`.
    pub fn signature(&mut self, sig: &'static str) -> Result<(), Hdf5Error> {
        let at = self.abs();
        let found = self.bytes(4).map_err(|_| Hdf5Error::BadSignature {
            what: self.what,
            at,
            expected: sig,
            found: String::new(),
        })?;
        if found != sig.as_bytes() {
            return Err(Hdf5Error::BadSignature {
                what: self.what,
                at,
                expected: sig,
                found: String::from_utf8_lossy(found).into_owned(),
            });
        }
        Ok(())
    }

    /// Checks that the 4 bytes after the first `len` of the structure are
    /// the lookup3 checksum of those `len` bytes.
    pub fn check_sum(&self, len: usize) -> Result<(), Hdf5Error> {
        let (Some(body), Some(sum)) = (self.data.get(..len), self.data.get(len..len + 4)) else {
            return Err(Hdf5Error::malformed(
                self.what,
                self.at,
                format!("its checksum at byte {len} is past its end"),
            ));
        };
        let stored = le(sum) as u32;
        let computed = lookup3(body);
        if stored != computed {
            return Err(Hdf5Error::ChecksumMismatch {
                what: self.what,
                at: self.at,
                stored,
                computed,
            });
        }
        Ok(())
    }
}

/// A little-endian unsigned integer of up to 8 bytes.
pub(super) fn le(b: &[u8]) -> u64 {
    b.iter()
        .take(8)
        .rev()
        .fold(0u64, |acc, &x| (acc << 8) | u64::from(x))
}

/// Bob Jenkins' lookup3 `hashlittle` with seed 0, as `H5_checksum_lookup3`.
pub(super) fn lookup3(key: &[u8]) -> u32 {
    fn rot(x: u32, k: u32) -> u32 {
        x.rotate_left(k)
    }
    let word = |k: &[u8], i: usize| -> u32 {
        let mut w = [0u8; 4];
        for (j, slot) in w.iter_mut().enumerate() {
            *slot = k.get(i + j).copied().unwrap_or(0);
        }
        u32::from_le_bytes(w)
    };
    let init = 0xdead_beef_u32.wrapping_add(key.len() as u32);
    let (mut a, mut b, mut c) = (init, init, init);
    let mut k = key;
    while k.len() > 12 {
        a = a.wrapping_add(word(k, 0));
        b = b.wrapping_add(word(k, 4));
        c = c.wrapping_add(word(k, 8));
        // mix(a, b, c)
        a = a.wrapping_sub(c);
        a ^= rot(c, 4);
        c = c.wrapping_add(b);
        b = b.wrapping_sub(a);
        b ^= rot(a, 6);
        a = a.wrapping_add(c);
        c = c.wrapping_sub(b);
        c ^= rot(b, 8);
        b = b.wrapping_add(a);
        a = a.wrapping_sub(c);
        a ^= rot(c, 16);
        c = c.wrapping_add(b);
        b = b.wrapping_sub(a);
        b ^= rot(a, 19);
        a = a.wrapping_add(c);
        c = c.wrapping_sub(b);
        c ^= rot(b, 4);
        b = b.wrapping_add(a);
        k = &k[12..];
    }
    if k.is_empty() {
        return c;
    }
    a = a.wrapping_add(word(k, 0));
    b = b.wrapping_add(word(k, 4));
    c = c.wrapping_add(word(k, 8));
    // final(a, b, c)
    c ^= b;
    c = c.wrapping_sub(rot(b, 14));
    a ^= c;
    a = a.wrapping_sub(rot(c, 11));
    b ^= a;
    b = b.wrapping_sub(rot(a, 25));
    c ^= b;
    c = c.wrapping_sub(rot(b, 16));
    a ^= c;
    a = a.wrapping_sub(rot(c, 4));
    b ^= a;
    b = b.wrapping_sub(rot(a, 14));
    c ^= b;
    c = c.wrapping_sub(rot(b, 24));
    c
}

/// Fletcher-32 over 16-bit big-endian words (an odd last byte as the high
/// byte of a word), as `H5_checksum_fletcher32`.
pub(super) fn fletcher32(data: &[u8]) -> u32 {
    let (mut sum1, mut sum2) = (0u32, 0u32);
    let mut words = data.chunks_exact(2);
    loop {
        let mut n = 0;
        for w in words.by_ref() {
            sum1 = sum1.wrapping_add((u32::from(w[0]) << 8) | u32::from(w[1]));
            sum2 = sum2.wrapping_add(sum1);
            n += 1;
            if n == 360 {
                break;
            }
        }
        if n == 0 {
            break;
        }
        sum1 = (sum1 & 0xffff) + (sum1 >> 16);
        sum2 = (sum2 & 0xffff) + (sum2 >> 16);
        if n < 360 {
            break;
        }
    }
    if let [last] = words.remainder() {
        sum1 = sum1.wrapping_add(u32::from(*last) << 8);
        sum2 = sum2.wrapping_add(sum1);
        sum1 = (sum1 & 0xffff) + (sum1 >> 16);
        sum2 = (sum2 & 0xffff) + (sum2 >> 16);
    }
    sum1 = (sum1 & 0xffff) + (sum1 >> 16);
    sum2 = (sum2 & 0xffff) + (sum2 >> 16);
    (sum2 << 16) | sum1
}
