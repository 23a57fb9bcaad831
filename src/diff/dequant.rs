//! Diffs where one side or both are quantized (QUANT.md §8.7): each side's
//! decoded logical tensors take the place of their parts, named by their
//! logical name, so a quantized checkpoint meets its original weight by
//! weight (`<m>.qweight` + `<m>.scales` … against `<m>.weight`), and two
//! quantizations of one model meet each other. Values are compared as the
//! plain pass compares them, in f64, decoded chunk by chunk.

use std::collections::{BTreeSet, HashMap};

use super::detail::{Reader, each_pair};
use super::values::{Acc, finish, identical};
use super::{
    DiffError, DiffOptions, DiffReport, Pair, Side, Status, TensorDiff, diff_metadata, diff_pair,
    match_key, metadata_of, summarize,
};
use crate::dtype::Dtype;
use crate::format::Checkpoint;
use crate::jobs::{CancelToken, Cancelled, Progress};
use crate::quant::Quantization;

// One side's comparable thing: a stored tensor, or a decoded logical one.
use super::Source as Item;

/// A side's items in file order, with their names: a decoded logical
/// tensor at the place of its first part, its parts left out.
pub(crate) fn items<'a>(
    ck: &'a Checkpoint,
    q: Option<&'a Quantization>,
) -> Vec<(String, Item<'a>)> {
    let mut out = Vec::with_capacity(ck.tensors().len());
    let mut seen = BTreeSet::new();
    for (t, info) in ck.entries() {
        match q.and_then(|q| q.owner_index(t).map(|i| (i, q))) {
            Some((i, q)) => {
                let Some(lt) = q.tensors().get(i) else {
                    continue;
                };
                if lt.status() != crate::quant::Status::Decoded {
                    out.push((info.name().to_owned(), Item::Stored(t)));
                } else if seen.insert(i) {
                    out.push((lt.name().to_owned(), Item::Logical(lt)));
                }
            }
            None => out.push((info.name().to_owned(), Item::Stored(t))),
        }
    }
    out
}

/// The GGUF metadata of `ck` when it meets `other` through llama.cpp's
/// name table (GGUF.md, `diff`): `ck` is a GGUF of a mapped architecture,
/// `other` is not a GGUF, and more of `other`'s names are the Hugging Face
/// names of `ck`'s tensors than are their own names.
fn hf_side<'c>(
    ck: &'c Checkpoint,
    other: &Checkpoint,
) -> Option<&'c crate::format::gguf::open::GgufParts> {
    use crate::format::gguf::names;
    let parts = ck.shards().first().and_then(|s| s.file().gguf())?;
    let arch = parts.architecture()?;
    if other.container() == crate::format::ContainerKind::GGUF
        || !names::MAPPED_ARCHITECTURES.contains(&arch)
    {
        return None;
    }
    let (mut mapped, mut own) = (0usize, 0usize);
    for (_, info) in ck.entries() {
        mapped +=
            usize::from(names::hf_name(info.name()).is_some_and(|h| other.find(&h).is_some()));
        own += usize::from(other.find(info.name()).is_some());
    }
    (mapped > own).then_some(parts)
}

/// True when either side meets the other through llama.cpp's name table:
/// the diff then goes item by item, un-permuting Q and K.
pub(super) fn meets_hf(a: &Checkpoint, b: &Checkpoint) -> bool {
    hf_side(a, b).is_some() || hf_side(b, a).is_some()
}

/// A side's items under their Hugging Face names when it [`hf_side`]s the
/// other; for each item, the heads to un-permute it by and its own name
/// when it was renamed.
fn hf_view(
    ck: &Checkpoint,
    other: &Checkpoint,
    items: &mut [(String, Item<'_>)],
) -> Vec<(Option<u64>, Option<String>)> {
    use crate::format::gguf::names;
    let mut out = vec![(None, None); items.len()];
    if let Some(parts) = hf_side(ck, other) {
        for ((name, _), o) in items.iter_mut().zip(&mut out) {
            if let Some(hf) = names::hf_name(name) {
                o.0 = names::permuted_heads(parts, name);
                o.1 = Some(std::mem::replace(name, hf));
            }
        }
    }
    out
}

/// Compares one pair of items (`heads`: each side's rows to un-permute).
#[expect(
    clippy::too_many_arguments,
    reason = "one pair, its sides and the run's state"
)]
fn compare(
    a: &Checkpoint,
    b: &Checkpoint,
    (name_a, ia): &(String, Item<'_>),
    (name_b, ib): &(String, Item<'_>),
    heads: (Option<u64>, Option<u64>),
    options: &DiffOptions,
    cancel: &CancelToken,
    progress: &Progress,
) -> Result<Option<TensorDiff>, Cancelled> {
    if let ((Item::Stored(ta), Item::Stored(tb)), (None, None)) = ((ia, ib), heads) {
        let Some(mut d) = diff_pair(a, b, Pair { a: *ta, b: *tb }, options, cancel, progress)?
        else {
            return Ok(None);
        };
        // Matched through GGUF's name table: the row carries the names
        // the items are matched by.
        d.name.clone_from(name_b);
        d.name_a = (name_a != name_b).then(|| name_a.clone());
        return Ok(Some(d));
    }
    let (Some(ra), Some(rb)) = (Reader::open(a, *ia), Reader::open(b, *ib)) else {
        return Ok(None);
    };
    let (mut ra, mut rb) = (ra.unpermuted(heads.0), rb.unpermuted(heads.1));
    let (da, db, na, nb) = (ra.dtype, rb.dtype, ra.bytes, rb.bytes);
    let mut out = identical(
        name_b,
        (name_a != name_b).then(|| name_a.clone()),
        (da, ra.shape.clone()),
        (db, rb.shape.clone()),
    );
    out.dequantized = match (ia, ib) {
        (Item::Logical(_), Item::Logical(_)) => Some("both"),
        (Item::Logical(_), _) => Some("a"),
        (_, Item::Logical(_)) => Some("b"),
        _ => None,
    };
    if ra.shape != rb.shape || (da == Dtype::C64) != (db == Dtype::C64) {
        out.status = if ra.shape == rb.shape {
            Status::DtypeChanged
        } else {
            Status::ShapeChanged
        };
        progress.add(na + nb);
        return Ok(Some(out));
    }
    let numel = ra.numel();
    let mut acc = Acc::default();
    // Progress is counted once, as the parts' stored bytes.
    let quiet = Progress::new();
    each_pair(&mut ra, &mut rb, options, cancel, &quiet, &mut |_, x, y| {
        acc.real(x, y, options.atol, options.rtol);
    })?;
    progress.add(na + nb);
    // A dequantized weight and its original differ in dtype by design.
    finish(&mut out, &acc, numel, false);
    // Two weights of one scheme whose stored parts are the same bytes are
    // identical (a GGUF against itself), not merely equal in value.
    if let (Item::Logical(la), Item::Logical(lb)) = (ia, ib)
        && out.status == Status::Equal
        && la.label() == lb.label()
        && la.parts().len() == lb.parts().len()
        && la
            .parts()
            .iter()
            .zip(lb.parts())
            .all(|((ra, pa), (rb, pb))| ra == rb && a.bytes(*pa) == b.bytes(*pb))
    {
        out.status = Status::Identical;
    }
    Ok(Some(out))
}

/// [`super::diff`] with the quantized weights of `qa` and `qb` compared as
/// their logical tensors.
pub(super) fn diff_dequant(
    a: &Checkpoint,
    qa: Option<&Quantization>,
    b: &Checkpoint,
    qb: Option<&Quantization>,
    options: &DiffOptions,
    cancel: &CancelToken,
    progress: &Progress,
) -> Result<DiffReport, DiffError> {
    let mut items_a = items(a, qa);
    let mut items_b = items(b, qb);
    let own_a = hf_view(a, b, &mut items_a);
    let own_b = hf_view(b, a, &mut items_b);
    let mut in_a: HashMap<String, usize> = HashMap::with_capacity(items_a.len());
    for (i, (name, _)) in items_a.iter().enumerate() {
        in_a.insert(match_key(name, options, Side::A), i);
    }
    let mut pairs = Vec::new();
    let mut only_in_b = Vec::new();
    let mut matched = BTreeSet::new();
    for (j, (name, _)) in items_b.iter().enumerate() {
        let key = match_key(name, options, Side::B);
        match in_a.get(&key) {
            Some(&i) => {
                pairs.push((i, j));
                matched.insert(i);
            }
            None => only_in_b.push(name.clone()),
        }
    }
    let mut only_in_a: Vec<String> = items_a
        .iter()
        .enumerate()
        .filter(|(i, _)| !matched.contains(i))
        .map(|(_, (n, _))| n.clone())
        .collect();
    only_in_a.sort();
    only_in_b.sort();
    let bytes = |ck: &Checkpoint, item: &Item<'_>| match item {
        Item::Stored(t) => ck.info(*t).map_or(0, crate::TensorInfo::nbytes),
        Item::Logical(lt) => lt.stored_bytes(ck),
    };
    let total: u64 = pairs
        .iter()
        .map(|&(i, j)| bytes(a, &items_a[i].1) + bytes(b, &items_b[j].1))
        .sum();
    progress.set_total(total);
    let parts = |item: &Item<'_>| match item {
        Item::Stored(t) => vec![*t],
        Item::Logical(lt) => lt.parts().iter().map(|(_, t)| *t).collect(),
    };
    let order: Vec<usize> = (0..pairs.len()).collect();
    let results = super::in_batches(
        (a, b),
        &order,
        &|k| {
            let (i, j) = pairs[k];
            (parts(&items_a[i].1), parts(&items_b[j].1))
        },
        &|k| {
            let (i, j) = pairs[k];
            bytes(a, &items_a[i].1) + bytes(b, &items_b[j].1)
        },
        &|k| {
            let (i, j) = pairs[k];
            let sides = (&own_a[i], &own_b[j]);
            let heads = (sides.0.0, sides.1.0);
            let mut row = compare(
                a,
                b,
                &items_a[i],
                &items_b[j],
                heads,
                options,
                cancel,
                progress,
            )?;
            // Met through GGUF's names: how to read each side again.
            if let Some(found) = row.as_mut()
                && (sides.0.1.is_some() || sides.1.1.is_some())
            {
                found.sides = Some(super::PairSides {
                    a: sides.0.1.clone().unwrap_or_else(|| items_a[i].0.clone()),
                    b: sides.1.1.clone().unwrap_or_else(|| items_b[j].0.clone()),
                    unpermute: heads,
                });
            }
            Ok(row)
        },
        cancel,
        progress,
    )?;
    a.check_all_unchanged()?;
    b.check_all_unchanged()?;
    let tensors: Vec<TensorDiff> = results.into_iter().map(|(_, d)| d).collect();
    let metadata = diff_metadata(&metadata_of(a), &metadata_of(b));
    let summary = summarize(&tensors, only_in_a.len(), only_in_b.len(), &metadata);
    let layers = super::layers(&tensors);
    Ok(DiffReport {
        only_in_a,
        only_in_b,
        tensors,
        metadata,
        summary,
        layers,
    })
}
