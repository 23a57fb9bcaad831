//! A tensor stored as blocks: hyper-rectangles of it, each kept on its own
//! (HDF5's chunks, TensorFlow's slices, a distributed checkpoint's
//! shards). [`check`] says whether blocks tile a shape; [`assemble`] hands
//! the tensor on in C order, a band of leading rows at a time, decoding
//! each block once while the bands it reaches are written, so memory is a
//! band and the blocks that cross it, never the tensor.

use rayon::prelude::*;

use super::decode::{DecodeError, Sink};
use crate::jobs::CancelToken;

/// One block: where it starts in the tensor and its stored shape (which
/// may reach past the tensor's edge, as HDF5's edge chunks do: the part
/// outside is dropped).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Block<P> {
    /// Its first element's coordinates in the tensor.
    pub origin: Vec<u64>,
    /// Its shape as stored (its decoded bytes are this shape, C order).
    pub shape: Vec<u64>,
    /// What the container needs to decode it.
    pub piece: P,
}

/// Decodes a block's piece into its bytes (C order of its stored shape,
/// little-endian), appended to the buffer given. Called from several
/// threads at once: a band's blocks are decoded in parallel.
pub type ReadBlock<'a, P> = &'a (dyn Fn(&P, &mut Vec<u8>) -> Result<(), DecodeError> + Sync);

/// What [`check`] allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rules {
    /// Elements no block covers read as the fill value (HDF5's unwritten
    /// chunks); otherwise they are refused.
    pub holes: bool,
    /// Blocks may reach past the tensor's edge (HDF5's chunks).
    pub overhang: bool,
}

/// Blocks compared pairwise at most: more, and they must lie on a grid.
const MAX_PAIRWISE: usize = 4096;

/// Bytes of the tensor written at once, at most (a band of leading rows;
/// one row is always allowed up to [`MAX_ROW`]).
pub const MAX_BAND: u64 = 8 << 20;

/// The largest row (the elements under one leading index) a band may hold.
pub const MAX_ROW: u64 = 256 << 20;

fn volume(shape: &[u64]) -> Option<u64> {
    shape.iter().try_fold(1u64, |a, &d| a.checked_mul(d))
}

/// The block's extent clipped to `shape`, per dimension `[start, end)`.
fn clipped<P>(b: &Block<P>, shape: &[u64]) -> Vec<(u64, u64)> {
    b.origin
        .iter()
        .zip(&b.shape)
        .zip(shape)
        .map(|((&o, &s), &d)| (o.min(d), o.saturating_add(s).min(d)))
        .collect()
}

/// Checks that `blocks` lie inside `shape` (or overhang it where allowed),
/// that no two overlap, and, unless holes are allowed, that together they
/// cover every element. The message says which block breaks which rule.
pub fn check<P>(shape: &[u64], blocks: &[Block<P>], rules: Rules) -> Result<(), String> {
    let rank = shape.len();
    let numel = volume(shape).ok_or("the shape's element count overflows")?;
    let mut covered: u64 = 0;
    for (i, b) in blocks.iter().enumerate() {
        if b.origin.len() != rank || b.shape.len() != rank {
            return Err(format!(
                "block {i} has rank {} but the tensor has rank {rank}",
                b.origin.len()
            ));
        }
        volume(&b.shape).ok_or_else(|| format!("block {i}'s element count overflows"))?;
        for (dim, ((&o, &s), &d)) in b.origin.iter().zip(&b.shape).zip(shape).enumerate() {
            let end = o
                .checked_add(s)
                .ok_or_else(|| format!("block {i} overflows in dimension {dim}"))?;
            if o >= d && s > 0 {
                return Err(format!(
                    "block {i} starts at {o} in dimension {dim}, past the tensor's {d}"
                ));
            }
            if end > d && !rules.overhang {
                return Err(format!(
                    "block {i} reaches {end} in dimension {dim}, past the tensor's {d}"
                ));
            }
        }
        let c = clipped(b, shape);
        covered = covered.saturating_add(c.iter().map(|(s, e)| e - s).product::<u64>());
    }
    check_disjoint(shape, blocks)?;
    if !rules.holes && covered != numel {
        return Err(format!(
            "the blocks cover {covered} of the tensor's {numel} elements"
        ));
    }
    Ok(())
}

/// No two blocks share an element: on a grid (one block shape, origins
/// multiples of it) by their origins; otherwise pairwise, for at most
/// [`MAX_PAIRWISE`] blocks.
fn check_disjoint<P>(shape: &[u64], blocks: &[Block<P>]) -> Result<(), String> {
    let on_grid = blocks.first().is_some_and(|first| {
        blocks.iter().all(|b| {
            b.shape == first.shape
                && b.origin
                    .iter()
                    .zip(&b.shape)
                    .all(|(&o, &s)| s > 0 && o % s == 0)
        })
    });
    if on_grid {
        let mut seen = std::collections::HashSet::with_capacity(blocks.len());
        for (i, b) in blocks.iter().enumerate() {
            if !seen.insert(&b.origin) {
                return Err(format!("block {i} repeats the origin {:?}", b.origin));
            }
        }
        return Ok(());
    }
    if blocks.len() > MAX_PAIRWISE {
        return Err(format!(
            "{} blocks of different shapes: at most {MAX_PAIRWISE} are checked",
            blocks.len()
        ));
    }
    let extents: Vec<Vec<(u64, u64)>> = blocks.iter().map(|b| clipped(b, shape)).collect();
    for (i, a) in extents.iter().enumerate() {
        if a.iter().any(|(s, e)| s == e) {
            continue;
        }
        for (j, b) in extents.iter().enumerate().skip(i + 1) {
            let meet = a
                .iter()
                .zip(b)
                .all(|(&(s0, e0), &(s1, e1))| s0 < e1 && s1 < e0);
            if meet {
                return Err(format!("blocks {i} and {j} overlap"));
            }
        }
    }
    Ok(())
}

/// Hands `sink` the tensor of `shape` (elements of `element` bytes) that
/// `blocks` tile, in C order: `read` decodes a block's piece into its
/// bytes (C order of its stored shape, little-endian); elements no block
/// covers are `fill` (one element's bytes). The blocks were [`check`]ed.
#[allow(clippy::too_many_arguments)]
pub fn assemble<P: Sync>(
    shape: &[u64],
    element: usize,
    blocks: &[Block<P>],
    fill: &[u8],
    read: ReadBlock<'_, P>,
    cancel: &CancelToken,
    sink: Sink<'_>,
) -> Result<(), DecodeError> {
    let tensor = Tensor {
        shape,
        element,
        fill,
    };
    assemble_in_bands(&tensor, blocks, MAX_BAND, read, cancel, sink)
}

/// The tensor [`assemble`] writes: its shape, element size and fill.
struct Tensor<'a> {
    shape: &'a [u64],
    element: usize,
    fill: &'a [u8],
}

/// [`assemble`] with bands of at most `max_band` bytes (at least a row).
fn assemble_in_bands<P: Sync>(
    tensor: &Tensor<'_>,
    blocks: &[Block<P>],
    max_band: u64,
    read: ReadBlock<'_, P>,
    cancel: &CancelToken,
    sink: Sink<'_>,
) -> Result<(), DecodeError> {
    let Tensor {
        shape,
        element,
        fill,
    } = *tensor;
    let Some(numel) = volume(shape) else {
        return Err(DecodeError::invalid(
            "ShapeOverflow",
            "the shape's element count overflows",
        ));
    };
    if numel == 0 {
        return Ok(());
    }
    let e = element as u64;
    if shape.is_empty() {
        // A 0-d tensor: the one block that covers it, else the fill.
        let mut out = Vec::new();
        match blocks.first() {
            Some(b) => read(&b.piece, &mut out)?,
            None => out.extend_from_slice(fill),
        }
        out.truncate(element);
        return sink(&out).map_err(DecodeError::Sink);
    }
    let row_elems = volume(&shape[1..]).unwrap_or(0);
    let row_bytes = row_elems.saturating_mul(e);
    if row_bytes > MAX_ROW {
        return Err(DecodeError::invalid(
            "BlocksTooLarge",
            format!(
                "one row of the tensor is {row_bytes} bytes; rows of at most {MAX_ROW} bytes are assembled"
            ),
        ));
    }
    let rows_per_band = (max_band / row_bytes.max(1)).max(1);
    // Bands of whole rows; a block that starts in a band is decoded there
    // (with the others that start in it, in parallel) and kept while it
    // reaches past the band's end.
    let cuts = [0, shape[0]];
    let mut order: Vec<usize> = (0..blocks.len()).collect();
    order.sort_by_key(|&i| blocks[i].origin[0]);
    let mut next = 0usize;
    // Blocks decoded and still needed by a later band: (index, bytes).
    let mut open: Vec<(usize, Vec<u8>)> = Vec::new();
    let mut band = Vec::new();
    for w in cuts.windows(2) {
        let (mut a, end) = (w[0], w[1]);
        while a < end {
            cancel.check()?;
            let b = (a + rows_per_band).min(end);
            let len = usize::try_from((b - a) * row_bytes).unwrap_or(usize::MAX);
            band.clear();
            if fill.iter().all(|&x| x == 0) {
                band.resize(len, 0);
            } else {
                band.reserve(len);
                while band.len() < len {
                    band.extend_from_slice(&fill[..element.min(fill.len()).max(1)]);
                }
                band.truncate(len);
            }
            for (i, bytes) in &open {
                copy_into(&mut band, shape, element, (a, b), &blocks[*i], bytes);
            }
            // Blocks that start in this band: decoded a few at a time on
            // every core, copied, and kept only when they reach past it
            // (memory: the band, a group of blocks, and the blocks that
            // cross its end, never every block of a wide row).
            let starting = order[next..]
                .iter()
                .take_while(|&&i| blocks[i].origin[0] < b)
                .count();
            for group in order[next..next + starting].chunks(AT_ONCE.max(1)) {
                cancel.check()?;
                let decoded: Vec<Result<(usize, Vec<u8>), DecodeError>> = group
                    .par_iter()
                    .map(|&i| decode_block(blocks, i, e, read))
                    .collect();
                for d in decoded {
                    let (i, bytes) = d?;
                    copy_into(&mut band, shape, element, (a, b), &blocks[i], &bytes);
                    if blocks[i].origin[0] + blocks[i].shape[0] > b {
                        open.push((i, bytes));
                    }
                }
            }
            next += starting;
            sink(&band).map_err(DecodeError::Sink)?;
            open.retain(|(i, _)| blocks[*i].origin[0] + blocks[*i].shape[0] > b);
            a = b;
        }
    }
    Ok(())
}

/// Blocks decoded at once (in parallel) at most: a few a core.
const AT_ONCE: usize = 8;

/// Block `i` decoded and its length checked against its shape.
fn decode_block<P>(
    blocks: &[Block<P>],
    i: usize,
    element: u64,
    read: ReadBlock<'_, P>,
) -> Result<(usize, Vec<u8>), DecodeError> {
    let mut bytes = Vec::new();
    read(&blocks[i].piece, &mut bytes)?;
    let want = volume(&blocks[i].shape)
        .unwrap_or(0)
        .saturating_mul(element);
    if bytes.len() as u64 != want {
        return Err(DecodeError::invalid(
            "BlockSize",
            format!(
                "block {i} decoded to {} bytes; its shape {:?} holds {want}",
                bytes.len(),
                blocks[i].shape
            ),
        ));
    }
    Ok((i, bytes))
}

/// Copies the part of `block` (decoded as `bytes`) inside rows `[a, b)` of
/// the tensor into `band`, which holds those rows in C order.
fn copy_into<P>(
    band: &mut [u8],
    shape: &[u64],
    element: usize,
    (first, end): (u64, u64),
    block: &Block<P>,
    bytes: &[u8],
) {
    let rank = shape.len();
    let clip = clipped(block, shape);
    let r0 = clip[0].0.max(first);
    let r1 = clip[0].1.min(end);
    if r0 >= r1 || clip.iter().any(|(s, e)| s >= e) {
        return;
    }
    // Strides in elements, of the tensor and of the block.
    let mut t_stride = vec![1u64; rank];
    let mut b_stride = vec![1u64; rank];
    for d in (0..rank.saturating_sub(1)).rev() {
        t_stride[d] = t_stride[d + 1] * shape[d + 1];
        b_stride[d] = b_stride[d + 1] * block.shape[d + 1];
    }
    let last = rank - 1;
    let run = ((clip[last].1 - clip[last].0) as usize) * element;
    // An odometer over the dimensions before the last, inside the clip.
    let mut idx: Vec<u64> = clip.iter().map(|(s, _)| *s).collect();
    idx[0] = r0;
    loop {
        let mut t_off = (idx[0] - first) * t_stride[0];
        let mut b_off = (idx[0] - block.origin[0]) * b_stride[0];
        for d in 1..rank {
            t_off += idx[d] * t_stride[d];
            b_off += (idx[d] - block.origin[d]) * b_stride[d];
        }
        if rank == 1 {
            t_off = idx[0] - first;
            b_off = idx[0] - block.origin[0];
        }
        let (t, s) = (t_off as usize * element, b_off as usize * element);
        if let (Some(dst), Some(src)) = (band.get_mut(t..t + run), bytes.get(s..s + run)) {
            dst.copy_from_slice(src);
        }
        if rank == 1 {
            return;
        }
        // Next index over dims [0, last).
        let mut d = last;
        loop {
            if d == 0 {
                return;
            }
            d -= 1;
            idx[d] += 1;
            let stop = if d == 0 { r1 } else { clip[d].1 };
            if idx[d] < stop {
                break;
            }
            idx[d] = if d == 0 { r0 } else { clip[d].0 };
            if d == 0 {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tensor whose element `k` (C order) is the byte `k % 251`, cut
    /// into blocks of `cut` (edge blocks full-size, as HDF5 stores them).
    fn grid(shape: &[u64], cut: &[u64]) -> Vec<Block<Vec<u8>>> {
        let counts: Vec<u64> = shape.iter().zip(cut).map(|(d, c)| d.div_ceil(*c)).collect();
        let mut out = Vec::new();
        let total: u64 = counts.iter().product();
        for n in 0..total {
            let mut rest = n;
            let mut origin = vec![0; shape.len()];
            for d in (0..shape.len()).rev() {
                origin[d] = (rest % counts[d]) * cut[d];
                rest /= counts[d];
            }
            let mut bytes = Vec::new();
            let bn = volume(cut).unwrap();
            for k in 0..bn {
                let mut r = k;
                let mut flat = 0u64;
                let mut inside = true;
                let mut mul = 1u64;
                for d in (0..shape.len()).rev() {
                    let x = origin[d] + r % cut[d];
                    r /= cut[d];
                    inside &= x < shape[d];
                    flat += x * mul;
                    mul *= shape[d];
                }
                bytes.push(if inside { (flat % 251) as u8 } else { 0xEE });
            }
            out.push(Block {
                origin,
                shape: cut.to_vec(),
                piece: bytes,
            });
        }
        out
    }

    fn run(shape: &[u64], blocks: &[Block<Vec<u8>>], fill: u8) -> Vec<u8> {
        run_in_bands(shape, blocks, fill, MAX_BAND)
    }

    fn run_in_bands(shape: &[u64], blocks: &[Block<Vec<u8>>], fill: u8, max_band: u64) -> Vec<u8> {
        let mut out = Vec::new();
        let tensor = Tensor {
            shape,
            element: 1,
            fill: &[fill],
        };
        assemble_in_bands(
            &tensor,
            blocks,
            max_band,
            &|p: &Vec<u8>, into: &mut Vec<u8>| {
                into.extend_from_slice(p);
                Ok(())
            },
            &CancelToken::default(),
            &mut |b| {
                out.extend_from_slice(b);
                Ok(())
            },
        )
        .unwrap();
        out
    }

    #[test]
    fn grids_with_edge_blocks_assemble_in_c_order() {
        let rules = Rules {
            holes: false,
            overhang: true,
        };
        for (shape, cut) in [
            (vec![7u64, 5], vec![3u64, 2]),
            (vec![4, 3, 5], vec![2, 2, 2]),
            (vec![10], vec![4]),
            (vec![2, 3], vec![5, 5]),
        ] {
            let blocks = grid(&shape, &cut);
            check(&shape, &blocks, rules).unwrap();
            let n = volume(&shape).unwrap();
            let want: Vec<u8> = (0..n).map(|k| (k % 251) as u8).collect();
            assert_eq!(run(&shape, &blocks, 0), want, "{shape:?} by {cut:?}");
        }
    }

    #[test]
    fn bands_that_cut_through_blocks_give_the_same_bytes() {
        for (shape, cut) in [
            (vec![7u64, 5], vec![3u64, 2]),
            (vec![9, 4, 3], vec![4, 3, 2]),
        ] {
            let blocks = grid(&shape, &cut);
            let row: u64 = shape[1..].iter().product();
            let whole = run(&shape, &blocks, 0);
            for rows in 1..=shape[0] {
                assert_eq!(
                    run_in_bands(&shape, &blocks, 0, rows * row),
                    whole,
                    "{shape:?} by {cut:?}, bands of {rows} rows"
                );
            }
        }
    }

    #[test]
    fn holes_read_as_the_fill_value() {
        let shape = [4u64, 4];
        let mut blocks = grid(&shape, &[2, 2]);
        blocks.remove(1);
        let rules = Rules {
            holes: true,
            overhang: true,
        };
        check(&shape, &blocks, rules).unwrap();
        assert!(
            check(
                &shape,
                &blocks,
                Rules {
                    holes: false,
                    ..rules
                }
            )
            .is_err()
        );
        let out = run(&shape, &blocks, 7);
        assert_eq!(&out[2..4], &[7, 7]);
        assert_eq!(&out[6..8], &[7, 7]);
        assert_eq!(out[0], 0);
    }

    #[test]
    fn uneven_slices_and_their_faults() {
        let rules = Rules {
            holes: false,
            overhang: false,
        };
        let b = |origin: Vec<u64>, shape: Vec<u64>| Block {
            origin,
            shape,
            piece: (),
        };
        let shape = [5u64, 4];
        check(
            &shape,
            &[b(vec![0, 0], vec![2, 4]), b(vec![2, 0], vec![3, 4])],
            rules,
        )
        .unwrap();
        let overlap = [b(vec![0, 0], vec![3, 4]), b(vec![2, 0], vec![3, 4])];
        assert!(
            check(&shape, &overlap, rules)
                .unwrap_err()
                .contains("overlap")
        );
        let hole = [b(vec![0, 0], vec![2, 4]), b(vec![3, 0], vec![2, 4])];
        assert!(check(&shape, &hole, rules).unwrap_err().contains("cover"));
        let past = [b(vec![0, 0], vec![6, 4])];
        assert!(check(&shape, &past, rules).unwrap_err().contains("past"));
    }
}
