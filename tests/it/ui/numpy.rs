//! A NumPy archive in the explorer: the overview names the container, a
//! big-endian member's statistics and value grid show the values numpy
//! reads (its bytes are read into scratch space in C order by a job), a
//! Fortran-order member's grid is in logical order, and a member exports.

use egui_kittest::kittest::Queryable;
use tensorscope::gui::State;

use super::{file_menu, harness, no_dialog, open, set_text, settle};

/// The committed archive numpy wrote (`scripts/make_numpy_fixtures.py`).
fn mixed_npz() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/numpy/savez_compressed_mixed.npz")
}

#[test]
fn an_npz_opens_its_members_show_their_values_and_one_exports() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut h = harness(State::default(), no_dialog());
    open(&mut h, &mixed_npz());
    h.get_by_label_contains("NumPy .npz archive");
    h.get_by_label("fortran");
    // A deflated, big-endian I32 member: statistics by a job.
    h.get_by_label("big_endian").click();
    settle(&mut h);
    h.get_by_label("count");
    assert!(h.query_all_by_label("-2147483648").count() >= 1);
    // The value grid waits for the member to be read in C order, then
    // shows numpy's values, in order.
    h.get_by_label("Values").click();
    settle(&mut h);
    h.run_steps(2);
    for v in ["-2147483648", "2147483647", "-1624719313", "-1325135315"] {
        assert!(h.query_all_by_label(v).count() >= 1, "{v} is not shown");
    }
    // A Fortran-order F64 member: its grid reads 1.0 at [0, 2] (C order),
    // where the column-major bytes hold another value.
    h.get_by_label("fortran").click();
    settle(&mut h);
    h.run_steps(2);
    for (index, value) in [("[1, 1]", "1.000000e150"), ("[1, 2]", "-1.000000e150")] {
        let y = |label: &str| h.get_by_label(label).rect().center().y;
        assert!(
            (y(index) - y(value)).abs() < 2.0,
            "{value} is not on the row of {index}"
        );
    }
    // Export the big-endian member: little-endian values numpy would read.
    h.get_by_label("big_endian").click();
    settle(&mut h);
    file_menu(&mut h, "Export tensor…");
    settle(&mut h);
    let out = dir.path().join("big_endian.csv");
    set_text(&h.get_by_label("File:"), &out.display().to_string());
    h.run_steps(2);
    h.get_by_label("Export").click();
    settle(&mut h);
    h.get_by_label_contains("Wrote");
    let text = std::fs::read_to_string(&out).expect("csv written");
    let values: Vec<i64> = text
        .lines()
        .map(|l| l.trim().parse().expect("integer"))
        .collect();
    assert_eq!(
        values,
        [
            -2_147_483_648,
            2_147_483_647,
            0,
            1,
            -2_147_483_647,
            2_147_483_646,
            -1,
            -2,
            -1_624_719_313,
            -1_325_135_315
        ]
    );
}
