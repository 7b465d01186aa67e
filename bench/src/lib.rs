//! Helpers shared by the load generators in `src/bin/`: percentiles, a line fit and
//! hand-written SVG plots.

/// The `q`-quantile (0–1) of sorted values, nearest rank; None when empty.
pub fn nearest_rank<T: Copy>(sorted: &[T], q: f64) -> Option<T> {
    let last = sorted.len().checked_sub(1)?;
    let idx = (q * last as f64).round() as usize;
    Some(sorted[idx.min(last)])
}

/// The `p`-th percentile (0–100) of sorted values, nearest rank; NaN when empty.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    nearest_rank(sorted, p / 100.0).unwrap_or(f64::NAN)
}

/// The least-squares slope of y over x; None with fewer than 3 points or no spread in x.
pub fn slope(points: &[(f64, f64)]) -> Option<f64> {
    if points.len() < 3 {
        return None;
    }
    let n = points.len() as f64;
    let mx = points.iter().map(|p| p.0).sum::<f64>() / n;
    let my = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    (sxx > 0.0).then(|| sxy / sxx)
}

/// One data series of a plot.
pub struct Series {
    pub name: String,
    /// CSS colour.
    pub color: String,
    pub points: Vec<(f64, f64)>,
    /// Draw as a step line (true) or as dots (false).
    pub line: bool,
}

/// A horizontal reference line (a limit) with its label.
pub struct Limit {
    pub y: f64,
    pub label: String,
}

/// An SVG line/scatter plot of `series` with optional horizontal limit lines.
pub fn svg_plot(
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
    limits: &[Limit],
) -> String {
    let (w, h, ml, mr, mt, mb) = (900.0, 420.0, 70.0, 170.0, 40.0, 50.0);
    let pw = w - ml - mr;
    let ph = h - mt - mb;
    let all = series.iter().flat_map(|s| s.points.iter());
    let x_max = all.clone().map(|p| p.0).fold(0.0_f64, f64::max).max(1e-9);
    let y_max = all
        .map(|p| p.1)
        .chain(limits.iter().map(|l| l.y))
        .fold(0.0_f64, f64::max)
        .max(1e-9)
        * 1.1;
    let sx = |x: f64| ml + x / x_max * pw;
    let sy = |y: f64| mt + ph - y / y_max * ph;
    let mut out = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" font-family=\"sans-serif\" font-size=\"12\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n\
         <text x=\"{}\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">{}</text>\n",
        ml + pw / 2.0,
        esc(title)
    );
    // Axes and ticks.
    out.push_str(&format!(
        "<line x1=\"{ml}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"black\"/>\n<line x1=\"{ml}\" y1=\"{mt}\" x2=\"{ml}\" y2=\"{}\" stroke=\"black\"/>\n",
        mt + ph,
        ml + pw,
        mt + ph,
        mt + ph
    ));
    for i in 0..=5 {
        let xv = x_max * i as f64 / 5.0;
        let yv = y_max * i as f64 / 5.0;
        out.push_str(&format!(
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>\n<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>\n\
             <line x1=\"{ml}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"#eee\"/>\n",
            sx(xv),
            mt + ph + 18.0,
            fmt_num(xv),
            ml - 6.0,
            sy(yv) + 4.0,
            fmt_num(yv),
            sy(yv),
            ml + pw,
            sy(yv)
        ));
    }
    out.push_str(&format!(
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n<text x=\"16\" y=\"{}\" text-anchor=\"middle\" transform=\"rotate(-90 16 {})\">{}</text>\n",
        ml + pw / 2.0,
        h - 10.0,
        esc(x_label),
        mt + ph / 2.0,
        mt + ph / 2.0,
        esc(y_label)
    ));
    for l in limits {
        out.push_str(&format!(
            "<line x1=\"{ml}\" y1=\"{y:.1}\" x2=\"{:.1}\" y2=\"{y:.1}\" stroke=\"red\" stroke-dasharray=\"6 4\"/>\n<text x=\"{:.1}\" y=\"{:.1}\" fill=\"red\">{}</text>\n",
            ml + pw,
            ml + pw + 6.0,
            sy(l.y) + 4.0,
            esc(&l.label),
            y = sy(l.y)
        ));
    }
    for (i, s) in series.iter().enumerate() {
        if s.line {
            let mut d = String::new();
            for (j, (x, y)) in s.points.iter().enumerate() {
                d.push_str(&format!(
                    "{}{:.1},{:.1} ",
                    if j == 0 { "M" } else { "L" },
                    sx(*x),
                    sy(*y)
                ));
            }
            out.push_str(&format!(
                "<path d=\"{d}\" fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\"/>\n",
                s.color
            ));
        } else {
            for (x, y) in &s.points {
                out.push_str(&format!(
                    "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"2\" fill=\"{}\"/>\n",
                    sx(*x),
                    sy(*y),
                    s.color
                ));
            }
        }
        let ly = mt + 20.0 + 18.0 * i as f64;
        out.push_str(&format!(
            "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"12\" height=\"4\" fill=\"{}\"/><text x=\"{:.1}\" y=\"{:.1}\">{}</text>\n",
            ml + pw + 6.0,
            ly - 4.0,
            s.color,
            ml + pw + 22.0,
            ly + 1.0,
            esc(&s.name)
        ));
    }
    out.push_str("</svg>\n");
    out
}

fn fmt_num(v: f64) -> String {
    if v.abs() >= 100.0 || v == 0.0 {
        format!("{v:.0}")
    } else if v.abs() >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
    }
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slope_fits_a_line_through_noise() {
        // y = 40 x + 1000, with ±8 alternating noise.
        let pts: Vec<(f64, f64)> = (0..50)
            .map(|i| {
                let x = f64::from(i);
                (x, 40.0 * x + 1000.0 + if i % 2 == 0 { 8.0 } else { -8.0 })
            })
            .collect();
        let s = slope(&pts).unwrap();
        assert!((s - 40.0).abs() < 0.1, "{s}");
        assert_eq!(slope(&pts[..2]), None);
        assert_eq!(slope(&[(1.0, 1.0), (1.0, 2.0), (1.0, 3.0)]), None);
    }

    #[test]
    fn percentile_is_nearest_rank() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 50.0), 51.0);
        assert_eq!(percentile(&v, 99.0), 99.0);
        assert!(percentile(&[], 50.0).is_nan());
    }

    #[test]
    fn plot_has_series_and_limits() {
        let s = svg_plot(
            "t",
            "x",
            "y",
            &[Series {
                name: "live".into(),
                color: "blue".into(),
                points: vec![(0.0, 1.0), (2.0, 3.0)],
                line: true,
            }],
            &[Limit {
                y: 4.0,
                label: "cpl 4".into(),
            }],
        );
        assert!(s.starts_with("<svg") && s.contains("<path d=\"M") && s.contains("cpl 4"));
    }
}
