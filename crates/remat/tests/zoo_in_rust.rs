//! The public zoo models (`tests/data/zoo`, recorded from JAX 0.10.2) written in Rust
//! against `remat`, one file per model under `tests/zoo/`: each is a starting point a user
//! can copy. Every model's test checks that its trace prints exactly as JAX's `jaxpr`,
//! saves JAX's residuals, and gives JAX's outputs and gradients with the interpreter and
//! the JIT (`zoo/common.rs`).
//!
//! (`tests/zoo.rs`, the test target named `zoo`, checks the recorded texts themselves.)

#[path = "zoo/adam_step.rs"]
mod adam_step;
#[path = "zoo/adamw_weight_decay.rs"]
mod adamw_weight_decay;
#[path = "zoo/batchnorm_resnet_block.rs"]
mod batchnorm_resnet_block;
#[path = "zoo/bf16_mixed_precision.rs"]
mod bf16_mixed_precision;
#[path = "zoo/causal_conv1d.rs"]
mod causal_conv1d;
#[path = "zoo/cnn.rs"]
mod cnn;
#[path = "zoo/cnn_dots_saveable.rs"]
mod cnn_dots_saveable;
#[path = "zoo/common.rs"]
mod common;
#[path = "zoo/control_flow.rs"]
mod control_flow;
#[path = "zoo/control_flow_while.rs"]
mod control_flow_while;
#[path = "zoo/custom_jvp.rs"]
mod custom_jvp;
#[path = "zoo/custom_vjp.rs"]
mod custom_vjp;
#[path = "zoo/depthwise_and_transpose_conv.rs"]
mod depthwise_and_transpose_conv;
#[path = "zoo/dropout_mlp.rs"]
mod dropout_mlp;
#[path = "zoo/einsum_zoo.rs"]
mod einsum_zoo;
#[path = "zoo/embedding_grad.rs"]
mod embedding_grad;
#[path = "zoo/gnn_segment_sum.rs"]
mod gnn_segment_sum;
#[path = "zoo/gpt_block.rs"]
mod gpt_block;
#[path = "zoo/grad_clip_global_norm.rs"]
mod grad_clip_global_norm;
#[path = "zoo/label_smoothing.rs"]
mod label_smoothing;
#[path = "zoo/lax_map.rs"]
mod lax_map;
#[path = "zoo/lstm.rs"]
mod lstm;
#[path = "zoo/moe_top_k.rs"]
mod moe_top_k;
#[path = "zoo/per_example_grads.rs"]
mod per_example_grads;
#[path = "zoo/scan_of_blocks_offload.rs"]
mod scan_of_blocks_offload;
#[path = "zoo/scans_and_sorts.rs"]
mod scans_and_sorts;
#[path = "zoo/special_functions.rs"]
mod special_functions;
#[path = "zoo/unet_down_up.rs"]
mod unet_down_up;
#[path = "zoo/vae_reparam.rs"]
mod vae_reparam;
#[path = "zoo/vit_patch_embed.rs"]
mod vit_patch_embed;
