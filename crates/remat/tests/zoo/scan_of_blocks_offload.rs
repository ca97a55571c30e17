//! `scan_of_blocks_offload`: `lax.scan` over two stacked transformer blocks, the body
//! under `jax.checkpoint` with JAX's function-valued policy
//! `save_and_offload_only_these_names(saved=['attn'], offloaded=['mlp_hidden'])`. The
//! Python original (`gen_zoo.py`):
//!
//! ```python
//! def scan_blocks_offload(stacked, x, n_heads=2):
//!     def block(x, p):
//!         (g1, b1), wqkv, wo, (g2, b2), w1, w2 = p
//!         a = checkpoint_name(causal_attention(layernorm(x, g1, b1), wqkv, wo, n_heads), 'attn')
//!         x = x + a
//!         u = checkpoint_name(jax.nn.gelu(layernorm(x, g2, b2) @ w1), 'mlp_hidden')
//!         return x + u @ w2, None
//!     policy = jax.checkpoint_policies.save_and_offload_only_these_names(
//!         names_which_can_be_saved=['attn'], names_which_can_be_offloaded=['mlp_hidden'],
//!         offload_src='device', offload_dst='pinned_host')
//!     x, _ = lax.scan(jax.checkpoint(block, policy=policy), x, stacked)
//!     return jnp.sum(x ** 2) / x.size
//! ```
//!
//! JAX prints that policy as the closure it is
//! (`<function save_and_offload_only_these_names.<locals>.policy at 0x...>`), not as its
//! arguments. To print the same text, the Rust model uses the same opaque policy and gives
//! it its meaning inside the policy value (`Policy::Opaque`'s `meaning`); a Rust program that does not need JAX's exact
//! text would write `Policy::SaveAndOffloadOnlyTheseNames { .. }` (same residuals,
//! printed `SaveAndOffloadOnlyTheseNames(...)`).

use remat::{checkpoint, checkpoint_name, named, nn, scan, Policy, PolicyNames, Tensor};

use super::common::Case;
use super::gpt_block::{causal_attention, layernorm};

/// One block's parameters: `(g1, b1), wqkv, wo, (g2, b2), w1, w2` (stacked over blocks
/// along a new axis 0 when given to [`scan_blocks_offload`]).
pub type Block = ((Tensor, Tensor), Tensor, Tensor, (Tensor, Tensor), Tensor, Tensor);

/// One transformer block: attention (named `attn`) and an MLP (hidden layer named
/// `mlp_hidden`), each with a residual connection.
pub fn block(x: Tensor, p: Block) -> (Tensor, ()) {
    let ((g1, b1), wqkv, wo, (g2, b2), w1, w2) = p;
    let a = checkpoint_name(&causal_attention(&layernorm(&x, &g1, &b1), &wqkv, &wo, 2), "attn");
    let x = x + a;
    let u = checkpoint_name(&nn::gelu(&layernorm(&x, &g2, &b2).matmul(&w1)), "mlp_hidden");
    (&x + u.matmul(&w2), ())
}

/// The `save_and_offload_only_these_names(saved=['attn'], offloaded=['mlp_hidden'])`
/// policy, as JAX prints it.
pub fn offload_policy() -> Policy {
    let names = PolicyNames { saved: vec!["attn".into()], offloaded: vec!["mlp_hidden".into()] };
    Policy::Opaque {
        repr: "<function save_and_offload_only_these_names.<locals>.policy at 0xXXXXXXXXXXXX>".into(),
        meaning: Some(Box::new(names.policy())),
    }
}

/// The loss: the blocks applied in turn by a `scan`, each rematerialized by the policy.
pub fn scan_blocks_offload(stacked: Block, x: Tensor) -> Tensor {
    let body = checkpoint(|(x, p): (Tensor, Block)| block(x, p)).policy(offload_policy());
    let (x, ()) = scan(|x, p| body.call((x, p)), x, stacked);
    let size = x.size() as f64;
    x.powi(2).sum() / size
}

#[test]
fn scan_of_blocks_offload_matches_jax() {
    let case = Case::load("scan_of_blocks_offload");
    let a = case.args();
    let stacked = (
        (a[0].clone(), a[1].clone()),
        a[2].clone(),
        a[3].clone(),
        (a[4].clone(), a[5].clone()),
        a[6].clone(),
        a[7].clone(),
    );
    let args = (named("stacked", stacked), named("x", a[8].clone()));
    case.assert_matches(|(stacked, x)| scan_blocks_offload(stacked, x), &args);
}
