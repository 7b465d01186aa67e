//! The report's plots as inline SVG: a line over time (with an optional dashed limit), a
//! scatter of values over time, and horizontal bars of counts.

const W: f64 = 640.0;
const H: f64 = 240.0;
const PAD: f64 = 40.0;

/// Escapes text for HTML and SVG.
pub(super) fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The frame of a plot of `points` (x ≥ 0, y ≥ 0) up to `limit`: the scales and the axes.
struct Frame {
    max_x: f64,
    max_y: f64,
}

impl Frame {
    fn of(points: &[(f64, f64)], limit: f64) -> Frame {
        Frame {
            max_x: points.iter().map(|p| p.0).fold(1.0, f64::max),
            max_y: points.iter().map(|p| p.1).fold(limit, f64::max).max(1.0),
        }
    }
    fn x(&self, v: f64) -> f64 {
        PAD + v / self.max_x * (W - 2.0 * PAD)
    }
    fn y(&self, v: f64) -> f64 {
        H - PAD - v / self.max_y * (H - 2.0 * PAD)
    }
    /// The SVG around `body`, with axes and labels.
    fn svg(&self, body: &str, x_label: &str, y_label: &str, y_note: &str) -> String {
        format!(
            r##"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" role="img">
<rect width="{W}" height="{H}" fill="#fff"/>
<line x1="{PAD}" y1="{b}" x2="{r}" y2="{b}" stroke="#888"/><line x1="{PAD}" y1="{PAD}" x2="{PAD}" y2="{b}" stroke="#888"/>
{body}
<text x="{r}" y="{tb}" text-anchor="end" font-size="11">{x_label} (0–{max_x:.0})</text>
<text x="4" y="14" font-size="11">{y_label} (max {max_y:.0}{y_note})</text>
</svg>"##,
            b = H - PAD,
            r = W - PAD,
            tb = H - 10.0,
            max_x = self.max_x,
            max_y = self.max_y,
        )
    }
}

/// A polyline plot of `points`, with a dashed line at `limit` when it is above 0.
pub(super) fn line(points: &[(f64, f64)], limit: f64, x_label: &str, y_label: &str) -> String {
    let f = Frame::of(points, limit);
    let pts: Vec<String> = points
        .iter()
        .map(|p| format!("{:.1},{:.1}", f.x(p.0), f.y(p.1)))
        .collect();
    let mut body = String::new();
    let mut note = String::new();
    if limit > 0.0 {
        body.push_str(&format!(
            r##"<line class="limit" x1="{PAD}" y1="{ly:.1}" x2="{r}" y2="{ly:.1}" stroke="#c33" stroke-dasharray="4 3"/>"##,
            ly = f.y(limit),
            r = W - PAD
        ));
        body.push('\n');
        note = format!("; dashed: {limit:.0}");
    }
    body.push_str(&format!(
        r##"<polyline fill="none" stroke="#26c" stroke-width="2" points="{}"/>"##,
        pts.join(" ")
    ));
    f.svg(&body, x_label, y_label, &note)
}

/// A scatter plot of `points`: one dot each.
pub(super) fn scatter(points: &[(f64, f64)], x_label: &str, y_label: &str) -> String {
    let f = Frame::of(points, 0.0);
    let body: String = points
        .iter()
        .map(|p| {
            format!(
                r##"<circle cx="{:.1}" cy="{:.1}" r="2" fill="#26c"/>"##,
                f.x(p.0),
                f.y(p.1)
            )
        })
        .collect();
    f.svg(&body, x_label, y_label, "")
}

/// Horizontal bars of `counts` (name, count), longest scaled to the width, each labelled
/// with its name and count; `None` when there is nothing to draw.
pub(super) fn bars(counts: &[(String, i64)]) -> Option<String> {
    if counts.is_empty() {
        return None;
    }
    let max = counts.iter().map(|c| c.1).max().unwrap_or(0).max(1) as f64;
    let (label_w, bar_h, gap) = (140.0, 16.0, 6.0);
    let h = counts.len() as f64 * (bar_h + gap) + gap;
    let body: String = counts
        .iter()
        .enumerate()
        .map(|(i, (name, n))| {
            let y = gap + i as f64 * (bar_h + gap);
            let w = (*n as f64 / max * (W - label_w - 60.0)).max(1.0);
            format!(
                r##"<text x="{tx}" y="{ty:.1}" text-anchor="end" font-size="11">{name}</text><rect x="{label_w}" y="{y:.1}" width="{w:.1}" height="{bar_h}" fill="#26c"/><text x="{cx:.1}" y="{ty:.1}" font-size="11">{n}</text>"##,
                tx = label_w - 6.0,
                ty = y + bar_h - 4.0,
                cx = label_w + w + 4.0,
                name = esc(name),
            )
        })
        .collect::<Vec<_>>()
        .join("\n");
    Some(format!(
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{h:.0}" role="img">
<rect width="{W}" height="{h:.0}" fill="#fff"/>
{body}
</svg>"##
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plots_draw_their_points() {
        let l = line(&[(0.0, 1.0), (1.0, 2.0)], 3.0, "s", "calls");
        assert!(l.contains("class=\"limit\"") && l.contains("dashed: 3"));
        assert!(!line(&[(0.0, 1.0)], 0.0, "s", "calls").contains("class=\"limit\""));
        assert_eq!(
            scatter(&[(0.0, 1.0), (2.0, 5.0)], "s", "ms")
                .matches("<circle")
                .count(),
            2
        );
        assert!(bars(&[]).is_none());
        let b = bars(&[("busy<".into(), 2), ("answered".into(), 4)]).unwrap();
        assert!(b.contains("busy&lt;") && b.matches("<rect").count() == 3);
    }
}
