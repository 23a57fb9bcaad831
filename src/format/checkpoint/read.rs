//! How readers reach a checkpoint's bytes: remote ranges fetched into the
//! cache, tensors not stored in C order prepared in scratch space, and the
//! checks before and after a read that the files did not change.

use super::{Checkpoint, TensorRef};
use crate::format::LoadError;

impl Checkpoint {
    /// Brings the bytes of `tensors` into reach: a tensor not stored as a
    /// C-order, little-endian slice of its file is prepared in scratch
    /// space (once; see `StoredFile::prepare`); for remote files, what the
    /// cache lacks is fetched (touching tensors in one run of chunks) and
    /// kept until the result is dropped.
    /// Every reader calls this before it reads; received bytes are added to
    /// `progress`'s fetched count.
    pub fn fetch(
        &self,
        tensors: &[TensorRef],
        cancel: &crate::jobs::CancelToken,
        progress: &crate::jobs::Progress,
    ) -> Result<crate::source::Fetched, LoadError> {
        let mut out = self.fetch_remote(tensors, cancel, progress)?;
        // Then what is not stored in C order is read from those bytes.
        for &t in tensors {
            if let Some(shard) = self.shards.get(t.shard)
                && let Some(pin) = shard.file.prepare(t.index, cancel, None)?
            {
                out.keep(pin);
            }
        }
        Ok(out)
    }

    /// [`Checkpoint::fetch`] of one tensor, for a view that waits for it:
    /// the bytes its reading into C order writes are `progress`'s work.
    pub fn fetch_one(
        &self,
        t: TensorRef,
        cancel: &crate::jobs::CancelToken,
        progress: &crate::jobs::Progress,
    ) -> Result<crate::source::Fetched, LoadError> {
        let mut out = self.fetch_remote(&[t], cancel, progress)?;
        if let (Some(shard), Some(info)) = (self.shards.get(t.shard), self.info(t)) {
            progress.set_total(info.nbytes());
            if let Some(pin) = shard.file.prepare(t.index, cancel, Some(progress))? {
                out.keep(pin);
            }
        }
        Ok(out)
    }

    /// The remote half of [`Checkpoint::fetch`]: the bytes the cache lacks.
    fn fetch_remote(
        &self,
        tensors: &[TensorRef],
        cancel: &crate::jobs::CancelToken,
        progress: &crate::jobs::Progress,
    ) -> Result<crate::source::Fetched, LoadError> {
        let mut out = crate::source::Fetched::default();
        if !self.is_remote() {
            return Ok(out);
        }
        // (shard, file of the shard, range).
        let mut ranges: Vec<(usize, usize, std::ops::Range<u64>)> = tensors
            .iter()
            .filter_map(|&t| {
                let shard = self.shards.get(t.shard)?;
                Some(
                    shard
                        .file
                        .read_ranges(t.index)
                        .into_iter()
                        .filter(|(k, r)| {
                            !r.is_empty()
                                && shard
                                    .file
                                    .file_source(*k)
                                    .is_some_and(|s| s.remote().is_some())
                        })
                        .map(move |(k, r)| (t.shard, k, r)),
                )
            })
            .flatten()
            .collect();
        ranges.sort_by_key(|(s, k, r)| (*s, *k, r.start));
        // Merged only where they touch (within a block, which the cache
        // fetches whole anyway): a gap between two tensors is never fetched.
        let mut merged: Vec<(usize, usize, std::ops::Range<u64>)> = Vec::new();
        for (s, k, r) in ranges {
            match merged.last_mut() {
                Some((ls, lk, lr))
                    if *ls == s
                        && *lk == k
                        && r.start
                            <= lr.end.saturating_add(crate::source::remote::cache::BLOCK) =>
                {
                    lr.end = lr.end.max(r.end);
                }
                _ => merged.push((s, k, r)),
            }
        }
        for (s, k, r) in merged {
            let shard = &self.shards[s];
            let Some(source) = shard.file.file_source(k) else {
                continue;
            };
            let pin = source
                .fetch(r, cancel, progress)
                .map_err(|error| LoadError::Remote {
                    path: shard.file.path().to_path_buf(),
                    error,
                })?;
            out.extend(pin);
        }
        // A remote zip's storages: each where its local header says.
        for &t in tensors {
            if let Some(shard) = self.shards.get(t.shard) {
                shard.file.check_fetched(t.index)?;
            }
        }
        Ok(out)
    }

    /// The bytes of a small tensor that is read while a checkpoint is
    /// looked at (a quantization's `g_idx`, a quant state): for a remote
    /// file not yet cached, read in one request of exactly its range,
    /// outside the cache (a chunk each would cost megabytes per layer).
    /// Empty when that read fails: the caller's verdict names the tensor.
    pub fn small_bytes(&self, t: TensorRef) -> std::borrow::Cow<'_, [u8]> {
        let (Some(shard), Some(info)) = (self.shards.get(t.shard), self.info(t)) else {
            return std::borrow::Cow::Borrowed(&[]);
        };
        if !shard.file.is_in_place(t.index) {
            // Small by the caller's word: prepared now and copied.
            let pin = shard
                .file
                .prepare(t.index, &crate::jobs::CancelToken::default(), None);
            return match pin {
                Ok(_pin) => std::borrow::Cow::Owned(self.bytes(t).to_vec()),
                Err(_) => std::borrow::Cow::Borrowed(&[]),
            };
        }
        let range = shard.file.tensor_range(info);
        match shard.file.remote() {
            Some(remote) if !remote.is_present(range.clone()) => {
                std::borrow::Cow::Owned(remote.read_exact(range).unwrap_or_default())
            }
            _ => std::borrow::Cow::Borrowed(self.bytes(t)),
        }
    }

    /// True when the bytes of `t` can be read now: in place, or prepared
    /// in scratch space (a reader holds what [`Checkpoint::fetch`] gave).
    pub fn is_prepared(&self, t: TensorRef) -> bool {
        self.shards
            .get(t.shard)
            .is_some_and(|s| s.file.is_prepared(t.index))
    }

    /// Bytes the cache lacks for `tensors` (0 for local files): what
    /// [`Checkpoint::fetch`] would download, for asking first.
    pub fn missing_bytes(&self, tensors: &[TensorRef]) -> u64 {
        // Ranges by (shard, file of the shard).
        let mut by_file: std::collections::BTreeMap<(usize, usize), Vec<std::ops::Range<u64>>> =
            std::collections::BTreeMap::new();
        for &t in tensors {
            if let Some(shard) = self.shards.get(t.shard) {
                for (k, r) in shard.file.read_ranges(t.index) {
                    by_file.entry((t.shard, k)).or_default().push(r);
                }
            }
        }
        by_file
            .iter()
            .filter_map(|(&(s, k), ranges)| {
                let remote = self.shards.get(s)?.file.file_source(k)?.remote()?;
                Some(remote.missing(ranges))
            })
            .sum()
    }

    /// Checks that the files holding `tensors` are as they were when
    /// mapped (see `StoredFile::check_unchanged`): before a reader
    /// starts, and again before it reports what it read. For a remote
    /// file, also that the tensors' bytes were fetched: a reader that did
    /// not fetch them read zeros, which must never be reported.
    pub fn check_unchanged(&self, tensors: &[TensorRef]) -> Result<(), LoadError> {
        for &t in tensors {
            if let (Some(shard), Some(info)) = (self.shards.get(t.shard), self.info(t))
                && !shard.file.is_prepared(t.index)
            {
                return Err(LoadError::Remote {
                    path: shard.file.path().to_path_buf(),
                    error: crate::source::RemoteError::new(
                        "NotFetched",
                        format!(
                            "the bytes of tensor {:?} were read before they were prepared; nothing is reported",
                            info.name()
                        ),
                    ),
                });
            }
            if let (Some(shard), Some(info)) = (self.shards.get(t.shard), self.info(t))
                && !shard.file.is_present(t.index)
            {
                return Err(LoadError::Remote {
                    path: shard.file.path().to_path_buf(),
                    error: crate::source::RemoteError::new(
                        "NotFetched",
                        format!(
                            "the bytes of tensor {:?} were read before they were fetched (or were evicted from the cache while read); nothing is reported",
                            info.name()
                        ),
                    ),
                });
            }
        }
        self.check_files(tensors)
    }

    /// The first half of [`Checkpoint::check_unchanged`]: the files holding
    /// `tensors` are as they were when opened. For a reader's start, before
    /// it fetches.
    pub fn check_files(&self, tensors: &[TensorRef]) -> Result<(), LoadError> {
        let mut shards: Vec<usize> = tensors.iter().map(|t| t.shard).collect();
        shards.sort_unstable();
        shards.dedup();
        for s in shards {
            if let Some(shard) = self.shards.get(s) {
                shard.file.check_unchanged()?;
            }
        }
        Ok(())
    }

    /// Reads what opening a file does not: the compressed members of a zip
    /// container, each to its end, checking its length and CRC-32 (nothing
    /// to do for safetensors, whose whole verdict is in its header). For
    /// `validate`, whose verdict covers the data.
    pub fn verify_data(&self, cancel: &crate::jobs::CancelToken) -> Result<(), LoadError> {
        self.shards
            .iter()
            .try_for_each(|s| s.file.verify_members(cancel))
    }

    /// Refuses a checkpoint no verb may read (a PyTorch file whose pickle
    /// is unsafe); `info` and `validate` report it instead.
    pub fn readable(&self) -> Result<(), LoadError> {
        self.shards.iter().try_for_each(|s| s.file.readable())
    }

    /// [`Checkpoint::check_unchanged`] for every file of the checkpoint.
    pub fn check_all_unchanged(&self) -> Result<(), LoadError> {
        self.shards
            .iter()
            .try_for_each(|s| s.file.check_unchanged())
    }
}
