#!/bin/sh
# Writes the report figures shown in README.md and docs/report.md: the vjp of
# tanh_mlp.jaxpr (three tanh layers over a batch of 512), as `remat report` draws it, and
# the zoo's GPT block compared under three policies and a planner's plan, as SVG
# (crates/remat/examples/render_figures/); crates/remat/tests/report.rs fails until the
# committed files are what this writes. The training loss curve (train_loss.svg) is the
# train example's: see README.md.
set -e
cd "$(dirname "$0")/../.."
cargo run -q -p remat --example render_figures -- docs/images/tanh_mlp.jaxpr tests/data/zoo/gpt_block.json docs/images
