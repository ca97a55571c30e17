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
