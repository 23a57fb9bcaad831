//! A folder of NumPy files (a JAX/Flax export: one `.npy` a parameter) opens
//! as one checkpoint: every file's tensors, each naming its file; a name two
//! files give is read from the first, with a warning; a broken file is an
//! error naming it; resave writes one safetensors file diff finds identical.

use super::{data_dir, diff, f32_data, info, npy_file, resave, stats, validate, write_file};

#[test]
fn a_folder_of_npy_and_npz_files_is_one_checkpoint() {
    let dir = tempfile::tempdir().expect("tempdir");
    let folder = dir.path().join("export");
    std::fs::create_dir(&folder).expect("folder");
    write_file(
        &folder,
        "params.dense.kernel.npy",
        &npy_file("<f4", "(3, 4)", &f32_data(12)),
    );
    write_file(
        &folder,
        "params.dense.bias.npy",
        &npy_file("<f4", "(4,)", &f32_data(4)),
    );
    std::fs::copy(data_dir().join("savez_names.npz"), folder.join("extra.npz")).expect("copy");
    let o = info(&folder);
    assert_eq!(o.code, 0, "{}", o.doc);
    assert_eq!(o.doc["format"], "numpy");
    assert_eq!(o.doc["kind"], "folder");
    let tensors = o.doc["tensors"].as_array().expect("tensors");
    let named = |n: &str| {
        tensors
            .iter()
            .find(|t| t["name"] == n)
            .unwrap_or_else(|| panic!("{n} in {}", o.doc))
    };
    assert_eq!(
        named("params.dense.kernel")["shard"],
        "params.dense.kernel.npy"
    );
    assert_eq!(named("params.dense.bias")["shape"], serde_json::json!([4]));
    assert_eq!(named("layer/0/weight")["shard"], "extra.npz");
    assert_eq!(o.doc["shards"].as_array().map(Vec::len), Some(3));
    assert_eq!(validate(&folder).code, 0);
    let s = stats(&folder, &[]);
    assert_eq!(s.code, 0, "{}", s.doc);
    // Re-saved as one file, every tensor identical.
    let out = dir.path().join("export.safetensors");
    let r = resave(&folder, &out);
    assert_eq!(r.code, 0, "{}", r.doc);
    let d = diff(&folder, &out);
    assert_eq!(d.code, 0, "{}", d.doc);

    // An archive whose member has a name a file gave first: the first is
    // read by name, a warning says so.
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    zip.start_file(
        "params.dense.bias.npy",
        zip::write::SimpleFileOptions::default(),
    )
    .expect("member");
    std::io::Write::write_all(&mut zip, &npy_file("<f4", "(2,)", &f32_data(2))).expect("write");
    let npz = zip.finish().expect("finish").into_inner();
    write_file(&folder, "zz.npz", &npz);
    let o = info(&folder);
    assert_eq!(o.code, 0, "{}", o.doc);
    let warned = o.doc["warnings"]
        .as_array()
        .expect("warnings")
        .iter()
        .any(|w| w["kind"] == "DuplicateTensor" && w["tensor"] == "params.dense.bias");
    assert!(warned, "{}", o.doc);
    let s = stats(&folder, &["--tensor", "params.dense.bias"]);
    assert_eq!(s.code, 0, "{}", s.doc);
    assert_eq!(s.doc["tensors"][0]["count"], 4, "{}", s.doc);

    // A broken file makes the folder an error that names it.
    write_file(&folder, "broken.npy", b"\x93NUMPY\x04\x00");
    let o = info(&folder);
    assert_eq!(o.code, 2, "{}", o.doc);
    assert!(
        o.doc["error"]["path"]
            .as_str()
            .is_some_and(|p| p.ends_with("broken.npy")),
        "{}",
        o.doc
    );
}
