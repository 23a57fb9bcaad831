//! Remote checkpoints over loopback HTTP: every verb on `http://` and
//! `hf://` locations gives what it gives on the local copy, fetches only
//! the bytes it needs, and every fault is a clear error.

mod frameworks;
mod gguf;
mod pytorch;
mod scan;
mod series;
pub mod server;

use crate::exe::OutputOnceMore as _;
use std::fmt::Write as _;
use std::path::Path;

use server::{Body, Fault, Route, Server, without_paths};

/// The largest request for tensor bytes (src/source/remote/cache.rs).
const CHUNK: u64 = 4 << 20;

/// Runs the binary with its own cache folder and `env`.
fn run(cache: &Path, env: &[(&str, &str)], args: &[&str]) -> (i32, String, String) {
    let mut cmd = crate::exe::command();
    cmd.args(args)
        .env("TENSORSCOPE_CACHE_DIR", cache)
        .env("TENSORSCOPE_HTTP_TIMEOUT", "10")
        .env_remove("HF_TOKEN")
        .env("HF_HOME", cache.join("no-hf-home"))
        .env_remove("HTTPS_PROXY")
        .env_remove("HTTP_PROXY")
        .env_remove("ALL_PROXY")
        .env_remove("https_proxy")
        .env_remove("http_proxy");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output_once_more().expect("run tensorscope");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn json(stdout: &str, stderr: &str) -> serde_json::Value {
    serde_json::from_str(stdout)
        .unwrap_or_else(|e| panic!("stdout is not one JSON document ({e}): {stdout:?} / {stderr}"))
}

/// A file of F32 tensors of `sizes` elements each, with seeded values.
pub fn model(names_sizes: &[(&str, usize)], seed: u64) -> Vec<u8> {
    let mut header = String::from("{\"__metadata__\":{\"format\":\"pt\"}");
    let mut offset = 0u64;
    for (name, n) in names_sizes {
        let end = offset + 4 * *n as u64;
        let _ = write!(
            header,
            ",\"{name}\":{{\"dtype\":\"F32\",\"shape\":[{n}],\"data_offsets\":[{offset},{end}]}}"
        );
        offset = end;
    }
    header.push('}');
    while (header.len() + 8) % 8 != 0 {
        header.push(' ');
    }
    let mut out = Vec::with_capacity(8 + header.len() + offset as usize);
    out.extend_from_slice(&(header.len() as u64).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    for (_, n) in names_sizes {
        for _ in 0..*n {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let v = ((x >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 4.0;
            out.extend_from_slice(&v.to_le_bytes());
        }
    }
    out
}

fn header_len(file: &[u8]) -> u64 {
    8 + u64::from_le_bytes(file[..8].try_into().expect("8 bytes"))
}

const TENSORS: &[(&str, usize)] = &[
    ("a.weight", 1_500_000),
    ("b.weight", 2_000_000),
    ("c.bias", 1000),
];

#[test]
fn info_of_a_large_remote_file_reads_only_its_header() {
    // A 1 GiB file: its header, then zeros the server makes up.
    let gib: u64 = 1 << 30;
    let mut header = String::from("{");
    let n = 64u64;
    for i in 0..n {
        let (b, e) = (i * gib / n, (i + 1) * gib / n);
        if i > 0 {
            header.push(',');
        }
        let _ = write!(
            header,
            "\"layers.{i}.weight\":{{\"dtype\":\"U8\",\"shape\":[{}],\"data_offsets\":[{b},{e}]}}",
            e - b
        );
    }
    header.push('}');
    let mut head = (header.len() as u64).to_le_bytes().to_vec();
    head.extend_from_slice(header.as_bytes());
    let total = head.len() as u64 + gib;
    let s = Server::start();
    s.route(
        "/big.safetensors",
        Route::File {
            body: Body::Zeros {
                head: std::sync::Arc::new(head.clone()),
                len: total,
            },
            etag: "\"big\"".into(),
        },
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let local = dir.path().join("big.safetensors");
    let f = std::fs::File::create(&local).expect("create");
    std::io::Write::write_all(&mut &f, &head).expect("write");
    f.set_len(total).expect("sparse");
    let url = s.url("/big.safetensors");
    let (code, out, err) = run(&dir.path().join("cache"), &[], &["info", "--json", &url]);
    assert_eq!(code, 0, "{err}");
    let remote = json(&out, &err);
    let (code, out, err) = run(
        &dir.path().join("cache"),
        &[],
        &["info", "--json", local.to_str().expect("utf-8")],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(without_paths(remote), without_paths(json(&out, &err)));
    let fetched = s.body_bytes();
    assert!(
        fetched < head.len() as u64 + 64 * 1024,
        "info fetched {fetched} bytes for a {}-byte header",
        head.len()
    );
    let reads = s
        .log()
        .iter()
        .filter(|r| r.path == "/big.safetensors")
        .count();
    assert!(reads <= 2, "{:?}", s.log());
}

#[test]
fn stats_of_one_tensor_fetches_its_bytes_once() {
    let file = model(TENSORS, 1);
    let s = Server::start();
    s.file("/m.safetensors", file.clone());
    let dir = tempfile::tempdir().expect("tempdir");
    let local = dir.path().join("m.safetensors");
    std::fs::write(&local, &file).expect("write");
    let cache = dir.path().join("cache");
    let url = s.url("/m.safetensors");
    let args = |p: &str| {
        vec![
            "stats".to_owned(),
            "--json".into(),
            "--tensor".into(),
            "b.weight".into(),
            p.to_owned(),
        ]
    };
    let remote_args = args(&url);
    let remote_args: Vec<&str> = remote_args.iter().map(String::as_str).collect();
    let (code, out, err) = run(&cache, &[], &remote_args);
    assert_eq!(code, 0, "{err}");
    let remote = json(&out, &err);
    let local_args = args(local.to_str().expect("utf-8"));
    let local_args: Vec<&str> = local_args.iter().map(String::as_str).collect();
    let (code, out, err) = run(&cache, &[], &local_args);
    assert_eq!(code, 0, "{err}");
    assert_eq!(without_paths(remote), without_paths(json(&out, &err)));
    let tensor = 4 * 2_000_000u64;
    let fetched = s.body_bytes();
    assert!(
        fetched <= tensor + header_len(&file) + CHUNK,
        "stats --tensor fetched {fetched} bytes for a {tensor}-byte tensor"
    );
    // A second run: the header revalidated (304), the bytes from the cache.
    s.reset_counts();
    let (code, out, err) = run(&cache, &[], &remote_args);
    assert_eq!(code, 0, "{err}");
    let again = json(&out, &err);
    assert_eq!(
        s.body_bytes(),
        0,
        "a cached run fetched bytes: {:?}",
        s.log()
    );
    assert_eq!(
        again["tensors"][0]["mean"],
        json(&out, &err)["tensors"][0]["mean"]
    );
    // The whole file's scan and an export match the local copy too.
    let (code, out, err) = run(&cache, &[], &["stats", "--json", &url]);
    assert_eq!(code, 0, "{err}");
    let whole = json(&out, &err);
    let (code, out, err) = run(
        &cache,
        &[],
        &["stats", "--json", local.to_str().expect("utf-8")],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(without_paths(whole), without_paths(json(&out, &err)));
    let npy = dir.path().join("a.npy");
    let (code, _, err) = run(
        &cache,
        &[],
        &[
            "export",
            "-o",
            npy.to_str().expect("utf-8"),
            &url,
            "a.weight",
        ],
    );
    assert_eq!(code, 0, "{err}");
    let written = std::fs::read(&npy).expect("npy");
    let data = &file[header_len(&file) as usize..][..4 * 1_500_000];
    assert!(
        written.ends_with(data),
        "the exported values are the file's"
    );
}

/// An index and two shards on the server, and the same in a local folder.
fn sharded(s: &Server, dir: &Path, prefix: &str) -> std::path::PathBuf {
    let one = model(&[("a.weight", 300_000), ("b.weight", 1_200_000)], 2);
    let two = model(&[("c.weight", 900_000)], 3);
    let index = serde_json::json!({
        "metadata": {"total_size": 4 * 2_400_000},
        "weight_map": {
            "a.weight": "model-00001-of-00002.safetensors",
            "b.weight": "model-00001-of-00002.safetensors",
            "c.weight": "model-00002-of-00002.safetensors",
        }
    })
    .to_string();
    let folder = dir.join("local");
    std::fs::create_dir_all(&folder).expect("folder");
    for (name, bytes) in [
        ("model-00001-of-00002.safetensors", &one),
        ("model-00002-of-00002.safetensors", &two),
    ] {
        s.file(&format!("{prefix}/{name}"), bytes.clone());
        std::fs::write(folder.join(name), bytes).expect("write");
    }
    s.file(
        &format!("{prefix}/model.safetensors.index.json"),
        index.clone().into_bytes(),
    );
    std::fs::write(folder.join("model.safetensors.index.json"), &index).expect("write");
    folder.join("model.safetensors.index.json")
}

#[test]
fn a_sharded_remote_model_reads_and_diffs_as_the_local_copy() {
    let s = Server::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let local = sharded(&s, dir.path(), "/repo");
    let local = local.to_str().expect("utf-8");
    let cache = dir.path().join("cache");
    let url = s.url("/repo/model.safetensors.index.json");
    for verb in [
        &["info", "--json"][..],
        &["validate", "--json"],
        &["stats", "--json"],
    ] {
        let mut r: Vec<&str> = verb.to_vec();
        r.push(&url);
        let (code, out, err) = run(&cache, &[], &r);
        assert_eq!(code, 0, "{verb:?}: {err}");
        let remote = json(&out, &err);
        let mut l: Vec<&str> = verb.to_vec();
        l.push(local);
        let (code, out, err) = run(&cache, &[], &l);
        assert_eq!(code, 0, "{verb:?}: {err}");
        assert_eq!(
            without_paths(remote),
            without_paths(json(&out, &err)),
            "{verb:?}"
        );
    }
    // A second run: the index and the headers revalidated, nothing sent.
    s.reset_counts();
    let (code, _, err) = run(&cache, &[], &["info", "--json", &url]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        s.body_bytes(),
        0,
        "a cached run fetched bytes: {:?}",
        s.log()
    );
    // Remote against local: every tensor identical.
    let (code, out, err) = run(&cache, &[], &["diff", "--json", &url, local]);
    assert_eq!(code, 0, "{err}");
    let doc = json(&out, &err);
    assert_eq!(doc["summary"]["counts"]["identical"], 3, "{doc}");
    // A shard the server lost is named.
    s.route("/repo/model-00002-of-00002.safetensors", Route::Status(404));
    let (code, out, err) = run(&dir.path().join("cache2"), &[], &["info", "--json", &url]);
    assert_eq!(code, 2, "{err}");
    let doc = json(&out, &err);
    assert_eq!(doc["error"]["kind"], "NotFound", "{doc}");
    assert!(
        doc["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("model-00002-of-00002")),
        "{doc}"
    );
}

/// What is tried, the fault, the error kind it must give, the environment.
type Case<'a> = (&'a str, Fault, &'a str, &'a [(&'a str, &'a str)]);

#[test]
fn every_fault_is_a_clear_error() {
    let file = model(TENSORS, 4);
    let dir = tempfile::tempdir().expect("tempdir");
    let cases: &[Case] = &[
        ("no range support", Fault::NoRange, "RangeIgnored", &[]),
        (
            "a connection dropped mid-body",
            Fault::DropMidBody,
            "Transport",
            &[],
        ),
        (
            "a body shorter than its length",
            Fault::ShortBody,
            "Transport",
            &[],
        ),
        (
            "a slow response",
            Fault::Slow(3000),
            "Transport",
            &[("TENSORSCOPE_HTTP_TIMEOUT", "0.5")],
        ),
        (
            "a changed ETag",
            Fault::ChangeEtagAfter(1),
            "RemoteChanged",
            &[],
        ),
    ];
    for (i, (what, fault, kind, env)) in cases.iter().enumerate() {
        let s = Server::start();
        s.file("/m.safetensors", file.clone());
        let url = s.url("/m.safetensors");
        let cache = dir.path().join(format!("c{i}"));
        let stats = |env| {
            run(
                &cache,
                env,
                &["stats", "--json", "--tensor", "b.weight", &url],
            )
        };
        match fault {
            Fault::NoRange => {
                // The header is read off the start of the whole file, then
                // the connection is closed; a tensor's bytes are refused.
                s.fault(*fault);
                let (code, out, err) = run(&cache, env, &["info", "--json", &url]);
                assert_eq!(code, 0, "{what}: {err}");
                assert_eq!(
                    json(&out, &err)["tensors"].as_array().map(Vec::len),
                    Some(3)
                );
            }
            Fault::ChangeEtagAfter(_) => s.fault(*fault),
            _ => {
                // The header comes first, unharmed; the tensor's chunk
                // meets the fault.
                let (code, _, err) = run(&cache, &[], &["info", &url]);
                assert_eq!(code, 0, "{what}: {err}");
                s.fault(*fault);
            }
        }
        let (code, out, err) = stats(env);
        check_error(what, code, &out, &err, kind);
    }
    let s = Server::start();
    for (status, kind) in [
        (401, "Unauthorized"),
        (403, "Unauthorized"),
        (404, "NotFound"),
        (429, "RateLimited"),
        (500, "HttpStatus"),
    ] {
        s.route("/x.safetensors", Route::Status(status));
        let (code, out, err) = run(
            &dir.path().join("s"),
            &[],
            &["info", "--json", &s.url("/x.safetensors")],
        );
        check_error(&format!("HTTP {status}"), code, &out, &err, kind);
        if status == 429 {
            assert!(out.contains("retry after 7"), "{out}");
        }
    }
    // A server that claims an exabyte file: refused before anything is
    // sized or allocated by it.
    s.route(
        "/huge.safetensors",
        Route::File {
            body: Body::Zeros {
                head: std::sync::Arc::new(model(TENSORS, 1)[..4096].to_vec()),
                len: 1 << 60,
            },
            etag: "\"huge\"".into(),
        },
    );
    let (code, out, err) = run(
        &dir.path().join("s"),
        &[],
        &["info", "--json", &s.url("/huge.safetensors")],
    );
    check_error("an exabyte file", code, &out, &err, "BadResponse");
    s.route("/loop1", Route::Redirect("/loop2".into()));
    s.route("/loop2", Route::Redirect("/loop1".into()));
    let (code, out, err) = run(
        &dir.path().join("s"),
        &[],
        &["info", "--json", &s.url("/loop1")],
    );
    check_error("a redirect loop", code, &out, &err, "TooManyRedirects");
    // A port nobody listens on.
    let (code, out, err) = run(
        &dir.path().join("s"),
        &[],
        &["info", "--json", "http://127.0.0.1:9/x.safetensors"],
    );
    check_error("no server", code, &out, &err, "Transport");
}

fn check_error(what: &str, code: i32, out: &str, err: &str, kind: &str) {
    assert_eq!(code, 2, "{what}: exit {code}: {out} / {err}");
    assert!(!err.contains("panicked"), "{what}: {err}");
    let doc = json(out, err);
    assert_eq!(doc["error"]["kind"], kind, "{what}: {doc}");
    assert!(
        doc["error"]["message"]
            .as_str()
            .is_some_and(|m| m.len() > 20),
        "{what}: {doc}"
    );
}

#[test]
fn hub_paths_send_the_token_to_the_endpoint_only() {
    let hub = Server::start();
    let cdn = Server::start();
    let dir = tempfile::tempdir().expect("tempdir");
    // The files live on the "CDN"; the Hub's resolve URLs redirect there,
    // except the index, which the Hub serves itself (and guards).
    let local = sharded(&cdn, dir.path(), "/cdn");
    let base = "/org/model/resolve/main";
    hub.file(
        &format!("{base}/model.safetensors.index.json"),
        std::fs::read(&local).expect("index"),
    );
    hub.require_token(&format!("{base}/model.safetensors.index.json"), "secret");
    for name in [
        "model-00001-of-00002.safetensors",
        "model-00002-of-00002.safetensors",
    ] {
        hub.route(
            &format!("{base}/{name}"),
            Route::Redirect(cdn.url(&format!("/cdn/{name}"))),
        );
    }
    let env = [
        ("HF_ENDPOINT", hub.origin()),
        ("HF_TOKEN", "secret".to_owned()),
    ];
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let cache = dir.path().join("cache");
    let (code, out, err) = run(&cache, &env, &["info", "--json", "hf://org/model"]);
    assert_eq!(code, 0, "{err}");
    let remote = json(&out, &err);
    let (code, out, err) = run(
        &cache,
        &[],
        &["info", "--json", local.to_str().expect("utf-8")],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(without_paths(remote), without_paths(json(&out, &err)));
    assert!(
        hub.log()
            .iter()
            .all(|r| r.authorization.as_deref() == Some("Bearer secret")),
        "{:?}",
        hub.log()
    );
    assert!(!cdn.log().is_empty());
    assert!(
        cdn.log().iter().all(|r| r.authorization.is_none()),
        "the token went to another host: {:?}",
        cdn.log()
    );
    // The Hub's web links name the same files.
    let link = hub.url("/org/model/blob/main/model-00002-of-00002.safetensors");
    let (code, out, err) = run(&cache, &env, &["info", "--json", &link]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        json(&out, &err)["tensors"].as_array().map(Vec::len),
        Some(1)
    );
    // Without the token: what to do about it.
    let (code, out, err) = run(
        &dir.path().join("c2"),
        &env[..1],
        &["info", "--json", "hf://org/model"],
    );
    check_error("no token", code, &out, &err, "Unauthorized");
    assert!(out.contains("HF_TOKEN"), "{out}");
    // A file the repository lacks: which file, which revision.
    let (code, out, err) = run(
        &cache,
        &env,
        &["info", "--json", "hf://org/model@v2/missing.safetensors"],
    );
    check_error("missing file", code, &out, &err, "NotFound");
    assert!(
        out.contains("missing.safetensors") && out.contains("v2"),
        "{out}"
    );
}

#[cfg(unix)]
#[test]
fn the_cache_stays_under_its_cap() {
    if crate::exe::foreign() {
        // Within a file the cap punches holes (platform::sparse): wine 8
        // answers Windows' FSCTL_SET_ZERO_DATA with ERROR_NOT_SUPPORTED.
        return;
    }
    let file = model(&[("a", 3_000_000), ("b", 3_000_000), ("c", 3_000_000)], 5);
    let s = Server::start();
    s.file("/m.safetensors", file.clone());
    let dir = tempfile::tempdir().expect("tempdir");
    let cache = dir.path().join("cache");
    // 8 MiB: two chunks. The scan needs each tensor's chunks in turn.
    let (code, out, err) = run(
        &cache,
        &[("TENSORSCOPE_CACHE_MAX", "8M")],
        &["stats", "--json", &s.url("/m.safetensors")],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        json(&out, &err)["tensors"].as_array().map(Vec::len),
        Some(3)
    );
    let used: u64 = walk(&cache);
    assert!(used <= (8 << 20) + CHUNK, "the cache holds {used} bytes");
}

/// Bytes of disk the files under `dir` take.
#[cfg(unix)]
fn walk(dir: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt as _;
    std::fs::read_dir(dir).map_or(0, |rd| {
        rd.flatten()
            .map(|e| {
                let p = e.path();
                if p.is_dir() {
                    walk(&p)
                } else {
                    std::fs::metadata(&p).map_or(0, |m| m.blocks() * 512)
                }
            })
            .sum()
    })
}

#[test]
fn a_long_header_takes_two_requests_and_a_new_version_empties_the_cache() {
    // 4,000 tensors: a header of about 300 KB, more than the first request.
    let names: Vec<String> = (0..4000)
        .map(|i| format!("model.layers.{i}.mlp.weight"))
        .collect();
    let sizes: Vec<(&str, usize)> = names.iter().map(|n| (n.as_str(), 64)).collect();
    let file = model(&sizes, 6);
    assert!(header_len(&file) > 200_000);
    let s = Server::start();
    s.file("/long.safetensors", file.clone());
    let dir = tempfile::tempdir().expect("tempdir");
    let cache = dir.path().join("cache");
    let url = s.url("/long.safetensors");
    let (code, out, err) = run(&cache, &[], &["info", "--json", &url]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        json(&out, &err)["tensors"].as_array().map(Vec::len),
        Some(4000)
    );
    let reads = s
        .log()
        .iter()
        .filter(|r| r.path == "/long.safetensors")
        .count();
    assert_eq!(reads, 2, "{:?}", s.log());
    assert!(s.body_bytes() < header_len(&file) + 64 * 1024);
    // Remote against remote.
    s.file("/same.safetensors", file.clone());
    let (code, out, err) = run(
        &cache,
        &[],
        &["diff", "--json", &url, &s.url("/same.safetensors")],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(json(&out, &err)["summary"]["counts"]["identical"], 4000);
    // The server's file changes between two runs: the cached bytes of the
    // old version are not used.
    let small = model(TENSORS, 7);
    s.file("/v.safetensors", small.clone());
    let v = s.url("/v.safetensors");
    let (code, _, err) = run(&cache, &[], &["stats", "--json", "--tensor", "c.bias", &v]);
    assert_eq!(code, 0, "{err}");
    let newer = model(TENSORS, 8);
    s.route(
        "/v.safetensors",
        Route::File {
            body: Body::Bytes(std::sync::Arc::new(newer.clone())),
            etag: "\"v2\"".into(),
        },
    );
    let local = dir.path().join("v.safetensors");
    std::fs::write(&local, &newer).expect("write");
    let (code, out, err) = run(&cache, &[], &["stats", "--json", "--tensor", "c.bias", &v]);
    assert_eq!(code, 0, "{err}");
    let remote = json(&out, &err);
    let (code, out, err) = run(
        &cache,
        &[],
        &[
            "stats",
            "--json",
            "--tensor",
            "c.bias",
            local.to_str().expect("utf-8"),
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(without_paths(remote), without_paths(json(&out, &err)));
    // And a remote file re-saves to a local one, byte for byte.
    let saved = dir.path().join("saved.safetensors");
    let (code, _, err) = run(
        &cache,
        &[],
        &["resave", &v, "-o", saved.to_str().expect("utf-8")],
    );
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = run(
        &cache,
        &[],
        &[
            "diff",
            "--json",
            saved.to_str().expect("utf-8"),
            local.to_str().expect("utf-8"),
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(json(&out, &err)["summary"]["same"], true);
}

/// `info`, `stats` and `validate` of `url` give what they give on
/// `local`, paths aside.
fn same_as_local(cache: &Path, url: &str, local: &str) {
    for verb in ["info", "stats", "validate"] {
        let (code, out, err) = run(cache, &[], &[verb, "--json", url]);
        assert_eq!(code, 0, "{verb} {url}: {err}");
        let remote = json(&out, &err);
        let (code, out, err) = run(cache, &[], &[verb, "--json", local]);
        assert_eq!(code, 0, "{verb} {local}: {err}");
        assert_eq!(
            without_paths(remote),
            without_paths(json(&out, &err)),
            "{verb} {url}"
        );
    }
}

#[test]
fn a_remote_npy_reads_as_the_local_copy_and_a_remote_npz_is_refused_clearly() {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/numpy");
    let s = Server::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let cache = dir.path().join("cache");
    // Big-endian and Fortran order: read by ranges, then in C order.
    for name in ["fortran_be_u4_3d.npy", "le_f4.npy", "version_3_0_f4.npy"] {
        let local = data.join(name);
        s.file(&format!("/{name}"), std::fs::read(&local).expect("fixture"));
        let url = s.url(&format!("/{name}"));
        let local = local.to_str().expect("utf-8");
        same_as_local(&cache, &url, local);
        let tensor = name.trim_end_matches(".npy");
        let (a, b) = (dir.path().join("a.npy"), dir.path().join("b.npy"));
        for (from, to) in [(url.as_str(), &a), (local, &b)] {
            let (code, _, err) = run(
                &cache,
                &[],
                &["export", "-o", to.to_str().expect("utf-8"), from, tensor],
            );
            assert_eq!(code, 0, "export {name}: {err}");
        }
        assert_eq!(
            std::fs::read(&a).expect("a"),
            std::fs::read(&b).expect("b"),
            "{name}"
        );
    }
    let npz = "savez_compressed_mixed.npz";
    s.file(
        &format!("/{npz}"),
        std::fs::read(data.join(npz)).expect("fixture"),
    );
    let (code, out, err) = run(&cache, &[], &["info", "--json", &s.url(&format!("/{npz}"))]);
    assert_eq!(code, 2, "{err}");
    let doc = json(&out, &err);
    assert_eq!(doc["error"]["kind"], "NpzRemote", "{doc}");
}
