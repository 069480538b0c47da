//! Plots of a report: accuracy against mean tokens spent, one line per strategy (a point per
//! budget, with its 95% CI as an error bar), written as SVG and PNG with plotters. Text uses
//! the DejaVu Sans font shipped in `evals/assets/`, so plots render the same on any machine.

use std::path::Path;
use std::sync::OnceLock;

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::error::{EvalError, Result};
use crate::report::CellReport;

static FONT: &[u8] = include_bytes!("../assets/DejaVuSans.ttf");

fn register_font() -> Result<()> {
    static DONE: OnceLock<bool> = OnceLock::new();
    let ok = DONE.get_or_init(|| {
        plotters::style::register_font("sans-serif", FontStyle::Normal, FONT).is_ok()
    });
    if *ok {
        Ok(())
    } else {
        Err(EvalError::Results {
            path: "evals/assets/DejaVuSans.ttf".into(),
            reason: "the plot font cannot be loaded".into(),
        })
    }
}

fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    cells: &[CellReport],
    title: &str,
) -> std::result::Result<(), String> {
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let max_x = cells.iter().map(|c| c.mean_spent).fold(1.0, f64::max) * 1.1;
    let mut chart = ChartBuilder::on(root)
        .caption(title, ("sans-serif", 22))
        .margin(16)
        .x_label_area_size(48)
        .y_label_area_size(56)
        .build_cartesian_2d(0.0..max_x, 0.0..1.0)
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .x_desc("mean tokens spent per problem")
        .y_desc("accuracy")
        .label_style(("sans-serif", 14))
        .draw()
        .map_err(|e| e.to_string())?;
    // One line per (configuration, verifier): `weighted_best_of_n`, `self_consistency {"n":2}`
    // or `weighted_best_of_n + calc`.
    let label = |c: &CellReport| {
        if c.verifier == "none" {
            c.configuration()
        } else {
            format!("{} + {}", c.configuration(), c.verifier)
        }
    };
    let mut strategies: Vec<String> = cells.iter().map(label).collect();
    strategies.dedup();
    for (i, s) in strategies.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        let mut pts: Vec<&CellReport> = cells.iter().filter(|c| label(c) == *s).collect();
        pts.sort_by(|a, b| a.mean_spent.total_cmp(&b.mean_spent));
        chart
            .draw_series(LineSeries::new(
                pts.iter().map(|c| (c.mean_spent, c.accuracy)),
                color.stroke_width(2),
            ))
            .map_err(|e| e.to_string())?
            .label(s.to_string())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
            });
        chart
            .draw_series(
                pts.iter()
                    .map(|c| Circle::new((c.mean_spent, c.accuracy), 4, color.filled())),
            )
            .map_err(|e| e.to_string())?;
        chart
            .draw_series(pts.iter().map(|c| {
                ErrorBar::new_vertical(c.mean_spent, c.ci95.0, c.accuracy, c.ci95.1, color, 8)
            }))
            .map_err(|e| e.to_string())?;
    }
    // The legend goes where the points are not: above them when every CI ends below the
    // middle (small models' accuracies), else in the lower right.
    let highest = cells.iter().map(|c| c.ci95.1).fold(0.0, f64::max);
    let legend_at = if highest < 0.5 {
        SeriesLabelPosition::UpperRight
    } else {
        SeriesLabelPosition::LowerRight
    };
    chart
        .configure_series_labels()
        .position(legend_at)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 14))
        .draw()
        .map_err(|e| e.to_string())?;
    root.present().map_err(|e| e.to_string())
}

/// Writes `stem.svg` and `stem.png` in `dir`.
pub fn accuracy_vs_spend(cells: &[CellReport], dir: &Path, stem: &str, title: &str) -> Result<()> {
    register_font()?;
    let fail = |path: &Path, reason: String| EvalError::Results {
        path: path.display().to_string(),
        reason,
    };
    let svg = dir.join(format!("{stem}.svg"));
    draw(
        &SVGBackend::new(&svg, (900, 600)).into_drawing_area(),
        cells,
        title,
    )
    .map_err(|e| fail(&svg, e))?;
    let png = dir.join(format!("{stem}.png"));
    draw(
        &BitMapBackend::new(&png, (900, 600)).into_drawing_area(),
        cells,
        title,
    )
    .map_err(|e| fail(&png, e))?;
    Ok(())
}
