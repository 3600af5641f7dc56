//! `dptrain export`: a completed run's model, as a weight file for another framework, with its
//! tensors renamed to the names a user's own PyTorch module has.

use anyhow::{Result, bail};
use clap::Args;
use dp_run::model_file::export;
use std::path::PathBuf;

/// Writes the model of a completed run (its model.safetensors: PyTorch's layouts, the run's
/// privacy report in the metadata, never its keys) to a new file, its tensor names changed by
/// --rename; load it in PyTorch with `model.load_state_dict(safetensors.torch.load_file(FILE))`.
///
/// Example: dptrain export runs/demo --out cnn.safetensors --rename '^convs\.(\d)\.=conv$1.'
#[derive(Args, Debug)]
pub struct ExportArgs {
    /// The run folder (a completed run).
    run: PathBuf,

    /// The file to write (it must not exist).
    #[arg(long)]
    out: PathBuf,

    /// The file format: safetensors (the only one: a pickle would run code when loaded).
    #[arg(long, default_value = "safetensors", value_parser = ["safetensors"])]
    format: String,

    /// PATTERN=REPLACEMENT: every tensor name matching the regular expression PATTERN has the
    /// match replaced (`$1` for a group); repeat to apply several in turn. The zoo's names are
    /// `convs.N.weight`, `convs.N.bias`, `dense.N.weight`, `dense.N.bias`.
    #[arg(long, value_name = "PATTERN=REPLACEMENT")]
    rename: Vec<String>,
}

/// Runs `dptrain export`.
pub fn run(args: ExportArgs) -> Result<()> {
    let renames = args
        .rename
        .iter()
        .map(|r| r.split_once('=').ok_or_else(|| anyhow::anyhow!("--rename {r}: give PATTERN=REPLACEMENT")))
        .collect::<Result<Vec<(&str, &str)>>>()?;
    if args.format != "safetensors" {
        bail!("--format {}: only safetensors is written", args.format);
    }
    let exported = export(&args.run, &args.out, &renames)?;
    if exported.key_present {
        eprintln!(
            "warning: {} still holds the run's key file: never publish it with the model (it is not in {})",
            args.run.display(),
            exported.path.display()
        );
    }
    say!(
        "{}: {} tensors ({}), {}",
        exported.path.display(),
        exported.tensors.len(),
        exported.tensors.join(", "),
        exported.privacy
    )?;
    Ok(())
}
