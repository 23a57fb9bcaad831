//! Remote reads over loopback HTTP against the same verbs on the local
//! copy: time and bytes fetched, beside the machine's own loopback
//! bandwidth.
//!
//! ```sh
//! cargo build --release && cargo run --release --example bench_remote
//! cargo run --release --example bench_remote -- --mib-per-shard 64 --shards 2 --runs 1
//! cargo run --release --example bench_remote -- --tensor model.layers.3.self_attn.q_proj.weight --log
//! ```
//!
//! It builds a sharded llama-like model in a temporary folder (`--shards`
//! shards of about `--mib-per-shard` MiB: F32 attention and norms, BF16
//! MLP and embeddings, xorshift values), and a second model whose last
//! shard differs in the lowest mantissa bit of about half its values (for
//! `diff`). Both are served from memory by the loopback test server
//! (`tests/it/remote/server.rs`), which counts every body byte it sends.
//!
//! Each verb runs `target/release/tensorscope` as a fresh process (best of
//! `--runs`): on the local files (which sit in the page cache, as they were
//! just written), on the URLs with a fresh, empty cache folder
//! (`TENSORSCOPE_CACHE_DIR`, cap `TENSORSCOPE_CACHE_MAX=8G`) for each cold
//! run, and, for `info` and `stats --tensor`, again on the cache the last
//! cold run filled. Each remote document is checked against the local one
//! (paths aside). The loopback bandwidth is a plain HTTP/1.1 GET of the
//! largest shard through the same server, read with a std `TcpStream`.
//! `--log` prints every request of the remote runs to stderr.

#[path = "../tests/it/remote/server.rs"]
mod server;

use std::fmt::Write as _;
use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use server::{Body, Route, Server, without_paths};

/// The first request of a remote file (src/source/remote/file.rs).
const HEADER_GUESS: u64 = 64 * 1024;
/// The chunk tensor bytes are fetched in (src/source/remote/cache.rs).
const CHUNK: u64 = 4 << 20;
const MIB: u64 = 1 << 20;
const INDEX: &str = "model.safetensors.index.json";

struct Args {
    mib_per_shard: u64,
    shards: usize,
    runs: usize,
    tensor: Option<String>,
    /// Print each remote run's requests to stderr.
    log: bool,
}

fn parse_args() -> Args {
    let mut args = Args {
        mib_per_shard: 256,
        shards: 4,
        runs: 3,
        tensor: None,
        log: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut value = |name: &str| -> u64 {
            it.next()
                .and_then(|v| v.parse().ok())
                .filter(|&v| v > 0)
                .unwrap_or_else(|| panic!("{name} needs a positive whole number"))
        };
        match a.as_str() {
            "--mib-per-shard" => args.mib_per_shard = value("--mib-per-shard"),
            "--shards" => args.shards = value("--shards") as usize,
            "--runs" => args.runs = value("--runs") as usize,
            "--tensor" => {
                args.tensor = Some(it.next().unwrap_or_else(|| panic!("--tensor needs a name")));
            }
            "--log" => args.log = true,
            "--bench" => {}
            other => panic!(
                "unknown argument {other} (known: --mib-per-shard N, --shards N, --runs N, --tensor NAME, --log)"
            ),
        }
    }
    args
}

/// xorshift64*.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// One tensor of the model.
struct Spec {
    name: String,
    dtype: &'static str,
    shape: Vec<u64>,
}

impl Spec {
    fn new(name: String, dtype: &'static str, shape: &[u64]) -> Self {
        Self {
            name,
            dtype,
            shape: shape.to_vec(),
        }
    }

    fn elem(&self) -> u64 {
        if self.dtype == "F32" { 4 } else { 2 }
    }

    fn bytes(&self) -> u64 {
        self.shape.iter().product::<u64>() * self.elem()
    }
}

const HIDDEN: u64 = 1024;
const KV: u64 = 256;
const INTER: u64 = 2816;
const VOCAB: u64 = 8192;

fn layer(l: usize) -> Vec<Spec> {
    let p = |s: &str| format!("model.layers.{l}.{s}");
    vec![
        Spec::new(p("input_layernorm.weight"), "F32", &[HIDDEN]),
        Spec::new(p("self_attn.q_proj.weight"), "F32", &[HIDDEN, HIDDEN]),
        Spec::new(p("self_attn.k_proj.weight"), "F32", &[KV, HIDDEN]),
        Spec::new(p("self_attn.v_proj.weight"), "F32", &[KV, HIDDEN]),
        Spec::new(p("self_attn.o_proj.weight"), "F32", &[HIDDEN, HIDDEN]),
        Spec::new(p("post_attention_layernorm.weight"), "F32", &[HIDDEN]),
        Spec::new(p("mlp.gate_proj.weight"), "BF16", &[INTER, HIDDEN]),
        Spec::new(p("mlp.up_proj.weight"), "BF16", &[INTER, HIDDEN]),
        Spec::new(p("mlp.down_proj.weight"), "BF16", &[HIDDEN, INTER]),
    ]
}

/// The tensors of each shard: the embeddings first, layers packed in
/// order until each shard holds `target` bytes, the final norm and the
/// head at the end of the last.
fn plan(shards: usize, target: u64) -> Vec<Vec<Spec>> {
    let tail = [
        Spec::new("model.norm.weight".into(), "F32", &[HIDDEN]),
        Spec::new("lm_head.weight".into(), "BF16", &[VOCAB, HIDDEN]),
    ];
    let tail_bytes: u64 = tail.iter().map(Spec::bytes).sum();
    let mut out: Vec<Vec<Spec>> = vec![vec![Spec::new(
        "model.embed_tokens.weight".into(),
        "BF16",
        &[VOCAB, HIDDEN],
    )]];
    let size = |s: &[Spec]| s.iter().map(Spec::bytes).sum::<u64>();
    'layers: for l in 0.. {
        for t in layer(l) {
            let last = out.len() == shards;
            let current = out.last_mut().expect("a shard");
            let full = size(current) + if last { tail_bytes } else { 0 } >= target;
            if full && last {
                break 'layers;
            }
            if full {
                out.push(Vec::new());
            }
            out.last_mut().expect("a shard").push(t);
        }
    }
    out.last_mut().expect("a shard").extend(tail);
    out
}

/// A safetensors file of `specs` with xorshift values (uniform in ±0.02).
fn shard_bytes(specs: &[Spec], seed: u64) -> Vec<u8> {
    let mut header = String::from("{\"__metadata__\":{\"format\":\"pt\"}");
    let mut offset = 0u64;
    for s in specs {
        let end = offset + s.bytes();
        let shape: Vec<String> = s.shape.iter().map(u64::to_string).collect();
        let _ = write!(
            header,
            ",\"{}\":{{\"dtype\":\"{}\",\"shape\":[{}],\"data_offsets\":[{offset},{end}]}}",
            s.name,
            s.dtype,
            shape.join(",")
        );
        offset = end;
    }
    header.push('}');
    while header.len() % 8 != 0 {
        header.push(' ');
    }
    let start = 8 + header.len();
    let mut out = Vec::with_capacity(start + offset as usize);
    out.extend_from_slice(&(header.len() as u64).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    out.resize(start + offset as usize, 0);
    let mut at = start;
    for (i, s) in specs.iter().enumerate() {
        let data = &mut out[at..at + s.bytes() as usize];
        at += data.len();
        let mut rng = Rng((seed ^ (i as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15)) | 1);
        let value = |r: u64| ((r >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 0.04;
        if s.dtype == "F32" {
            for e in data.chunks_exact_mut(4) {
                e.copy_from_slice(&value(rng.next()).to_le_bytes());
            }
        } else {
            for e in data.chunks_exact_mut(4) {
                let r = rng.next();
                e[..2].copy_from_slice(&half::bf16::from_f32(value(r)).to_le_bytes());
                e[2..].copy_from_slice(&half::bf16::from_f32(value(r << 24)).to_le_bytes());
            }
        }
    }
    out
}

/// `file` with the lowest mantissa bit of about half its values flipped
/// (values of ±0.02 stay finite).
fn perturbed(file: &[u8], specs: &[Spec]) -> Vec<u8> {
    let mut out = file.to_vec();
    let mut at = header_len(file) as usize;
    let mut rng = Rng(0xd1ff);
    for s in specs {
        let elem = s.elem() as usize;
        let data = &mut out[at..at + s.bytes() as usize];
        at += data.len();
        for group in data.chunks_mut(64 * elem) {
            let bits = rng.next();
            for (k, e) in group.chunks_exact_mut(elem).enumerate() {
                e[0] ^= ((bits >> k) & 1) as u8;
            }
        }
    }
    out
}

/// A model in memory: `(file name, bytes)` of its shards, and its index.
struct Model {
    shards: Vec<(String, Arc<Vec<u8>>)>,
    index: Arc<Vec<u8>>,
}

fn header_len(file: &[u8]) -> u64 {
    8 + u64::from_le_bytes(file[..8].try_into().expect("8 bytes"))
}

/// The bytes of the [`CHUNK`]s that tensor `name` touches in its shard.
fn chunk_span(plan: &[Vec<Spec>], model: &Model, name: &str) -> u64 {
    for (specs, (_, file)) in plan.iter().zip(&model.shards) {
        let mut at = header_len(file);
        for s in specs {
            if s.name == name {
                let first = at / CHUNK * CHUNK;
                let last = ((at + s.bytes()).div_ceil(CHUNK) * CHUNK).min(file.len() as u64);
                return last - first;
            }
            at += s.bytes();
        }
    }
    0
}

fn index_json(plan: &[Vec<Spec>], names: &[String]) -> Vec<u8> {
    let mut map = serde_json::Map::new();
    let mut total = 0u64;
    for (specs, file) in plan.iter().zip(names) {
        for s in specs {
            map.insert(s.name.clone(), file.clone().into());
            total += s.bytes();
        }
    }
    serde_json::json!({"metadata": {"total_size": total}, "weight_map": map})
        .to_string()
        .into_bytes()
}

/// Model A and model B (A with its last shard perturbed), in memory and
/// written to `dir/a` and `dir/b` (B's other shards hard links to A's).
fn build(dir: &Path, plan: &[Vec<Spec>]) -> (Model, Model) {
    let n = plan.len();
    let names: Vec<String> = (1..=n)
        .map(|i| format!("model-{i:05}-of-{n:05}.safetensors"))
        .collect();
    let index = Arc::new(index_json(plan, &names));
    let (a_dir, b_dir) = (dir.join("a"), dir.join("b"));
    std::fs::create_dir_all(&a_dir).expect("folder a");
    std::fs::create_dir_all(&b_dir).expect("folder b");
    let mut a = Vec::new();
    let mut b = Vec::new();
    for (i, (specs, name)) in plan.iter().zip(&names).enumerate() {
        eprintln!("writing shard {}/{n}…", i + 1);
        let bytes = Arc::new(shard_bytes(specs, 0x5eed + i as u64));
        std::fs::write(a_dir.join(name), bytes.as_slice()).expect("write shard");
        if i + 1 == n {
            let other = Arc::new(perturbed(&bytes, specs));
            std::fs::write(b_dir.join(name), other.as_slice()).expect("write shard");
            b.push((name.clone(), other));
        } else {
            if std::fs::hard_link(a_dir.join(name), b_dir.join(name)).is_err() {
                std::fs::write(b_dir.join(name), bytes.as_slice()).expect("write shard");
            }
            b.push((name.clone(), Arc::clone(&bytes)));
        }
        a.push((name.clone(), bytes));
    }
    for d in [&a_dir, &b_dir] {
        std::fs::write(d.join(INDEX), index.as_slice()).expect("write index");
    }
    (
        Model {
            shards: a,
            index: Arc::clone(&index),
        },
        Model { shards: b, index },
    )
}

/// Serves `model` under `prefix` (`/a`, `/b`) from the bytes in memory.
fn serve(s: &Server, prefix: &str, model: &Model) {
    let files = model
        .shards
        .iter()
        .map(|(n, b)| (n.as_str(), b))
        .chain(std::iter::once((INDEX, &model.index)));
    for (name, bytes) in files {
        let path = format!("{prefix}/{name}");
        s.route(
            &path,
            Route::File {
                body: Body::Bytes(Arc::clone(bytes)),
                etag: format!("\"v1-{path}\""),
            },
        );
    }
}

/// Runs the CLI with its cache in `cache`; its JSON document and wall time.
fn run_cli(bin: &Path, cache: &Path, args: &[String]) -> (Duration, serde_json::Value) {
    let t = Instant::now();
    let out = Command::new(bin)
        .args(args)
        .env("TENSORSCOPE_CACHE_DIR", cache)
        .env("TENSORSCOPE_CACHE_MAX", "8G")
        .env_remove("HF_TOKEN")
        .env_remove("HTTPS_PROXY")
        .env_remove("HTTP_PROXY")
        .env_remove("ALL_PROXY")
        .env_remove("https_proxy")
        .env_remove("http_proxy")
        .output()
        .expect("run tensorscope");
    let elapsed = t.elapsed();
    // `diff` exits 1 when the checkpoints differ.
    let code = out.status.code().unwrap_or(-1);
    assert!(
        code == 0 || (code == 1 && args[0] == "diff"),
        "tensorscope {args:?} exited {code}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "tensorscope {args:?}: stdout is not JSON ({e}): {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (elapsed, doc)
}

/// Remote runs of one verb: the best time, and the most body bytes and
/// requests of any run.
#[derive(Clone, Copy)]
struct Fetch {
    time: Duration,
    bytes: u64,
    requests: usize,
    /// Of `bytes`, those of the shard indexes (fetched whole, `200`).
    index_bytes: u64,
}

impl Fetch {
    const NONE: Fetch = Fetch {
        time: Duration::MAX,
        bytes: 0,
        requests: 0,
        index_bytes: 0,
    };

    /// Adds a run of `time` to the server's counts since their reset.
    fn add(&mut self, time: Duration, s: &Server, index_len: u64) {
        let log = s.log();
        let indexes = log
            .iter()
            .filter(|r| r.status == 200 && r.path.ends_with(".index.json"))
            .count() as u64;
        self.time = self.time.min(time);
        self.bytes = self.bytes.max(s.body_bytes());
        self.requests = self.requests.max(log.len());
        self.index_bytes = self.index_bytes.max(indexes * index_len);
    }
}

/// What one verb measured.
struct Row {
    verb: Verb,
    local: Duration,
    cold: Fetch,
    cached: Option<Fetch>,
    same: bool,
}

/// The verbs timed.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Verb {
    Info,
    StatsTensor,
    Stats,
    Diff,
}

impl Verb {
    const ALL: [Verb; 4] = [Verb::Info, Verb::StatsTensor, Verb::Stats, Verb::Diff];

    fn name(self) -> &'static str {
        match self {
            Verb::Info => "info",
            Verb::StatsTensor => "stats --tensor X",
            Verb::Stats => "stats (whole model)",
            Verb::Diff => "diff A B",
        }
    }

    /// Timed again on the cache its cold run filled.
    fn cached(self) -> bool {
        matches!(self, Verb::Info | Verb::StatsTensor)
    }

    /// The command line on models `a` and `b`.
    fn args(self, tensor: &str, a: &str, b: &str) -> Vec<String> {
        let v: &[&str] = match self {
            Verb::Info => &["info", "--json", a],
            Verb::StatsTensor => &["stats", "--json", "--tensor", tensor, a],
            Verb::Stats => &["stats", "--json", a],
            Verb::Diff => &["diff", "--json", a, b],
        };
        v.iter().map(|s| (*s).to_owned()).collect()
    }
}

/// Times `verb` on the local folders, then on the URLs of a new server
/// (cold: a fresh cache each run; cached: the last cold run's cache).
fn bench_verb(
    bin: &Path,
    dir: &Path,
    models: (&Model, &Model),
    (verb, tensor): (Verb, &str),
    &Args { runs, log, .. }: &Args,
) -> Row {
    let local_a = dir.join("a").join(INDEX);
    let local_b = dir.join("b").join(INDEX);
    let args = verb.args(
        tensor,
        local_a.to_str().expect("utf-8 path"),
        local_b.to_str().expect("utf-8 path"),
    );
    let scratch = tempfile::tempdir().expect("tempdir");
    let mut local = Duration::MAX;
    let mut local_doc = serde_json::Value::Null;
    for _ in 0..runs {
        let (t, doc) = run_cli(bin, scratch.path(), &args);
        local = local.min(t);
        local_doc = doc;
    }
    let local_doc = without_paths(local_doc);
    // A server per verb: the test server stops accepting after ten minutes.
    let s = Server::start();
    serve(&s, "/a", models.0);
    serve(&s, "/b", models.1);
    let args = verb.args(
        tensor,
        &s.url(&format!("/a/{INDEX}")),
        &s.url(&format!("/b/{INDEX}")),
    );
    let index_len = models.0.index.len() as u64;
    let mut cold = Fetch::NONE;
    let mut same = true;
    let mut cache = None;
    for _ in 0..runs {
        let fresh = tempfile::tempdir().expect("tempdir");
        s.reset_counts();
        let (t, doc) = run_cli(bin, fresh.path(), &args);
        cold.add(t, &s, index_len);
        if log {
            print_log(&format!("{} cold", verb.name()), &s);
        }
        same &= without_paths(doc) == local_doc;
        cache = Some(fresh);
    }
    let cached = verb.cached().then(|| {
        let cache = cache.as_ref().expect("a cold run");
        let mut cached = Fetch::NONE;
        for _ in 0..runs {
            s.reset_counts();
            let (t, doc) = run_cli(bin, cache.path(), &args);
            cached.add(t, &s, index_len);
            if log {
                print_log(&format!("{} cached", verb.name()), &s);
            }
            same &= without_paths(doc) == local_doc;
        }
        cached
    });
    Row {
        verb,
        local,
        cold,
        cached,
        same,
    }
}

/// The requests the server saw since its counts were reset.
fn print_log(what: &str, s: &Server) {
    eprintln!("{what}: {} body bytes", s.body_bytes());
    for r in s.log() {
        eprintln!(
            "  {} {} {}",
            r.status,
            r.path,
            r.range.as_deref().unwrap_or("(whole)")
        );
    }
}

/// A plain HTTP/1.1 GET of `path` with a std `TcpStream`: wall time and
/// body bytes read.
fn plain_get(s: &Server, path: &str) -> (Duration, u64) {
    let origin = s.origin();
    let addr = origin.trim_start_matches("http://");
    let t = Instant::now();
    let mut stream = TcpStream::connect(addr).expect("connect to the loopback server");
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .expect("send the request");
    let mut buf = vec![0u8; 1 << 20];
    let mut head = Vec::new();
    let mut length: Option<u64> = None;
    let mut body = 0u64;
    loop {
        let n = stream.read(&mut buf).expect("read the response");
        if n == 0 {
            break;
        }
        if length.is_some() {
            body += n as u64;
        } else {
            head.extend_from_slice(&buf[..n]);
            if let Some(end) = head.windows(4).position(|w| w == b"\r\n\r\n") {
                let text = String::from_utf8_lossy(&head[..end]).to_ascii_lowercase();
                length = Some(
                    text.lines()
                        .find_map(|l| l.strip_prefix("content-length:"))
                        .and_then(|v| v.trim().parse().ok())
                        .expect("a Content-Length"),
                );
                body = (head.len() - end - 4) as u64;
            }
        }
        if length.is_some_and(|l| body >= l) {
            break;
        }
    }
    assert_eq!(Some(body), length, "the whole body came");
    (t.elapsed(), body)
}

/// Bytes per second of a plain GET of the largest shard (best of `runs`,
/// at least 3), its name and size.
fn loopback(model: &Model, runs: usize) -> (f64, String, u64) {
    let s = Server::start();
    serve(&s, "/a", model);
    let (name, bytes) = model
        .shards
        .iter()
        .max_by_key(|(_, b)| b.len())
        .expect("a shard");
    let best = (0..runs.max(3))
        .map(|_| plain_get(&s, &format!("/a/{name}")).0)
        .min()
        .unwrap_or_default();
    (
        bytes.len() as f64 / best.as_secs_f64(),
        name.clone(),
        bytes.len() as u64,
    )
}

fn human(bytes: u64) -> String {
    let b = bytes as f64;
    if bytes < 1 << 10 {
        format!("{bytes} B")
    } else if bytes < 1 << 20 {
        format!("{:.1} KiB", b / 1024.0)
    } else if bytes < 1 << 30 {
        format!("{:.1} MiB", b / MIB as f64)
    } else {
        format!("{:.2} GiB", b / f64::from(1u32 << 30))
    }
}

fn print_table(rows: &[Row]) {
    println!(
        "| verb | local s | remote cold s | cold fetched (requests) | cold MB/s | remote cached s | cached fetched (requests) | cold / local | cached / local | same JSON as local |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for r in rows {
        let (cached_s, cached_b, cached_ratio) = r.cached.map_or_else(
            || ("-".to_owned(), "-".to_owned(), "-".to_owned()),
            |c| {
                (
                    format!("{:.3}", c.time.as_secs_f64()),
                    format!("{} ({})", human(c.bytes), c.requests),
                    format!("{:.2}×", c.time.as_secs_f64() / r.local.as_secs_f64()),
                )
            },
        );
        println!(
            "| {} | {:.3} | {:.3} | {} ({}) | {:.0} | {cached_s} | {cached_b} | {:.2}× | {cached_ratio} | {} |",
            r.verb.name(),
            r.local.as_secs_f64(),
            r.cold.time.as_secs_f64(),
            human(r.cold.bytes),
            r.cold.requests,
            r.cold.bytes as f64 / r.cold.time.as_secs_f64() / 1e6,
            r.cold.time.as_secs_f64() / r.local.as_secs_f64(),
            if r.same { "yes" } else { "NO" }
        );
    }
}

fn holds(ok: bool) -> &'static str {
    if ok { "holds" } else { "DOES NOT HOLD" }
}

/// The bounds: `info` within the index and each shard's header plus
/// [`HEADER_GUESS`]; `stats --tensor` within that, the tensor and a
/// [`CHUNK`] (and within the chunks it touches, `span` bytes); cached
/// runs fetch no shard bytes.
fn print_bounds(rows: &[Row], model: &Model, tensor: (&str, u64), span: u64) {
    let index = model.index.len() as u64;
    let headers: u64 = model
        .shards
        .iter()
        .map(|(_, b)| header_len(b) + HEADER_GUESS)
        .sum();
    let info_bound = index + headers;
    let n = model.shards.len();
    println!();
    if let Some(r) = rows.iter().find(|r| r.verb == Verb::Info) {
        println!(
            "- info: cold fetched {} bytes; bound index ({index}) + Σ over {n} shards of (header + 64 KiB) = {info_bound} bytes: {}.",
            r.cold.bytes,
            holds(r.cold.bytes <= info_bound)
        );
    }
    if let Some(r) = rows.iter().find(|r| r.verb == Verb::StatsTensor) {
        let bound = tensor.1 + info_bound + CHUNK;
        println!(
            "- stats --tensor {} ({} bytes; the 4 MiB chunks it touches: {span} bytes): cold fetched {} bytes; bound tensor + index + Σ(header + 64 KiB) + 4 MiB = {bound} bytes: {}.",
            tensor.0,
            tensor.1,
            r.cold.bytes,
            holds(r.cold.bytes <= bound)
        );
        // What the chunked cache must fetch: every chunk the tensor
        // touches (up to two beyond its own bytes when it straddles).
        let aligned = info_bound + span;
        println!(
            "- stats --tensor, chunk-aligned bound index + Σ(header + 64 KiB) + the chunks X touches = {aligned} bytes: {}.",
            holds(r.cold.bytes <= aligned)
        );
    }
    for r in rows {
        if let Some(c) = r.cached {
            let shards = c.bytes - c.index_bytes.min(c.bytes);
            println!(
                "- {} cached: fetched {} bytes in {} requests: the index {} bytes and the shards {shards} bytes; 0 expected (the index and the headers revalidated with 304): {}.",
                r.verb.name(),
                c.bytes,
                c.requests,
                c.index_bytes,
                holds(c.bytes == 0)
            );
        }
    }
}

/// The tensor `stats --tensor` reads: `--tensor`, else a down_proj in the
/// middle of the middle shard.
fn pick_tensor(plan: &[Vec<Spec>], chosen: Option<&str>) -> (String, u64) {
    let name = chosen.map_or_else(
        || {
            let middle = &plan[plan.len() / 2];
            let down: Vec<&Spec> = middle
                .iter()
                .filter(|s| s.name.ends_with("mlp.down_proj.weight"))
                .collect();
            down.get(down.len() / 2)
                .map_or(&middle[0], |s| *s)
                .name
                .clone()
        },
        str::to_owned,
    );
    let bytes = plan
        .iter()
        .flatten()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("no tensor {name} in the model"))
        .bytes();
    (name, bytes)
}

fn main() {
    let args = parse_args();
    let exe = std::env::current_exe().expect("the example's own path");
    let bin: PathBuf = exe.parent().and_then(Path::parent).map_or_else(
        || PathBuf::from("target/release/tensorscope"),
        |d| d.join("tensorscope"),
    );
    if !bin.is_file() {
        eprintln!(
            "{} is missing: build the command line first with `cargo build --release`.",
            bin.display()
        );
        std::process::exit(2);
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let plan = plan(args.shards, args.mib_per_shard * MIB);
    let (tensor, tensor_bytes) = pick_tensor(&plan, args.tensor.as_deref());
    let (a, b) = build(dir.path(), &plan);
    let total: u64 = a.shards.iter().map(|(_, b)| b.len() as u64).sum();
    // One untimed run, so that the first timed one does not pay for
    // loading the binary.
    let warm = dir.path().join("a").join(INDEX);
    let _ = run_cli(
        &bin,
        dir.path(),
        &Verb::Info.args("", warm.to_str().expect("utf-8 path"), ""),
    );
    eprintln!("timing a plain GET of the largest shard…");
    let (bandwidth, largest, largest_len) = loopback(&a, args.runs);
    let mut rows = Vec::new();
    for verb in Verb::ALL {
        eprintln!("timing {}…", verb.name());
        rows.push(bench_verb(
            &bin,
            dir.path(),
            (&a, &b),
            (verb, &tensor),
            &args,
        ));
    }
    println!(
        "\n{} shards, {} in all ({} tensors: F32 attention and norms, BF16 MLP and embeddings); \
         B differs from A in its last shard; best of {} runs, each a fresh `{}` process. \
         X = {tensor} ({}).\n",
        a.shards.len(),
        human(total),
        plan.iter().map(Vec::len).sum::<usize>(),
        args.runs,
        bin.display(),
        human(tensor_bytes),
    );
    print_table(&rows);
    println!(
        "\nLoopback bandwidth: a plain HTTP/1.1 GET (std TcpStream) of {largest} ({}) through the same server: {:.0} MB/s (best of {}).",
        human(largest_len),
        bandwidth / 1e6,
        args.runs.max(3)
    );
    for r in rows
        .iter()
        .filter(|r| matches!(r.verb, Verb::Stats | Verb::Diff))
    {
        println!(
            "{} cold fetched at {:.0}% of it.",
            r.verb.name(),
            100.0 * r.cold.bytes as f64 / r.cold.time.as_secs_f64() / bandwidth
        );
    }
    let span = chunk_span(&plan, &a, &tensor);
    print_bounds(&rows, &a, (&tensor, tensor_bytes), span);
}
