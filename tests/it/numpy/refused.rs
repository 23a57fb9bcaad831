//! Files numpy writes that Tensorscope refuses (NUMPY.md, "Dtypes"): object
//! arrays, whose data is a pickle that is never run; structured, string,
//! datetime, timedelta, complex128, long double and ml_dtypes void arrays;
//! an `.npz` holding one good member and one object member.

use std::path::Path;

use serde_json::Value;

use super::{
    assert_invalid, assert_refused_by_every_verb, data_dir, fixture_path, manifest_files, validate,
};

/// The file's name less its extension: the tensor `export` is asked for.
fn stem(entry: &Value) -> &str {
    let file = entry["file"].as_str().expect("file");
    file.rsplit_once('.').map_or(file, |(stem, _)| stem)
}

#[test]
fn validate_refuses_each_with_a_message_naming_the_type() {
    for entry in manifest_files(true) {
        let what = entry["file"].as_str().expect("file");
        let message = assert_invalid(&validate(&fixture_path(entry)), what).to_lowercase();
        let needles: Vec<String> = entry["message_any"]
            .as_array()
            .expect("message_any")
            .iter()
            .map(|n| n.as_str().expect("needle").to_lowercase())
            .collect();
        assert!(
            needles.iter().any(|n| message.contains(n.as_str())),
            "{what}: the message {message:?} names none of {needles:?} ({})",
            entry["reason"]
        );
    }
}

#[test]
fn every_verb_refuses_them_with_one_error_document_and_writes_nothing() {
    for entry in manifest_files(true) {
        assert_refused_by_every_verb(&fixture_path(entry), stem(entry), None);
    }
}

#[test]
fn object_arrays_are_never_unpickled() {
    // Unpickling the payload would create PWNED_BY_PICKLE in the working
    // folder: every verb runs there, on the fixture by its absolute path and
    // on a copy by a relative one.
    let work = tempfile::tempdir().expect("tempdir");
    let payloads: Vec<&Value> = manifest_files(true)
        .into_iter()
        .filter(|e| e["descr"] == "|O")
        .collect();
    assert_eq!(payloads.len(), 2, "the .npy and the .npz payloads");
    for entry in payloads {
        let name = entry["file"].as_str().expect("file");
        let original = fixture_path(entry);
        std::fs::copy(&original, work.path().join(name)).expect("copy the payload");
        for file in [original.as_path(), Path::new(name)] {
            assert_refused_by_every_verb(file, stem(entry), Some(work.path()));
        }
    }
    let data = data_dir();
    for dir in [work.path(), data.as_path()] {
        assert!(
            !dir.join("PWNED_BY_PICKLE").exists(),
            "a pickle ran: {}",
            dir.display()
        );
    }
}
