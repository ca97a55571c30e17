//! Everything the README's example and the docs' table name is reachable from `remat::`
//! (the indexing macro and constants, the tree traits, the run options), and a user policy
//! that is not registered is the same clear error nested in `SaveFromBothPolicies` as at
//! the top level, through the facade's `grad`.

use remat::{checkpoint, idx, Array, Aval, DType, Policy, Tensor, ELLIPSIS, NEW_AXIS};

#[test]
fn indexing_is_reachable_from_the_facade() {
    let f = |x: Tensor| x.index(idx![1..3, NEW_AXIS, ELLIPSIS]);
    let traced = remat::make_jaxpr(f, &Aval::new(DType::F32, vec![4, 5])).unwrap();
    assert_eq!(traced.jaxpr.jaxpr.out_avals()[0].shape, [2, 1, 5]);
    let _: fn(remat::RunOptions) -> remat::Backend = |o| o.backend;
}

#[test]
fn an_unregistered_policy_is_one_error_at_the_top_and_nested() {
    let unknown = Policy::Function { name: "not_registered_anywhere".into(), repr: "<function x>".into() };
    let nested = Policy::SaveFromBothPolicies {
        policy_1: Box::new(Policy::DotsSaveable { only_if_no_batch_dims: true }),
        policy_2: Box::new(unknown.clone()),
    };
    let x = Array::F32(ndarray::arr1(&[0.5f32, 1.0]).into_dyn());
    let f = |x: Tensor| x.sin().sin().sum();
    let line = line!() + 3;
    let errors: Vec<String> = [unknown, nested]
        .into_iter()
        .map(|p| remat::grad(checkpoint(f).policy(p)).call(&x).unwrap_err().to_string())
        .collect();
    // The checkpoint passed to `grad` itself is located at the `call`.
    let want = format!(
        "differentiation failed: remat2 at {}:{line}:55: unknown policy function `not_registered_anywhere`: \
         register it with remat_ad::register_policy",
        file!()
    );
    assert_eq!(errors[0], want);
    assert_eq!(errors[1], errors[0]);
}

/// A model whose layer is a closure: `function_scope!()` inside the closure names the
/// enclosing `fn` (JAX prints `model.<locals>.<lambda>` for the same Python; remat names the
/// function the closure is written in, as the issue asks).
fn model(x: Tensor) -> Tensor {
    let layer = |h: Tensor| {
        let _scope = remat::function_scope!();
        h.sin()
    };
    layer(layer(x)).sum()
}

#[test]
fn a_closures_equations_name_the_enclosing_function() {
    let text = remat::saved_residuals_text(model, &remat::named("x", Aval::new(DType::F32, vec![3]))).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    for line in lines {
        assert!(line.starts_with("f32[3] output of cos from crates/remat/tests/reachable.rs:"), "{line}");
        assert!(line.ends_with(" (model)"), "{line}");
    }
}
