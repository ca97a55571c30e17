//! `cargo run --release --example train`: trains a small CNN on the 8x8 digits shipped in
//! `data/`, written in Rust with remat, and shows what each `jax.checkpoint` policy costs.
//!
//! 1. The data: 1,797 images, split by a `jax.random` permutation into 1,437 for training
//!    and 360 held out.
//! 2. The table: for each policy (`nothing`, `dots`, `names`, `everything`) and for the
//!    memory planner's choice (`planner`: `remat::plan` at `--budget` bytes), the bytes the
//!    loss's forward pass saves for its backward pass (`remat::saved_residuals`, or the
//!    plan's list), the peak of the compiled train step's arena
//!    (`Compiled::plan().peak_bytes`), and its time.
//! 3. Training with `--policy` (one of the above): one `remat::jit`ted step (value and gradient, clipping,
//!    warmup + cosine learning rate, AdamW), batches shuffled per epoch by a `jax.random`
//!    permutation, a progress bar with the loss and steps per second, the loss curve as an
//!    SVG, and the held-out loss and accuracy at the end.
//!
//! `--residuals` also prints each policy's residuals in JAX's words (as
//! `train_jax.py` prints JAX's, for `docs/training.md`). `--no-times` leaves the times out
//! (the table's step time, the run's seconds), so that the output is the same on every run:
//! README.md shows it, and `crates/remat/tests/train.rs` runs `run.rs` with the README's
//! arguments and compares.

mod data;
mod model;
mod run;
mod state;

use clap::Parser;

fn main() {
    let args = run::Args::parse();
    if let Err(e) = run::run(&args, &mut std::io::stdout()) {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}
