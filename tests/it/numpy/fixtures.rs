//! The files numpy wrote (`tests/data/numpy`), against what its manifest
//! says numpy reads from them: names, dtypes, shapes, statistics, and the
//! bytes every output must carry (C order, little-endian).

use std::collections::BTreeSet;

use serde_json::Value;

use super::{
    accepted_names, arrays, diff, doc_shape, expected_bytes, export, export_descr, find_named,
    fixture_path, info, manifest, manifest_files, read_exported_npy, resave, shape_of, stats,
    validate,
};

/// A manifest file entry's name, for messages.
fn label(entry: &Value) -> &str {
    entry["file"].as_str().expect("file")
}

#[test]
fn info_lists_every_array_under_its_name_dtype_and_shape() {
    for entry in manifest_files(false) {
        let what = label(entry);
        let o = info(&fixture_path(entry));
        assert_eq!(o.code, 0, "{what}: {}", o.doc);
        assert_eq!(o.doc["format"], "numpy", "{what}: {}", o.doc);
        let tensors = o.doc["tensors"].as_array().expect("tensors");
        // Only `.npy` members are tensors: a README.txt is not one.
        assert_eq!(
            tensors.len(),
            arrays(entry).len(),
            "{what}: tensors {}",
            o.doc
        );
        for array in arrays(entry) {
            let t = find_named(&o.doc["tensors"], array, what);
            assert_eq!(t["dtype"], array["dtype"], "{what}: {t}");
            assert_eq!(doc_shape(t), shape_of(array), "{what}: {t}");
        }
    }
}

#[test]
fn info_gives_numel_nbytes_and_the_absolute_data_range_of_stored_data() {
    // DESIGN.md: for NumPy files `data_offsets` are the absolute byte range
    // of the data of a `.npy` or a stored member, null for a deflated one.
    for entry in manifest_files(false) {
        let what = label(entry);
        let o = info(&fixture_path(entry));
        assert_eq!(o.code, 0, "{what}: {}", o.doc);
        for array in arrays(entry) {
            let t = find_named(&o.doc["tensors"], array, what);
            assert_eq!(t["numel"], array["numel"], "{what}: {t}");
            assert_eq!(t["nbytes"], array["nbytes"], "{what}: {t}");
            assert_eq!(t["data_offsets"], array["data_offsets"], "{what}: {t}");
        }
    }
}

#[test]
fn validate_accepts_every_numpy_written_file() {
    for entry in manifest_files(false) {
        let what = label(entry);
        let o = validate(&fixture_path(entry));
        assert_eq!(o.code, 0, "{what}: {}", o.doc);
        assert_eq!(o.doc["valid"], true, "{what}: {}", o.doc);
        assert!(o.doc["error"].is_null(), "{what}: {}", o.doc);
    }
}

/// min/max: exactly the manifest's (integers as JSON integers, null when
/// there is no finite value).
fn assert_exact(got: &Value, want: &Value, what: &str) {
    if want.is_null() {
        assert!(got.is_null(), "{what}: {got}, expected null");
    } else if want.is_f64() {
        assert_eq!(got.as_f64(), want.as_f64(), "{what}: {got} against {want}");
    } else {
        assert!(
            got.is_i64() || got.is_u64(),
            "{what}: {got} is not an exact integer (expected {want})"
        );
        assert_eq!(got.as_i64(), want.as_i64(), "{what}: {got} against {want}");
        assert_eq!(got.as_u64(), want.as_u64(), "{what}: {got} against {want}");
    }
}

/// mean/std: within 1e-9 · mean|x| of the float64 reference.
fn assert_close(got: &Value, want: &Value, abs_mean: f64, what: &str) {
    if want.is_null() {
        assert!(got.is_null(), "{what}: {got}, expected null");
        return;
    }
    let g = got
        .as_f64()
        .unwrap_or_else(|| panic!("{what}: {got} is not a number (expected {want})"));
    let w = want.as_f64().expect("manifest number");
    let tolerance = 1e-9 * abs_mean + 1e-300;
    assert!(
        (g - w).abs() <= tolerance,
        "{what}: {g} against {w} (tolerance {tolerance})"
    );
}

/// One stats object against the manifest's figures.
pub(crate) fn assert_figures(got: &Value, want: &Value, what: &str) {
    for key in ["count", "nan", "pos_inf", "neg_inf", "zeros"] {
        assert!(want[key].is_u64(), "manifest {what}: {key}");
        assert_eq!(
            got[key].as_u64(),
            want[key].as_u64(),
            "{what}: {key}: {got}"
        );
    }
    for key in ["min", "max"] {
        assert_exact(&got[key], &want[key], &format!("{what}: {key}"));
    }
    let abs_mean = want["abs_mean"].as_f64().unwrap_or(0.0);
    for key in ["mean", "std"] {
        assert_close(&got[key], &want[key], abs_mean, &format!("{what}: {key}"));
    }
}

#[test]
fn stats_match_the_float64_reference() {
    for entry in manifest_files(false) {
        let what = label(entry);
        let o = stats(&fixture_path(entry), &[]);
        assert_eq!(o.code, 0, "{what}: {}", o.doc);
        for array in arrays(entry) {
            let t = find_named(&o.doc["tensors"], array, what);
            let name = array["name"].as_str().expect("name");
            let want = &array["stats"];
            assert_figures(t, want, &format!("{what}: {name}"));
            // C64: the top-level figures are those of |z|; each part has its own.
            for part in ["real", "imag"] {
                if want[part].is_object() {
                    assert_figures(&t[part], &want[part], &format!("{what}: {name}.{part}"));
                }
            }
        }
    }
}

#[test]
fn export_npy_writes_c_order_little_endian_values() {
    let dir = tempfile::tempdir().expect("tempdir");
    for (i, entry) in manifest_files(false).into_iter().enumerate() {
        let what = label(entry);
        let path = fixture_path(entry);
        // The name Tensorscope reports (a `.bin` file leaves room).
        let listed = info(&path);
        assert_eq!(listed.code, 0, "{what}: {}", listed.doc);
        for (j, array) in arrays(entry).iter().enumerate() {
            let name = find_named(&listed.doc["tensors"], array, what)["name"]
                .as_str()
                .expect("name")
                .to_owned();
            let out = dir.path().join(format!("{i}-{j}.npy"));
            let o = export(&path, &name, &out);
            assert_eq!(o.code, 0, "{what}: export {name}: {}", o.doc);
            assert_eq!(
                o.doc["elements"], array["numel"],
                "{what}: {name}: {}",
                o.doc
            );
            let npy = read_exported_npy(&out);
            let dtype = array["dtype"].as_str().expect("dtype");
            assert_eq!(npy.descr, export_descr(dtype), "{what}: {name}");
            assert_eq!(npy.shape, shape_of(array), "{what}: {name}");
            assert_eq!(
                npy.data.len() as u64,
                array["nbytes"].as_u64().expect("nbytes"),
                "{what}: {name}"
            );
            if let Some(bytes) = expected_bytes(array) {
                assert!(npy.data == bytes, "{what}: {name}: exported values differ");
            }
        }
    }
}

#[test]
fn resave_writes_what_safetensors_reads_and_diff_finds_it_identical() {
    let dir = tempfile::tempdir().expect("tempdir");
    for (i, entry) in manifest_files(false).into_iter().enumerate() {
        let what = label(entry);
        let path = fixture_path(entry);
        let out = dir.path().join(format!("{i}.safetensors"));
        let o = resave(&path, &out);
        assert_eq!(o.code, 0, "{what}: resave: {}", o.doc);

        let bytes = std::fs::read(&out).expect("read the resaved file");
        let st = safetensors::SafeTensors::deserialize(&bytes)
            .unwrap_or_else(|e| panic!("{what}: safetensors refuses the resave: {e}"));
        assert_eq!(st.len(), arrays(entry).len(), "{what}: {:?}", st.names());
        for array in arrays(entry) {
            let names = accepted_names(array);
            let name = st
                .names()
                .into_iter()
                .find(|candidate| names.contains(candidate))
                .unwrap_or_else(|| panic!("{what}: no {names:?} in {:?}", st.names()));
            let view = st.tensor(name).expect("tensor");
            assert_eq!(view.dtype().to_string(), array["dtype"], "{what}: {name}");
            let shape: Vec<u64> = view.shape().iter().map(|&d| d as u64).collect();
            assert_eq!(shape, shape_of(array), "{what}: {name}");
            if let Some(want) = expected_bytes(array) {
                assert!(
                    view.data() == want.as_slice(),
                    "{what}: {name}: bytes differ"
                );
            }
        }

        let d = diff(&path, &out);
        assert_eq!(d.code, 0, "{what}: diff after resave: {}", d.doc);
        assert_eq!(
            d.doc["only_in_a"],
            serde_json::json!([]),
            "{what}: {}",
            d.doc
        );
        assert_eq!(
            d.doc["only_in_b"],
            serde_json::json!([]),
            "{what}: {}",
            d.doc
        );
        let rows = d.doc["tensors"].as_array().expect("diff rows");
        assert_eq!(rows.len(), arrays(entry).len(), "{what}: {}", d.doc);
        for row in rows {
            assert_eq!(row["status"], "identical", "{what}: {row}");
        }
    }
}

/// The fixtures cover what NUMPY.md lists; a regenerated manifest that lost
/// a case fails here rather than silently testing less.
#[test]
fn the_manifest_covers_every_case_numpy_md_lists() {
    let mut descrs = BTreeSet::new();
    let mut versions = BTreeSet::new();
    let mut compressions = BTreeSet::new();
    let mut names = BTreeSet::new();
    let (mut fortran_ranks, mut fortran_big_endian) = (BTreeSet::new(), false);
    let (mut scalar, mut empty, mut specials) = (false, false, false);
    for entry in manifest_files(false) {
        for array in arrays(entry) {
            let descr = array["descr"].as_str().expect("descr");
            descrs.insert(descr.to_owned());
            versions.insert(array["npy_version"][0].as_u64().expect("version"));
            if let Some(c) = array["compression"].as_str() {
                compressions.insert(c.to_owned());
            }
            names.insert(array["name"].as_str().expect("name").to_owned());
            let shape = shape_of(array);
            if array["fortran_order"] == true {
                fortran_ranks.insert(shape.len());
                fortran_big_endian |= descr.starts_with('>');
            }
            scalar |= shape.is_empty();
            empty |= shape.contains(&0);
            let s = &array["stats"];
            specials |= s["nan"].as_u64() > Some(0)
                && s["pos_inf"].as_u64() > Some(0)
                && s["neg_inf"].as_u64() > Some(0);
        }
    }
    for code in ["u2", "u4", "u8", "i2", "i4", "i8", "f2", "f4", "f8", "c8"] {
        assert!(descrs.contains(&format!("<{code}")), "no <{code}");
        assert!(descrs.contains(&format!(">{code}")), "no >{code}");
    }
    for code in ["|b1", "|u1", "|i1"] {
        assert!(descrs.contains(code), "no {code}");
    }
    assert_eq!(versions, BTreeSet::from([1, 2, 3]));
    assert!(compressions.contains("stored") && compressions.contains("deflated"));
    for name in ["arr_0", "arr_1", "layer/0/weight", "model.embed.weight"] {
        assert!(names.contains(name), "no tensor {name}");
    }
    assert!(fortran_ranks.contains(&2) && fortran_ranks.contains(&3));
    assert!(fortran_big_endian && scalar && empty && specials);
    assert!(manifest_files(true).len() >= 10);
    let generator = &manifest()["generator"];
    for key in ["script", "python", "numpy", "ml_dtypes", "date"] {
        assert!(generator[key].is_string(), "generator.{key}");
    }
}
