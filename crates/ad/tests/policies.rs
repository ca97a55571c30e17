//! Remat policies: gradients never depend on the policy; every built-in policy means what
//! JAX's does; user-written policies (Rust closures) attach to checkpoints by name.

mod common;

use std::sync::Arc;

use common::vjp_values;
use remat_ad::{register_policy, resolve_policy, saved_residuals, vjp, Builder, Saveability};
use remat_ir::{Atom, Jaxpr, Policy, Primitive, UnaryOp};
use remat_testkit::{arg_names, arrays, case_jaxpr, check_close, conformance_case, conformance_cases};

/// `jax.checkpoint(f, policy=policy)` around the whole of `jaxpr`.
fn checkpointed(jaxpr: &Jaxpr, policy: Option<Policy>) -> Jaxpr {
    let mut b = Builder::new();
    let ins: Vec<Atom> = jaxpr.invars.iter().map(|&v| Atom::Var(b.invar(jaxpr.aval(v).clone()))).collect();
    let prim = Primitive::Remat2 { jaxpr: Arc::new(jaxpr.clone()), prevent_cse: true, differentiated: false, policy };
    let outs = b.bind(prim, ins).unwrap().into_iter().map(Atom::Var).collect();
    b.finish(outs)
}

fn builtin_policies() -> Vec<Option<Policy>> {
    let names = |ns: &[&str]| ns.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let function = |name: &str| Policy::Function { name: name.into(), repr: format!("<function {name} at 0x0>") };
    vec![
        None,
        Some(Policy::EverythingSaveable),
        Some(Policy::NothingSaveable),
        Some(Policy::DotsSaveable { only_if_no_batch_dims: false }),
        Some(Policy::DotsSaveable { only_if_no_batch_dims: true }),
        Some(Policy::SaveOnlyTheseNames { names: names(&["a", "layer0_output"]) }),
        Some(Policy::SaveAnyNamesButThese { names: names(&["b"]) }),
        Some(Policy::SaveAnythingExceptTheseNames { names: names(&["a"]) }),
        Some(Policy::SaveFromBothPolicies {
            policy_1: Box::new(Policy::SaveOnlyTheseNames { names: names(&["b"]) }),
            policy_2: Box::new(Policy::DotsSaveable { only_if_no_batch_dims: true }),
        }),
        Some(Policy::SaveAndOffloadOnlyTheseNames {
            saved: names(&["a"]),
            offloaded: names(&["b", "layer1_output"]),
            offload_src: "device".into(),
            offload_dst: "pinned_host".into(),
        }),
        Some(Policy::OffloadDotWithNoBatchDims { offload_src: "device".into(), offload_dst: "pinned_host".into() }),
        Some(function("nothing_saveable")),
        Some(function("everything_saveable")),
        Some(function("dots_with_no_batch_dims_saveable")),
        Some(function("checkpoint_dots")),
    ]
}

#[test]
fn gradients_do_not_depend_on_the_policy() {
    let mut failures = Vec::new();
    let mut runs = 0;
    for (name, case) in conformance_cases() {
        let jaxpr = case_jaxpr(&case);
        for policy in builtin_policies() {
            let wrapped = checkpointed(&jaxpr, policy.clone());
            let result = vjp(&wrapped, &arg_names(&case)).map_err(|e| e.to_string()).and_then(|v| {
                let (outs, grads) = vjp_values(&v, &arrays(&case, "args"), &arrays(&case, "cotangents"))?;
                check_close("output", &outs, &arrays(&case, "outputs"), 1e-4, 1e-5)?;
                check_close("grad", &grads, &arrays(&case, "grads"), 1e-4, 1e-5)
            });
            if let Err(e) = result {
                failures.push(format!("{name} under {policy:?}: {e}"));
            }
            runs += 1;
        }
    }
    assert!(failures.is_empty(), "{} of {runs}:\n{}", failures.len(), failures.join("\n"));
    assert_eq!(runs, 32 * builtin_policies().len());
}

fn residual_lines(jaxpr: &Jaxpr, names: &[&str]) -> Vec<String> {
    let names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
    saved_residuals(jaxpr, &names)
        .unwrap()
        .iter()
        .map(|r| r.to_string().split(" from case").next().unwrap().to_string())
        .collect()
}

#[test]
fn everything_saveable_around_a_function_saves_what_no_checkpoint_saves() {
    // Outside any checkpoint everything may be saved, so the whole-function
    // `everything_saveable` checkpoint saves exactly the plain function's residuals.
    for (name, case) in conformance_cases() {
        let jaxpr = case_jaxpr(&case);
        if name.contains("scan") || jaxpr.eqns.iter().any(|e| !e.primitive.subjaxprs().is_empty()) {
            continue;
        }
        let names: Vec<String> = arg_names(&case);
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let plain = residual_lines(&jaxpr, &names);
        let every = residual_lines(&checkpointed(&jaxpr, Some(Policy::EverythingSaveable)), &names);
        assert_eq!(plain, every, "{name}");
    }
}

#[test]
fn a_user_policy_is_a_rust_closure_attached_by_name() {
    // Save only the outputs of `sin` (by primitive) with at least 6 elements (by aval).
    let policy = register_policy("big_sines_only", |prim: &Primitive, in_avals: &[remat_ir::Aval]| {
        let is_sin = matches!(prim, Primitive::Unary(UnaryOp::Sin));
        Saveability::from_bool(is_sin && in_avals[0].size() >= 6)
    });
    assert_eq!(policy, Policy::Function { name: "big_sines_only".into(), repr: "<function big_sines_only>".into() });
    let case = conformance_case("seed_no_checkpoint");
    let wrapped = checkpointed(&case_jaxpr(&case), Some(policy));
    let lines = residual_lines(&wrapped, &["W1", "W2", "W3", "x"]);
    assert_eq!(
        lines,
        [
            "f32[5,4] from the argument W1",
            "f32[6,5] from the argument W2",
            "f32[7,6] from the argument W3",
            "f32[4] from the argument x",
            "f32[6] output of sin",
        ]
    );
    // The gradients are unchanged.
    let v = vjp(&wrapped, &[]).unwrap();
    let (_, grads) = vjp_values(&v, &arrays(&case, "args"), &arrays(&case, "cotangents")).unwrap();
    check_close("grad", &grads, &arrays(&case, "grads"), 1e-4, 1e-5).unwrap();
}

#[test]
fn a_user_policy_can_offload() {
    let policy = register_policy("offload_sines", |prim: &Primitive, _: &[remat_ir::Aval]| {
        if matches!(prim, Primitive::Unary(UnaryOp::Sin)) {
            Saveability::Offloadable { src: "device".into(), dst: "pinned_host".into() }
        } else {
            Saveability::Recompute
        }
    });
    let case = conformance_case("seed_no_checkpoint");
    let wrapped = checkpointed(&case_jaxpr(&case), Some(policy));
    let lines = residual_lines(&wrapped, &["W1", "W2", "W3", "x"]);
    assert_eq!(&lines[4..], ["f32<host>[5] output of device_put from ", "f32<host>[6] output of device_put from "]);
    let v = vjp(&wrapped, &[]).unwrap();
    let (_, grads) = vjp_values(&v, &arrays(&case, "args"), &arrays(&case, "cotangents")).unwrap();
    check_close("grad", &grads, &arrays(&case, "grads"), 1e-4, 1e-5).unwrap();
}

#[test]
fn invalid_policies_are_jax_value_errors() {
    let names = |ns: &[&str]| ns.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let overlap = Policy::SaveAndOffloadOnlyTheseNames {
        saved: names(&["a", "b"]),
        offloaded: names(&["b"]),
        offload_src: "device".into(),
        offload_dst: "pinned_host".into(),
    };
    let err = resolve_policy(Some(&overlap)).unwrap_err().to_string();
    assert!(err.contains("both saveable and offloadable"), "{err}");
    let both = Policy::SaveFromBothPolicies {
        policy_1: Box::new(Policy::EverythingSaveable),
        policy_2: Box::new(Policy::OffloadDotWithNoBatchDims {
            offload_src: "device".into(),
            offload_dst: "pinned_host".into(),
        }),
    };
    assert!(resolve_policy(Some(&both)).unwrap_err().to_string().contains("must return booleans"));
    let unknown = Policy::Function { name: "mystery".into(), repr: "<function mystery at 0x1>".into() };
    assert!(resolve_policy(Some(&unknown)).unwrap_err().to_string().contains("unknown policy function `mystery`"));
    // Nested inside save_from_both_policies too (it was silently "recompute" there).
    let nested = Policy::SaveFromBothPolicies {
        policy_1: Box::new(Policy::DotsSaveable { only_if_no_batch_dims: false }),
        policy_2: Box::new(unknown.clone()),
    };
    let err = resolve_policy(Some(&nested)).unwrap_err().to_string();
    assert!(err.contains("unknown policy function `mystery`"), "{err}");
    let wrapped = checkpointed(&case_jaxpr(&conformance_case("seed_no_checkpoint")), Some(nested));
    assert!(vjp(&wrapped, &[]).unwrap_err().to_string().contains("mystery"));
    // And a checkpoint with such a policy cannot be differentiated.
    let wrapped = checkpointed(&case_jaxpr(&conformance_case("seed_no_checkpoint")), Some(overlap));
    assert!(vjp(&wrapped, &[]).is_err());
}

#[test]
fn builtin_policies_decide_as_jax_does() {
    use remat_ir::{Aval, DType, DotDimensionNumbers};
    let f32s = |s: &[usize]| Aval::new(DType::F32, s.to_vec());
    let dot = |batch: bool| Primitive::DotGeneral {
        dimension_numbers: DotDimensionNumbers {
            lhs_contracting: vec![2],
            rhs_contracting: vec![1],
            lhs_batch: if batch { vec![0] } else { vec![] },
            rhs_batch: if batch { vec![0] } else { vec![] },
        },
        preferred_element_type: None,
        precision: None,
    };
    let name = |n: &str| Primitive::Name { name: n.into() };
    let sin = Primitive::Unary(UnaryOp::Sin);
    let avals = [f32s(&[2, 3, 4]), f32s(&[2, 4, 5])];
    let decide = |p: Policy, prim: &Primitive| resolve_policy(Some(&p)).unwrap().decide(prim, &avals).unwrap();
    let names = |ns: &[&str]| ns.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    use Saveability::{Recompute, Saveable};
    let no_batch = Policy::DotsSaveable { only_if_no_batch_dims: true };
    assert_eq!(decide(no_batch.clone(), &dot(true)), Recompute);
    assert_eq!(decide(no_batch, &dot(false)), Saveable);
    assert_eq!(decide(Policy::DotsSaveable { only_if_no_batch_dims: false }, &dot(true)), Saveable);
    assert_eq!(decide(Policy::SaveOnlyTheseNames { names: names(&["a"]) }, &name("a")), Saveable);
    assert_eq!(decide(Policy::SaveOnlyTheseNames { names: names(&["a"]) }, &sin), Recompute);
    assert_eq!(decide(Policy::SaveAnyNamesButThese { names: names(&["a"]) }, &name("b")), Saveable);
    assert_eq!(decide(Policy::SaveAnyNamesButThese { names: names(&["a"]) }, &name("a")), Recompute);
    assert_eq!(decide(Policy::SaveAnyNamesButThese { names: names(&["a"]) }, &sin), Recompute);
    // The documented meaning (JAX 0.10.2 ships a stub that saves everything).
    assert_eq!(decide(Policy::SaveAnythingExceptTheseNames { names: names(&["a"]) }, &name("a")), Recompute);
    assert_eq!(decide(Policy::SaveAnythingExceptTheseNames { names: names(&["a"]) }, &sin), Saveable);
    let offload = Policy::OffloadDotWithNoBatchDims { offload_src: "device".into(), offload_dst: "pinned_host".into() };
    assert_eq!(
        decide(offload.clone(), &dot(false)),
        Saveability::Offloadable { src: "device".into(), dst: "pinned_host".into() }
    );
    assert_eq!(decide(offload, &dot(true)), Recompute);
    let function = |n: &str| Policy::Function { name: n.into(), repr: format!("<function {n} at 0x1>") };
    assert_eq!(decide(function("dots_with_no_batch_dims_saveable"), &dot(true)), Recompute);
    assert_eq!(decide(function("dots_saveable"), &dot(true)), Saveable);
    assert_eq!(decide(function("nothing_saveable"), &dot(false)), Recompute);
    assert_eq!(decide(function("everything_saveable"), &sin), Saveable);
}

/// An opaque `save_and_offload_only_these_names` closure means what the caller gives it,
/// inside the policy value (`with_policy_names` puts it there; nothing is process-wide);
/// `offload_dot_with_no_batch_dims`'s closure means what its name says; a lambda means
/// nothing remat can know.
#[test]
fn policy_names_give_an_opaque_closure_its_meaning() {
    use remat_ad::PolicyNames;
    let names = PolicyNames::parse(&["save=a,b", "offload=c", "save=d"]).unwrap();
    assert_eq!(names.saved, ["a", "b", "d"]);
    assert_eq!(names.offloaded, ["c"]);
    // One quoted argument means what its words mean.
    assert_eq!(PolicyNames::parse(&["save=a,b offload=c", "save=d"]).unwrap(), names);
    let err = |words: &[&str]| PolicyNames::parse(words).unwrap_err().to_string();
    assert!(err(&["save"]).contains("expected `save=NAMES` or `offload=NAMES`, found `save`"));
    assert!(err(&["keep=a"]).contains("found `keep=` in `keep=a`"));
    assert!(err(&["save=a,,b"]).contains("an empty name in `save=a,,b`"));
    assert!(err(&["save=a=b"]).contains("name `a=b` in `save=a=b` holds `=`"));
    assert!(err(&["save='a'"]).contains("holds `'`"));
    assert!(err(&["save=a", "save=a"]).contains("name `a` is given twice"));
    let repr = "<function save_and_offload_only_these_names.<locals>.policy at 0xXXXXXXXXXXXX>";
    let without = Policy::Opaque { repr: repr.into(), meaning: None };
    assert!(resolve_policy(Some(&without)).unwrap_err().to_string().contains("--policy-names save=NAMES"));
    let opaque = Policy::Opaque { repr: repr.into(), meaning: Some(Box::new(names.policy())) };
    let resolved = resolve_policy(Some(&opaque)).unwrap();
    let name = |n: &str| Primitive::Name { name: n.into() };
    assert_eq!(resolved.decide(&name("a"), &[]).unwrap(), Saveability::Saveable);
    assert_eq!(
        resolved.decide(&name("c"), &[]).unwrap(),
        Saveability::Offloadable { src: "device".into(), dst: "pinned_host".into() }
    );
    assert_eq!(resolved.decide(&name("e"), &[]).unwrap(), Saveability::Recompute);
    // The policy still prints as JAX printed it.
    assert_eq!(opaque.to_param().repr(), repr);
    let dots = Policy::Opaque {
        repr: "<function offload_dot_with_no_batch_dims.<locals>.policy at 0xXXXXXXXXXXXX>".into(),
        meaning: None,
    };
    let dot = Primitive::DotGeneral {
        dimension_numbers: remat_ir::DotDimensionNumbers {
            lhs_contracting: vec![1],
            rhs_contracting: vec![0],
            lhs_batch: vec![],
            rhs_batch: vec![],
        },
        preferred_element_type: None,
        precision: None,
    };
    assert_eq!(
        resolve_policy(Some(&dots)).unwrap().decide(&dot, &[]).unwrap(),
        Saveability::Offloadable { src: "device".into(), dst: "pinned_host".into() }
    );
    // JAX 0.10.2's `save_anything_except_these_names` is a stub that saves everything,
    // whatever its names.
    let except = Policy::Opaque {
        repr: "<function save_anything_except_these_names.<locals>.<lambda> at 0xXXXXXXXXXXXX>".into(),
        meaning: None,
    };
    assert_eq!(resolve_policy(Some(&except)).unwrap().decide(&dot, &[]).unwrap(), Saveability::Saveable);
    assert_eq!(
        resolve_policy(Some(&except)).unwrap().decide(&Primitive::Unary(UnaryOp::Sin), &[]).unwrap(),
        Saveability::Saveable
    );
    // Whose arguments can change the meaning: the error says which arguments.
    let both = Policy::Opaque {
        repr: "<function save_from_both_policies.<locals>.policy at 0xXXXXXXXXXXXX>".into(),
        meaning: None,
    };
    assert!(resolve_policy(Some(&both))
        .unwrap_err()
        .to_string()
        .contains("its two policies are arguments the text does not carry"));
    // Other closures stay without a meaning.
    let lambda = Policy::Opaque { repr: "<function <lambda> at 0xXXXXXXXXXXXX>".into(), meaning: None };
    assert!(resolve_policy(Some(&lambda)).unwrap_err().to_string().contains("a lambda's code is not in the text"));
}
