//! Integer group quantization with unsigned codes and zero points, shared
//! by GPTQ, AWQ and compressed-tensors (whose signed codes and zero points
//! are these minus 2^(b-1)).

use super::num::Rng;

/// One quantized nn.Linear [n, k].
pub struct IntLinear {
    pub n: usize,
    pub k: usize,
    pub ng: usize,
    pub bits: u32,
    /// The group of each input column.
    pub gidx: Vec<usize>,
    /// Unsigned codes in [0, 2^b-1], row-major [n][k].
    pub codes: Vec<u32>,
    /// Unsigned zero points in [0, 2^b-1], [n][g].
    pub zeros: Vec<u32>,
    /// Scales, already numbers of the scale dtype, [n][g].
    pub scales: Vec<f32>,
}

impl IntLinear {
    pub fn code(&self, n: usize, i: usize) -> u32 {
        self.codes[n * self.k + i]
    }

    pub fn zero(&self, n: usize, g: usize) -> u32 {
        self.zeros[n * self.ng + g]
    }

    pub fn scale(&self, n: usize, g: usize) -> f32 {
        self.scales[n * self.ng + g]
    }

    /// `(q - z) * s` of element (n, i), exact in f64.
    pub fn exact(&self, n: usize, i: usize) -> f64 {
        let g = self.gidx[i];
        (f64::from(self.code(n, i)) - f64::from(self.zero(n, g))) * f64::from(self.scale(n, g))
    }

    /// Offset of the signed codes of compressed-tensors: 2^(b-1).
    pub fn offset(&self) -> i64 {
        1 << (self.bits - 1)
    }

    /// The values of the logical weight, each `(q - z) * s` rounded once
    /// by `round`, row-major.
    pub fn values(&self, round: fn(f64) -> f32) -> Vec<f32> {
        (0..self.n * self.k)
            .map(|at| round(self.exact(at / self.k, at % self.k)))
            .collect()
    }
}

/// The group of each of `k` input columns for groups of `group` columns:
/// `i / group`, or with act-order a random permutation `perm` of the
/// columns quantized in that order, `g_idx[perm[j]] = j / group`.
pub fn group_index(rng: &mut Rng, k: usize, group: usize, act_order: bool) -> Vec<usize> {
    if !act_order {
        return (0..k).map(|i| i / group).collect();
    }
    let perm = rng.permutation(k);
    let mut gidx = vec![0; k];
    for (j, &p) in perm.iter().enumerate() {
        gidx[p] = j / group;
    }
    gidx
}

/// Min-max quantization of `w` ([n, k], row-major) into groups `gidx`.
///
/// Symmetric: z = 2^(b-1) and s = 2*amax/maxq (GPTQ's choice). Asymmetric:
/// s = (max-min)/maxq and z = round(-min/s); then the first group of rows
/// 0, 1 and 2 is forced to z = 0, z = maxq and z = 2^(b-1) (the signed
/// zero of compressed-tensors), so that every fixture holds them. Scales
/// are rounded by `round_scale` before the codes are computed.
pub fn quantize(
    w: &[f64],
    n: usize,
    k: usize,
    gidx: &[usize],
    bits: u32,
    sym: bool,
    round_scale: fn(f64) -> f32,
) -> IntLinear {
    let ng = gidx.iter().max().map_or(0, |g| g + 1);
    let maxq = (1u32 << bits) - 1;
    let half = 1u32 << (bits - 1);
    let mut zeros = vec![0u32; n * ng];
    let mut scales = vec![0f32; n * ng];
    for row in 0..n {
        for g in 0..ng {
            let group = (0..k).filter(|&i| gidx[i] == g).map(|i| w[row * k + i]);
            let (lo, hi) = group.fold((0f64, 0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
            let (raw, zero) = if sym {
                (2.0 * lo.abs().max(hi) / f64::from(maxq), half)
            } else {
                let raw = (hi - lo) / f64::from(maxq);
                (raw, (-lo / raw).round().clamp(0.0, f64::from(maxq)) as u32)
            };
            let mut scale = round_scale(if raw > 0.0 { raw } else { 1e-3 });
            if scale <= 0.0 {
                scale = round_scale(1e-3);
            }
            zeros[row * ng + g] = match (sym, row, g) {
                (false, 0, 0) => 0,
                (false, 1, 0) => maxq,
                (false, 2, 0) => half,
                _ => zero,
            };
            scales[row * ng + g] = scale;
        }
    }
    let codes = (0..n * k)
        .map(|at| {
            let param = (at / k) * ng + gidx[at % k];
            let q = (w[at] / f64::from(scales[param])).round() + f64::from(zeros[param]);
            q.clamp(0.0, f64::from(maxq)) as u32
        })
        .collect();
    IntLinear {
        n,
        k,
        ng,
        bits,
        gidx: gidx.to_vec(),
        codes,
        zeros,
        scales,
    }
}
