//! Text for people, shared by the command line and the explorer: the one
//! escaper for untrusted text (tensor names and metadata come from the
//! file, so they may hold control characters, bidi overrides that reorder
//! what a terminal or a label shows, or a megabyte of one name), and the
//! number formats both faces print.

use std::fmt::Write as _;

/// How [`escape`] shows text cut at its character limit, and which
/// characters it keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// A terminal line: `…[N bytes]` after the cut, `""` for an empty name.
    Terminal,
    /// A label on one line: `… (N bytes in all)` after the cut.
    Label,
    /// A label that keeps its line breaks and tabs (metadata values).
    MultilineLabel,
}

/// Characters that change how the text around them reads without showing
/// themselves: bidi embeddings, overrides, isolates and marks (they reorder
/// what follows), and the zero-width space, joiners, word joiner and BOM
/// (they make two different names look the same). Shown escaped, so a name
/// cannot pass for another name or hide part of itself.
fn is_invisible_control(c: char) -> bool {
    matches!(
        c,
        '\u{202A}'..='\u{202E}'
            | '\u{2066}'..='\u{2069}'
            | '\u{200E}'
            | '\u{200F}'
            | '\u{061C}'
            | '\u{200B}'..='\u{200D}'
            | '\u{2060}'
            | '\u{FEFF}'
    )
}

/// Makes untrusted text safe to show: control characters and bidi controls
/// are written as `\u{…}` escapes, and text past `max_chars` characters is
/// cut with a note of its length in bytes.
pub fn escape(s: &str, max_chars: usize, style: Style) -> String {
    let keep_lines = style == Style::MultilineLabel;
    let mut out = String::with_capacity(s.len().min(max_chars.saturating_mul(4)));
    for (i, c) in s.chars().enumerate() {
        if i == max_chars {
            let _ = match style {
                Style::Terminal => write!(out, "…[{} bytes]", s.len()),
                Style::Label | Style::MultilineLabel => {
                    write!(out, "… ({} bytes in all)", s.len())
                }
            };
            break;
        }
        if keep_lines && (c == '\n' || c == '\t') {
            out.push(c);
        } else if c.is_control() || is_invisible_control(c) {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    if style == Style::Terminal && s.is_empty() {
        out.push_str("\"\"");
    }
    out
}

/// A tensor name for a terminal line (at most 200 characters).
pub fn display_name(name: &str) -> String {
    escape(name, 200, Style::Terminal)
}

/// Untrusted text for a one-line label, cut after `max_chars` characters.
pub fn safe_text(s: &str, max_chars: usize) -> String {
    escape(s, max_chars, Style::Label)
}

/// `s` shortened in the middle with `…` so that its width (the sum of
/// `width` over its characters) is at most `max`: both ends stay visible
/// (`model.layers.10…q_proj.weight`), the end a little more of it. `s`
/// itself when it fits.
pub fn elide_middle(
    s: &str,
    max: f32,
    mut width: impl FnMut(char) -> f32,
) -> std::borrow::Cow<'_, str> {
    let total: f32 = s.chars().map(&mut width).sum();
    if total <= max {
        return std::borrow::Cow::Borrowed(s);
    }
    let budget = (max - width('…')).max(0.0);
    // The end (the tensor's role) gets 55% of the room, the start the rest
    // and whatever the end leaves.
    let chars: Vec<char> = s.chars().collect();
    let mut tail = 0usize;
    let mut used = 0.0f32;
    for &c in chars.iter().rev() {
        let w = width(c);
        if used + w > budget * 0.55 {
            break;
        }
        used += w;
        tail += 1;
    }
    let mut head = 0usize;
    for &c in chars.iter().take(chars.len() - tail) {
        let w = width(c);
        if used + w > budget {
            break;
        }
        used += w;
        head += 1;
    }
    let mut out: String = chars.iter().take(head).collect();
    out.push('…');
    out.extend(chars.iter().skip(chars.len() - tail));
    std::borrow::Cow::Owned(out)
}

/// Like [`safe_text`] but keeps line breaks and tabs.
pub fn safe_multiline(s: &str, max_chars: usize) -> String {
    escape(s, max_chars, Style::MultilineLabel)
}

/// Thousands separators for human output (`1,234`).
pub fn group_digits(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Bytes in binary units (`1.5 GiB`).
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut v = bytes as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit < UNITS.len() - 1 {
        v /= 1024.0;
        unit += 1;
    }
    format!("{v:.1} {}", UNITS[unit])
}

/// A count with a metric suffix (`7.24B`), for parameter counts.
pub fn human_count(n: u64) -> String {
    match n {
        0..1_000 => n.to_string(),
        1_000..1_000_000 => format!("{:.1}K", n as f64 / 1e3),
        1_000_000..1_000_000_000 => format!("{:.1}M", n as f64 / 1e6),
        1_000_000_000..1_000_000_000_000 => format!("{:.2}B", n as f64 / 1e9),
        _ => format!("{:.2}T", n as f64 / 1e12),
    }
}

/// A value in at most about a dozen characters: the shortest round-trip
/// form, scientific when large or tiny, `NaN`/`+Inf`/`-Inf` spelled out.
pub fn fmt_value(x: f64) -> String {
    if x.is_nan() {
        return "NaN".into();
    }
    if x.is_infinite() {
        return if x > 0.0 {
            "+Inf".into()
        } else {
            "-Inf".into()
        };
    }
    let a = x.abs();
    if a != 0.0 && !(1e-4..1e7).contains(&a) {
        format!("{x:.6e}")
    } else {
        let s = format!("{x}");
        if s.len() > 12 { format!("{x:.6}") } else { s }
    }
}

/// [`fmt_value`] of a figure that may not apply: `—` when it does not.
pub fn fmt_opt(x: Option<f64>) -> String {
    x.map_or_else(|| "—".to_owned(), fmt_value)
}

/// A shape as the format writes it: `[4096, 11008]`, `[]` for a scalar.
pub fn fmt_shape(shape: &[u64]) -> String {
    let parts: Vec<String> = shape.iter().map(u64::to_string).collect();
    format!("[{}]", parts.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_elide_in_the_middle() {
        let w = |_: char| 1.0;
        let name = "model.layers.10.self_attn.q_proj.weight";
        assert_eq!(elide_middle(name, 100.0, w), name);
        let short = elide_middle(name, 24.0, w);
        assert_eq!(short.chars().count(), 24);
        assert_eq!(short, "model.layer…_proj.weight");
        assert!(short.contains('…'));
        // Nothing fits: only the mark; wide characters count their width.
        assert_eq!(elide_middle(name, 0.5, w), "…");
        let wide = elide_middle("ab漢字cd", 4.0, |c| if c.is_ascii() { 1.0 } else { 2.0 });
        assert_eq!(wide, "a…d");
    }

    #[test]
    fn terminal_names_are_escaped() {
        assert_eq!(display_name("a\nb"), "a\\u{a}b");
        assert_eq!(display_name("x\u{202E}y"), "x\\u{202e}y");
        // Zero-width characters would make two names look the same.
        assert_eq!(
            display_name("a\u{200B}b\u{200C}\u{200D}\u{2060}\u{FEFF}"),
            "a\\u{200b}b\\u{200c}\\u{200d}\\u{2060}\\u{feff}"
        );
        assert_eq!(display_name(""), "\"\"");
        let long = "x".repeat(1_000_000);
        assert!(display_name(&long).len() < 300);
        assert!(display_name(&long).ends_with("…[1000000 bytes]"));
    }

    #[test]
    fn labels_are_escaped() {
        assert_eq!(safe_text("a\nb\u{202E}", 10), "a\\u{a}b\\u{202e}");
        assert_eq!(safe_multiline("k\u{200B}\n", 10), "k\\u{200b}\n");
        assert_eq!(safe_multiline("a\nb", 10), "a\nb");
        assert_eq!(safe_text("", 10), "");
        let long = safe_text(&"x".repeat(1 << 20), 100);
        assert!(long.len() < 200 && long.ends_with("(1048576 bytes in all)"));
    }

    #[test]
    fn numbers() {
        assert_eq!(group_digits(0), "0");
        assert_eq!(group_digits(1234), "1,234");
        assert_eq!(group_digits(u64::MAX), "18,446,744,073,709,551,615");
        assert_eq!(human_bytes(1536), "1.5 KiB");
        assert_eq!(human_count(7_241_732_096), "7.24B");
        assert_eq!(fmt_value(0.5), "0.5");
        assert_eq!(fmt_value(f64::NEG_INFINITY), "-Inf");
        assert_eq!(fmt_value(1e-9), "1.000000e-9");
        assert_eq!(fmt_shape(&[]), "[]");
    }
}
