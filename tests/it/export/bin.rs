//! `.bin`: the tensor's bytes as stored, for every dtype.

use tensorscope::export::{ExportFormat, ExportOptions};
use tensorscope::format::Checkpoint;

use super::{every_dtype, export, raw};

#[test]
fn bin_is_the_bytes_as_stored() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = every_dtype(dir.path());
    let ck = Checkpoint::open(&src).expect("open");
    for &t in ck.tensors() {
        let info = ck.info(t).expect("info");
        let out = dir.path().join(format!("{}.bin", info.name()));
        let report = export(&ck, info.name(), &out, &ExportOptions::default()).expect("bin");
        assert_eq!(
            std::fs::read(&out).expect("bin"),
            ck.bytes(t),
            "{}",
            info.name()
        );
        assert_eq!(report.bytes_written, info.nbytes());
        assert_eq!(report.format, ExportFormat::Bin);
    }
    let e = export(&ck, "t_F32", &dir.path().join("x.bin"), &raw()).expect_err("raw .bin");
    assert_eq!(e.kind(), "RawNotApplicable");
}
