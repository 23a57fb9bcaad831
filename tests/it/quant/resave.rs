//! `resave --dequant` on every library-made sample: a plain checkpoint
//! that the official `safetensors` crate reads, holding each quantized
//! weight's values (bit for bit the library's own) under its logical name,
//! with the plain tensors unchanged and no packed part left.

use safetensors::SafeTensors;
use tensorscope::Checkpoint;
use tensorscope::dtype::Dtype;
use tensorscope::jobs::{CancelToken, Progress};
use tensorscope::quant;
use tensorscope::resave::{ResaveOptions, resave};

use crate::quant_oracle::{SAMPLES, oracle_values, sample};

fn values(dtype: safetensors::Dtype, bytes: &[u8]) -> Vec<f32> {
    match dtype {
        safetensors::Dtype::F32 => bytes
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect(),
        safetensors::Dtype::F16 => bytes
            .chunks_exact(2)
            .map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f32())
            .collect(),
        safetensors::Dtype::BF16 => bytes
            .chunks_exact(2)
            .map(|c| half::bf16::from_le_bytes([c[0], c[1]]).to_f32())
            .collect(),
        other => panic!("unexpected dtype {other:?}"),
    }
}

#[test]
fn dequantized_resave_is_plain_and_exact() {
    let dir = tempfile::tempdir().expect("tempdir");
    for name in SAMPLES {
        let src = sample(name);
        let ck = Checkpoint::open(&src.join("model.safetensors")).expect("open");
        let oracle = Checkpoint::open(&src.join("oracle.safetensors")).expect("oracle");
        let q = quant::detect(&ck).expect("quantized");
        for convert in [false, true] {
            let out = dir.path().join(format!("{name}-{convert}.safetensors"));
            let opts = ResaveOptions {
                dequantize: true,
                // `--dtype *=F32`: every float dtype to F32.
                conversions: if convert {
                    [Dtype::F64, Dtype::F16, Dtype::BF16]
                        .into_iter()
                        .map(|d| (d, Dtype::F32))
                        .collect()
                } else {
                    Vec::new()
                },
                ..ResaveOptions::default()
            };
            resave(&ck, &out, &opts, &CancelToken::new(), &Progress::new())
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            let bytes = std::fs::read(&out).expect("read");
            let st = SafeTensors::deserialize(&bytes).expect("the official crate reads it");
            for lt in q.tensors() {
                let key = if oracle
                    .find(&format!("{}.as_linear_EOI", lt.name()))
                    .is_some()
                {
                    format!("{}.as_linear_EOI", lt.name())
                } else {
                    lt.name().to_owned()
                };
                let want = oracle_values(&oracle, &key).expect("oracle");
                let t = st
                    .tensor(lt.name())
                    .unwrap_or_else(|_| panic!("{name}: no {}", lt.name()));
                let shape: Vec<u64> = t.shape().iter().map(|&d| d as u64).collect();
                assert_eq!(shape, lt.shape(), "{name} {}", lt.name());
                if convert {
                    assert_eq!(t.dtype(), safetensors::Dtype::F32, "{name} {}", lt.name());
                }
                let got = values(t.dtype(), t.data());
                assert!(
                    got.iter()
                        .zip(&want)
                        .all(|(a, b)| a.to_bits() == b.to_bits() || (*a == 0.0 && *b == 0.0)),
                    "{name} {}: values differ from the library's",
                    lt.name()
                );
                for (_, part) in lt.parts() {
                    let part = ck.info(*part).expect("part").name();
                    assert!(
                        part == lt.name() || st.tensor(part).is_err(),
                        "{name}: packed part {part} left in the output"
                    );
                }
            }
            // Plain tensors are copied (or converted) as they were.
            for (t, info) in ck.entries() {
                if q.owner(t).is_none() {
                    let out_t = st.tensor(info.name()).expect("plain tensor kept");
                    assert_eq!(out_t.shape().len(), info.shape().len());
                    if !convert {
                        assert_eq!(out_t.data(), ck.bytes(t), "{name} {}", info.name());
                    }
                }
            }
        }
    }
}
