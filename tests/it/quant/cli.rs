//! The command line on quantized checkpoints, as a user runs it: the
//! `quantization` object of `info --json`, `export --dequant` against the
//! libraries' own dequantized values (`tests/data/quant-samples/*/oracle`),
//! `stats --dequant` against a float64 reference computed here from the
//! exported values, `diff` of an original against its quantization, and
//! hostile checkpoints (exit codes 0/1/2, never a panic).

use crate::exe::OutputOnceMore as _;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Stdio;

use serde_json::Value;
use tensorscope::Checkpoint;
use tensorscope::dtype::Dtype;

use super::r#gen::{self as g, Fixture};
use crate::fixtures::{small_model, write};
use crate::quant_oracle::{SAMPLES, oracle_values, sample};

/// What one run of the binary gave.
struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

/// Runs the binary with `args`. Whatever the input, it must end with a
/// documented exit code (0, 1 or 2) and without a panic.
fn run(args: &[&str]) -> Run {
    let out = crate::exe::command()
        .args(args)
        .stdin(Stdio::null())
        .output_once_more()
        .expect("run tensorscope");
    let r = Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    };
    assert!(
        matches!(r.code, 0..=2),
        "{args:?}: exit code {} / {}",
        r.code,
        r.stderr
    );
    assert!(!r.stderr.contains("panicked"), "{args:?}: {}", r.stderr);
    r
}

/// Runs the binary with `args` and `--json`: the exit code and the one
/// JSON document on stdout.
fn run_json(args: &[&str]) -> (i32, Value) {
    let mut full = args.to_vec();
    full.push("--json");
    let r = run(&full);
    let mut docs = serde_json::Deserializer::from_str(&r.stdout).into_iter::<Value>();
    let doc = docs
        .next()
        .unwrap_or_else(|| panic!("{args:?}: no JSON document on stdout / {}", r.stderr))
        .unwrap_or_else(|e| panic!("{args:?}: stdout is not JSON ({e}): {:?}", r.stdout));
    assert!(docs.next().is_none(), "{args:?}: more than one document");
    (r.code, doc)
}

/// Asserts an error document of `kind` with exit code 2.
fn assert_error(args: &[&str], kind: &str) -> Value {
    let (code, doc) = run_json(args);
    assert_eq!(code, 2, "{args:?}: exit code: {doc}");
    assert_eq!(doc["error"]["kind"], kind, "{args:?}: {doc}");
    assert!(
        doc["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()),
        "{args:?}: {doc}"
    );
    doc
}

fn p(path: &Path) -> &str {
    path.to_str().expect("UTF-8 path")
}

/// What the quantization of a sample is, as its library wrote it.
struct Want {
    sample: &'static str,
    scheme: &'static str,
    bits: u64,
    group_size: Option<u64>,
    zero_point: &'static str,
    value_dtype: &'static str,
    /// The roles of the parts; `*` is the gpt-oss projection's name.
    roles: &'static [&'static str],
}

const WANTS: [Want; 9] = [
    Want {
        sample: "awq_gemm_w4_g128",
        scheme: "awq-gemm",
        bits: 4,
        group_size: Some(128),
        zero_point: "stored",
        value_dtype: "F16",
        roles: &["qweight", "qzeros", "scales"],
    },
    Want {
        sample: "bnb_nf4",
        scheme: "bnb-4bit",
        bits: 4,
        group_size: Some(64),
        zero_point: "none",
        value_dtype: "BF16",
        roles: &[
            "weight",
            "weight.absmax",
            "weight.quant_map",
            "weight.quant_state.bitsandbytes__nf4",
        ],
    },
    Want {
        sample: "ct_fp8_channel_dynamic",
        scheme: "fp8",
        bits: 8,
        group_size: None,
        zero_point: "none",
        value_dtype: "BF16",
        roles: &["weight", "weight_scale"],
    },
    Want {
        sample: "ct_nvfp4a16",
        scheme: "nvfp4",
        bits: 4,
        group_size: Some(16),
        zero_point: "none",
        value_dtype: "BF16",
        roles: &["weight_global_scale", "weight_packed", "weight_scale"],
    },
    Want {
        sample: "ct_w4a16_group128_sym",
        scheme: "ct-pack-quantized",
        bits: 4,
        group_size: Some(128),
        zero_point: "none",
        value_dtype: "BF16",
        roles: &["weight_packed", "weight_scale", "weight_shape"],
    },
    Want {
        sample: "fp8_block128_deepseek",
        scheme: "fp8",
        bits: 8,
        group_size: Some(128),
        zero_point: "none",
        value_dtype: "F32",
        roles: &["weight", "weight_scale_inv"],
    },
    Want {
        sample: "gptq_w4_g128_sym_actorder_v1",
        scheme: "gptq",
        bits: 4,
        group_size: Some(128),
        zero_point: "stored-minus-one",
        value_dtype: "F16",
        roles: &["g_idx", "qweight", "qzeros", "scales"],
    },
    Want {
        sample: "mlx_affine_4bit_g64",
        scheme: "mlx-affine",
        bits: 4,
        group_size: Some(64),
        zero_point: "bias",
        value_dtype: "BF16",
        roles: &["biases", "scales", "weight"],
    },
    Want {
        sample: "mxfp4_gptoss",
        scheme: "mxfp4-gpt-oss",
        bits: 4,
        group_size: Some(32),
        zero_point: "none",
        value_dtype: "F32",
        roles: &["*_blocks", "*_scales"],
    },
];

fn want(sample: &str) -> &'static Want {
    WANTS
        .iter()
        .find(|w| w.sample == sample)
        .unwrap_or_else(|| panic!("no expectations for {sample}"))
}

fn model(sample_name: &str) -> PathBuf {
    sample(sample_name).join("model.safetensors")
}

/// The oracle's logical tensors of a sample: (logical name, oracle
/// tensor name, shape). gpt-oss oracles hold each expert tensor twice;
/// `<prefix>.as_linear_EOI` is the one in our logical layout.
fn oracle_tensors(oracle: &Checkpoint) -> Vec<(String, String, Vec<u64>)> {
    let names: BTreeSet<String> = oracle.entries().map(|(_, i)| i.name().to_owned()).collect();
    let mut out = Vec::new();
    for (_, info) in oracle.entries() {
        let name = info.name();
        if let Some(logical) = name.strip_suffix(".as_linear_EOI") {
            out.push((logical.to_owned(), name.to_owned(), info.shape().to_vec()));
        } else if !names.contains(&format!("{name}.as_linear_EOI")) {
            out.push((name.to_owned(), name.to_owned(), info.shape().to_vec()));
        }
    }
    assert!(!out.is_empty(), "an oracle without tensors");
    out
}

fn open_oracle(sample_name: &str) -> Checkpoint {
    Checkpoint::open(&sample(sample_name).join("oracle.safetensors")).expect("open the oracle")
}

/// The method the sample's config.json names: its `quant_method`, or
/// `mlx` for MLX's `quantization` section, which has none.
fn config_method(sample_name: &str) -> String {
    let text = std::fs::read(sample(sample_name).join("config.json")).expect("config.json");
    let cfg: Value = serde_json::from_slice(&text).expect("config.json is JSON");
    if let Some(m) = cfg["quantization_config"]["quant_method"].as_str() {
        m.to_ascii_lowercase()
    } else {
        assert!(cfg["quantization"].is_object(), "{sample_name}: {cfg}");
        "mlx".to_owned()
    }
}

fn shape_of(v: &Value) -> Vec<u64> {
    v.as_array()
        .unwrap_or_else(|| panic!("not a shape: {v}"))
        .iter()
        .map(|d| d.as_u64().expect("a dimension"))
        .collect()
}

/// The `quantization` object of `info --json FILE`, and the names of the
/// file's stored tensors.
fn info_quantization(file: &Path) -> (Value, Vec<String>) {
    let (code, doc) = run_json(&["info", p(file)]);
    assert_eq!(code, 0, "info {}: {doc}", file.display());
    let names = doc["tensors"]
        .as_array()
        .expect("tensors")
        .iter()
        .map(|t| t["name"].as_str().expect("name").to_owned())
        .collect();
    (doc["quantization"].clone(), names)
}

/// The modules of `info --json` by name, with their part names.
fn modules(q: &Value) -> BTreeMap<String, (Value, Vec<String>)> {
    q["modules"]
        .as_array()
        .unwrap_or_else(|| panic!("no modules: {q}"))
        .iter()
        .map(|m| {
            let parts = m["parts"]
                .as_object()
                .unwrap_or_else(|| panic!("parts is not an object: {m}"))
                .values()
                .map(|v| v.as_str().expect("a part's name").to_owned())
                .collect();
            (
                m["name"].as_str().expect("name").to_owned(),
                (m.clone(), parts),
            )
        })
        .collect()
}

fn check_module(sample_name: &str, m: &Value, shape: &[u64], stored: &[String]) {
    let w = want(sample_name);
    let name = m["name"].as_str().expect("name");
    let ctx = format!("{sample_name} {name}");
    assert_eq!(m["scheme"], w.scheme, "{ctx}: {m}");
    assert_eq!(m["bits"].as_u64(), Some(w.bits), "{ctx}: {m}");
    assert_eq!(m["group_size"].as_u64(), w.group_size, "{ctx}: {m}");
    if w.group_size.is_none() {
        assert!(m["group_size"].is_null(), "{ctx}: {m}");
    }
    assert_eq!(m["zero_point"], w.zero_point, "{ctx}: {m}");
    assert_eq!(m["value_dtype"], w.value_dtype, "{ctx}: {m}");
    assert_eq!(shape_of(&m["logical_shape"]), shape, "{ctx}: {m}");
    assert_eq!(m["status"], "decoded", "{ctx}: {m}");
    assert!(m["message"].is_string(), "{ctx}: {m}");
    let parts = m["parts"].as_object().expect("parts");
    let proj = name.rsplit('.').next().unwrap_or_default();
    let roles: BTreeSet<String> = w.roles.iter().map(|r| r.replace('*', proj)).collect();
    let got: BTreeSet<String> = parts.keys().cloned().collect();
    assert_eq!(got, roles, "{ctx}: roles");
    let prefix = name.strip_suffix(".weight").unwrap_or(name);
    for part in parts.values() {
        let part = part.as_str().expect("a part's name");
        assert!(
            stored.iter().any(|s| s == part),
            "{ctx}: part {part} is no tensor of the file"
        );
        assert!(
            part.starts_with(prefix),
            "{ctx}: part {part} of another module"
        );
    }
}

#[test]
fn info_json_describes_every_sample_quantization() {
    for sample_name in SAMPLES {
        let dir = sample(sample_name);
        let (q, stored) = info_quantization(&model(sample_name));
        assert!(q.is_object(), "{sample_name}: quantization is {q}");
        assert_eq!(q["method"], config_method(sample_name), "{sample_name}");
        // GPTQ has a quantize_config.json too: config.json comes first.
        let config = q["config"].as_str().expect("config is a path");
        assert!(config.ends_with("config.json"), "{sample_name}: {config}");
        // (Windows joins with `\`, also onto a path given with `/`.)
        assert_eq!(
            Path::new(&config.replace('\\', "/")),
            dir.join("config.json"),
            "{sample_name}"
        );
        assert_eq!(q["config_problems"], serde_json::json!([]), "{sample_name}");
        let oracle = open_oracle(sample_name);
        let want_tensors = oracle_tensors(&oracle);
        let mods = modules(&q);
        let names: BTreeSet<&String> = mods.keys().collect();
        let oracle_names: BTreeSet<&String> = want_tensors.iter().map(|t| &t.0).collect();
        assert_eq!(
            names, oracle_names,
            "{sample_name}: one module per oracle tensor"
        );
        assert_eq!(mods.len(), q["modules"].as_array().map_or(0, Vec::len));
        let mut all_parts = BTreeSet::new();
        for (logical, _, shape) in &want_tensors {
            let (m, parts) = &mods[logical];
            check_module(sample_name, m, shape, &stored);
            for part in parts {
                assert!(
                    all_parts.insert(part.clone()),
                    "{sample_name}: {part} twice"
                );
            }
        }
    }
}

#[test]
fn info_json_of_a_plain_checkpoint_has_no_quantization() {
    let dir = tempfile::tempdir().expect("tempdir");
    let plain = write(dir.path(), "plain/m.safetensors", &small_model());
    let (q, _) = info_quantization(&plain);
    assert!(q.is_null(), "a plain fixture: {q}");
    for sample_name in SAMPLES {
        // The original weights alone in a folder: nothing quantized.
        let alone = dir.path().join(sample_name).join("original.safetensors");
        std::fs::create_dir_all(alone.parent().expect("parent")).expect("mkdir");
        std::fs::copy(sample(sample_name).join("original.safetensors"), &alone).expect("copy");
        let (q, _) = info_quantization(&alone);
        assert!(q.is_null(), "{sample_name} original.safetensors alone: {q}");
        // In place, beside the sample's config.json, the config names a
        // method (detect: "None when no tensor belongs to a known scheme
        // and no config names one"), but no tensor is quantized.
        let (q, _) = info_quantization(&sample(sample_name).join("original.safetensors"));
        assert!(
            q.is_null() || q["modules"] == serde_json::json!([]),
            "{sample_name} original.safetensors: {q}"
        );
    }
}

/// A parsed `.npy` file.
struct Npy {
    descr: String,
    fortran_order: bool,
    shape: Vec<u64>,
    data: Vec<u8>,
}

/// The value of `key` in a `.npy` header dict, up to the next top-level
/// comma (a shape tuple is read whole).
fn npy_field<'a>(header: &'a str, key: &str) -> &'a str {
    let at = header
        .find(&format!("'{key}':"))
        .unwrap_or_else(|| panic!("no {key} in the npy header {header:?}"));
    let rest = header[at + key.len() + 3..].trim_start();
    let end = if rest.starts_with('(') {
        rest.find(')').map(|i| i + 1)
    } else {
        rest.find([',', '}'])
    };
    rest[..end.unwrap_or_else(|| panic!("{key} is not closed in {header:?}"))].trim()
}

/// Parses a `.npy` file: the magic, the version, the header dict (padded
/// to a multiple of 64 bytes, ending in a newline), then the data.
fn parse_npy(bytes: &[u8]) -> Npy {
    assert!(bytes.len() >= 10, "a .npy of {} bytes", bytes.len());
    assert_eq!(&bytes[..6], b"\x93NUMPY", "the .npy magic");
    let (len, start) = match bytes[6] {
        1 => (usize::from(u16::from_le_bytes([bytes[8], bytes[9]])), 10),
        2 | 3 => (
            u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
            12,
        ),
        v => panic!("npy version {v}"),
    };
    let end = start + len;
    assert!(end <= bytes.len(), "the npy header runs past the file");
    assert_eq!(end % 64, 0, "the npy data starts at {end}");
    let header = std::str::from_utf8(&bytes[start..end]).expect("an ASCII npy header");
    assert!(header.ends_with('\n'), "{header:?}");
    let header = header.trim_end();
    assert!(
        header.starts_with('{') && header.ends_with('}'),
        "{header:?}"
    );
    let descr = npy_field(header, "descr").trim_matches('\'').to_owned();
    let fortran_order = match npy_field(header, "fortran_order") {
        "False" => false,
        "True" => true,
        other => panic!("fortran_order {other}"),
    };
    let tuple = npy_field(header, "shape");
    let shape = tuple
        .trim_start_matches('(')
        .trim_end_matches(')')
        .split(',')
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .map(|d| d.parse().expect("a dimension"))
        .collect();
    Npy {
        descr,
        fortran_order,
        shape,
        data: bytes[end..].to_vec(),
    }
}

fn f32s(bytes: &[u8]) -> Vec<f32> {
    assert_eq!(bytes.len() % 4, 0, "{} bytes of f32", bytes.len());
    bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// The first index where two runs of f32 differ in their bits.
fn first_difference(got: &[f32], want: &[f32]) -> Option<(usize, f32, f32)> {
    got.iter()
        .zip(want)
        .enumerate()
        .find(|(_, (a, b))| a.to_bits() != b.to_bits())
        .map(|(i, (a, b))| (i, *a, *b))
}

/// `export --dequant FILE NAME -o OUT --json`, checked as a success:
/// returns the file written.
fn export_dequant(file: &Path, name: &str, out: &Path, shape: &[u64]) -> Vec<u8> {
    let (code, doc) = run_json(&["export", "--dequant", p(file), name, "-o", p(out)]);
    assert_eq!(
        code,
        0,
        "export --dequant {name} -o {}: {doc}",
        out.display()
    );
    assert_eq!(doc["tensor"], name, "{doc}");
    assert_eq!(doc["dtype"], "F32", "{doc}");
    assert_eq!(shape_of(&doc["shape"]), shape, "{doc}");
    assert_eq!(
        doc["elements"].as_u64(),
        Some(shape.iter().product()),
        "{doc}"
    );
    assert_eq!(doc["encoding"], "values", "{doc}");
    assert_eq!(Path::new(doc["output"].as_str().expect("output")), out);
    let bytes = std::fs::read(out).expect("the export is written");
    assert_eq!(doc["bytes_written"].as_u64(), Some(bytes.len() as u64));
    bytes
}

#[test]
fn export_dequant_writes_the_library_values_bit_for_bit() {
    let dir = tempfile::tempdir().expect("tempdir");
    for sample_name in SAMPLES {
        let file = model(sample_name);
        let oracle = open_oracle(sample_name);
        for (i, (name, key, shape)) in oracle_tensors(&oracle).iter().enumerate() {
            let want = oracle_values(&oracle, key).expect("oracle values");
            let npy = dir.path().join(format!("{sample_name}-{i}.npy"));
            let bytes = export_dequant(&file, name, &npy, shape);
            let parsed = parse_npy(&bytes);
            assert_eq!(parsed.descr, "<f4", "{sample_name} {name}");
            assert!(!parsed.fortran_order, "{sample_name} {name}");
            assert_eq!(parsed.shape, *shape, "{sample_name} {name}");
            let got = f32s(&parsed.data);
            assert_eq!(got.len(), want.len(), "{sample_name} {name}");
            if let Some((j, a, b)) = first_difference(&got, &want) {
                panic!("{sample_name} {name}.npy [{j}]: {a} but the library gives {b}");
            }
            let bin = dir.path().join(format!("{sample_name}-{i}.bin"));
            let got = f32s(&export_dequant(&file, name, &bin, shape));
            assert_eq!(got.len(), want.len(), "{sample_name} {name}");
            if let Some((j, a, b)) = first_difference(&got, &want) {
                panic!("{sample_name} {name}.bin [{j}]: {a} but the library gives {b}");
            }
        }
    }
}

/// The stored tensors of a sample that are no part of a quantized weight.
fn plain_tensors(sample_name: &str) -> Vec<String> {
    let (q, stored) = info_quantization(&model(sample_name));
    let parts: BTreeSet<String> = modules(&q).into_values().flat_map(|m| m.1).collect();
    stored.into_iter().filter(|n| !parts.contains(n)).collect()
}

#[test]
fn export_dequant_of_a_plain_tensor_and_refusals() {
    let dir = tempfile::tempdir().expect("tempdir");
    for sample_name in SAMPLES {
        let file = model(sample_name);
        let f = p(&file);
        let plain = plain_tensors(sample_name);
        let name = plain.first().expect("every sample has a plain tensor");
        for ext in ["npy", "csv", "bin"] {
            let with = dir.path().join(format!("{sample_name}-with.{ext}"));
            let without = dir.path().join(format!("{sample_name}-without.{ext}"));
            let (code, a) = run_json(&["export", "--dequant", f, name, "-o", p(&with)]);
            assert_eq!(code, 0, "{sample_name} {name} --dequant .{ext}: {a}");
            let (code, b) = run_json(&["export", f, name, "-o", p(&without)]);
            assert_eq!(code, 0, "{sample_name} {name} .{ext}: {b}");
            assert!(a.get("scheme").is_none(), "{a}");
            for key in [
                "tensor",
                "dtype",
                "shape",
                "format",
                "encoding",
                "npy_descr",
            ] {
                assert_eq!(a.get(key), b.get(key), "{sample_name} {name} .{ext}: {key}");
            }
            assert_eq!(
                std::fs::read(&with).expect("written"),
                std::fs::read(&without).expect("written"),
                "{sample_name} {name} .{ext}"
            );
        }
        let (q, _) = info_quantization(&file);
        for logical in modules(&q).keys() {
            for ext in ["csv", "png"] {
                let out = dir.path().join(format!("{sample_name}-refused.{ext}"));
                let doc = assert_error(
                    &["export", "--dequant", f, logical, "-o", p(&out)],
                    "DequantFormat",
                );
                assert!(
                    !out.exists(),
                    "{sample_name} {logical}: .{ext} written: {doc}"
                );
            }
        }
        let out = dir.path().join(format!("{sample_name}-unknown.npy"));
        for unknown in ["model.layers.0.no_such_proj.weight", "model.layers.0.mlp"] {
            assert_error(
                &["export", "--dequant", f, unknown, "-o", p(&out)],
                "UnknownTensor",
            );
        }
        assert!(
            !out.exists(),
            "{sample_name}: an unknown tensor was written"
        );
    }
}

/// An f64 sum with Neumaier's compensation: exact enough to judge a
/// compensated sum in the binary.
fn neumaier(values: impl Iterator<Item = f64>) -> f64 {
    let (mut sum, mut c) = (0f64, 0f64);
    for x in values {
        let t = sum + x;
        c += if sum.abs() >= x.abs() {
            (sum - t) + x
        } else {
            (x - t) + sum
        };
        sum = t;
    }
    sum + c
}

/// The float64 reference figures of a run of finite f32 values.
struct Reference {
    count: u64,
    min: f64,
    max: f64,
    mean: f64,
    std: f64,
    l2_norm: f64,
    sorted: Vec<f64>,
}

fn reference(values: &[f32]) -> Reference {
    assert!(values.iter().all(|v| v.is_finite()), "a non-finite value");
    let xs: Vec<f64> = values.iter().map(|&v| f64::from(v)).collect();
    let n = xs.len() as f64;
    let mean = neumaier(xs.iter().copied()) / n;
    let var = neumaier(xs.iter().map(|x| (x - mean) * (x - mean))) / n;
    let mut sorted = xs.clone();
    sorted.sort_by(f64::total_cmp);
    Reference {
        count: xs.len() as u64,
        min: sorted[0],
        max: sorted[sorted.len() - 1],
        mean,
        std: var.sqrt(),
        l2_norm: neumaier(xs.iter().map(|x| x * x)).sqrt(),
        sorted,
    }
}

/// The value at the nearest rank ⌈q·n⌉ (1-based, at least 1) of `permille`.
fn nearest_rank_value(sorted: &[f64], permille: u64) -> f64 {
    let n = sorted.len() as u64;
    let rank = (permille * n).div_ceil(1000).clamp(1, n);
    sorted[(rank - 1) as usize]
}

fn assert_rel(what: &str, got: &Value, want: f64, rel: f64) {
    let g = got
        .as_f64()
        .unwrap_or_else(|| panic!("{what}: {got} is not a number"));
    let err = (g - want).abs();
    assert!(
        err <= rel * want.abs(),
        "{what}: {g} against the reference {want} ({:e} relative)",
        err / want.abs()
    );
}

fn check_stats_entry(ctx: &str, e: &Value, values: &[f32], shape: &[u64], bits: u64) {
    let r = reference(values);
    assert_eq!(e["count"].as_u64(), Some(r.count), "{ctx}");
    assert_eq!(e["finite"].as_u64(), Some(r.count), "{ctx}");
    assert_eq!(e["nan"].as_u64(), Some(0), "{ctx}");
    assert_eq!(shape_of(&e["shape"]), shape, "{ctx}");
    assert_eq!(e["min"].as_f64(), Some(r.min), "{ctx}: min");
    assert_eq!(e["max"].as_f64(), Some(r.max), "{ctx}: max");
    assert_rel(&format!("{ctx}: mean"), &e["mean"], r.mean, 1e-12);
    assert_rel(&format!("{ctx}: std"), &e["std"], r.std, 1e-9);
    assert_rel(&format!("{ctx}: l2_norm"), &e["l2_norm"], r.l2_norm, 1e-9);
    for (key, permille) in tensorscope::stats::QUANTILES {
        let got = e["quantiles"][key].as_f64();
        let want = nearest_rank_value(&r.sorted, permille);
        // −0 and +0 are the same quantile.
        assert!(
            got == Some(want),
            "{ctx}: {key} is {got:?}, nearest rank gives {want}"
        );
    }
    let codes = &e["quant"]["codes"];
    let code_values = codes["values"].as_array().expect("codes.values");
    let counts: Vec<u64> = codes["counts"]
        .as_array()
        .expect("codes.counts")
        .iter()
        .map(|c| c.as_u64().expect("a count"))
        .collect();
    assert_eq!(code_values.len(), counts.len(), "{ctx}: codes");
    assert_eq!(counts.iter().sum::<u64>(), r.count, "{ctx}: code counts");
    if bits == 4 {
        assert_eq!(counts.len(), 16, "{ctx}: codes of a 4-bit scheme");
    }
    let scales = &e["quant"]["scales"];
    let (lo, hi) = (scales["min"].as_f64(), scales["max"].as_f64());
    assert!(
        matches!((lo, hi), (Some(lo), Some(hi)) if lo <= hi),
        "{ctx}: scales {scales}"
    );
}

#[test]
fn stats_dequant_agrees_with_a_float64_reference() {
    let dir = tempfile::tempdir().expect("tempdir");
    for sample_name in SAMPLES {
        let file = model(sample_name);
        let (q, _) = info_quantization(&file);
        let mods = modules(&q);
        for (i, (name, (m, parts))) in mods.iter().enumerate() {
            let shape = shape_of(&m["logical_shape"]);
            let bin = dir.path().join(format!("{sample_name}-{i}.bin"));
            let values = f32s(&export_dequant(&file, name, &bin, &shape));
            let (code, doc) = run_json(&["stats", "--dequant", p(&file), "--tensor", name]);
            assert_eq!(code, 0, "{sample_name} {name}: {doc}");
            let entries = doc["tensors"].as_array().expect("tensors");
            assert_eq!(entries.len(), 1, "{sample_name} {name}: {doc}");
            let e = &entries[0];
            let ctx = format!("{sample_name} {name}");
            assert_eq!(e["name"], name.as_str(), "{ctx}");
            assert_eq!(e["scheme"], m["scheme"], "{ctx}");
            assert_eq!(e["dtype"], m["value_dtype"], "{ctx}");
            let bits = m["bits"].as_u64().expect("bits");
            check_stats_entry(&ctx, e, &values, &shape, bits);
            let scale_tensor = e["quant"]["scales"]["tensor"].as_str().expect("scales");
            assert!(
                parts.iter().any(|p| p == scale_tensor),
                "{ctx}: scales from {scale_tensor}"
            );
        }
    }
}

#[test]
fn stats_without_dequant_reports_the_stored_tensors() {
    for sample_name in SAMPLES {
        let file = model(sample_name);
        let (q, stored) = info_quantization(&file);
        let (code, doc) = run_json(&["stats", p(&file)]);
        assert_eq!(code, 0, "{sample_name}: {doc}");
        let entries = doc["tensors"].as_array().expect("tensors");
        let names: Vec<&str> = entries
            .iter()
            .map(|e| e["name"].as_str().expect("name"))
            .collect();
        assert_eq!(names, stored, "{sample_name}: one entry per stored tensor");
        for e in entries {
            assert!(e.get("quant").is_none(), "{sample_name}: {}", e["name"]);
            assert!(e.get("scheme").is_none(), "{sample_name}: {}", e["name"]);
        }
        for (logical, (_, parts)) in modules(&q) {
            for part in &parts {
                assert!(names.contains(&part.as_str()), "{sample_name}: no {part}");
            }
            if !parts.contains(&logical) {
                assert!(
                    !names.contains(&logical.as_str()),
                    "{sample_name}: {logical}"
                );
            }
        }
    }
}

/// A stored tensor's values in f64 (the originals are F16, BF16 or F32).
fn stored_values(ck: &Checkpoint, name: &str) -> Vec<f64> {
    let t = ck
        .find(name)
        .unwrap_or_else(|| panic!("no tensor {name} in {}", ck.path().display()));
    let info = ck.info(t).expect("info");
    let bytes = ck.bytes(t);
    match info.dtype() {
        Dtype::F16 => bytes
            .chunks_exact(2)
            .map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f64())
            .collect(),
        Dtype::BF16 => bytes
            .chunks_exact(2)
            .map(|c| half::bf16::from_le_bytes([c[0], c[1]]).to_f64())
            .collect(),
        Dtype::F32 => f32s(bytes).into_iter().map(f64::from).collect(),
        other => panic!("{name}: an original of {}", other.name()),
    }
}

/// ‖oracle − original‖ / ‖original‖ in f64.
fn reference_rel_l2(original: &[f64], oracle: &[f32]) -> f64 {
    assert_eq!(original.len(), oracle.len());
    let diff = neumaier(
        original
            .iter()
            .zip(oracle)
            .map(|(a, b)| (f64::from(*b) - a) * (f64::from(*b) - a)),
    );
    let norm = neumaier(original.iter().map(|a| a * a));
    (diff / norm).sqrt()
}

fn rows(doc: &Value) -> BTreeMap<String, Value> {
    doc["tensors"]
        .as_array()
        .expect("tensors")
        .iter()
        .map(|t| (t["name"].as_str().expect("name").to_owned(), t.clone()))
        .collect()
}

fn names_of(v: &Value) -> BTreeSet<String> {
    v.as_array()
        .unwrap_or_else(|| panic!("not a list of names: {v}"))
        .iter()
        .map(|n| n.as_str().expect("a name").to_owned())
        .collect()
}

#[test]
fn diff_compares_each_quantized_weight_with_its_original() {
    for sample_name in SAMPLES {
        let dir = sample(sample_name);
        let (a, b) = (dir.join("original.safetensors"), model(sample_name));
        let original = Checkpoint::open(&a).expect("open the original");
        let oracle = open_oracle(sample_name);
        let (q, _) = info_quantization(&b);
        let mods = modules(&q);
        let (code, doc) = run_json(&["diff", p(&a), p(&b)]);
        assert_eq!(code, 1, "{sample_name}: the checkpoints differ: {doc}");
        let by_name = rows(&doc);
        let only_b = names_of(&doc["only_in_b"]);
        assert_eq!(doc["only_in_a"], serde_json::json!([]), "{sample_name}");
        for (name, key, shape) in oracle_tensors(&oracle) {
            let ctx = format!("{sample_name} {name}");
            let row = by_name
                .get(&name)
                .unwrap_or_else(|| panic!("{ctx}: no row in {doc}"));
            assert_eq!(row["dequantized"], "b", "{ctx}: {row}");
            assert_eq!(row["status"], "changed", "{ctx}: {row}");
            assert_eq!(shape_of(&row["shape_a"]), shape, "{ctx}");
            assert_eq!(shape_of(&row["shape_b"]), shape, "{ctx}");
            assert_eq!(row["dtype_b"], mods[&name].0["value_dtype"], "{ctx}");
            let want = reference_rel_l2(
                &stored_values(&original, &name),
                &oracle_values(&oracle, &key).expect("oracle values"),
            );
            assert_rel(&format!("{ctx}: rel_l2"), &row["rel_l2"], want, 1e-9);
            let rel = row["rel_l2"].as_f64().expect("rel_l2");
            let snr = row["snr_db"].as_f64().expect("snr_db");
            assert!(
                (snr - -20.0 * rel.log10()).abs() <= 1e-6,
                "{ctx}: snr_db {snr} for rel_l2 {rel}"
            );
            for part in &mods[&name].1 {
                assert!(!only_b.contains(part), "{ctx}: part {part} listed alone");
            }
        }
    }
}

#[test]
fn diff_raw_compares_the_stored_parts() {
    for sample_name in SAMPLES {
        let dir = sample(sample_name);
        let (a, b) = (dir.join("original.safetensors"), model(sample_name));
        let (q, _) = info_quantization(&b);
        let (code, doc) = run_json(&["diff", "--raw", p(&a), p(&b)]);
        assert_eq!(code, 1, "{sample_name}: {doc}");
        let by_name = rows(&doc);
        for row in by_name.values() {
            assert!(row.get("dequantized").is_none(), "{sample_name}: {row}");
            assert!(row.get("snr_db").is_none(), "{sample_name}: {row}");
        }
        let only_b = names_of(&doc["only_in_b"]);
        for (name, (_, parts)) in modules(&q) {
            let alone = parts.iter().filter(|p| only_b.contains(*p)).count();
            assert!(
                alone > 0,
                "{sample_name} {name}: no part in only_in_b: {doc}"
            );
            for part in &parts {
                assert!(
                    only_b.contains(part) || by_name.contains_key(part),
                    "{sample_name} {name}: part {part} is neither a row nor only in B"
                );
            }
        }
    }
}

/// The logical name of the module the hostile fixtures break (the
/// generators' first linear module).
const BROKEN: &str = "model.layers.0.self_attn.q_proj.weight";

fn check_hostile(what: &str, fx: &Fixture, root: &Path, config_case: bool) {
    let file = fx.write(&root.join(what));
    let f = p(&file);
    let (q, _) = info_quantization(&file);
    assert!(q.is_object(), "{what}: quantization is {q}");
    let mods = modules(&q);
    if config_case {
        let problems = q["config_problems"].as_array().expect("config_problems");
        assert!(!problems.is_empty(), "{what}: no config problem: {q}");
        assert!(
            problems
                .iter()
                .all(|p| p.as_str().is_some_and(|s| s.contains("config.json"))),
            "{what}: {q}"
        );
    } else {
        let (m, _) = mods
            .get(BROKEN)
            .unwrap_or_else(|| panic!("{what}: no module {BROKEN}: {q}"));
        assert_eq!(m["status"], "inconsistent", "{what}: {m}");
    }
    for (i, (name, (m, _))) in mods.iter().enumerate() {
        let status = m["status"].as_str().expect("status");
        let out = root.join(format!("{what}-{i}.npy"));
        let args = ["export", "--dequant", f, name.as_str(), "-o", p(&out)];
        if status == "decoded" {
            let (code, doc) = run_json(&args);
            assert_eq!(code, 0, "{what} {name}: {doc}");
            continue;
        }
        assert!(
            m["message"].as_str().is_some_and(|s| !s.is_empty()),
            "{what} {name}: {status} without a message: {m}"
        );
        if status == "inconsistent" {
            assert_error(&args, "NotDecoded");
            assert!(!out.exists(), "{what} {name}: written");
        }
    }
    // stats gives the broken module no values; no verb panics.
    let (code, doc) = run_json(&["stats", "--dequant", f]);
    assert_eq!(code, 0, "{what}: {doc}");
    for e in doc["tensors"].as_array().expect("tensors") {
        let status = mods.get(e["name"].as_str().unwrap_or_default());
        if status.is_some_and(|(m, _)| m["status"] != "decoded") {
            assert!(e.get("count").is_none(), "{what}: values of {e}");
        }
    }
    assert_eq!(run(&["info", f]).code, 0, "{what}: info");
    assert_eq!(run_json(&["stats", f]).0, 0, "{what}: stats");
    assert_eq!(run_json(&["diff", f, f]).0, 0, "{what}: diff");
    assert_eq!(run_json(&["diff", "--raw", f, f]).0, 0, "{what}: diff");
}

#[test]
fn hostile_checkpoints_are_reported_without_a_panic() {
    let dir = tempfile::tempdir().expect("tempdir");
    check_hostile(
        "scales-wrong-shape",
        &g::hostile_scales_wrong_shape(),
        dir.path(),
        false,
    );
    check_hostile(
        "gidx-out-of-range",
        &g::hostile_gidx_out_of_range(),
        dir.path(),
        false,
    );
    check_hostile(
        "config-not-json",
        &g::hostile_config_not_json(),
        dir.path(),
        true,
    );
    check_hostile("config-huge", &g::hostile_config_huge(), dir.path(), true);
}
