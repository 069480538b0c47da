//! Plots of a report: accuracy against mean tokens spent, one line per strategy (a point per
//! budget, with its 95% CI as an error bar), written as SVG and PNG with plotters. The accuracy
//! axis ends just above the highest CI, so a small model's 0.1–0.3 is not squeezed into the
//! bottom of a 0–1 axis, and the legend sits beside the chart, never over its points. Text uses
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

/// Width of the whole image, in pixels.
const WIDTH: u32 = 1340;
/// Width of the legend column to the right of the chart, in pixels.
const LEGEND_WIDTH: u32 = 440;
/// Height of one legend row, in pixels.
const LEGEND_ROW: i32 = 20;

/// The top of the accuracy axis: the first tenth at least 0.01 above the highest of the CIs'
/// upper ends, so no error bar ends on the frame (at least 0.1, at most 1).
fn accuracy_axis_top(ci_highs: impl IntoIterator<Item = f64>) -> f64 {
    let highest = ci_highs.into_iter().fold(0.0, f64::max);
    (((highest + 0.01) * 10.0 - 1e-9).ceil() / 10.0).clamp(0.1, 1.0)
}

/// The line a cell belongs to, one per (configuration, verifier): `weighted_best_of_n`,
/// `self_consistency {"n":2}` or `weighted_best_of_n + calc`.
fn series_label(c: &CellReport) -> String {
    if c.verifier == "none" {
        c.configuration()
    } else {
        format!("{} + {}", c.configuration(), c.verifier)
    }
}

/// The lines of a plot, in the cells' order.
fn series(cells: &[CellReport]) -> Vec<String> {
    let mut labels: Vec<String> = cells.iter().map(series_label).collect();
    labels.dedup();
    labels
}

fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    cells: &[CellReport],
    title: &str,
) -> std::result::Result<(), String> {
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let root = root
        .margin(8, 0, 0, 0)
        .titled(title, ("sans-serif", 22))
        .map_err(|e| e.to_string())?;
    let (width, _) = root.dim_in_pixel();
    let (plot_area, legend_area) = root.split_horizontally(width.saturating_sub(LEGEND_WIDTH));
    let max_x = cells.iter().map(|c| c.mean_spent).fold(1.0, f64::max) * 1.1;
    let mut chart = ChartBuilder::on(&plot_area)
        .margin(16)
        .x_label_area_size(48)
        .y_label_area_size(56)
        .build_cartesian_2d(
            0.0..max_x,
            0.0..accuracy_axis_top(cells.iter().map(|c| c.ci95.1)),
        )
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .x_desc("mean tokens spent per problem")
        .y_desc("accuracy")
        .label_style(("sans-serif", 14))
        .draw()
        .map_err(|e| e.to_string())?;
    for (i, s) in series(cells).iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        let mut pts: Vec<&CellReport> = cells.iter().filter(|c| series_label(c) == *s).collect();
        pts.sort_by(|a, b| a.mean_spent.total_cmp(&b.mean_spent));
        chart
            .draw_series(LineSeries::new(
                pts.iter().map(|c| (c.mean_spent, c.accuracy)),
                color.stroke_width(2),
            ))
            .map_err(|e| e.to_string())?;
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
        // The legend row: a stroke of the line's colour and its label.
        let y = 24 + LEGEND_ROW * i as i32;
        legend_area
            .draw(&PathElement::new(
                vec![(4, y), (26, y)],
                color.stroke_width(3),
            ))
            .map_err(|e| e.to_string())?;
        legend_area
            .draw(&Text::new(
                s.to_string(),
                (34, y - 8),
                ("sans-serif", 14).into_font(),
            ))
            .map_err(|e| e.to_string())?;
    }
    root.present().map_err(|e| e.to_string())
}

/// Writes `stem.svg` and `stem.png` in `dir`.
pub fn accuracy_vs_spend(cells: &[CellReport], dir: &Path, stem: &str, title: &str) -> Result<()> {
    register_font()?;
    let fail = |path: &Path, reason: String| EvalError::Results {
        path: path.display().to_string(),
        reason,
    };
    // Tall enough for a legend row per line.
    let rows = u32::try_from(series(cells).len()).unwrap_or(u32::MAX);
    let size = (
        WIDTH,
        rows.saturating_mul(LEGEND_ROW as u32)
            .saturating_add(80)
            .max(600),
    );
    let svg = dir.join(format!("{stem}.svg"));
    draw(
        &SVGBackend::new(&svg, size).into_drawing_area(),
        cells,
        title,
    )
    .map_err(|e| fail(&svg, e))?;
    let png = dir.join(format!("{stem}.png"));
    draw(
        &BitMapBackend::new(&png, size).into_drawing_area(),
        cells,
        title,
    )
    .map_err(|e| fail(&png, e))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::accuracy_axis_top;

    #[test]
    fn the_accuracy_axis_ends_at_the_tenth_above_the_highest_ci() {
        assert_eq!(accuracy_axis_top([0.12, 0.285, 0.2]), 0.3);
        // An error bar never ends on the frame.
        assert_eq!(accuracy_axis_top([0.295]), 0.4);
        assert_eq!(accuracy_axis_top([0.3]), 0.4);
        // Never below a tenth (no results, or all wrong), never above 1.
        assert_eq!(accuracy_axis_top([]), 0.1);
        assert_eq!(accuracy_axis_top([0.0]), 0.1);
        assert_eq!(accuracy_axis_top([1.0]), 1.0);
    }
}
