//! Reference decoders for the self-tests: a second, independent reading of
//! QUANT.md, from the bytes of a written file (through the official
//! `safetensors` reader) back to codes and values. They are checked against
//! the generators' `Expected` and, when the samples are at hand, against
//! the libraries' own oracles (quant-samples/*/oracle.safetensors).

// Reason: the decoders keep QUANT.md's notation (n, k, q, z, s, g, b).
#![allow(clippy::many_single_char_names, clippy::needless_range_loop)]

use half::{bf16, f16};
use safetensors::{Dtype, SafeTensors};

/// Codes and values of one logical tensor, row-major.
pub struct Decoded {
    pub shape: Vec<usize>,
    pub values: Vec<f32>,
    pub codes: Vec<i64>,
}

fn view<'a>(st: &'a SafeTensors<'a>, name: &str) -> safetensors::tensor::TensorView<'a> {
    st.tensor(name)
        .unwrap_or_else(|e| panic!("tensor {name}: {e}"))
}

pub fn has(st: &SafeTensors<'_>, name: &str) -> bool {
    st.tensor(name).is_ok()
}

pub fn shape(st: &SafeTensors<'_>, name: &str) -> Vec<usize> {
    view(st, name).shape().to_vec()
}

pub fn bytes(st: &SafeTensors<'_>, name: &str) -> Vec<u8> {
    view(st, name).data().to_vec()
}

pub fn words(st: &SafeTensors<'_>, name: &str) -> Vec<u32> {
    let v = view(st, name);
    assert!(
        matches!(v.dtype(), Dtype::I32 | Dtype::U32),
        "{name} is {:?}",
        v.dtype()
    );
    v.data()
        .chunks(4)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

fn ints64(st: &SafeTensors<'_>, name: &str) -> Vec<i64> {
    view(st, name)
        .data()
        .chunks(8)
        .map(|b| i64::from_le_bytes(b.try_into().expect("8 bytes")))
        .collect()
}

/// F16, BF16 or F32 values as f32.
pub fn floats(st: &SafeTensors<'_>, name: &str) -> Vec<f32> {
    let v = view(st, name);
    let d = v.data();
    match v.dtype() {
        Dtype::F16 => d
            .chunks(2)
            .map(|b| f16::from_le_bytes([b[0], b[1]]).to_f32())
            .collect(),
        Dtype::BF16 => d
            .chunks(2)
            .map(|b| bf16::from_le_bytes([b[0], b[1]]).to_f32())
            .collect(),
        Dtype::F32 => d
            .chunks(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect(),
        Dtype::F8_E8M0 => d.iter().map(|&e| 2f32.powi(i32::from(e) - 127)).collect(),
        other => panic!("{name}: no floats of {other:?}"),
    }
}

/// Field `i` of `b` bits of an LSB-first bitstream whose word `j` is
/// `word(j)`.
fn field(word: &dyn Fn(usize) -> u32, i: usize, b: u32) -> u32 {
    let bit = i * b as usize;
    let (w, s) = (bit / 32, (bit % 32) as u32);
    let mut v = word(w) >> s;
    if s + b > 32 {
        v |= word(w + 1) << (32 - s);
    }
    if b == 32 { v } else { v & ((1 << b) - 1) }
}

const FP4: [f32; 16] = [
    0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0,
];

/// E4M3fn by bit manipulation into an f32 (independent of the generator's
/// table arithmetic).
pub fn e4m3(c: u8) -> f32 {
    let sign = u32::from(c >> 7) << 31;
    let (e, m) = (u32::from((c >> 3) & 0xF), u32::from(c & 7));
    if e == 15 && m == 7 {
        return f32::NAN;
    }
    if e == 0 {
        let mag = m as f32 * 2f32.powi(-9);
        return f32::from_bits(sign | mag.to_bits());
    }
    f32::from_bits(sign | (e + 120) << 23 | m << 20)
}

fn e2m3(c: u8) -> f32 {
    let s = if c & 0x20 != 0 { -1.0 } else { 1.0 };
    let (e, m) = (i32::from((c >> 3) & 3), f32::from(c & 7));
    s * if e == 0 {
        m * 0.125
    } else {
        (8.0 + m) * 2f32.powi(e - 4)
    }
}

fn e8m0(e: u8) -> f32 {
    2f32.powi(i32::from(e) - 127)
}

/// GPTQ `<m>`: v1 zeros fixed by the word-level add (2/4/8 bits) or the
/// per-field +1 (3 bits); values F16((q - z) * s).
pub fn gptq(st: &SafeTensors<'_>, m: &str, bits: u32, v1: bool) -> Decoded {
    let gidx = words(st, &format!("{m}.g_idx"));
    let k = gidx.len();
    let sshape = shape(st, &format!("{m}.scales"));
    let n = sshape[1];
    let scales = floats(st, &format!("{m}.scales"));
    let qw = words(st, &format!("{m}.qweight"));
    let mut qz = words(st, &format!("{m}.qzeros"));
    let zw = shape(st, &format!("{m}.qzeros"))[1];
    if v1 && bits != 3 {
        let c = match bits {
            2 => 0x5555_5555u32,
            4 => 0x1111_1111,
            _ => 0x0101_0101,
        };
        for w in &mut qz {
            *w = w.wrapping_add(c);
        }
    }
    let mut out = Decoded {
        shape: vec![n, k],
        values: vec![],
        codes: vec![],
    };
    for col in 0..n {
        for i in 0..k {
            let q = field(&|j| qw[j * n + col], i, bits);
            let g = gidx[i] as usize;
            let mut z = field(&|j| qz[g * zw + j], col, bits);
            if v1 && bits == 3 {
                z = (z + 1) & 7;
            }
            out.codes.push(i64::from(q));
            let v = (q as f32 - z as f32) * scales[g * n + col];
            out.values.push(f16::from_f32(v).to_f32());
        }
    }
    out
}

/// AutoAWQ GEMM `<m>` (reverse order [0, 4, 1, 5, 2, 6, 3, 7]).
pub fn awq(st: &SafeTensors<'_>, m: &str, group: usize) -> Decoded {
    const REVERSE: [usize; 8] = [0, 4, 1, 5, 2, 6, 3, 7];
    let qs = shape(st, &format!("{m}.qweight"));
    let (k, c) = (qs[0], qs[1]);
    let n = 8 * c;
    let qw = words(st, &format!("{m}.qweight"));
    let qz = words(st, &format!("{m}.qzeros"));
    let scales = floats(st, &format!("{m}.scales"));
    let nib = |w: u32, col: usize| (w >> (4 * REVERSE[col % 8])) & 0xF;
    let mut out = Decoded {
        shape: vec![n, k],
        values: vec![],
        codes: vec![],
    };
    for col in 0..n {
        for i in 0..k {
            let q = nib(qw[i * c + col / 8], col);
            let z = nib(qz[(i / group) * c + col / 8], col);
            out.codes.push(i64::from(q));
            let v = (q as f32 - z as f32) * scales[(i / group) * n + col];
            out.values.push(f16::from_f32(v).to_f32());
        }
    }
    out
}

/// compressed-tensors pack-quantized `<m>`; dense or padded told by the
/// packed width; values BF16((q - zp) * s).
pub fn ct_pack(st: &SafeTensors<'_>, m: &str, bits: u32) -> Decoded {
    let ws = ints64(st, &format!("{m}.weight_shape"));
    let (n, k) = (ws[0] as usize, ws[1] as usize);
    let packed = words(st, &format!("{m}.weight_packed"));
    let cols = packed.len() / n;
    let dense = cols == (k * bits as usize).div_ceil(32);
    let per = (32 / bits) as usize;
    let read = |ws: &dyn Fn(usize) -> u32, i: usize| {
        if dense {
            field(ws, i, bits)
        } else {
            (ws(i / per) >> (bits as usize * (i % per))) & ((1 << bits) - 1)
        }
    };
    let sshape = shape(st, &format!("{m}.weight_scale"));
    let ng = sshape[1];
    let scales = floats(st, &format!("{m}.weight_scale"));
    let gidx: Vec<usize> = if has(st, &format!("{m}.weight_g_idx")) {
        words(st, &format!("{m}.weight_g_idx"))
            .iter()
            .map(|&g| g as usize)
            .collect()
    } else {
        (0..k).map(|i| i / (k / ng)).collect()
    };
    let zp_name = format!("{m}.weight_zero_point");
    let zp = has(st, &zp_name).then(|| words(st, &zp_name));
    let half = 1i64 << (bits - 1);
    let mut out = Decoded {
        shape: vec![n, k],
        values: vec![],
        codes: vec![],
    };
    for row in 0..n {
        for i in 0..k {
            let q = i64::from(read(&|j| packed[row * cols + j], i)) - half;
            let g = gidx[i];
            let z = zp
                .as_ref()
                .map_or(0, |zp| i64::from(read(&|j| zp[j * ng + g], row)) - half);
            out.codes.push(q);
            let v = (q - z) as f32 * scales[row * ng + g];
            out.values.push(bf16::from_f32(v).to_f32());
        }
    }
    out
}

/// compressed-tensors naive INT8 `<m>`.
pub fn ct_int8(st: &SafeTensors<'_>, m: &str) -> Decoded {
    let s = shape(st, &format!("{m}.weight"));
    let (n, k) = (s[0], s[1]);
    let q = bytes(st, &format!("{m}.weight"));
    let scales = floats(st, &format!("{m}.weight_scale"));
    let zp_name = format!("{m}.weight_zero_point");
    let zp = has(st, &zp_name).then(|| bytes(st, &zp_name));
    let codes: Vec<i64> = q.iter().map(|&b| i64::from(b as i8)).collect();
    let values = codes
        .iter()
        .enumerate()
        .map(|(at, &c)| {
            let z = zp.as_ref().map_or(0, |zp| i64::from(zp[at / k] as i8));
            bf16::from_f32((c - z) as f32 * scales[at / k]).to_f32()
        })
        .collect();
    Decoded {
        shape: vec![n, k],
        values,
        codes,
    }
}

/// An F8_E4M3 `weight` times its scale grid `scale` (scalar/[1] tensor,
/// [N,1] channel, U8 [N,K/32] MX, else a block from the grid), the product
/// in F32 then to `out` ("F32" or "BF16").
pub fn fp8_scaled(st: &SafeTensors<'_>, weight: &str, scale: &str, out: &str) -> Decoded {
    let s = shape(st, weight);
    let (n, k) = (s[0], s[1]);
    let codes = bytes(st, weight);
    let sv = view(st, scale);
    let grid: Vec<f32> = if sv.dtype() == Dtype::U8 {
        sv.data().iter().map(|&e| e8m0(e)).collect()
    } else {
        floats(st, scale)
    };
    let gs = sv.shape().to_vec();
    let (bh, bw) = match gs.as_slice() {
        [] | [1] => (n, k),
        [r, c] if sv.dtype() == Dtype::U8 => (n / r, k / c),
        [r, c] if *r == n && *c == 1 => (1, k),
        [r, c] => (
            n.div_ceil(*r).next_power_of_two(),
            k.div_ceil(*c).next_power_of_two(),
        ),
        other => panic!("scale grid {other:?}"),
    };
    let gc = k.div_ceil(bw);
    let values = codes
        .iter()
        .enumerate()
        .map(|(at, &c)| {
            let v = e4m3(c) * grid[(at / k / bh) * gc + (at % k) / bw];
            if out == "BF16" {
                bf16::from_f32(v).to_f32()
            } else {
                v
            }
        })
        .collect();
    Decoded {
        shape: vec![n, k],
        values,
        codes: codes.into_iter().map(i64::from).collect(),
    }
}

/// FP4 bytes (low nibble first) of `packed` [N, K/2] with scales
/// `scale_of(row, group)`, groups of `group`; value `fin(e2m1, scale)`.
fn fp4_grid(
    packed: &[u8],
    n: usize,
    k: usize,
    group: usize,
    scale_of: &dyn Fn(usize, usize) -> f32,
    fin: &dyn Fn(f32, f32) -> f32,
) -> Decoded {
    let mut out = Decoded {
        shape: vec![n, k],
        values: vec![],
        codes: vec![],
    };
    for row in 0..n {
        for i in 0..k {
            let b = packed[row * k / 2 + i / 2];
            let c = if i % 2 == 0 { b & 0xF } else { b >> 4 };
            out.codes.push(i64::from(c));
            out.values
                .push(fin(FP4[c as usize], scale_of(row, i / group)));
        }
    }
    out
}

/// compressed-tensors NVFP4: BF16(f32(e2m1 * f32(fp8 / global))).
pub fn ct_nvfp4(st: &SafeTensors<'_>, m: &str) -> Decoded {
    let s = shape(st, &format!("{m}.weight_packed"));
    let (n, k) = (s[0], 2 * s[1]);
    let packed = bytes(st, &format!("{m}.weight_packed"));
    let sc = bytes(st, &format!("{m}.weight_scale"));
    let global = floats(st, &format!("{m}.weight_global_scale"))[0];
    let g = k / 16;
    fp4_grid(
        &packed,
        n,
        k,
        16,
        &|r, j| e4m3(sc[r * g + j]) / global,
        &|e, s| bf16::from_f32(e * s).to_f32(),
    )
}

/// ModelOpt NVFP4: f32(e2m1 * fp8 * weight_scale_2), evaluated in f64.
pub fn modelopt_nvfp4(st: &SafeTensors<'_>, m: &str) -> Decoded {
    let s = shape(st, &format!("{m}.weight"));
    let (n, k) = (s[0], 2 * s[1]);
    let packed = bytes(st, &format!("{m}.weight"));
    let sc = bytes(st, &format!("{m}.weight_scale"));
    let s2 = f64::from(floats(st, &format!("{m}.weight_scale_2"))[0]);
    let g = k / 16;
    fp4_grid(&packed, n, k, 16, &|r, j| e4m3(sc[r * g + j]), &|e, s| {
        (f64::from(e) * f64::from(s) * s2) as f32
    })
}

/// MXFP4 with E8M0 scales [N, K/32] (compressed-tensors, MLX).
pub fn mxfp4(packed: &[u8], scales: &[u8], n: usize, k: usize) -> Decoded {
    let g = k / 32;
    fp4_grid(
        packed,
        n,
        k,
        32,
        &|r, j| e8m0(scales[r * g + j]),
        &|e, s| e * s,
    )
}

/// compressed-tensors MXFP6: E2M3 * 2^(s-127) / global.
pub fn ct_mxfp6(st: &SafeTensors<'_>, m: &str) -> Decoded {
    let s = shape(st, &format!("{m}.weight_packed"));
    let (n, k) = (s[0], s[1] * 4 / 3);
    let packed = bytes(st, &format!("{m}.weight_packed"));
    let sc = bytes(st, &format!("{m}.weight_scale"));
    let global = floats(st, &format!("{m}.weight_global_scale"))[0];
    let mut out = Decoded {
        shape: vec![n, k],
        values: vec![],
        codes: vec![],
    };
    for row in 0..n {
        for i in 0..k {
            let at = row * (3 * k / 4) + 3 * (i / 4);
            let w = u32::from(packed[at])
                | u32::from(packed[at + 1]) << 8
                | u32::from(packed[at + 2]) << 16;
            let c = ((w >> (6 * (i % 4))) & 0x3F) as u8;
            out.codes.push(i64::from(c));
            out.values
                .push(e2m3(c) * e8m0(sc[row * (k / 32) + i / 32]) / global);
        }
    }
    out
}

/// gpt-oss `<p>_blocks` [E, N, K/32, 16] + `<p>_scales`: [E, N, K].
pub fn gptoss(st: &SafeTensors<'_>, p: &str) -> Decoded {
    let s = shape(st, &format!("{p}_blocks"));
    let (e, n, k) = (s[0], s[1], s[2] * 32);
    let blocks = bytes(st, &format!("{p}_blocks"));
    let scales = bytes(st, &format!("{p}_scales"));
    let d = mxfp4(&blocks, &scales, e * n, k);
    Decoded {
        shape: vec![e, n, k],
        values: d.values,
        codes: d.codes,
    }
}

/// bitsandbytes 4-bit `<m>.weight`, self-described by its JSON blob.
pub fn bnb4(st: &SafeTensors<'_>, m: &str) -> Decoded {
    let w = format!("{m}.weight");
    let blob_name = st
        .names()
        .into_iter()
        .find(|x| x.starts_with(&format!("{w}.quant_state.bitsandbytes__")))
        .expect("a quant_state blob");
    let blob: serde_json::Value =
        serde_json::from_slice(&bytes(st, blob_name)).expect("the blob is JSON");
    let bs = blob["blocksize"].as_u64().expect("blocksize") as usize;
    let shp: Vec<usize> = blob["shape"]
        .as_array()
        .expect("shape")
        .iter()
        .map(|v| v.as_u64().expect("dim") as usize)
        .collect();
    let qmap = floats(st, &format!("{w}.quant_map"));
    let absmax: Vec<f32> = if blob.get("nested_offset").is_some() {
        let offset = blob["nested_offset"].as_f64().expect("offset") as f32;
        let per_nested = blob["nested_blocksize"].as_u64().expect("nested blocksize") as usize;
        let nmap = floats(st, &format!("{w}.nested_quant_map"));
        let nabs = floats(st, &format!("{w}.nested_absmax"));
        bytes(st, &format!("{w}.absmax"))
            .iter()
            .enumerate()
            .map(|(i, &c)| nmap[c as usize] * nabs[i / per_nested] + offset)
            .collect()
    } else {
        floats(st, &format!("{w}.absmax"))
    };
    let packed = bytes(st, &w);
    let numel: usize = shp.iter().product();
    let dtype = blob["dtype"].as_str().expect("dtype").to_owned();
    let mut out = Decoded {
        shape: shp,
        values: vec![],
        codes: vec![],
    };
    for i in 0..numel {
        let c = if i % 2 == 0 {
            packed[i / 2] >> 4
        } else {
            packed[i / 2] & 0xF
        };
        let v = qmap[c as usize] * absmax[i / bs];
        out.codes.push(i64::from(c));
        out.values.push(match dtype.as_str() {
            "bfloat16" => bf16::from_f32(v).to_f32(),
            "float16" => f16::from_f32(v).to_f32(),
            _ => v,
        });
    }
    out
}

/// bitsandbytes LLM.int8 `<m>`: A * SCB * f32(1/127), in f32.
pub fn bnb8(st: &SafeTensors<'_>, m: &str) -> Decoded {
    let s = shape(st, &format!("{m}.weight"));
    let (n, k) = (s[0], s[1]);
    let scb = floats(st, &format!("{m}.SCB"));
    let codes: Vec<i64> = bytes(st, &format!("{m}.weight"))
        .iter()
        .map(|&b| i64::from(b as i8))
        .collect();
    let inv = (1.0f64 / 127.0) as f32;
    let values = codes
        .iter()
        .enumerate()
        .map(|(at, &q)| q as f32 * scb[at / k] * inv)
        .collect();
    Decoded {
        shape: vec![n, k],
        values,
        codes,
    }
}

/// MLX `<m>`: `mode` "affine" (bits from the width), "mxfp4", "nvfp4" or
/// "mxfp8".
pub fn mlx(st: &SafeTensors<'_>, m: &str, mode: &str, group: usize) -> Decoded {
    let ws = shape(st, &format!("{m}.weight"));
    let n = ws[0];
    let words = words(st, &format!("{m}.weight"));
    let ss = shape(st, &format!("{m}.scales"));
    let k = ss[1] * group;
    let bits = (ws[1] * 32 / k) as u32;
    let raw: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    match mode {
        "affine" => {
            let scales = floats(st, &format!("{m}.scales"));
            let biases = floats(st, &format!("{m}.biases"));
            let f16s = view(st, &format!("{m}.scales")).dtype() == Dtype::F16;
            let r = |x: f32| {
                if f16s {
                    f16::from_f32(x).to_f32()
                } else {
                    bf16::from_f32(x).to_f32()
                }
            };
            let mut out = Decoded {
                shape: vec![n, k],
                values: vec![],
                codes: vec![],
            };
            for row in 0..n {
                for i in 0..k {
                    let q = field(&|j| words[row * ws[1] + j], i, bits);
                    let g = row * ss[1] + i / group;
                    out.codes.push(i64::from(q));
                    out.values.push(r(r(scales[g] * q as f32) + biases[g]));
                }
            }
            out
        }
        "mxfp4" => mxfp4(&raw, &bytes(st, &format!("{m}.scales")), n, k),
        "nvfp4" => {
            let sc = bytes(st, &format!("{m}.scales"));
            fp4_grid(
                &raw,
                n,
                k,
                16,
                &|r, j| e4m3(sc[r * (k / 16) + j]),
                &|e, s| e * s,
            )
        }
        "mxfp8" => {
            let sc = bytes(st, &format!("{m}.scales"));
            let values = raw
                .iter()
                .enumerate()
                .map(|(at, &c)| e4m3(c) * e8m0(sc[(at / k) * (k / 32) + (at % k) / 32]))
                .collect();
            Decoded {
                shape: vec![n, k],
                values,
                codes: raw.into_iter().map(i64::from).collect(),
            }
        }
        other => panic!("no MLX mode {other}"),
    }
}
