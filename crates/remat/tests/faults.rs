//! Faults in user code (issue 22): a panic inside a traced closure (at the top, inside a
//! checkpoint, a jit or a scan body) or inside a user's remat policy is an error naming the
//! closure and where it was called, never a crash of the caller; tracing works again after.

use remat::{checkpoint, named, register_policy, Array, Aval, DType, Error, Policy, Saveability, Tensor};

fn vec3() -> Aval {
    Aval::new(DType::F32, vec![3])
}

fn ones() -> Array {
    Array::F32(ndarray::ArrayD::ones(vec![3]))
}

/// The error's text, which must name the closure and say it panicked.
fn message(e: Error) -> String {
    let text = e.to_string();
    assert!(text.contains("panicked"), "{text}");
    text
}

/// The closures of this file are named by their Rust type, which says where they are.
const HERE: &str = "faults::";

#[test]
fn a_panic_in_each_kind_of_traced_closure_is_an_error_naming_it() {
    let boom = |x: Tensor| -> Tensor {
        if x.shape()[0] == 3 {
            panic!("boom in the model");
        }
        x
    };
    let inner = |x: Tensor| boom(x.sin());
    let cases: Vec<(&str, Result<remat::Traced, remat::TraceError>)> = vec![
        ("the traced closure", remat::make_jaxpr(|x: Tensor| boom(x).sum(), &named("x", vec3()))),
        (
            "the checkpointed closure",
            remat::make_jaxpr(|x: Tensor| checkpoint(inner).call(x).sum(), &named("x", vec3())),
        ),
        ("the jit closure", remat::make_jaxpr(|x: Tensor| remat::trace::jit(inner).call(x).sum(), &named("x", vec3()))),
        (
            "the scan body",
            remat::make_jaxpr(
                |(c, xs): (Tensor, Tensor)| {
                    remat::scan(
                        |c: Tensor, x: Tensor| -> (Tensor, Tensor) {
                            panic!("boom in the body {}", c.shape().len() + x.shape().len())
                        },
                        c,
                        xs,
                    )
                    .0
                },
                &(named("c", vec3()), named("xs", Aval::new(DType::F32, vec![4, 3]))),
            ),
        ),
    ];
    for (kind, result) in cases {
        let text = message(Error::Trace(result.unwrap_err()));
        assert!(text.contains(kind) && text.contains(HERE) && text.contains("boom in the"), "{text}");
        // Where it was called: this file.
        assert!(text.contains("called at crates/remat/tests/faults.rs:"), "{text}");
    }
    // The trace's state was reset: the same thread traces again.
    let ok = remat::make_jaxpr(|x: Tensor| x.sin().sum(), &named("x", vec3())).unwrap();
    assert_eq!(ok.jaxpr.jaxpr.eqns.len(), 2);
}

#[test]
fn jit_and_grad_return_a_panic_as_an_error_at_the_callers_line() {
    let f = |x: Tensor| -> Tensor {
        let _ = x.shape()[5]; // index out of bounds, as a careless model might
        x.sum()
    };
    let jit = remat::jit(f);
    let line = line!() + 1;
    let text = message(jit.call(&ones()).unwrap_err());
    assert!(text.contains(&format!("crates/remat/tests/faults.rs:{line}")), "{text}");
    assert!(text.contains("index out of bounds"), "{text}");
    let text = message(remat::grad(f).call(&ones()).unwrap_err());
    assert!(text.contains("the traced closure") && text.contains(HERE), "{text}");
    for text in [
        remat::vjp_program(f, &named("x", vec3())).map(|_| ()),
        remat::saved_residuals(f, &named("x", vec3())).map(|_| ()),
        remat::fwd_bwd_strings(f, &named("x", vec3())).map(|_| ()),
    ]
    .map(|r| message(r.unwrap_err()))
    {
        assert!(text.contains("the traced closure"), "{text}");
    }
    // A function that does not panic still runs on the same thread.
    assert_eq!(remat::jit(|x: Tensor| x.sum()).call(&ones()).unwrap()[0].to_f64_vec(), [3.0]);
}

#[test]
fn a_panic_in_a_user_policy_is_an_error_naming_the_policy_and_the_equation() {
    let policy = register_policy("faults_panicking_policy", |prim: &remat::ir::Primitive, _: &[Aval]| {
        if prim.name() == "sin" {
            panic!("this policy cannot decide about {}", prim.name());
        }
        Saveability::Recompute
    });
    let nested = Policy::SaveFromBothPolicies {
        policy_1: Box::new(Policy::NothingSaveable),
        policy_2: Box::new(policy.clone()),
    };
    for p in [policy, nested] {
        let ck = checkpoint(|x: Tensor| x.sin().cos()).policy(p);
        let text = message(remat::grad(|x: Tensor| ck.call(x).sum()).call(&ones()).unwrap_err());
        assert!(text.contains("the user policy `faults_panicking_policy` panicked deciding about sin at crates/remat/tests/faults.rs:"), "{text}");
        assert!(text.contains("this policy cannot decide about sin"), "{text}");
    }
}
