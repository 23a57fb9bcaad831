//! The Windows fault guard (`platform::fault`), checked under wine by
//! `scripts/test-windows`: a read of a mapped file that fails to page in
//! raises `EXCEPTION_IN_PAGE_ERROR`, and the guard must put zero pages in
//! place of the view, flag the mapping and let the program go on.
//!
//! Wine keeps reading a file that Linux truncates under it, so the fault is
//! raised here the way the system raises it (`RaiseException` with the
//! code and the faulting address as its second parameter), which runs the
//! same vectored handler. On Linux and macOS the unit test of
//! `source::map` truncates a mapped file for real.
//!
//! ```sh
//! scripts/build-windows --profile cross
//! RUSTC_BOOTSTRAP=1 RUSTC=/usr/bin/rustc /usr/bin/cargo build -Zbuild-std \
//!     --target x86_64-pc-windows-gnu --profile cross --example fault_guard
//! wine target/x86_64-pc-windows-gnu/cross/examples/fault_guard.exe
//! ```

#![cfg_attr(
    windows,
    allow(unsafe_code, reason = "mapping a file and raising an exception")
)]

#[cfg(windows)]
fn main() {
    use std::io::Write as _;
    use tensorscope::platform::fault;
    use windows_sys::Win32::Foundation::STATUS_IN_PAGE_ERROR;
    use windows_sys::Win32::System::Diagnostics::Debug::RaiseException;

    let page = 4096;
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("mapped.bin");
    let mut f = std::fs::File::create(&path).expect("create");
    f.write_all(&vec![7u8; 3 * page]).expect("write");
    drop(f);
    let file = std::fs::File::open(&path).expect("open");
    // SAFETY: a file of this program's own, mapped read-only.
    let map = unsafe { memmap2::Mmap::map(&file) }.expect("map");
    let start = map.as_ptr() as usize;
    let registration = fault::register(start, map.len()).expect("the guard is installed");
    assert!(!registration.changed());
    assert_eq!(map[page], 7);

    // The fault a failed page-in raises, at the second page.
    let args = [0usize, start + page];
    // SAFETY: a continuable exception with two parameters, as the system
    // raises an in-page error; the guard's handler continues it.
    unsafe { RaiseException(STATUS_IN_PAGE_ERROR as u32, 0, 2, args.as_ptr()) };

    assert!(registration.changed(), "the mapping is flagged");
    assert!(
        map.iter().all(|&b| b == 0),
        "zero pages stand in place of the view"
    );
    let released = registration.release();
    drop(map);
    released.free_after_unmap();

    // A second mapping of the same file is unflagged and reads the file.
    // SAFETY: as above.
    let again = unsafe { memmap2::Mmap::map(&file) }.expect("map");
    let registration = fault::register(again.as_ptr() as usize, again.len()).expect("registered");
    assert!(!registration.changed());
    assert_eq!(again[2 * page], 7);
    let released = registration.release();
    drop(again);
    released.free_after_unmap();
    println!("fault_guard: an in-page error in a mapped file became zeros and a flag");
}

#[cfg(not(windows))]
fn main() {
    println!(
        "fault_guard: checks the Windows guard; on this system the unit test of source::map \
         truncates a mapped file for real"
    );
}
