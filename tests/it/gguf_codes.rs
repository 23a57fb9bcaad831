//! `stats` on GGUF's block types (`tests/data/gguf/types.gguf`, one tensor
//! of each type, written by gguf-py): the histogram of each element's code
//! where the type has one (every element counted once; the counts those
//! of the file's bytes; for the simple types each value its code through
//! the type's formula and its block's scale, bit for bit gguf-py's value),
//! none for the grid types, and the distribution of the scales the blocks
//! hold (one per block, NVFP4 four).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::numpy::unhex;
use crate::pytorch::build::run;

fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/gguf")
}

/// The manifest's entry of `types.gguf`.
fn types_entry() -> Value {
    let text = std::fs::read(data_dir().join("MANIFEST.json")).expect("manifest");
    let m: Value = serde_json::from_slice(&text).expect("manifest JSON");
    m["files"]
        .as_array()
        .expect("files")
        .iter()
        .find(|f| f["file"] == "types.gguf")
        .expect("types.gguf")
        .clone()
}

/// Each type with codes: the lowest and highest code, block elements and
/// bytes.
const WITH_CODES: [(&str, i64, i64, usize, usize); 16] = [
    ("Q4_0", 0, 15, 32, 18),
    ("Q4_1", 0, 15, 32, 20),
    ("Q5_0", 0, 31, 32, 22),
    ("Q5_1", 0, 31, 32, 24),
    ("Q8_0", -128, 127, 32, 34),
    ("Q2_K", 0, 3, 256, 84),
    ("Q3_K", -4, 3, 256, 110),
    ("Q4_K", 0, 15, 256, 144),
    ("Q5_K", 0, 31, 256, 176),
    ("Q6_K", -32, 31, 256, 210),
    ("IQ4_NL", 0, 15, 32, 18),
    ("IQ4_XS", 0, 15, 256, 136),
    ("TQ1_0", -1, 1, 256, 54),
    ("TQ2_0", -1, 2, 256, 66),
    ("MXFP4", 0, 15, 32, 17),
    ("NVFP4", 0, 15, 64, 36),
];

/// The grid types: no code per element; block elements and bytes.
const GRIDS: [(&str, usize, usize); 7] = [
    ("IQ2_XXS", 256, 66),
    ("IQ2_XS", 256, 74),
    ("IQ3_XXS", 256, 98),
    ("IQ1_S", 256, 50),
    ("IQ3_S", 256, 110),
    ("IQ2_S", 256, 82),
    ("IQ1_M", 256, 56),
];

const KVALUES_IQ4NL: [i8; 16] = [
    -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113,
];
const KVALUES_MXFP4: [i8; 16] = [0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12];

fn f16(b: &[u8], at: usize) -> f32 {
    half::f16::from_bits(u16::from_le_bytes([b[at], b[at + 1]])).to_f32()
}

/// MXFP4's scale as gguf-py multiplies by it: 2^(e - 128).
fn e8m0_half(e: u8) -> f32 {
    if e < 2 {
        f32::from_bits(0x0020_0000_u32 << e)
    } else {
        f32::from_bits(u32::from(e - 1) << 23)
    }
}

/// Element `i`'s nibble of a run of 16 bytes (low nibbles first).
fn nibble(qs: &[u8], i: usize) -> u8 {
    if i < 16 { qs[i] & 15 } else { qs[i - 16] >> 4 }
}

/// For the simple types, each element's code and value (by gguf-py's
/// formula, in its float32 operations) of one block, and its scale.
fn simple(name: &str, b: &[u8]) -> Option<(Vec<(i64, f32)>, f32)> {
    let d = f16(b, 0);
    let one = |i: usize| -> (i64, f32) {
        match name {
            "Q4_0" => {
                let q = nibble(&b[2..], i);
                (i64::from(q), d * f32::from(q as i8 - 8))
            }
            "Q4_1" => {
                let q = nibble(&b[4..], i);
                (i64::from(q), d * f32::from(q) + f16(b, 2))
            }
            "Q5_0" => {
                let qh = u32::from_le_bytes([b[2], b[3], b[4], b[5]]);
                let q = nibble(&b[6..], i) | ((((qh >> i) & 1) as u8) << 4);
                (i64::from(q), d * f32::from(q as i8 - 16))
            }
            "Q8_0" => {
                let q = b[2 + i] as i8;
                (i64::from(q), f32::from(q) * d)
            }
            "IQ4_NL" => {
                let q = nibble(&b[2..], i);
                (i64::from(q), d * f32::from(KVALUES_IQ4NL[usize::from(q)]))
            }
            _ => {
                let q = nibble(&b[1..], i);
                let v = e8m0_half(b[0]) * f32::from(KVALUES_MXFP4[usize::from(q)]);
                (i64::from(q), v)
            }
        }
    };
    let scale = if name == "MXFP4" { e8m0_half(b[0]) } else { d };
    matches!(name, "Q4_0" | "Q4_1" | "Q5_0" | "Q8_0" | "IQ4_NL" | "MXFP4")
        .then(|| ((0..32).map(one).collect(), scale))
}

/// The counts of every code of a tensor whose codes are whole bit planes
/// of a stretch of each block (every nibble, bit pair or byte there is
/// one element's code): the stretch, the code's width, its offset.
fn plane_counts(name: &str, stored: &[u8], size: usize) -> Option<BTreeMap<i64, u64>> {
    let (range, width, offset): (std::ops::Range<usize>, u32, i64) = match name {
        "Q4_0" | "IQ4_NL" => (2..18, 4, 0),
        "Q4_1" => (4..20, 4, 0),
        "Q4_K" => (16..144, 4, 0),
        "IQ4_XS" => (8..136, 4, 0),
        "MXFP4" => (1..17, 4, 0),
        "NVFP4" => (4..36, 4, 0),
        "Q2_K" => (16..80, 2, 0),
        "TQ2_0" => (0..64, 2, -1),
        "Q8_0" => (2..34, 8, 0),
        _ => return None,
    };
    let mut counts = BTreeMap::new();
    for block in stored.chunks_exact(size) {
        for &byte in &block[range.clone()] {
            for k in 0..8 / width {
                let raw = (u32::from(byte) >> (k * width)) & ((1 << width) - 1);
                let code = if width == 8 {
                    i64::from(byte as i8)
                } else {
                    i64::from(raw) + offset
                };
                *counts.entry(code).or_insert(0) += 1;
            }
        }
    }
    Some(counts)
}

fn as_u64s(v: &Value) -> Vec<u64> {
    v.as_array()
        .expect("an array")
        .iter()
        .map(|x| x.as_u64().expect("a count"))
        .collect()
}

#[test]
fn stats_count_each_element_by_its_code_and_each_block_by_its_scale() {
    let entry = types_entry();
    let path = data_dir().join("types.gguf");
    let file = std::fs::read(&path).expect("fixture");
    let base = entry["tensor_data_offset"].as_u64().expect("offset") as usize;
    let cwd = tempfile::tempdir().expect("tempdir");
    let r = run(cwd.path(), &["stats", path.to_str().expect("utf-8")]);
    assert_eq!(r.code, 0, "{}", r.doc);
    let got = r.doc["tensors"].as_array().expect("tensors");
    let mut checked = 0;
    for w in entry["tensors"].as_array().expect("tensors") {
        let (name, dtype) = (w["name"].as_str().expect("name"), &w["dtype"]);
        let numel = w["numel"].as_u64().expect("numel");
        let [b, e] = [0, 1].map(|i| base + w["data_offsets"][i].as_u64().expect("o") as usize);
        let stored = &file[b..e];
        let t = got
            .iter()
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("no {name}"));
        let quant = &t["quant"];
        if let Some(&(ty, per, size)) = GRIDS.iter().find(|g| *dtype == g.0) {
            assert_eq!(quant["codes"]["counts"], serde_json::json!([]), "{ty}");
            assert_eq!(quant["scales"]["count"], stored.len() / size, "{ty}");
            assert_eq!(numel as usize, stored.len() / size * per);
            checked += 1;
            continue;
        }
        let Some(&(ty, lo, hi, per, size)) = WITH_CODES.iter().find(|c| *dtype == c.0) else {
            continue;
        };
        checked += 1;
        // Every code of the range listed, every element counted once.
        let values: Vec<i64> = quant["codes"]["values"]
            .as_array()
            .expect("values")
            .iter()
            .map(|v| v.as_i64().expect("a code"))
            .collect();
        assert_eq!(values, (lo..=hi).collect::<Vec<_>>(), "{ty}");
        let counts = as_u64s(&quant["codes"]["counts"]);
        assert_eq!(counts.iter().sum::<u64>(), numel, "{ty}");
        if let Some(want) = plane_counts(ty, stored, size) {
            for (code, n) in values.iter().zip(&counts) {
                assert_eq!(
                    *n,
                    want.get(code).copied().unwrap_or(0),
                    "{ty}: code {code}"
                );
            }
        }
        // One scale per block (NVFP4: per sub-block of 16), under the
        // tensor's own name.
        let blocks = stored.len() / size;
        let each = if ty == "NVFP4" { 4 } else { 1 };
        assert_eq!(quant["scales"]["count"], blocks * each, "{ty}");
        assert_eq!(quant["scales"]["tensor"], name, "{ty}");
        assert_eq!(numel as usize, blocks * per, "{ty}");
        // The simple types: each value is its code through the formula.
        if simple(ty, &stored[..size]).is_some() {
            let decoded = unhex(w["hex_values"].as_str().expect("hex values"));
            let mut scales = Vec::new();
            let mut from_codes = BTreeMap::new();
            for (k, block) in stored.chunks_exact(size).enumerate() {
                let (pairs, scale) = simple(ty, block).expect("simple");
                scales.push(scale);
                for (i, (code, v)) in pairs.into_iter().enumerate() {
                    let at = 4 * (32 * k + i);
                    let want = f32::from_le_bytes(decoded[at..at + 4].try_into().expect("4"));
                    assert_eq!(v.to_bits(), want.to_bits(), "{ty}: element {}", 32 * k + i);
                    *from_codes.entry(code).or_insert(0u64) += 1;
                }
            }
            for (code, n) in values.iter().zip(&counts) {
                assert_eq!(*n, from_codes.get(code).copied().unwrap_or(0), "{ty}");
            }
            let min = scales.iter().copied().fold(f32::INFINITY, f32::min);
            let max = scales.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            assert_eq!(
                quant["scales"]["min"].as_f64(),
                Some(f64::from(min)),
                "{ty}"
            );
            assert_eq!(
                quant["scales"]["max"].as_f64(),
                Some(f64::from(max)),
                "{ty}"
            );
        }
    }
    assert_eq!(checked, WITH_CODES.len() + GRIDS.len());
}

#[test]
fn table_types_say_what_each_code_stands_for() {
    let path = data_dir().join("types.gguf");
    let cwd = tempfile::tempdir().expect("tempdir");
    let r = run(cwd.path(), &["stats", path.to_str().expect("utf-8")]);
    let got = r.doc["tensors"].as_array().expect("tensors");
    let table = |name: &str| {
        let t = got
            .iter()
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("no {name}"));
        t["quant"]["codes"]["code_values"].as_array().map(|v| {
            v.iter()
                .map(|x| x.as_f64().expect("a number"))
                .collect::<Vec<_>>()
        })
    };
    let iq4: Vec<f64> = KVALUES_IQ4NL.iter().map(|&v| f64::from(v)).collect();
    let fp4: Vec<f64> = KVALUES_MXFP4.iter().map(|&v| f64::from(v)).collect();
    for name in ["t.IQ4_NL", "t.IQ4_XS"] {
        assert_eq!(table(name).as_ref(), Some(&iq4), "{name}");
    }
    for name in ["t.MXFP4", "t.NVFP4"] {
        assert_eq!(table(name).as_ref(), Some(&fp4), "{name}");
    }
    assert_eq!(table("t.Q4_K"), None);
}
