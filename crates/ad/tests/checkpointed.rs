//! `Checkpointed`: a per-equation plan taken by partial evaluation means what a policy
//! means. Deciding every equation as a built-in policy would gives exactly the split JAX
//! makes for `checkpoint(f, policy)`: the same residuals, forward and backward programs.

use std::sync::Arc;

use remat_ad::builder::Builder;
use remat_ad::{resolve_policy, vjp, Checkpointed, Saveability};
use remat_ir::{parse_jaxpr, pp_jaxpr, Atom, Jaxpr, Policy, Primitive};

const F: &str = "{ lambda ; a:f32[3,4] b:f32[4,5] c:f32[3,5]. let
    d:f32[3,5] = dot_general[dimension_numbers=(([1], [0]), ([], [])) out_sharding=None preferred_element_type=float32] a b
    e:f32[3,5] = sin d
    f:f32[3,5] = mul e c
    g:f32[3,5] = tanh f
    h:f32[3,5] = name[name=hidden] g
    i:f32[3,5] = mul h d
    j:f32[] = reduce_sum[axes=(0, 1) out_sharding=None] i
  in (j,) }";

/// `(ins) -> remat2[policy](f)(ins)`, built as JAX's `jax.checkpoint(f, policy=...)` traces.
fn checkpointed(f: &Jaxpr, policy: Policy) -> Jaxpr {
    let mut b = Builder::new();
    let ins: Vec<Atom> = f.invars.iter().map(|&v| Atom::Var(b.invar(f.aval(v).clone()))).collect();
    let prim = Primitive::Remat2 {
        jaxpr: Arc::new(f.clone()),
        prevent_cse: true,
        differentiated: false,
        policy: Some(policy),
    };
    let outs = b.bind(prim, ins).unwrap();
    b.finish(outs.into_iter().map(Atom::Var).collect())
}

/// The text with every `policy=...` parameter's value left out.
fn without_policy(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(i) = rest.find("policy=") {
        out.push_str(&rest[..i + 7]);
        rest = &rest[i + 7..];
        let end = rest.find(" prevent_cse").unwrap_or(0);
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

#[test]
fn per_equation_decisions_split_as_the_policy_they_copy() {
    let f = parse_jaxpr(F, "f.jaxpr").unwrap();
    let names: Vec<String> = ["a", "b", "c"].map(String::from).to_vec();
    let cp = Checkpointed::new(&f, None).unwrap();
    for policy in [
        Policy::NothingSaveable,
        Policy::EverythingSaveable,
        Policy::DotsSaveable { only_if_no_batch_dims: true },
        Policy::SaveOnlyTheseNames { names: vec!["hidden".into()] },
    ] {
        let resolved = resolve_policy(Some(&policy)).unwrap();
        let body = cp.body();
        let decisions: Vec<Saveability> = body
            .eqns
            .iter()
            .map(|e| {
                let avals: Vec<_> = e.invars.iter().map(|a| body.atom_aval(a)).collect();
                resolved.decide(&e.primitive, &avals).unwrap()
            })
            .collect();
        let planned = cp.vjp(decisions, &names).unwrap();
        let jax = vjp(&checkpointed(&f, policy.clone()), &names).unwrap();
        let lines = |v: &remat_ad::Vjp| v.residuals.iter().map(|r| r.to_string()).collect::<Vec<_>>();
        assert_eq!(lines(&planned), lines(&jax), "{policy:?}");
        assert_eq!(pp_jaxpr(&planned.fwd), pp_jaxpr(&jax.fwd), "{policy:?}");
        // The staged checkpoint prints its policy: the plan's name instead of the policy's.
        let bwd = pp_jaxpr(&planned.bwd);
        assert!(bwd.contains("policy=<function remat_plan>"), "{bwd}");
        assert_eq!(without_policy(&bwd), without_policy(&pp_jaxpr(&jax.bwd)), "{policy:?}");
    }
}

#[test]
fn a_per_equation_policy_needs_one_decision_per_equation() {
    let f = parse_jaxpr(F, "f.jaxpr").unwrap();
    let cp = Checkpointed::new(&f, None).unwrap();
    let e = cp.vjp(vec![Saveability::Saveable], &[]).unwrap_err().to_string();
    assert!(e.contains("one decision per equation: 1 decisions for"), "{e}");
    let e = Checkpointed::new(&f, Some(&[7])).unwrap_err().to_string();
    assert_eq!(e, "argnum 7 is out of range for 3 inputs");
}

/// `with_policy`: what `remat explain --policy`, the report and the Python package measure.
/// A function without a checkpoint is put inside one (constants and all), and a function
/// with checkpoints has every one's policy replaced, as an outer `jax.checkpoint(f,
/// policy=...)`'s policy decides for the checkpoints inside it.
#[test]
fn with_policy_checkpoints_the_whole_function_or_replaces_every_policy() {
    let f = parse_jaxpr(F, "f.jaxpr").unwrap();
    let nothing = Policy::NothingSaveable;
    let whole = remat_ad::with_policy(&f, &nothing).unwrap();
    assert_eq!(pp_jaxpr(&whole), pp_jaxpr(&checkpointed(&f, nothing.clone())));
    let dots = checkpointed(&f, Policy::DotsSaveable { only_if_no_batch_dims: false });
    let replaced = remat_ad::with_policy(&dots, &nothing).unwrap();
    assert_eq!(pp_jaxpr(&replaced), pp_jaxpr(&checkpointed(&f, nothing.clone())));

    // A function with a constant: the constant stays the program's and is the checkpoint's
    // leading input (it was left without a checkpoint, so the policy changed nothing).
    let c = parse_jaxpr("{ lambda a:f32[3]; b:f32[3]. let c:f32[3] = mul a b; d:f32[3] = sin c in (d,) }", "c.jaxpr")
        .unwrap();
    let got = remat_ad::with_policy(&c, &nothing).unwrap();
    assert_eq!(got.constvars.len(), 1);
    assert_eq!(got.eqns.len(), 1);
    match &got.eqns[0].primitive {
        Primitive::Remat2 { jaxpr, policy, .. } => {
            assert_eq!(policy.as_ref(), Some(&nothing));
            assert_eq!(jaxpr.invars.len(), 2);
            assert!(jaxpr.constvars.is_empty());
        }
        other => panic!("expected a remat2, got {}", other.name()),
    }
}
