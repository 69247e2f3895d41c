//! The latency-over-time plot of a run (SVG): one point per operation at its invocation time, its latency on
//! a log scale, coloured by outcome (ok, fail, indeterminate: plotted at the time the client gave up), with
//! the fault windows shaded and labelled. It draws; it judges nothing.

use std::path::Path;

use plotters::prelude::*;

use crate::history::{Op, Outcome};
use crate::Error;

/// A shaded period of the plot.
#[derive(Debug, Clone)]
pub struct Shade {
    pub start_s: f64,
    pub end_s: f64,
    /// Fault family, which picks the colour (`kill`, `pause`, `partition`, `member-dark`, `clock`).
    pub kind: String,
}

fn shade_colour(kind: &str) -> RGBColor {
    match kind {
        "kill" => RGBColor(230, 80, 80),
        "pause" => RGBColor(240, 170, 60),
        "partition" => RGBColor(90, 120, 230),
        "member-dark" => RGBColor(120, 120, 120),
        _ => RGBColor(170, 90, 200),
    }
}

/// A point series: its legend, colour and which outcomes it shows.
type Group = (&'static str, RGBColor, fn(&Outcome) -> bool);

fn plot_err<E: std::fmt::Debug>(e: E) -> Error {
    Error::Plot(format!("{e:?}"))
}

/// Writes the plot to `path`.
pub fn latency_svg(path: &Path, ops: &[Op], shades: &[Shade], title: &str) -> Result<(), Error> {
    let to_s = |ns: u64| ns as f64 / 1e9;
    let points: Vec<(f64, f64, &Outcome)> = ops
        .iter()
        .map(|o| {
            let ms = (o.complete_ns.saturating_sub(o.invoke_ns)) as f64 / 1e6;
            (to_s(o.invoke_ns), ms.max(0.1), &o.outcome)
        })
        .collect();
    let x_max = points
        .iter()
        .map(|p| p.0)
        .chain(shades.iter().map(|s| s.end_s))
        .fold(1.0f64, f64::max)
        * 1.02;
    let y_max = points.iter().map(|p| p.1).fold(10.0f64, f64::max) * 1.5;
    let y_min = 0.1f64;

    let root = SVGBackend::new(path, (1400, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(plot_err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..x_max, (y_min..y_max).log_scale())
        .map_err(plot_err)?;
    chart
        .configure_mesh()
        .x_desc("time since start of the run (s)")
        .y_desc("latency (ms, log)")
        .draw()
        .map_err(plot_err)?;

    let mut kinds_seen = Vec::new();
    for s in shades {
        let colour = shade_colour(&s.kind);
        let series = chart
            .draw_series(std::iter::once(Rectangle::new(
                [(s.start_s, y_min), (s.end_s, y_max)],
                colour.mix(0.18).filled(),
            )))
            .map_err(plot_err)?;
        if !kinds_seen.contains(&s.kind) {
            kinds_seen.push(s.kind.clone());
            series.label(s.kind.clone()).legend(move |(x, y)| {
                Rectangle::new([(x, y - 5), (x + 14, y + 5)], colour.mix(0.4).filled())
            });
        }
    }
    let groups: [Group; 3] = [
        ("ok", RGBColor(40, 150, 60), |o| {
            matches!(o, Outcome::Ok { .. })
        }),
        ("fail", RGBColor(230, 140, 0), |o| {
            matches!(o, Outcome::Fail { .. })
        }),
        ("info (indeterminate)", RGBColor(200, 0, 0), |o| {
            matches!(o, Outcome::Info { .. })
        }),
    ];
    for (label, colour, pick) in groups {
        chart
            .draw_series(
                points
                    .iter()
                    .filter(|p| pick(p.2))
                    .map(|p| Circle::new((p.0, p.1), 2, colour.filled())),
            )
            .map_err(plot_err)?
            .label(label)
            .legend(move |(x, y)| Circle::new((x + 7, y), 3, colour.filled()));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(plot_err)?;
    root.present().map_err(plot_err)?;
    Ok(())
}
