//! The text report of `stats`: a tensor's lines (its counts, range,
//! moments, quantiles and a sparkline of its histogram), a quantized
//! weight's codes and scales, and the summary that ends the report.

use std::fmt::Write as _;
use std::time::Duration;

use crate::cli::output::{display_name, group_digits};
use crate::stats::{Histogram, LogicalStats, QUANTILES, Scalar, Summary, TensorStats, ValueStats};

/// A number with 6 significant digits, fixed or exponent notation.
fn num(x: f64) -> String {
    if x == 0.0 {
        return "0".into();
    }
    if !x.is_finite() {
        return x.to_string();
    }
    let a = x.abs();
    if (1e-4..1e6).contains(&a) {
        let digits = (5 - a.log10().floor() as i32).clamp(0, 10) as usize;
        let s = format!("{x:.digits$}");
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_owned()
        } else {
            s
        }
    } else {
        format!("{x:.5e}")
    }
}

fn scalar(s: Option<Scalar>) -> String {
    match s {
        Some(Scalar::Float(x)) => num(x),
        Some(Scalar::Int(i)) => i.to_string(),
        Some(Scalar::UInt(u)) => u.to_string(),
        None => "-".into(),
    }
}

fn float(x: Option<f64>) -> String {
    x.map_or_else(|| "-".into(), num)
}

/// A one-line sketch of a histogram: 32 columns of block characters.
fn sparkline(h: &Histogram) -> String {
    const COLUMNS: usize = 32;
    const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    if h.counts.is_empty() {
        return String::new();
    }
    let per = h.counts.len().div_ceil(COLUMNS);
    let sums: Vec<u64> = h.counts.chunks(per).map(|c| c.iter().sum()).collect();
    let top = sums.iter().copied().max().unwrap_or(0).max(1);
    sums.iter()
        .map(|&c| {
            if c == 0 {
                ' '
            } else {
                let i = ((c as f64 / top as f64) * 7.0).round() as usize;
                BARS.get(i).copied().unwrap_or('█')
            }
        })
        .collect()
}

fn values_text(s: &mut String, v: &ValueStats, indent: &str) {
    let _ = writeln!(
        s,
        "{indent}count {}  finite {}  nan {}  +inf {}  -inf {}  zeros {}  subnormal {}{}",
        group_digits(v.count),
        group_digits(v.finite),
        group_digits(v.nan),
        group_digits(v.pos_inf),
        group_digits(v.neg_inf),
        group_digits(v.zeros),
        group_digits(v.subnormals),
        v.true_count
            .map(|t| format!("  true {}", group_digits(t)))
            .unwrap_or_default()
    );
    let _ = writeln!(
        s,
        "{indent}min {}  max {}  mean {}  std {}  mean|x| {}  l2 {}",
        scalar(v.min),
        scalar(v.max),
        float(v.mean),
        float(v.std),
        float(v.abs_mean),
        float(v.l2_norm)
    );
    if v.outliers_6sigma.is_some() || v.max_abs_over_std.is_some() {
        let _ = writeln!(
            s,
            "{indent}beyond 6σ {}  max|x|/σ {}",
            v.outliers_6sigma
                .map_or_else(|| "-".to_owned(), group_digits),
            float(v.max_abs_over_std)
        );
    }
    if let Some(q) = &v.quantiles {
        let parts: Vec<String> = QUANTILES
            .iter()
            .zip(&q.0)
            .map(|((name, _), value)| format!("{} {}", name.replace('_', "."), scalar(*value)))
            .collect();
        let _ = writeln!(s, "{indent}{}", parts.join("  "));
    }
    if let Some(h) = &v.histogram
        && !h.counts.is_empty()
    {
        let _ = writeln!(s, "{indent}histogram |{}|", sparkline(h));
    }
}

/// One tensor's lines of the text report.
pub(super) fn tensor_text(t: &TensorStats) -> String {
    let mut s = String::new();
    let shape: Vec<String> = t.shape.iter().map(u64::to_string).collect();
    let _ = writeln!(
        s,
        "{}  {}  [{}]{}",
        display_name(&t.name),
        t.dtype,
        shape.join(", "),
        t.shard
            .as_ref()
            .map(|sh| format!("  {}", display_name(sh)))
            .unwrap_or_default()
    );
    if let (Some(re), Some(im)) = (&t.real, &t.imag) {
        let _ = writeln!(s, "  |z|:");
        values_text(&mut s, &t.values, "    ");
        let _ = writeln!(s, "  real:");
        values_text(&mut s, re, "    ");
        let _ = writeln!(s, "  imag:");
        values_text(&mut s, im, "    ");
    } else {
        values_text(&mut s, &t.values, "  ");
    }
    s
}

/// A logical tensor's lines of the text report: its values, then codes,
/// extremes and scales.
pub(super) fn logical_text(l: &LogicalStats) -> String {
    let mut s = tensor_text(&l.stats);
    let q = &l.quant;
    let _ = writeln!(s, "  scheme     {} ({})", display_name(&l.label), l.scheme);
    let used = q.codes.counts.iter().filter(|c| **c > 0).count();
    let _ = writeln!(
        s,
        "  codes      {used} of {} used, {:.3}% at the extremes",
        q.codes.counts.len(),
        q.at_extremes * 100.0
    );
    if let Some(z) = &q.zeros {
        let _ = writeln!(
            s,
            "  zeros      {} values, {} .. {}",
            z.values.len(),
            z.values.first().copied().unwrap_or(0),
            z.values.last().copied().unwrap_or(0)
        );
    }
    if let Some(sc) = &q.scales {
        let _ = writeln!(
            s,
            "  scales     {} in {}: {} .. {}",
            group_digits(sc.count),
            display_name(&sc.tensor),
            float(sc.min),
            float(sc.max)
        );
    }
    s
}

/// The summary lines that end the text report.
pub(super) fn summary_text(m: &Summary, elapsed: Duration) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "\n{} tensors, {} elements, {} bytes in {:.2} s",
        group_digits(m.tensor_count as u64),
        group_digits(m.element_count),
        group_digits(m.data_bytes),
        elapsed.as_secs_f64()
    );
    let list = |names: &[String]| {
        names
            .iter()
            .map(|n| display_name(n))
            .collect::<Vec<_>>()
            .join(", ")
    };
    if m.nonfinite_tensors.is_empty() {
        let _ = writeln!(s, "no NaN or Inf");
    } else {
        let _ = writeln!(
            s,
            "NaN/Inf ({} NaN, {} Inf) in {} tensors: {}",
            group_digits(m.nan_count),
            group_digits(m.inf_count),
            m.nonfinite_tensors.len(),
            list(&m.nonfinite_tensors)
        );
    }
    if !m.all_zero_tensors.is_empty() {
        let _ = writeln!(
            s,
            "all-zero tensors ({}): {}",
            m.all_zero_tensors.len(),
            list(&m.all_zero_tensors)
        );
    }
    if let (Some(v), Some(t)) = (m.max_abs, &m.max_abs_tensor) {
        let _ = writeln!(
            s,
            "largest |value|: {} in {}",
            scalar(Some(v)),
            display_name(t)
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_short() {
        assert_eq!(num(0.0), "0");
        assert_eq!(num(1.0), "1");
        assert_eq!(num(-0.012_345_678_9), "-0.0123457");
        assert_eq!(num(123_456.7), "123457");
        assert_eq!(num(1e-7), "1.00000e-7");
        assert_eq!(num(3.4e38), "3.40000e38");
    }

    #[test]
    fn sparklines() {
        let h = Histogram {
            edges: vec![0.0, 1.0, 2.0, 3.0],
            counts: vec![1, 0, 8],
        };
        assert_eq!(sparkline(&h), "▂ █");
    }
}
