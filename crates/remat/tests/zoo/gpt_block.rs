//! `gpt_block`: a GPT block: embedding gather, positional embedding, two-head causal
//! attention (`tril` mask, `where`, softmax), layer norm, gelu (tanh and erf), a
//! weight-tied head and an integer-label cross-entropy, under
//! `jax.checkpoint(policy=save_only_these_names('attn_out'))`. The Python original
//! (`gen_zoo.py`):
//!
//! ```python
//! def layernorm(x, g, b, eps=1e-5):
//!     mu = jnp.mean(x, axis=-1, keepdims=True)
//!     var = jnp.mean((x - mu) ** 2, axis=-1, keepdims=True)
//!     return (x - mu) * lax.rsqrt(var + eps) * g + b
//! def causal_attention(x, wqkv, wo, n_heads):
//!     B, T, D = x.shape
//!     hd = D // n_heads
//!     q, k, v = jnp.split(x @ wqkv, 3, axis=-1)
//!     heads = lambda t: t.reshape(B, T, n_heads, hd).transpose(0, 2, 1, 3)
//!     q, k, v = heads(q), heads(k), heads(v)
//!     s = jnp.einsum('bhqd,bhkd->bhqk', q, k) / np.sqrt(hd).astype(np.float32)
//!     mask = jnp.tril(jnp.ones((T, T), bool))
//!     s = jnp.where(mask, s, -1e9)
//!     p = jax.nn.softmax(s, axis=-1)
//!     o = jnp.einsum('bhqk,bhkd->bhqd', p, v).transpose(0, 2, 1, 3).reshape(B, T, D)
//!     return o @ wo
//! def gpt_block_loss(params, tokens, labels):
//!     emb, pos, (g1, b1), wqkv, wo, (g2, b2), w1, w2, (gf, bf) = params
//!     T = tokens.shape[1]
//!     x = emb[tokens] + pos[:T]
//!     a = causal_attention(layernorm(x, g1, b1), wqkv, wo, n_heads=2)
//!     a = checkpoint_name(a, 'attn_out')
//!     x = x + a
//!     u = layernorm(x, g2, b2) @ w1
//!     h = 0.5 * (jax.nn.gelu(u, approximate=True) + jax.nn.gelu(u, approximate=False))
//!     x = x + h @ w2
//!     logits = layernorm(x, gf, bf) @ emb.T          # weight-tied output
//!     return xent_int(logits, labels)
//! jax.checkpoint(gpt_block_loss, policy=P.save_only_these_names('attn_out'))
//! ```

use remat::numpy::{self, einsum, Sections};
use remat::trace::idx;
use remat::{checkpoint, checkpoint_name, named, nn, DType, Policy, Tensor};

use super::cnn::xent_int;
use super::common::Case;

/// Layer norm over the last axis, as the model writes it.
pub fn layernorm(x: &Tensor, g: &Tensor, b: &Tensor) -> Tensor {
    let mu = x.mean_axes(&[-1], true);
    let var = (x - &mu).powi(2).mean_axes(&[-1], true);
    (x - &mu) * numpy::rsqrt(var + 1e-5) * g + b
}

/// Causal self-attention with `n_heads` heads over `x: [B, T, D]`.
pub fn causal_attention(x: &Tensor, wqkv: &Tensor, wo: &Tensor, n_heads: usize) -> Tensor {
    let [b, t, d] = [x.shape()[0], x.shape()[1], x.shape()[2]];
    let hd = d / n_heads;
    let heads =
        |t_: &Tensor| t_.reshape(&[b as isize, t as isize, n_heads as isize, hd as isize]).transpose(&[0, 2, 1, 3]);
    let qkv = x.matmul(wqkv).split(Sections::Count(3), -1);
    let (q, k, v) = (heads(&qkv[0]), heads(&qkv[1]), heads(&qkv[2]));
    let s = einsum("bhqd,bhkd->bhqk", &[&q, &k]) / (hd as f32).sqrt() as f64;
    let mask = numpy::ones(&[t, t], DType::Bool).tril(0);
    let s = numpy::where_(&mask, &s, -1e9);
    let p = nn::softmax(&s, -1);
    let o =
        einsum("bhqk,bhkd->bhqd", &[&p, &v]).transpose(&[0, 2, 1, 3]).reshape(&[b as isize, t as isize, d as isize]);
    o.matmul(wo)
}

/// `emb, pos, (g1, b1), wqkv, wo, (g2, b2), w1, w2, (gf, bf)`.
pub type Params =
    (Tensor, Tensor, (Tensor, Tensor), Tensor, Tensor, (Tensor, Tensor), Tensor, Tensor, (Tensor, Tensor));

/// The loss of next-token prediction over `tokens` against `labels` (`i32[B, T]`).
pub fn gpt_block_loss(params: Params, tokens: Tensor, labels: Tensor) -> Tensor {
    let (emb, pos, (g1, b1), wqkv, wo, (g2, b2), w1, w2, (gf, bf)) = params;
    let t = tokens.shape()[1];
    let x = emb.index_array(&tokens) + pos.index(idx![..t]);
    let a = causal_attention(&layernorm(&x, &g1, &b1), &wqkv, &wo, 2);
    let a = checkpoint_name(&a, "attn_out");
    let x = x + a;
    let u = layernorm(&x, &g2, &b2).matmul(&w1);
    let h: Tensor = 0.5 * (nn::gelu(&u) + nn::gelu_erf(&u));
    let x = &x + h.matmul(&w2);
    let logits = layernorm(&x, &gf, &bf).matmul(&emb.t());
    xent_int(&logits, &labels)
}

#[test]
fn gpt_block_matches_jax() {
    let case = Case::load("gpt_block");
    let a = case.args();
    let pair = |i: usize| (a[i].clone(), a[i + 1].clone());
    let params = (
        a[0].clone(),
        a[1].clone(),
        pair(2),
        a[4].clone(),
        a[5].clone(),
        pair(6),
        a[8].clone(),
        a[9].clone(),
        pair(10),
    );
    let args = (named("params", params), named("tokens", a[12].clone()), named("labels", a[13].clone()));
    let loss = checkpoint(|(params, tokens, labels): (Params, Tensor, Tensor)| gpt_block_loss(params, tokens, labels))
        .policy(Policy::SaveOnlyTheseNames { names: vec!["attn_out".into()] });
    case.assert_matches(|args| loss.call(args), &args);
}
