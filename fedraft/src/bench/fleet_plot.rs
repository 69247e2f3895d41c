//! The picture of `fedraft bench fleet`: the convergence curve as an SVG, written by hand (the
//! repository has no plotting library).
//!
//! Must not: compute a figure of its own; it draws what the report holds.

use std::fmt::Write as _;

use super::fleet_report::Report;

/// The convergence curve: objects converged over seconds since the first write.
pub fn svg(r: &Report) -> String {
    let (w, h, m) = (640.0, 360.0, 50.0);
    let t_max = r.curve.last().map_or(1.0, |c| c.0).max(1.0);
    let n_max = (r.objects as f64).max(1.0);
    let x = |t: f64| m + (w - 2.0 * m) * t / t_max;
    let y = |n: f64| h - m - (h - 2.0 * m) * n / n_max;
    let points: Vec<String> = r
        .curve
        .iter()
        .map(|(t, n)| format!("{:.1},{:.1}", x(*t), y(*n as f64)))
        .collect();
    let mut o = String::new();
    let _ = writeln!(
        o,
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">"##
    );
    let _ = writeln!(o, r##"<rect width="100%" height="100%" fill="white"/>"##);
    let _ = writeln!(
        o,
        r##"<text x="{m}" y="20">fedraft bench fleet: {} clusters, {} objects converged in {:.0} s</text>"##,
        r.clusters, r.objects, r.converged_s
    );
    let _ = writeln!(
        o,
        r##"<line x1="{m}" y1="{}" x2="{}" y2="{}" stroke="black"/><line x1="{m}" y1="{m}" x2="{m}" y2="{}" stroke="black"/>"##,
        h - m,
        w - m,
        h - m,
        h - m
    );
    for i in 0..=4 {
        let f = f64::from(i) / 4.0;
        let _ = writeln!(
            o,
            r##"<text x="{:.1}" y="{}" text-anchor="middle">{:.0} s</text><text x="{}" y="{:.1}" text-anchor="end">{:.0}</text>"##,
            x(f * t_max),
            h - m + 16.0,
            f * t_max,
            m - 4.0,
            y(f * n_max) + 4.0,
            f * n_max
        );
    }
    let _ = writeln!(
        o,
        r##"<polyline fill="none" stroke="#1f77b4" stroke-width="2" points="{}"/>"##,
        points.join(" ")
    );
    let _ = writeln!(
        o,
        r##"<text x="{}" y="{}" text-anchor="middle">seconds since the first write (objects converged)</text></svg>"##,
        w / 2.0,
        h - 10.0
    );
    o
}
