//! Hostile variants of the library-made samples: every header rewritten
//! with shapes refactored (the same element count: `[a, b]` as `[b, a]`,
//! `[a·b]`, `[1, a·b]`, `[2a, b/2]`) and dtypes swapped for others of the
//! same width, so that each file stays valid. Detection, decoding (every
//! element), the statistics, scales and zero points must never panic, and a
//! weight that is not decoded says why.

use serde_json::{Map, Value};
use tensorscope::Checkpoint;
use tensorscope::jobs::{CancelToken, Progress};
use tensorscope::quant::{self, Dequantizer};
use tensorscope::stats::{StatsOptions, logical_stats};

use crate::quant_oracle::{SAMPLES, sample};

/// splitmix64.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn pick<T: Copy>(&mut self, v: &[T]) -> T {
        v[(self.next() % v.len() as u64) as usize]
    }
}

fn same_width(dtype: &str, rng: &mut Rng) -> String {
    let group: &[&str] = match dtype {
        "I32" | "U32" | "F32" => &["I32", "U32", "F32"],
        "F16" | "BF16" | "I16" | "U16" => &["F16", "BF16", "I16", "U16"],
        "U8" | "I8" | "F8_E4M3" | "F8_E5M2" | "F8_E8M0" => &["U8", "I8", "F8_E4M3", "F8_E8M0"],
        "I64" | "U64" | "F64" => &["I64", "F64"],
        other => return other.to_owned(),
    };
    rng.pick(group).to_owned()
}

fn refactor(shape: &[u64], rng: &mut Rng) -> Vec<u64> {
    let n: u64 = shape.iter().product();
    let mut options = vec![shape.to_vec(), vec![n], vec![1, n]];
    if let [a, b] = shape {
        options.push(vec![*b, *a]);
        if b % 2 == 0 {
            options.push(vec![a * 2, b / 2]);
        }
    }
    if shape.len() > 2 {
        options.push(shape.iter().rev().copied().collect());
    }
    rng.pick(&options.iter().map(Vec::as_slice).collect::<Vec<_>>())
        .to_vec()
}

fn mutated(bytes: &[u8], rng: &mut Rng) -> Vec<u8> {
    let n = usize::try_from(u64::from_le_bytes(bytes[..8].try_into().expect("8 bytes")))
        .expect("small");
    let mut header: Map<String, Value> = serde_json::from_slice(&bytes[8..8 + n]).expect("header");
    for (name, t) in &mut header {
        if name == "__metadata__" || !rng.next().is_multiple_of(3) {
            continue;
        }
        let dtype = t["dtype"].as_str().unwrap_or("").to_owned();
        let shape: Vec<u64> = t["shape"]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_u64).collect())
            .unwrap_or_default();
        if rng.next().is_multiple_of(2) {
            t["dtype"] = same_width(&dtype, rng).into();
        } else {
            t["shape"] = refactor(&shape, rng).into();
        }
    }
    let mut text = serde_json::to_string(&header).expect("json");
    while !text.len().is_multiple_of(8) {
        text.push(' ');
    }
    let mut out = (text.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(text.as_bytes());
    out.extend_from_slice(&bytes[8 + n..]);
    out
}

#[test]
fn mutated_samples_never_panic() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut rng = Rng(0x5eed);
    let options = StatsOptions::default();
    let mut decoded = 0;
    for name in SAMPLES {
        let src = sample(name);
        let bytes = std::fs::read(src.join("model.safetensors")).expect("read");
        let folder = dir.path().join(name);
        std::fs::create_dir_all(&folder).expect("folder");
        for extra in ["config.json", "quantize_config.json"] {
            if let Ok(c) = std::fs::read(src.join(extra)) {
                std::fs::write(folder.join(extra), c).expect("config");
            }
        }
        for round in 0..24 {
            let path = folder.join(format!("m{round}.safetensors"));
            std::fs::write(&path, mutated(&bytes, &mut rng)).expect("write");
            let Ok(ck) = Checkpoint::open(&path) else {
                continue;
            };
            let Some(q) = quant::detect(&ck) else {
                continue;
            };
            for lt in q.tensors() {
                let Some(dq) = Dequantizer::new(&ck, lt) else {
                    assert!(
                        !lt.message().is_empty(),
                        "{name}: {} undecoded without a reason",
                        lt.name()
                    );
                    continue;
                };
                decoded += 1;
                let mut vals = vec![0f32; 4096];
                let mut codes = vec![0i32; 4096];
                let mut at = 0;
                while at < dq.len() {
                    let got = dq.values_and_codes(at, &mut vals, &mut codes);
                    assert!(got > 0, "{name} {}: decoding stopped at {at}", lt.name());
                    at += got as u64;
                }
                let _ = dq.scale_at(0);
                let _ = dq.zero_counts();
                logical_stats(&ck, lt, &options, &CancelToken::new(), &Progress::new())
                    .expect("stats of an unchanged file");
            }
        }
    }
    assert!(decoded > 20, "only {decoded} mutated weights still decoded");
}
