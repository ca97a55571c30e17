#!/bin/sh
# Renders the report figures shown in README.md and docs/report.md: the vjp of
# tanh_mlp.jaxpr (three tanh layers over a batch of 512), as `remat report` draws it, and
# the zoo's GPT block compared under three policies and a planner's plan, rendered to PNG
# by resvg (crates/remat/examples/render_figures.rs).
set -e
cd "$(dirname "$0")/../.."
cargo run -q -p remat --example render_figures -- docs/images/tanh_mlp.jaxpr tests/data/zoo/gpt_block.json docs/images
