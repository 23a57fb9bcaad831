//! Look and feel: the window icon (drawn in code, the same design as
//! `assets/tensorscope.svg`) and style tweaks.

use eframe::egui;

/// Side of the window icon in pixels.
const ICON_SIZE: usize = 64;

/// The bars of the icon's histogram, as heights out of 1.
const BARS: [f32; 7] = [0.18, 0.38, 0.7, 0.92, 0.62, 0.34, 0.14];

/// The app icon: a histogram on a dark rounded square.
pub fn icon() -> egui::IconData {
    egui::IconData {
        rgba: icon_rgba(ICON_SIZE),
        width: ICON_SIZE as u32,
        height: ICON_SIZE as u32,
    }
}

/// The icon's colour at a point of its 64×64 design.
fn icon_colour(fx: f32, fy: f32) -> [u8; 4] {
    let radius = 12.0f32;
    let cx = fx.clamp(radius, 64.0 - radius);
    let cy = fy.clamp(radius, 64.0 - radius);
    if (fx - cx).hypot(fy - cy) > radius {
        return [0, 0, 0, 0];
    }
    // Bars occupy x in 10..54, base at y = 52; the axis below them.
    let bar_w = 44.0 / BARS.len() as f32;
    let rel = (fx - 10.0) / bar_w;
    if (0.0..BARS.len() as f32).contains(&rel) && rel.fract() < 0.8 {
        let h = BARS[rel as usize] * 38.0;
        if fy <= 52.0 && fy >= 52.0 - h {
            return [255, 170, 51, 255];
        }
    }
    if (52.0..54.0).contains(&fy) && (8.0..56.0).contains(&fx) {
        return [200, 205, 215, 255];
    }
    [28, 32, 44, 255]
}

/// The icon as `size`×`size` RGBA pixels (straight alpha), each pixel the
/// mean of 4×4 samples of the design (the installed icon's sizes, 16 to
/// 256, come from here).
pub fn icon_rgba(size: usize) -> Vec<u8> {
    const SAMPLES: usize = 4;
    let scale = 64.0 / size.max(1) as f32;
    let mut rgba = vec![0u8; size * size * 4];
    for y in 0..size {
        for x in 0..size {
            let mut sum = [0f32; 4];
            for sy in 0..SAMPLES {
                for sx in 0..SAMPLES {
                    let fx = (x as f32 + (sx as f32 + 0.5) / SAMPLES as f32) * scale;
                    let fy = (y as f32 + (sy as f32 + 0.5) / SAMPLES as f32) * scale;
                    let c = icon_colour(fx, fy);
                    let a = f32::from(c[3]) / 255.0;
                    for k in 0..3 {
                        sum[k] += f32::from(c[k]) * a;
                    }
                    sum[3] += a;
                }
            }
            let n = (SAMPLES * SAMPLES) as f32;
            let alpha = sum[3] / n;
            let i = (y * size + x) * 4;
            for k in 0..3 {
                let v = if sum[3] > 0.0 { sum[k] / sum[3] } else { 0.0 };
                rgba[i + k] = v.round().clamp(0.0, 255.0) as u8;
            }
            rgba[i + 3] = (alpha * 255.0).round() as u8;
        }
    }
    rgba
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

    #[test]
    fn every_icon_size_has_clear_corners_and_an_opaque_middle() {
        for size in [16, 32, 48, 64, 128, 256] {
            let px = super::icon_rgba(size);
            assert_eq!(px.len(), size * size * 4);
            let alpha = |x: usize, y: usize| px[(y * size + x) * 4 + 3];
            assert_eq!(alpha(0, 0), 0, "{size}");
            assert_eq!(alpha(size - 1, size - 1), 0, "{size}");
            assert_eq!(alpha(size / 2, size / 2), 255, "{size}");
        }
    }
}
