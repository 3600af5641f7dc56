//! `dptrain plot`: the curves of several runs overlaid (test accuracy and training loss against
//! steps and against the epsilon spent), for a privacy/utility picture across epsilons.

use anyhow::Result;
use clap::Args;
use dp_run::curves::{Curve, check_some, draw};
use std::path::PathBuf;

/// Overlays the curves of run folders into one SVG and a PNG beside it (each run folder also
/// keeps its own curves.svg and curves.png, redrawn at every evaluation).
///
/// Example: dptrain plot runs/eps1 runs/eps2 runs/eps3 --out eps.svg
#[derive(Args, Debug)]
pub struct PlotArgs {
    /// Run folders (each named in the legend by its folder name).
    #[arg(required = true)]
    runs: Vec<PathBuf>,

    /// The SVG file to write, ending in .svg (the PNG goes beside it, with the extension .png);
    /// only a regular file or nothing is replaced.
    #[arg(long, default_value = "curves.svg")]
    out: PathBuf,

    /// The plot's title.
    #[arg(long, default_value = "dptrain runs")]
    title: String,
}

/// Runs `dptrain plot`.
pub fn run(args: PlotArgs) -> Result<()> {
    if args.out.extension().is_none_or(|e| e != "svg") {
        anyhow::bail!(
            "--out {}: give the SVG's name, ending in .svg (the PNG is written beside it with .png)",
            args.out.display()
        );
    }
    let curves = args
        .runs
        .iter()
        .map(|run| {
            let name = run.file_name().map_or_else(|| run.display().to_string(), |n| n.to_string_lossy().into_owned());
            Curve::read(run, &name)
        })
        .collect::<dp_engine::error::Result<Vec<_>>>()?;
    check_some(&curves)?;
    draw(&curves, &args.title, &args.out)?;
    say!("{} and {}", args.out.display(), args.out.with_extension("png").display())?;
    Ok(())
}
