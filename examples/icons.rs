//! Writes the app icon as PNG files in the hicolor sizes, for the Debian
//! package (`scripts/package-deb`): `OUT/<n>x<n>/tensorscope.png` for n in
//! 16, 32, 48, 64, 128 and 256, drawn from the same design as the window
//! icon and `assets/tensorscope.svg`.
//!
//! ```sh
//! cargo run --profile dist --example icons -- target/assets/icons
//! ```

fn main() {
    let out = std::path::PathBuf::from(
        std::env::args()
            .nth(1)
            .unwrap_or_else(|| "target/assets/icons".to_owned()),
    );
    for size in [16, 32, 48, 64, 128, 256] {
        let dir = out.join(format!("{size}x{size}"));
        std::fs::create_dir_all(&dir).expect("the icon folder can be made");
        let rgba = tensorscope::gui::icon_rgba(size);
        let png = tensorscope::export::png::encode_rgba(
            size,
            size,
            &rgba,
            &[("Software", "Tensorscope")],
        )
        .expect("a square icon encodes");
        std::fs::write(dir.join("tensorscope.png"), png).expect("the icon can be written");
    }
}
