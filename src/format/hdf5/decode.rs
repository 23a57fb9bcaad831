//! A dataset's bytes when they are not one plain slice: chunks run back
//! through the filter pipeline (Fletcher-32 checked, deflate, LZF,
//! shuffle) and assembled in bands by [`crate::format::blocks`]; or a
//! contiguous range whose elements need reordering (a complex stored
//! imaginary part first), streamed in pieces.

use std::borrow::Cow;
use std::ops::Range;

use super::chunks::Piece;
use super::io::fletcher32;
use super::messages::Filter;
use super::types::Conv;
use crate::format::blocks::{Block, assemble};
use crate::format::decode::{Decode, DecodeError, Sink};
use crate::jobs::CancelToken;

/// Filter ids.
pub(super) const DEFLATE: u16 = 1;
pub(super) const SHUFFLE: u16 = 2;
pub(super) const FLETCHER32: u16 = 3;
pub(super) const LZF: u16 = 32000;

/// Bytes handed to the sink at once by the contiguous decoder.
const PIECE: usize = 1 << 20;

/// The largest ratio of a deflate stream's output to its input.
const DEFLATE_RATIO: usize = 1032;

/// A chunked dataset (or one never written: no chunks, all fill).
#[derive(Debug)]
pub(super) struct Chunked {
    /// The dataset's path, for messages.
    pub name: String,
    /// Its shape.
    pub shape: Vec<u64>,
    /// Bytes of one element.
    pub element: usize,
    /// Bytes of one decoded chunk.
    pub chunk_bytes: u64,
    /// From stored elements to little-endian ones.
    pub conv: Conv,
    /// The filter pipeline, in the order it was applied when writing.
    pub filters: Vec<Filter>,
    /// The chunks written.
    pub blocks: Vec<Block<Piece>>,
    /// One element of fill value, little-endian.
    pub fill: Vec<u8>,
}

impl Chunked {
    fn err(&self, piece: &Piece, kind: &'static str, what: impl std::fmt::Display) -> DecodeError {
        DecodeError::invalid(
            kind,
            format!(
                "dataset {:?}, chunk at bytes {}..{}: {what}",
                self.name,
                piece.start,
                piece.start.saturating_add(piece.len)
            ),
        )
    }

    /// The chunk's bytes, run back through the pipeline and converted.
    fn read(&self, file: &[u8], piece: &Piece, out: &mut Vec<u8>) -> Result<(), DecodeError> {
        let raw = usize::try_from(piece.start)
            .ok()
            .zip(usize::try_from(piece.start.saturating_add(piece.len)).ok())
            .and_then(|(s, e)| file.get(s..e))
            .ok_or_else(|| self.err(piece, "Truncated", "past the end of the file"))?;
        let cap = self.chunk_bytes as usize;
        let mut data: Cow<'_, [u8]> = Cow::Borrowed(raw);
        if piece.filtered {
            for (i, f) in self.filters.iter().enumerate().rev() {
                if i < 32 && piece.mask & (1 << i) != 0 {
                    continue;
                }
                data = match f.id {
                    FLETCHER32 => self.fletcher(piece, data)?,
                    DEFLATE => Cow::Owned(
                        inflate(&data, cap).map_err(|e| self.err(piece, "BadDeflate", e))?,
                    ),
                    LZF => Cow::Owned(lzf(&data, cap).map_err(|e| self.err(piece, "BadLzf", e))?),
                    SHUFFLE => {
                        let size = f.client.first().map_or(self.element, |&s| s as usize);
                        Cow::Owned(unshuffle(&data, size))
                    }
                    id => {
                        return Err(self.err(piece, "UnknownFilter", format!("filter {id}")));
                    }
                };
            }
        }
        let mut bytes = data.into_owned();
        self.conv.apply(&mut bytes);
        if out.is_empty() {
            *out = bytes;
        } else {
            out.extend_from_slice(&bytes);
        }
        Ok(())
    }

    /// Checks and strips the Fletcher-32 checksum (stored little-endian
    /// after the data; the byte-swapped form of HDF5 before 1.6.3 is
    /// accepted too, as HDF5 does).
    fn fletcher<'a>(
        &self,
        piece: &Piece,
        data: Cow<'a, [u8]>,
    ) -> Result<Cow<'a, [u8]>, DecodeError> {
        let n = data.len();
        if n < 4 {
            return Err(self.err(
                piece,
                "ChecksumMismatch",
                "shorter than its Fletcher-32 checksum",
            ));
        }
        let (body, sum) = data.split_at(n - 4);
        let stored = u32::from_le_bytes([sum[0], sum[1], sum[2], sum[3]]);
        let computed = fletcher32(body);
        let c = computed.to_le_bytes();
        let reversed = u32::from_le_bytes([c[1], c[0], c[3], c[2]]);
        if stored != computed && stored != reversed {
            return Err(self.err(
                piece,
                "ChecksumMismatch",
                format!("Fletcher-32 checksum {computed:#010x} computed, {stored:#010x} stored"),
            ));
        }
        Ok(match data {
            Cow::Borrowed(b) => Cow::Borrowed(&b[..n - 4]),
            Cow::Owned(mut v) => {
                v.truncate(n - 4);
                Cow::Owned(v)
            }
        })
    }
}

impl Decode for Chunked {
    fn ranges(&self) -> Vec<(usize, Range<u64>)> {
        self.blocks
            .iter()
            .map(|b| (0, b.piece.start..b.piece.start.saturating_add(b.piece.len)))
            .collect()
    }

    fn decode(
        &self,
        files: &[&[u8]],
        cancel: &CancelToken,
        sink: Sink<'_>,
    ) -> Result<(), DecodeError> {
        let file = files.first().copied().unwrap_or(&[]);
        assemble(
            &self.shape,
            self.element,
            &self.blocks,
            &self.fill,
            &|p, out| {
                cancel.check()?;
                self.read(file, p, out)
            },
            cancel,
            sink,
        )
    }
}

/// A contiguous (or compact) range whose elements are reordered as read.
#[derive(Debug)]
pub(super) struct Reordered {
    /// The dataset's path, for messages.
    pub name: String,
    /// Its absolute byte range.
    pub range: Range<u64>,
    /// Bytes of one element.
    pub element: usize,
    /// From stored elements to little-endian ones.
    pub conv: Conv,
}

impl Decode for Reordered {
    fn ranges(&self) -> Vec<(usize, Range<u64>)> {
        vec![(0, self.range.clone())]
    }

    fn decode(
        &self,
        files: &[&[u8]],
        cancel: &CancelToken,
        sink: Sink<'_>,
    ) -> Result<(), DecodeError> {
        let file = files.first().copied().unwrap_or(&[]);
        let bytes = usize::try_from(self.range.start)
            .ok()
            .zip(usize::try_from(self.range.end).ok())
            .and_then(|(s, e)| file.get(s..e))
            .ok_or_else(|| {
                DecodeError::invalid(
                    "Truncated",
                    format!(
                        "dataset {:?}: bytes {}..{} are past the end of the file",
                        self.name, self.range.start, self.range.end
                    ),
                )
            })?;
        let step = (PIECE / self.element.max(1)).max(1) * self.element.max(1);
        let mut buf = Vec::with_capacity(step.min(bytes.len()));
        for part in bytes.chunks(step) {
            cancel.check()?;
            buf.clear();
            buf.extend_from_slice(part);
            self.conv.apply(&mut buf);
            sink(&buf).map_err(DecodeError::Sink)?;
        }
        Ok(())
    }
}

/// Inflates a zlib stream into at most `cap` bytes (more is an error:
/// the chunk holds `cap`), growing the output as it comes, never by a
/// declared size beyond what the input can produce.
pub(super) fn inflate(input: &[u8], cap: usize) -> Result<Vec<u8>, String> {
    use flate2::{Decompress, FlushDecompress, Status};
    let mut d = Decompress::new(true);
    let limit = cap.saturating_add(1);
    let first = cap
        .min(input.len().saturating_mul(DEFLATE_RATIO).saturating_add(64))
        .max(64);
    let mut out: Vec<u8> = Vec::with_capacity(first.min(limit));
    loop {
        if out.len() == out.capacity() {
            if out.len() >= limit {
                return Err(format!(
                    "the deflate stream inflates past the chunk's {cap} bytes"
                ));
            }
            let grow = out.capacity().max(64).min(limit - out.len());
            out.reserve_exact(grow);
        }
        let (used, made) = (d.total_in(), out.len());
        let rest = input.get(used as usize..).unwrap_or(&[]);
        let status = d
            .decompress_vec(rest, &mut out, FlushDecompress::Finish)
            .map_err(|e| format!("a bad deflate stream ({e})"))?;
        if status == Status::StreamEnd {
            break;
        }
        if d.total_in() == used && out.len() == made && out.len() < out.capacity() {
            return Err(format!(
                "the deflate stream ends early, after {} of its {} bytes",
                d.total_in(),
                input.len()
            ));
        }
    }
    if out.len() > cap {
        return Err(format!(
            "the deflate stream inflates past the chunk's {cap} bytes"
        ));
    }
    Ok(out)
}

/// Decompresses an LZF block (liblzf's format, as h5py's filter writes
/// it) into at most `cap` bytes.
pub(super) fn lzf(input: &[u8], cap: usize) -> Result<Vec<u8>, String> {
    let mut out: Vec<u8> = Vec::with_capacity(cap.min(input.len().saturating_mul(4)));
    let mut ip = 0usize;
    let short = || "the LZF stream ends inside an instruction".to_string();
    let over = || format!("the LZF stream decompresses past the chunk's {cap} bytes");
    while ip < input.len() {
        let ctrl = input[ip] as usize;
        ip += 1;
        if ctrl < 32 {
            let n = ctrl + 1;
            let lit = input.get(ip..ip + n).ok_or_else(short)?;
            if out.len() + n > cap {
                return Err(over());
            }
            out.extend_from_slice(lit);
            ip += n;
        } else {
            let mut n = ctrl >> 5;
            if n == 7 {
                n += *input.get(ip).ok_or_else(short)? as usize;
                ip += 1;
            }
            let back = ((ctrl & 0x1f) << 8) + *input.get(ip).ok_or_else(short)? as usize + 1;
            ip += 1;
            n += 2;
            if back > out.len() {
                return Err(format!(
                    "an LZF back-reference {back} bytes back, before the output's start"
                ));
            }
            if out.len() + n > cap {
                return Err(over());
            }
            let from = out.len() - back;
            for k in 0..n {
                let b = out[from + k];
                out.push(b);
            }
        }
    }
    Ok(out)
}

/// Undoes the shuffle filter: byte `j` of element `i` was stored at
/// `j * n + i`; a tail shorter than an element is as stored.
pub(super) fn unshuffle(src: &[u8], size: usize) -> Vec<u8> {
    if size <= 1 {
        return src.to_vec();
    }
    let n = src.len() / size;
    let mut out = vec![0u8; src.len()];
    let (body, tail) = out.split_at_mut(n * size);
    match size {
        2 => gather::<2>(src, n, body),
        4 => gather::<4>(src, n, body),
        8 => gather::<8>(src, n, body),
        _ => {
            for j in 0..size {
                for (i, &b) in src[j * n..(j + 1) * n].iter().enumerate() {
                    body[i * size + j] = b;
                }
            }
        }
    }
    tail.copy_from_slice(&src[n * size..]);
    out
}

/// Unshuffles `n` elements of `S` bytes: element `i` gathers byte `i` of
/// each of the `S` planes.
fn gather<const S: usize>(src: &[u8], n: usize, out: &mut [u8]) {
    let planes: [&[u8]; S] = std::array::from_fn(|j| &src[j * n..(j + 1) * n]);
    for (i, e) in out.chunks_exact_mut(S).enumerate() {
        for (j, b) in e.iter_mut().enumerate() {
            *b = planes[j][i];
        }
    }
}
