//! Reading a tensor's bytes from the data shards: a whole tensor streamed
//! in pieces of 1 MiB while its CRC-32C is computed and checked at the end,
//! and a partitioned tensor assembled from its slices (each checked whole)
//! by [`crate::format::blocks::assemble`].

use std::ops::Range;

use super::crc;
use crate::format::blocks::{self, Block};
use crate::format::decode::{Decode, DecodeError, Sink};
use crate::jobs::CancelToken;

/// Bytes handed to the sink at once.
const PIECE: usize = 1 << 20;

/// Stored bytes of one entry: where they are and the CRC they must have.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    /// The entry's key, for messages (escaped if binary).
    pub key: String,
    /// The shard.
    pub shard: u32,
    /// Its offset in the shard.
    pub offset: u64,
    /// Its length in bytes.
    pub size: u64,
    /// The masked CRC-32C stored in the entry.
    pub crc32c: u32,
}

impl Chunk {
    /// The data file's index (file 0 is the `.index`).
    pub fn file(&self) -> usize {
        self.shard as usize + 1
    }

    fn range(&self) -> Range<u64> {
        self.offset..self.offset.saturating_add(self.size)
    }

    /// Its bytes in `files`, or why they are not there.
    fn bytes<'f>(&self, files: &[&'f [u8]]) -> Result<&'f [u8], DecodeError> {
        let Some(file) = files.get(self.file()) else {
            return Err(DecodeError::invalid(
                "DataFileMissing",
                format!(
                    "entry {:?}: data file {} (shard {}) was not given",
                    self.key,
                    self.file(),
                    self.shard
                ),
            ));
        };
        let r = self.range();
        usize::try_from(r.start)
            .ok()
            .zip(usize::try_from(r.end).ok())
            .and_then(|(a, b)| file.get(a..b))
            .ok_or_else(|| {
                DecodeError::invalid(
                    "Truncated",
                    format!(
                        "entry {:?}: bytes {}..{} of shard {} are past its end ({} bytes)",
                        self.key,
                        r.start,
                        r.end,
                        self.shard,
                        file.len()
                    ),
                )
            })
    }

    fn mismatch(&self, computed: u32) -> DecodeError {
        DecodeError::invalid(
            "ChecksumMismatch",
            format!(
                "entry {:?}: the CRC-32C of bytes {}..{} of shard {} is {:#010x} (masked), the entry says {:#010x}",
                self.key,
                self.offset,
                self.offset.saturating_add(self.size),
                self.shard,
                crc::mask(computed),
                self.crc32c
            ),
        )
    }

    /// Its bytes appended to `out`, after checking their CRC.
    fn read_into(&self, files: &[&[u8]], out: &mut Vec<u8>) -> Result<(), DecodeError> {
        let bytes = self.bytes(files)?;
        let computed = crc::value(bytes);
        if crc::mask(computed) != self.crc32c {
            return Err(self.mismatch(computed));
        }
        out.extend_from_slice(bytes);
        Ok(())
    }
}

/// A tensor stored whole in one shard.
#[derive(Debug)]
pub struct Whole {
    /// Where its bytes are.
    pub chunk: Chunk,
}

impl Decode for Whole {
    fn ranges(&self) -> Vec<(usize, Range<u64>)> {
        vec![(self.chunk.file(), self.chunk.range())]
    }

    fn decode(
        &self,
        files: &[&[u8]],
        cancel: &CancelToken,
        sink: Sink<'_>,
    ) -> Result<(), DecodeError> {
        let bytes = self.chunk.bytes(files)?;
        let mut crc = 0u32;
        for piece in bytes.chunks(PIECE) {
            cancel.check()?;
            crc = crc::extend(crc, piece);
            sink(piece).map_err(DecodeError::Sink)?;
        }
        if crc::mask(crc) != self.chunk.crc32c {
            return Err(self.chunk.mismatch(crc));
        }
        Ok(())
    }
}

/// A partitioned tensor: its slices, each stored as an entry of its own.
#[derive(Debug)]
pub struct Sliced {
    /// The tensor's shape.
    pub shape: Vec<u64>,
    /// Bytes per element.
    pub element: usize,
    /// The slices (checked to tile the shape exactly).
    pub blocks: Vec<Block<Chunk>>,
}

impl Decode for Sliced {
    fn ranges(&self) -> Vec<(usize, Range<u64>)> {
        self.blocks
            .iter()
            .map(|b| (b.piece.file(), b.piece.range()))
            .collect()
    }

    fn decode(
        &self,
        files: &[&[u8]],
        cancel: &CancelToken,
        sink: Sink<'_>,
    ) -> Result<(), DecodeError> {
        let fill = vec![0u8; self.element];
        blocks::assemble(
            &self.shape,
            self.element,
            &self.blocks,
            &fill,
            &|chunk: &Chunk, out: &mut Vec<u8>| chunk.read_into(files, out),
            cancel,
            sink,
        )
    }
}
