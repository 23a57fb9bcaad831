//! The global tensors of a ZeRO checkpoint, as deepspeed's own
//! `zero_to_fp32.get_fp32_state_dict_from_zero_checkpoint` rebuilds them
//! (DISTRIBUTED.md §6): buffers, frozen parameters, trainable parameters
//! (the fp32 masters), shared aliases. A tensor's bytes are ranges of the
//! files, in order: one range is read in place, several (a parameter cut
//! across ranks) are copied range by range ([`Pieces`]), and a floating
//! buffer that is not F32 is widened as it is copied.

use std::ops::Range;
use std::sync::Arc;

use super::states::{ModelStates, OptimStates};
use super::torch::{Stored, element_size};
use crate::dtype::Dtype;
use crate::format::decode::{Data, Decode, DecodeError, Sink, Tensor};
use crate::jobs::CancelToken;

/// Bytes handed to the sink at once, at most.
const CHUNK: u64 = 1 << 20;

/// A tensor's bytes: ranges of files, in order, each copied as it is or
/// (`widen`) each element of that dtype written as F32.
#[derive(Debug)]
pub struct Pieces {
    pieces: Vec<(usize, Range<u64>)>,
    widen: Option<Dtype>,
}

impl Decode for Pieces {
    fn ranges(&self) -> Vec<(usize, Range<u64>)> {
        self.pieces.clone()
    }

    fn decode(
        &self,
        files: &[&[u8]],
        cancel: &CancelToken,
        sink: Sink<'_>,
    ) -> Result<(), DecodeError> {
        let element = self.widen.map_or(4, element_size);
        // Whole elements per chunk.
        let chunk = (CHUNK / element) * element;
        let mut wide: Vec<u8> = Vec::new();
        let mut values: Vec<f64> = Vec::new();
        for (k, range) in &self.pieces {
            let bytes = crate::format::decode::file_range(files, *k, range)?;
            for part in bytes.chunks(chunk as usize) {
                cancel.check()?;
                match self.widen {
                    None => sink(part).map_err(DecodeError::Sink)?,
                    Some(from) => {
                        widen(from, part, &mut values, &mut wide);
                        sink(&wide).map_err(DecodeError::Sink)?;
                    }
                }
            }
        }
        Ok(())
    }
}

/// `part`'s elements of `from` as F32, little-endian, into `out`, exactly
/// as torch's `.float()`: BF16 by its bits (NaNs kept), others by value.
fn widen(from: Dtype, part: &[u8], values: &mut Vec<f64>, out: &mut Vec<u8>) {
    out.clear();
    if from == Dtype::BF16 {
        for c in part.chunks_exact(2) {
            let bits = u32::from(u16::from_le_bytes([c[0], c[1]])) << 16;
            out.extend_from_slice(&bits.to_le_bytes());
        }
        return;
    }
    let n = (part.len() as u64 / element_size(from)) as usize;
    values.clear();
    values.resize(n, 0.0);
    let got = crate::dtype::decode::decode_f64(
        from,
        part,
        0,
        values,
        crate::dtype::decode::BitOrder::default(),
    );
    for &v in &values[..got] {
        // `as` rounds to nearest, ties to even, as torch does.
        out.extend_from_slice(&(v as f32).to_le_bytes());
    }
}

/// The data of a tensor whose bytes are `pieces` (widened from `widen`).
fn data(pieces: Vec<(usize, Range<u64>)>, widen: Option<Dtype>) -> Data {
    match (pieces.as_slice(), widen) {
        ([], None) => Data::Plain {
            file: 0,
            range: 0..0,
            big_endian: false,
        },
        ([(file, range)], None) => Data::Plain {
            file: *file,
            range: range.clone(),
            big_endian: false,
        },
        _ => Data::Decoded(Arc::new(Pieces { pieces, widen })),
    }
}

/// A flat vector made of consecutive stored vectors: `(file, first byte,
/// elements)` each.
struct Flat {
    parts: Vec<(usize, u64, u64)>,
    element: u64,
    len: u64,
}

impl Flat {
    fn new(element: u64) -> Self {
        Flat {
            parts: Vec::new(),
            element,
            len: 0,
        }
    }

    fn push(&mut self, file: usize, stored: &Stored) {
        let n = stored.numel();
        self.parts.push((file, stored.range.start, n));
        self.len += n;
    }

    /// The byte ranges of elements `from..from + n`, or `None` when they
    /// are not all inside.
    fn slice(&self, from: u64, n: u64) -> Option<Vec<(usize, Range<u64>)>> {
        let end = from.checked_add(n).filter(|&e| e <= self.len)?;
        let mut out = Vec::new();
        let mut at = 0u64;
        for &(file, start, len) in &self.parts {
            let (a, b) = (from.max(at), end.min(at + len));
            if a < b {
                let s = start + (a - at) * self.element;
                out.push((file, s..s + (b - a) * self.element));
            }
            at += len;
            if at >= end {
                break;
            }
        }
        Some(out)
    }
}

/// The element count of `shape`, checked.
fn numel(shape: &[u64]) -> Result<u64, String> {
    shape
        .iter()
        .try_fold(1u64, |n, &d| n.checked_mul(d))
        .ok_or_else(|| format!("the shape {shape:?} overflows 64 bits"))
}

fn tensor(name: &str, dtype: Dtype, shape: &[u64], data: Data, role: &'static str) -> Tensor {
    Tensor {
        name: name.to_owned(),
        dtype,
        shape: shape.to_vec(),
        data,
        facts: vec![("role", serde_json::Value::from(role))],
    }
}

/// What the reassembly reads: the model-states files (the first one's
/// layout; every one's frozen fragments in stage 3) and each rank's
/// optimizer file, each with its file index.
pub(super) struct Layout<'a> {
    /// The zero stage: 1, 2 or 3.
    pub stage: i64,
    /// The world size W (`partition_count`).
    pub world: u64,
    /// The model-states files, in natural order.
    pub models: &'a [(usize, ModelStates)],
    /// The optimizer files, rank by rank.
    pub ranks: &'a [(usize, OptimStates)],
}

/// The global tensors, in `zero_to_fp32`'s order: buffers, frozen
/// parameters, trainable parameters, shared aliases.
pub(super) fn tensors(layout: &Layout<'_>) -> Result<Vec<Tensor>, String> {
    let [(first_file, first), ..] = layout.models else {
        return Err("no model-states file".into());
    };
    let mut out = Vec::new();
    for (name, stored) in &first.buffers {
        let range = vec![(*first_file, stored.range.clone())];
        let floating = stored.dtype.kind() == crate::dtype::DtypeKind::Float;
        let (dtype, widen) = if floating && stored.dtype != Dtype::F32 {
            (Dtype::F32, Some(stored.dtype))
        } else {
            (stored.dtype, None)
        };
        out.push(tensor(
            name,
            dtype,
            &stored.shape,
            data(range, widen),
            "buffer",
        ));
    }
    frozen(layout, first, &mut out)?;
    match layout.stage {
        1 | 2 => stage12(layout, first, &mut out)?,
        _ => stage3(layout, first, &mut out)?,
    }
    for (alias, target) in &first.shared {
        let Some(t) = out.iter().find(|t| &t.name == target) else {
            continue;
        };
        let mut copy = t.clone();
        copy.name.clone_from(alias);
        copy.facts = vec![
            ("role", serde_json::Value::from("shared")),
            ("alias_of", serde_json::Value::from(target.as_str())),
        ];
        match out.iter_mut().find(|t| &t.name == alias) {
            Some(existing) => *existing = copy,
            None => out.push(copy),
        }
    }
    Ok(out)
}

/// The fragment of frozen parameter `name` a model-states file holds.
fn fragment<'m>(m: &'m ModelStates, name: &str) -> Option<&'m Stored> {
    m.frozen_fragments
        .iter()
        .find(|(f, _)| f == name)
        .map(|(_, s)| s)
}

/// Frozen parameters (when `frozen_param_shapes` is non-empty): stages 1
/// and 2 keep each whole in the first file's `frozen_param_fragments`;
/// stage 3 cuts each across the ranks' files, the parts concatenated and
/// cut to its size.
fn frozen(layout: &Layout<'_>, first: &ModelStates, out: &mut Vec<Tensor>) -> Result<(), String> {
    for (name, shape) in &first.frozen_shapes {
        let n = numel(shape).map_err(|e| format!("frozen parameter {name:?}: {e}"))?;
        let missing =
            || format!("frozen parameter {name:?} has no fragment in frozen_param_fragments");
        let files: Vec<(usize, &Stored)> = if layout.stage == 3 {
            layout
                .models
                .iter()
                .map(|(k, m)| fragment(m, name).map(|s| (*k, s)).ok_or_else(missing))
                .collect::<Result<_, _>>()?
        } else {
            let (k, _) = layout.models[0];
            vec![(k, fragment(first, name).ok_or_else(missing)?)]
        };
        let dtype = files[0].1.dtype;
        if files.iter().any(|(_, s)| s.dtype != dtype) {
            return Err(format!(
                "frozen parameter {name:?}: its fragments have different dtypes"
            ));
        }
        let mut flat = Flat::new(element_size(dtype));
        for (k, s) in &files {
            flat.push(*k, s);
        }
        let whole = layout.stage != 3 && flat.len != n;
        let pieces = flat.slice(0, n).filter(|_| !whole).ok_or_else(|| {
            format!(
                "frozen parameter {name:?} of shape {shape:?} has {} elements in its fragments",
                flat.len
            )
        })?;
        out.push(tensor(name, dtype, shape, data(pieces, None), "frozen"));
    }
    Ok(())
}

/// The groups' parameters that each rank's optimizer file cuts: the
/// shapes of `param_shapes`, checked to be one group per flat group.
fn check_groups(layout: &Layout<'_>, first: &ModelStates) -> Result<usize, String> {
    let groups = layout.ranks.first().map_or(0, |(_, o)| o.flat.len());
    if let Some((_, o)) = layout.ranks.iter().find(|(_, o)| o.flat.len() != groups) {
        return Err(format!(
            "the optimizer files disagree on the number of parameter groups ({groups} and {})",
            o.flat.len()
        ));
    }
    if first.param_shapes.len() != groups {
        return Err(format!(
            "param_shapes has {} parameter groups but the optimizer files {groups}",
            first.param_shapes.len()
        ));
    }
    Ok(groups)
}

/// Stages 1 and 2: a group's full flat vector is the ranks' slices in
/// rank order; its parameters take consecutive runs of it (plus each one's
/// alignment padding), and what remains is alignment padding.
fn stage12(layout: &Layout<'_>, first: &ModelStates, out: &mut Vec<Tensor>) -> Result<(), String> {
    let groups = check_groups(layout, first)?;
    let paddings = layout
        .ranks
        .first()
        .and_then(|(_, o)| o.alignment_paddings.as_ref());
    let align = 2 * layout.world;
    let align_up = |x: u64| x.div_ceil(align).checked_mul(align);
    for g in 0..groups {
        let mut flat = Flat::new(4);
        for (k, o) in layout.ranks {
            flat.push(*k, &o.flat[g]);
        }
        let shapes = &first.param_shapes[g];
        let padding = match paddings {
            Some(p) => {
                let group = p
                    .get(g)
                    .ok_or_else(|| format!("param_alignment_paddings has no group {g}"))?;
                if group.len() != shapes.len() {
                    return Err(format!(
                        "param_alignment_paddings has {} entries for group {g} of {} parameters",
                        group.len(),
                        shapes.len()
                    ));
                }
                Some(group)
            }
            None => None,
        };
        let mut offset = 0u64;
        for (i, (name, shape)) in shapes.iter().enumerate() {
            let n = numel(shape).map_err(|e| format!("parameter {name:?}: {e}"))?;
            let pieces = flat.slice(offset, n).ok_or_else(|| {
                format!(
                    "parameter {name:?} ({n} elements at {offset}) lies past the end of group {g}'s flat fp32 buffers, {} elements over {} ranks: they are shorter than the parameters",
                    flat.len,
                    layout.world
                )
            })?;
            out.push(tensor(name, Dtype::F32, shape, data(pieces, None), "param"));
            offset += n;
            if let Some(p) = padding {
                offset = offset
                    .checked_add(p[i])
                    .ok_or("param_alignment_paddings overflows")?;
            }
        }
        let (used, len) = (align_up(offset), align_up(flat.len));
        if used.is_none() || used != len {
            return Err(format!(
                "group {g}'s parameters use {offset} elements of its flat fp32 buffers' {}: aligned to {align}, they should be equal",
                flat.len
            ));
        }
    }
    Ok(())
}

/// Stage 3: each rank's groups make one flat vector; every parameter owns
/// `ceil(numel / W)` elements of every rank's vector at a running offset,
/// rank 0's part first, cut to its size (the padding, never read, is the
/// last ranks').
fn stage3(layout: &Layout<'_>, first: &ModelStates, out: &mut Vec<Tensor>) -> Result<(), String> {
    let w = layout.world;
    let mut flats = Vec::with_capacity(layout.ranks.len());
    for (k, o) in layout.ranks {
        let mut flat = Flat::new(4);
        for s in &o.flat {
            flat.push(*k, s);
        }
        flats.push(flat);
    }
    let len = flats.first().map_or(0, |f| f.len);
    if let Some(f) = flats.iter().find(|f| f.len != len) {
        return Err(format!(
            "the ranks' flat fp32 buffers differ in length ({len} and {} elements)",
            f.len
        ));
    }
    let mut offset = 0u64;
    for (name, shape) in first.param_shapes.iter().flatten() {
        let n = numel(shape).map_err(|e| format!("parameter {name:?}: {e}"))?;
        let part = n.div_ceil(w);
        let mut pieces = Vec::new();
        let mut left = n;
        for flat in &flats {
            let take = part.min(left);
            let got = flat
                .slice(offset, part)
                .and_then(|_| flat.slice(offset, take))
                .ok_or_else(|| {
                    format!(
                        "parameter {name:?} ({part} elements per rank at {offset}) lies past the end of the flat fp32 buffers ({len} elements per rank): they are shorter than the parameters"
                    )
                })?;
            pieces.extend(got);
            left -= take;
        }
        out.push(tensor(name, Dtype::F32, shape, data(pieces, None), "param"));
        offset += part;
    }
    if offset != len {
        return Err(format!(
            "the parameters use {offset} elements of each rank's flat fp32 buffers, which hold {len}"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slice_crosses_parts_in_order() {
        let mut f = Flat::new(4);
        let s = |start: u64, n: u64| Stored {
            dtype: Dtype::F32,
            shape: vec![n],
            range: start..start + 4 * n,
        };
        f.push(1, &s(100, 3));
        f.push(2, &s(500, 2));
        assert_eq!(f.slice(2, 2), Some(vec![(1, 108..112), (2, 500..504)]));
        assert_eq!(f.slice(0, 5).map(|v| v.len()), Some(2));
        assert_eq!(f.slice(3, 3), None);
        assert_eq!(f.slice(5, 0), Some(vec![]));
    }

    #[test]
    fn bf16_widens_by_its_bits() {
        let mut out = Vec::new();
        widen(
            Dtype::BF16,
            &[0x80, 0x3f, 0xc1, 0x7f],
            &mut Vec::new(),
            &mut out,
        );
        assert_eq!(out, [0, 0, 0x80, 0x3f, 0, 0, 0xc1, 0x7f]);
    }

    #[test]
    fn f16_and_f64_widen_by_value() {
        let mut out = Vec::new();
        // 1.5 and -2 as F16.
        widen(
            Dtype::F16,
            &[0x00, 0x3e, 0x00, 0xc0],
            &mut Vec::new(),
            &mut out,
        );
        assert_eq!(out, [1.5f32, -2.0].map(f32::to_le_bytes).concat());
        // F64 rounds to nearest, ties to even.
        let v = [0.1f64, 1.0 + f64::EPSILON];
        let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
        widen(Dtype::F64, &bytes, &mut Vec::new(), &mut out);
        assert_eq!(out, [0.1f32, 1.0].map(f32::to_le_bytes).concat());
    }
}
