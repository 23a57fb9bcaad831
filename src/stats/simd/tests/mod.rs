//! The vector copies against the portable code, bit for bit: the values
//! they are run on and the harness that runs them (here), the tests by what
//! they test (`scan.rs`, `block_f64.rs`, `prefix.rs`, `marked.rs`,
//! `pairs.rs`).

mod block_f64;
mod marked;
mod pairs;
mod prefix;
mod scan;

use super::*;
use crate::stats::kernel::BLOCK;

/// Random f32 values of every kind: normals of several scales, zeros,
/// subnormals, NaN and infinities.
fn values(seed: u64, n: usize, specials: bool) -> Vec<f32> {
    let mut state = seed | 1;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    (0..n)
        .map(|_| {
            let r = next();
            match r % 64 {
                0 if specials => f32::NAN,
                1 if specials => f32::INFINITY,
                2 => -0.0,
                3 => f32::from_bits((r >> 40) as u32 & 0x7f_ffff),
                _ => {
                    let u = (r >> 11) as f64 / (1u64 << 53) as f64;
                    ((u - 0.4) * 10f64.powi((r % 7) as i32 - 3)) as f32
                }
            }
        })
        .collect()
}

/// The bytes of `vals` in a format: f32 as is, F16 and BF16 rounded
/// (random 16-bit codes where `raw`, NaN and Inf among them).
fn encode(kind: Wide, vals: &[f32], raw: bool) -> Vec<u8> {
    vals.iter()
        .enumerate()
        .flat_map(|(i, &x)| match kind {
            Wide::F32 => x.to_le_bytes().to_vec(),
            _ if raw => ((x.to_bits() ^ (i as u32).wrapping_mul(0x9e37_79b9)) as u16)
                .to_le_bytes()
                .to_vec(),
            Wide::F16 => half::f16::from_f32(x).to_le_bytes().to_vec(),
            Wide::BF16 => half::bf16::from_f32(x).to_le_bytes().to_vec(),
        })
        .collect()
}

/// f64 values of every kind: normal ones of many magnitudes, and with
/// `specials` NaN of several payloads, ±Inf, ±0 and subnormals.
fn values_f64(seed: u64, n: usize, specials: bool, magnitude: i32) -> Vec<f64> {
    let mut state = seed | 1;
    (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let r = state;
            match r % 64 {
                0 if specials => f64::from_bits(0x7ff8_0000_0000_0000 | (r >> 20)),
                1 if specials => f64::INFINITY,
                2 if specials => f64::NEG_INFINITY,
                3 => -0.0,
                4 => 0.0,
                5 => f64::from_bits((r >> 12) & 0x000f_ffff_ffff_ffff),
                _ => {
                    let u = (r >> 11) as f64 / (1u64 << 53) as f64;
                    (u - 0.4) * 2f64.powi(magnitude + (r % 9) as i32 - 4)
                }
            }
        })
        .collect()
}

/// Runs a filter that keeps its keys in a [`kernel::Hits`] and hands
/// them to `out`.
fn into_hits(out: &mut dyn FnMut(&[u64]), run: impl FnOnce(&mut kernel::Hits<'_>)) {
    let mut found = kernel::Hits::new(out);
    run(&mut found);
    found.flush();
}

/// The keys a filter that keeps them in a [`kernel::Hits`] finds.
fn hits_of(run: impl FnOnce(&mut kernel::Hits<'_>)) -> Vec<u64> {
    let mut out = Vec::new();
    into_hits(&mut |ks| out.extend_from_slice(ks), run);
    out
}

/// The keys the portable filter finds in f32 bytes.
fn portable_hits(bytes: &[u8], marks: &[u64; kernel::MARK_WORDS]) -> Vec<u64> {
    hits_of(|found| kernel::for_each_marked_f32(bytes, marks, found))
}

/// The count of every bucket after `run` has counted into a clear
/// [`kernel::Tally`].
fn tally_of(run: impl FnOnce(&mut kernel::Tally<'_>)) -> Vec<u64> {
    use kernel::BUCKETS;
    let mut low = vec![0u8; BUCKETS];
    let mut wraps = vec![0u32; BUCKETS];
    let (Ok(low), Ok(wraps)) = (
        <&mut [u8; BUCKETS]>::try_from(low.as_mut_slice()),
        <&mut [u32; BUCKETS]>::try_from(wraps.as_mut_slice()),
    ) else {
        return Vec::new();
    };
    let mut tally = kernel::Tally { low, wraps };
    run(&mut tally);
    (0..BUCKETS).map(|p| tally.get(p)).collect()
}

/// A bitmap marking every third bucket of `counts` that holds values.
fn every_third(counts: &[u64]) -> Vec<u64> {
    let mut marks = vec![0u64; kernel::MARK_WORDS];
    for (p, &c) in counts.iter().enumerate() {
        if c > 0 && p % 3 == 0 {
            marks[p / 64] |= 1 << (p % 64);
        }
    }
    marks
}

/// Little-endian f32 values as the prefix loops read them.
fn f32s(bytes: &[u8]) -> &[[u8; 4]] {
    bytes.as_chunks::<4>().0
}
