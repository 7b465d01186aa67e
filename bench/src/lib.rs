//! Helpers shared by the load generators in `src/bin/`: percentiles, a line fit,
//! hand-written SVG plots, `/proc/<pid>/stat` samples and SIPp's statistics files.

use std::path::Path;

pub mod amd_set;
pub mod calls;
pub mod voice;

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

/// Milliseconds for a report table: whole above 100, two decimals below, `–` for none.
fn fmt_ms(v: f64) -> String {
    if v.is_nan() {
        "–".into()
    } else if v >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

/// Percentile `q` of set-up times (ms, sorted). SIPp's times step by its clock's tick, so a
/// percentile of 0 says only that it was under one step: it is printed as `<step`, the
/// smallest non-zero time in the sample (`<1 step` when every time was 0).
pub fn fmt_setup(sorted: &[f64], q: f64) -> String {
    let v = percentile(sorted, q);
    if v != 0.0 {
        return fmt_ms(v);
    }
    match sorted.iter().copied().find(|t| *t > 0.0) {
        Some(step) if step >= 1.0 => format!("<{step:.0}"),
        Some(step) => format!("<{step:.2}"),
        None => "<1 step".into(),
    }
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

/// Clock ticks per second of `/proc/<pid>/stat` times (USER_HZ, 100 on Linux).
pub const CLK_TCK: f64 = 100.0;

/// One reading of `/proc/<pid>/stat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcStat {
    /// Process state (`R`, `S`, … ; `Z` once it exited and was not yet reaped: its CPU
    /// times are then final).
    pub state: char,
    /// utime + stime, clock ticks.
    pub cpu_ticks: u64,
    /// Resident set, KiB.
    pub rss_kib: u64,
}

/// Parses the text of `/proc/<pid>/stat`.
pub fn parse_proc_stat(stat: &str) -> Option<ProcStat> {
    // Fields after the command name (which may contain spaces) start at state (field 3).
    let rest = stat.get(stat.rfind(')')? + 2..)?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let utime: u64 = f.get(11)?.parse().ok()?;
    let stime: u64 = f.get(12)?.parse().ok()?;
    let rss_pages: u64 = f.get(21)?.parse().ok()?;
    Some(ProcStat {
        state: f.first()?.chars().next()?,
        cpu_ticks: utime + stime,
        rss_kib: rss_pages * 4,
    })
}

/// utime + stime, in clock ticks, of every process whose command is `comm` (e.g. the
/// `postgres` server processes: the server's CPU beside the engine's).
pub fn cpu_ticks_of_command(comm: &str) -> u64 {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return 0;
    };
    dir.filter_map(|e| e.ok())
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
        })
        .filter_map(|e| std::fs::read_to_string(e.path().join("stat")).ok())
        .filter(|stat| {
            let name = stat
                .find('(')
                .zip(stat.rfind(')'))
                .map(|(a, b)| &stat[a + 1..b]);
            name == Some(comm)
        })
        .filter_map(|stat| parse_proc_stat(&stat))
        .map(|p| p.cpu_ticks)
        .sum()
}

/// `/proc/<pid>/stat` of a process; None once it is gone.
pub fn proc_stat(pid: u32) -> Option<ProcStat> {
    parse_proc_stat(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// What one SIPp run counted: the last row of its `-trace_stat` file (cumulative
/// counters) and the most calls it had open in any row.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SippStat {
    /// Rows read (one per `-fd` period, plus the rows written at the start and the end).
    pub rows: usize,
    pub outgoing: u64,
    pub incoming: u64,
    pub successful: u64,
    pub failed: u64,
    /// Messages SIPp sent again because no answer came in time (`Retransmissions(C)`).
    pub retransmissions: u64,
    /// The largest `CurrentCall` of any row.
    pub peak_current: u64,
    /// `CurrentCall` of every row, in file order (one row per second with `-fd 1`).
    pub current: Vec<u64>,
}

impl SippStat {
    /// The counts of several SIPp processes that ran side by side (started together, one
    /// row per second each): counters added, and the most calls open at once as the
    /// largest sum of the processes' `CurrentCall` row by row.
    pub fn combine(stats: &[SippStat]) -> SippStat {
        let rows = stats.iter().map(|s| s.current.len()).max().unwrap_or(0);
        let current: Vec<u64> = (0..rows)
            .map(|i| stats.iter().filter_map(|s| s.current.get(i)).sum())
            .collect();
        SippStat {
            rows: stats.iter().map(|s| s.rows).max().unwrap_or(0),
            outgoing: stats.iter().map(|s| s.outgoing).sum(),
            incoming: stats.iter().map(|s| s.incoming).sum(),
            successful: stats.iter().map(|s| s.successful).sum(),
            failed: stats.iter().map(|s| s.failed).sum(),
            retransmissions: stats.iter().map(|s| s.retransmissions).sum(),
            peak_current: current.iter().copied().max().unwrap_or(0),
            current,
        }
    }
}

/// Parses a SIPp `-trace_stat` CSV (`;`-separated, header row first).
pub fn parse_sipp_stat(text: &str) -> Option<SippStat> {
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let header: Vec<&str> = lines.next()?.split(';').collect();
    let col = |name: &str| header.iter().position(|h| h.trim() == name);
    let (out, inc, ok, failed, retrans, current) = (
        col("OutgoingCall(C)")?,
        col("IncomingCall(C)")?,
        col("SuccessfulCall(C)")?,
        col("FailedCall(C)")?,
        col("Retransmissions(C)")?,
        col("CurrentCall")?,
    );
    let mut stat = SippStat::default();
    for line in lines {
        let f: Vec<&str> = line.split(';').collect();
        let get = |i: usize| f.get(i).and_then(|v| v.trim().parse::<u64>().ok());
        let (Some(o), Some(i), Some(s), Some(x), Some(r), Some(c)) = (
            get(out),
            get(inc),
            get(ok),
            get(failed),
            get(retrans),
            get(current),
        ) else {
            continue;
        };
        stat.rows += 1;
        stat.outgoing = o;
        stat.incoming = i;
        stat.successful = s;
        stat.failed = x;
        stat.retransmissions = r;
        stat.peak_current = stat.peak_current.max(c);
        stat.current.push(c);
    }
    (stat.rows > 0).then_some(stat)
}

/// Response times (ms) of timer `rtd` from a SIPp `-trace_rtt` CSV
/// (`Date_ms;response_time_ms;rtd_no`), in file order.
pub fn parse_sipp_rtts(text: &str, rtd: u32) -> Vec<f64> {
    text.lines()
        .skip(1)
        .filter_map(|l| {
            let mut f = l.split(';');
            let _date = f.next()?;
            let v = f.next()?.trim().parse::<f64>().ok()?;
            let n = f.next()?.trim().parse::<u32>().ok()?;
            (n == rtd).then_some(v)
        })
        .collect()
}

/// The statistics SIPp wrote into `dir` for `scenario` (the scenario file's name without
/// `.xml`): its `-trace_stat` file `<scenario>_<pid>_.csv`.
pub fn read_sipp_stat(dir: &Path, scenario: &str) -> Option<SippStat> {
    sipp_files(dir, scenario, "_.csv")
        .iter()
        .find_map(|p| parse_sipp_stat(&std::fs::read_to_string(p).ok()?))
}

/// Response times (ms) of timer `rtd` that SIPp wrote into `dir` for `scenario`
/// (`<scenario>_<pid>_rtt.csv`), sorted.
pub fn read_sipp_rtts(dir: &Path, scenario: &str, rtd: u32) -> Vec<f64> {
    let mut out: Vec<f64> = sipp_files(dir, scenario, "_rtt.csv")
        .iter()
        .flat_map(|p| parse_sipp_rtts(&std::fs::read_to_string(p).unwrap_or_default(), rtd))
        .collect();
    out.sort_by(f64::total_cmp);
    out
}

/// What SIPp's `-trace_err` file (`<scenario>_<pid>_errors.log`) in `dir` says went wrong,
/// one line per kind of error with how often it happened, most frequent first.
pub fn read_sipp_errors(dir: &Path, scenario: &str) -> Vec<(String, usize)> {
    let text: String = sipp_files(dir, scenario, "_errors.log")
        .iter()
        .filter_map(|p| std::fs::read_to_string(p).ok())
        .collect();
    sipp_error_kinds(&text)
}

/// Groups the entries of a SIPp error log by kind. Each entry starts with a date, a time
/// and an epoch (`2026-11-24<TAB>04:47:56.270038<TAB>1795495676.270038: `); entries
/// are not always separated by a newline, and an unexpected message is printed whole after
/// its entry. A kind is the entry's first line with the Call-ID left out.
pub fn sipp_error_kinds(text: &str) -> Vec<(String, usize)> {
    let b = text.as_bytes();
    // Where each entry's timestamp starts: `dddd-dd-dd\t`.
    let is_start = |i: usize| {
        b.len() >= i + 11
            && b[i..i + 4].iter().all(u8::is_ascii_digit)
            && b[i + 4] == b'-'
            && b[i + 5..i + 7].iter().all(u8::is_ascii_digit)
            && b[i + 7] == b'-'
            && b[i + 8..i + 10].iter().all(u8::is_ascii_digit)
            && b[i + 10] == b'\t'
    };
    let starts: Vec<usize> = (0..b.len()).filter(|i| is_start(*i)).collect();
    let mut kinds: std::collections::BTreeMap<String, usize> = Default::default();
    for (k, &at) in starts.iter().enumerate() {
        let entry = &text[at..starts.get(k + 1).copied().unwrap_or(text.len())];
        let Some((_, msg)) = entry.split_once(": ") else {
            continue;
        };
        let first = msg.lines().next().unwrap_or("").trim();
        *kinds.entry(without_call_id(first)).or_default() += 1;
    }
    let mut out: Vec<(String, usize)> = kinds.into_iter().collect();
    out.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    out
}

/// `Call-Id: 1-28563@127.0.0.1, …`, `Call-Id '1-28563@127.0.0.1'` and `Dead call
/// 1-28563@127.0.0.1 (…` with the id left out, and the request-URI of a received request,
/// so that entries of one kind read the same.
fn without_call_id(line: &str) -> String {
    let mut out = line.to_string();
    for (open, close) in [
        ("Call-Id: ", ','),
        ("Call-Id '", '\''),
        ("Dead call ", ' '),
        ("received 'INVITE ", ' '),
        ("received 'BYE ", ' '),
        ("received 'ACK ", ' '),
    ] {
        if let Some(i) = out.find(open) {
            let from = i + open.len();
            if let Some(len) = out[from..].find(close) {
                out.replace_range(from..from + len, "…");
            }
        }
    }
    out
}

fn sipp_files(dir: &Path, scenario: &str, suffix: &str) -> Vec<std::path::PathBuf> {
    let prefix = format!("{scenario}_");
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            let Some(rest) = name.strip_prefix(&prefix) else {
                continue;
            };
            // `<pid>` then the suffix: `_rtt.csv` must not pass for `_.csv`.
            if rest
                .strip_suffix(suffix)
                .is_some_and(|pid| !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()))
            {
                out.push(e.path());
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sipp_error_entries_are_grouped_by_kind_without_their_call_id() {
        // As SIPp writes them: a header, entries not always ended by a newline, and an
        // unexpected message printed whole after its entry.
        let log = "The following events occurred:\n\
            2026-11-24\t04:47:56.270038\t1795495676.270038: Call-Id: 1-28563@127.0.0.1, receive timeout on message UAC:1 without label to jump to (ontimeout attribute): aborting call\
            2026-11-24\t04:47:56.370033\t1795495676.370033: Call-Id: 2-28563@127.0.0.1, receive timeout on message UAC:1 without label to jump to (ontimeout attribute): aborting call\n\
            2026-11-24\t04:47:57.000001\t1795495677.000001: Aborting call on unexpected message for Call-Id '3-28563@127.0.0.1': while expecting 'ACK' (index 3), received 'BYE sip:a@127.0.0.1 SIP/2.0\n\
            Via: SIP/2.0/UDP 127.0.0.1:5060\n\
            '\n\
            2026-11-24\t04:47:58.000001\t1795495678.000001: Dead call 0483f1@127.0.0.1 (aborted at index 3), received 'INVITE sip:+15550002004@127.0.0.1:48013 SIP/2.0\n\
            2026-11-24\t04:47:58.100001\t1795495678.100001: Dead call 466150@127.0.0.1 (aborted at index 3), received 'INVITE sip:+15550002006@127.0.0.1:48013 SIP/2.0\n";
        let kinds = sipp_error_kinds(log);
        assert_eq!(
            kinds,
            vec![
                (
                    "Call-Id: …, receive timeout on message UAC:1 without label to jump to (ontimeout attribute): aborting call".to_string(),
                    2
                ),
                (
                    "Dead call … (aborted at index 3), received 'INVITE … SIP/2.0".to_string(),
                    2
                ),
                (
                    "Aborting call on unexpected message for Call-Id '…': while expecting 'ACK' (index 3), received 'BYE … SIP/2.0".to_string(),
                    1
                ),
            ]
        );
        assert!(sipp_error_kinds("The following events occurred:\n").is_empty());
    }

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
    fn setup_percentiles_under_sipp_s_clock_step_say_so() {
        // SIPp's 4 ms tick: most calls 0, a few one step.
        let mut v = vec![0.0; 95];
        v.extend([4.0; 5]);
        assert_eq!(fmt_setup(&v, 50.0), "<4");
        assert_eq!(fmt_setup(&v, 99.0), "4.00");
        assert_eq!(fmt_setup(&[0.0, 0.0], 99.0), "<1 step");
        assert_eq!(fmt_setup(&[0.0, 0.25, 0.5], 50.0), "0.25");
        assert_eq!(fmt_setup(&[0.0, 0.0, 0.25], 50.0), "<0.25");
        assert_eq!(fmt_setup(&[1.234, 250.0], 99.0), "250");
        assert_eq!(fmt_setup(&[], 50.0), "–");
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
    #[test]
    fn proc_stat_reads_state_cpu_and_rss() {
        let line = "4242 (sipp (x)) Z 1 2 3 4 5 6 7 8 9 10 120 30 0 0 20 0 9 0 100 123456 250 0";
        let s = parse_proc_stat(line).unwrap();
        assert_eq!(
            s,
            ProcStat {
                state: 'Z',
                cpu_ticks: 150,
                rss_kib: 1000
            }
        );
        assert_eq!(parse_proc_stat("garbage"), None);
    }

    #[test]
    fn sipp_stat_takes_the_last_row_and_the_peak_of_current_calls() {
        let text = "StartTime;CurrentCall;IncomingCall(C);OutgoingCall(C);SuccessfulCall(C);FailedCall(C);Retransmissions(C);\n\
                    t0;0;0;0;0;0;0;\n\
                    t1;40;0;50;10;0;2;\n\
                    t2;0;0;100;97;3;5;\n";
        let s = parse_sipp_stat(text).unwrap();
        assert_eq!(
            s,
            SippStat {
                rows: 3,
                outgoing: 100,
                incoming: 0,
                successful: 97,
                failed: 3,
                retransmissions: 5,
                peak_current: 40,
                current: vec![0, 40, 0],
            }
        );
        assert_eq!(parse_sipp_stat("StartTime;CurrentCall\n"), None);
    }

    #[test]
    fn side_by_side_sipps_add_up_and_peak_together() {
        let a = SippStat {
            rows: 3,
            outgoing: 100,
            successful: 99,
            failed: 1,
            retransmissions: 2,
            peak_current: 40,
            current: vec![10, 40, 0],
            ..SippStat::default()
        };
        let b = SippStat {
            rows: 4,
            outgoing: 100,
            successful: 100,
            peak_current: 35,
            current: vec![35, 30, 5, 1],
            ..SippStat::default()
        };
        let c = SippStat::combine(&[a, b]);
        assert_eq!((c.outgoing, c.successful, c.failed), (200, 199, 1));
        assert_eq!(c.retransmissions, 2);
        // Row by row: 45, 70, 5, 1; the separate peaks would add up to 75.
        assert_eq!(c.peak_current, 70);
        assert_eq!(c.current, vec![45, 70, 5, 1]);
        assert_eq!(SippStat::combine(&[]), SippStat::default());
    }

    #[test]
    fn sipp_rtts_filter_by_timer() {
        let text = "Date_ms;response_time_ms;rtd_no\n52.001;3;1\n53.5;7;2\n60;1;1\n";
        assert_eq!(parse_sipp_rtts(text, 1), vec![3.0, 1.0]);
        assert_eq!(parse_sipp_rtts(text, 2), vec![7.0]);
    }

    #[test]
    fn sipp_files_are_told_apart_by_suffix() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("uac_77_.csv"),
            "CurrentCall;IncomingCall(C);OutgoingCall(C);SuccessfulCall(C);FailedCall(C);Retransmissions(C)\n1;0;4;4;0;0\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("uac_77_rtt.csv"),
            "Date_ms;response_time_ms;rtd_no\n1;5;1\n2;2;1\n",
        )
        .unwrap();
        assert_eq!(read_sipp_stat(dir.path(), "uac").unwrap().outgoing, 4);
        assert_eq!(read_sipp_rtts(dir.path(), "uac", 1), vec![2.0, 5.0]);
        assert!(read_sipp_stat(dir.path(), "uas").is_none());
    }
}
