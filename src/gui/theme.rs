//! Look and feel: the window icon (drawn in code, the same design as
//! `assets/tensorscope.svg`) and style tweaks.

use eframe::egui;

/// Side of the window icon in pixels.
const ICON_SIZE: usize = 64;

/// The bars of the icon's histogram, as heights out of 1.
const BARS: [f32; 7] = [0.18, 0.38, 0.7, 0.92, 0.62, 0.34, 0.14];

/// The app icon: a histogram on a dark rounded square.
pub fn icon() -> egui::IconData {
    let n = ICON_SIZE;
    let mut rgba = vec![0u8; n * n * 4];
    let radius = 12.0f32;
    for y in 0..n {
        for x in 0..n {
            let (fx, fy) = (x as f32 + 0.5, y as f32 + 0.5);
            // Rounded-square mask.
            let cx = fx.clamp(radius, n as f32 - radius);
            let cy = fy.clamp(radius, n as f32 - radius);
            let inside = (fx - cx).hypot(fy - cy) <= radius;
            let mut px = [0u8, 0, 0, 0];
            if inside {
                px = [28, 32, 44, 255];
                // Bars occupy x in 10..54, base at y = 52.
                let bar_w = 44.0 / BARS.len() as f32;
                let rel = (fx - 10.0) / bar_w;
                if (0.0..BARS.len() as f32).contains(&rel) && rel.fract() < 0.8 {
                    let h = BARS[rel as usize] * 38.0;
                    if fy <= 52.0 && fy >= 52.0 - h {
                        px = [255, 170, 51, 255];
                    }
                }
                if (52.0..54.0).contains(&fy) && (8.0..56.0).contains(&fx) {
                    px = [200, 205, 215, 255];
                }
            }
            let i = (y * n + x) * 4;
            rgba[i..i + 4].copy_from_slice(&px);
        }
    }
    egui::IconData {
        rgba,
        width: n as u32,
        height: n as u32,
    }
}

/// Applies the app's style.
pub fn setup(ctx: &egui::Context) {
    ctx.all_styles_mut(|style| {
        style.spacing.item_spacing = egui::vec2(8.0, 5.0);
        style.interaction.selectable_labels = false;
    });
}

#[cfg(test)]
mod tests {
    #[test]
    fn icon_is_square_rgba() {
        let i = super::icon();
        assert_eq!(i.rgba.len(), (i.width * i.height * 4) as usize);
    }
}
