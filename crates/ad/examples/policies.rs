//! A remat policy changes what the forward pass saves: the seed program
//! `sin(W3 @ sin(W2 @ sin(W1 @ x)))`, traced from Rust, differentiated without a
//! checkpoint and under three policies (and a user-written one), with the saved residuals
//! printed as `jax.ad_checkpoint.print_saved_residuals` prints them, then the forward and
//! backward halves of one of them (`remat::print_fwd_bwd` lays them side by side).
//!
//! Run with `cargo run -p remat-ad --example policies`.

use remat_ad::{fwd_bwd_strings, print_saved_residuals, register_policy, Saveability};
use remat_ir::{Aval, DType, Policy, Primitive, UnaryOp};
use remat_trace::{checkpoint, checkpoint_name, function_scope, make_jaxpr, named, Tensor};

fn g(w: &Tensor, x: &Tensor) -> Tensor {
    let _scope = function_scope!();
    w.dot(x).sin()
}

fn f_named((w1, w2, w3, x): (Tensor, Tensor, Tensor, Tensor)) -> Tensor {
    let _scope = function_scope!();
    let x = checkpoint_name(&g(&w1, &x), "a");
    let x = checkpoint_name(&g(&w2, &x), "b");
    checkpoint_name(&g(&w3, &x), "c")
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let f32s = |shape: &[usize]| Aval::new(DType::F32, shape.to_vec());
    let args =
        (named("W1", f32s(&[5, 4])), named("W2", f32s(&[6, 5])), named("W3", f32s(&[7, 6])), named("x", f32s(&[4])));
    // A user policy: save sines of at least 6 elements, recompute everything else.
    let big_sines = register_policy("big_sines_only", |prim: &Primitive, avals: &[Aval]| {
        Saveability::from_bool(matches!(prim, Primitive::Unary(UnaryOp::Sin)) && avals[0].size() >= 6)
    });
    let policies = [
        ("no checkpoint", None),
        ("checkpoint (default policy: nothing saveable)", Some(None)),
        ("dots_with_no_batch_dims_saveable", Some(Some(Policy::DotsSaveable { only_if_no_batch_dims: true }))),
        ("save_only_these_names('a')", Some(Some(Policy::SaveOnlyTheseNames { names: vec!["a".into()] }))),
        (
            "offload_dot_with_no_batch_dims('device', 'pinned_host')",
            Some(Some(Policy::OffloadDotWithNoBatchDims {
                offload_src: "device".into(),
                offload_dst: "pinned_host".into(),
            })),
        ),
        ("a Rust closure: big_sines_only", Some(Some(big_sines))),
    ];
    let mut last = None;
    for (title, policy) in policies {
        let traced = match policy {
            None => make_jaxpr(f_named, &args)?,
            Some(p) => {
                let mut ck = checkpoint(f_named);
                if let Some(p) = p {
                    ck = ck.policy(p);
                }
                make_jaxpr(|a| ck.call(a), &args)?
            }
        };
        println!("== {title}");
        print!("{}", print_saved_residuals(&traced.jaxpr.jaxpr, &traced.arg_names)?);
        println!();
        last = Some(traced);
    }
    if let Some(traced) = last {
        println!("== the forward and backward halves under big_sines_only");
        // One after the other: the two-column layout is the facade's (`remat::print_fwd_bwd`).
        let (fwd, bwd) = fwd_bwd_strings(&traced.jaxpr.jaxpr)?;
        println!("forward computation:\n\n{fwd}\n\nbackward computation:\n\n{bwd}");
    }
    Ok(())
}
