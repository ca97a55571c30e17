//! The seed programs traced from Rust (`remat-trace`) save exactly what JAX saves for them,
//! with source locations pointing at this file; and recursive checkpointing over a chain
//! of `sin`s keeps O(log n) residuals.

use remat_ad::{vjp, Residual, ResidualKind};
use remat_interp::eval_jaxpr;
use remat_ir::{Array, Aval, DType, Policy};
use remat_testkit::{arrays, check_close, conformance_case};
use remat_trace::{
    checkpoint, checkpoint_name, function_scope, make_jaxpr, named, nn, recursive_checkpoint, scan, ArgTree, Named,
    Tensor, TensorTree,
};

fn g(w: &Tensor, x: &Tensor) -> Tensor {
    let _scope = function_scope!();
    w.dot(x).sin()
}

fn f_plain((w1, w2, w3, x): (Tensor, Tensor, Tensor, Tensor)) -> Tensor {
    let x = g(&w1, &x);
    let x = g(&w2, &x);
    g(&w3, &x)
}

fn f_named((w1, w2, w3, x): (Tensor, Tensor, Tensor, Tensor)) -> Tensor {
    let x = checkpoint_name(&g(&w1, &x), "a");
    let x = checkpoint_name(&g(&w2, &x), "b");
    checkpoint_name(&g(&w3, &x), "c")
}

type Four = (Named<Array>, Named<Array>, Named<Array>, Named<Array>);

fn seed_args(case: &serde_json::Value) -> Four {
    let a = arrays(case, "args");
    (named("W1", a[0].clone()), named("W2", a[1].clone()), named("W3", a[2].clone()), named("x", a[3].clone()))
}

fn layer(w: &Tensor, x: &Tensor) -> Tensor {
    let _scope = function_scope!();
    w.dot(x).sin()
}

fn loss(params: &[Tensor], x: &Tensor, y: &Tensor, names: bool) -> Tensor {
    let _scope = function_scope!();
    let (w_last, ws) = params.split_last().expect("at least one layer");
    let mut x = x.clone();
    for (i, w) in ws.iter().enumerate() {
        x = layer(w, &x);
        if names {
            x = checkpoint_name(&x, &format!("layer{i}_output"));
        }
    }
    (w_last.dot(&x) - y).powi(2).sum()
}

type LossArgs = (Named<Vec<Array>>, Named<Array>, Named<Array>);

fn loss_args(case: &serde_json::Value) -> LossArgs {
    let a = arrays(case, "args");
    (named("params", a[..3].to_vec()), named("x", a[3].clone()), named("y", a[4].clone()))
}

fn scan_layer(x: Tensor, (w, b): (Tensor, Tensor)) -> (Tensor, ()) {
    ((x.dot(&w) + &b).maximum(0.0), ())
}

fn three(names: [&str; 3], case: &serde_json::Value) -> (Named<Array>, Named<Array>, Named<Array>) {
    let a = arrays(case, "args");
    (named(names[0], a[0].clone()), named(names[1], a[1].clone()), named(names[2], a[2].clone()))
}

fn pipeline((w1, w2, x): (Tensor, Tensor, Tensor)) -> Tensor {
    let y = x.matmul(&w1);
    let y = nn::relu(&y);
    let y = y.matmul(&w2);
    y.powi(2).sum()
}

fn chain(n: usize) -> impl Fn(Tensor) -> Tensor {
    move |x| (0..n).fold(x, |x, _| x.sin())
}

/// Traces `f` on the case's arguments and checks its saved residuals and gradients.
fn check<A: ArgTree, R: TensorTree>(
    name: &str,
    f: impl FnOnce(A::Traced) -> R,
    args: impl FnOnce(&serde_json::Value) -> A,
) -> Result<(), String> {
    let case = conformance_case(name);
    let args = args(&case);
    let traced = make_jaxpr(f, &args).map_err(|e| e.to_string())?;
    let v = vjp(&traced.jaxpr.jaxpr, &traced.arg_names).map_err(|e| e.to_string())?;
    let got: Vec<(String, String, String)> =
        v.residuals.iter().map(|r| (r.aval.to_string(), r.kind.kind_name().into(), r.kind.what().into())).collect();
    let want: Vec<(String, String, String)> = case["saved_residuals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["aval"].as_str().unwrap().into(),
                r["kind"].as_str().unwrap().into(),
                r["what"].as_str().unwrap_or("").into(),
            )
        })
        .collect();
    if got != want {
        return Err(format!("residuals\n  got  {got:?}\n  want {want:?}"));
    }
    for r in &v.residuals {
        let from_equation =
            !matches!(r.kind, ResidualKind::Argument(_) | ResidualKind::Constant | ResidualKind::Literal);
        if from_equation && !r.source.file.ends_with("tests/traced.rs") {
            return Err(format!("`{r}` does not point at the Rust source"));
        }
    }
    let flat = traced.flatten_args(&args).map_err(|e| e.to_string())?;
    let consts = &traced.jaxpr.consts;
    let fwd = eval_jaxpr(&v.fwd, consts, &flat).map_err(|e| e.to_string())?;
    let (outs, res) = fwd.split_at(v.num_outs);
    let mut bwd_args = res.to_vec();
    bwd_args.extend(arrays(&case, "cotangents"));
    let grads = eval_jaxpr(&v.bwd, &[], &bwd_args).map_err(|e| e.to_string())?;
    check_close("output", outs, &arrays(&case, "outputs"), 1e-4, 1e-5)?;
    check_close("grad", &grads, &arrays(&case, "grads"), 1e-4, 1e-5)
}

#[test]
fn traced_seed_programs_save_what_jax_saves() {
    let dots_nb = || Policy::DotsSaveable { only_if_no_batch_dims: true };
    let mut results: Vec<(&str, Result<(), String>)> = Vec::new();
    results.push(("seed_no_checkpoint", check("seed_no_checkpoint", f_plain, seed_args)));
    let layer_ck = checkpoint(|(w, x): (Tensor, Tensor)| g(&w, &x));
    results.push((
        "seed_checkpoint_each_layer",
        check(
            "seed_checkpoint_each_layer",
            |(w1, w2, w3, x): (Tensor, Tensor, Tensor, Tensor)| {
                let x = layer_ck.call((w1, x));
                let x = layer_ck.call((w2, x));
                layer_ck.call((w3, x))
            },
            seed_args,
        ),
    ));
    let f = checkpoint(f_plain).policy(dots_nb());
    results.push(("seed_policy_dots_no_batch", check("seed_policy_dots_no_batch", |a| f.call(a), seed_args)));
    let f = checkpoint(f_named).policy(Policy::SaveOnlyTheseNames { names: vec!["a".into()] });
    results.push(("seed_names_save_only_a", check("seed_names_save_only_a", |a| f.call(a), seed_args)));
    let plain = |(p, x, y): (Vec<Tensor>, Tensor, Tensor)| loss(&p, &x, &y, false);
    let named_loss = |(p, x, y): (Vec<Tensor>, Tensor, Tensor)| loss(&p, &x, &y, true);
    results.push(("seed_loss_plain", check("seed_loss_plain", plain, loss_args)));
    let f = checkpoint(plain).policy(dots_nb());
    results.push(("seed_loss_dots_policy", check("seed_loss_dots_policy", |a| f.call(a), loss_args)));
    results.push(("seed_loss_named_nopolicy", check("seed_loss_named_nopolicy", named_loss, loss_args)));
    let f = checkpoint(named_loss).policy(Policy::SaveAnyNamesButThese { names: vec!["layer1_output".into()] });
    results.push((
        "seed_loss_save_any_names_but_layer1",
        check("seed_loss_save_any_names_but_layer1", |a| f.call(a), loss_args),
    ));
    let x_arg = |case: &serde_json::Value| named("x", arrays(case, "args")[0].clone());
    results.push(("seed_chain_sin8", check("seed_chain_sin8", chain(8), x_arg)));
    results.push(("seed_chain_sin16", check("seed_chain_sin16", chain(16), x_arg)));
    let sins8 = vec![|x: Tensor| x.sin(); 8];
    results.push(("seed_recursive_sin8", check("seed_recursive_sin8", recursive_checkpoint(&sins8), x_arg)));
    let sins16 = vec![|x: Tensor| x.sin(); 16];
    results.push(("seed_recursive_sin16", check("seed_recursive_sin16", recursive_checkpoint(&sins16), x_arg)));
    let scan_args = |c: &serde_json::Value| three(["all_weights", "all_biases", "x"], c);
    let net = |(ws, bs, x): (Tensor, Tensor, Tensor)| scan(scan_layer, x, (ws, bs)).0;
    results.push(("seed_scan_plain", check("seed_scan_plain", net, scan_args)));
    let layer_ck = checkpoint(|(x, wb): (Tensor, (Tensor, Tensor))| scan_layer(x, wb)).policy(dots_nb());
    let net = |(ws, bs, x): (Tensor, Tensor, Tensor)| scan(|x, wb| layer_ck.call((x, wb)), x, (ws, bs)).0;
    results.push(("seed_scan_checkpoint_dots", check("seed_scan_checkpoint_dots", net, scan_args)));
    let pipe_args = |c: &serde_json::Value| three(["w1", "w2", "x"], c);
    let f = checkpoint(pipeline);
    results.push(("seed_pipeline_default", check("seed_pipeline_default", |a| f.call(a), pipe_args)));
    let f = checkpoint(pipeline).policy(dots_nb());
    results.push(("seed_pipeline_dots_no_batch", check("seed_pipeline_dots_no_batch", |a| f.call(a), pipe_args)));

    let failures: Vec<String> =
        results.iter().filter_map(|(n, r)| r.as_ref().err().map(|e| format!("{n}: {e}"))).collect();
    assert!(failures.is_empty(), "{} of {}:\n{}", failures.len(), results.len(), failures.join("\n"));
    assert_eq!(results.len(), 16);
}

#[test]
fn traced_residuals_point_at_the_rust_source() {
    let case = conformance_case("seed_no_checkpoint");
    let args = seed_args(&case);
    let traced = make_jaxpr(f_plain, &args).unwrap();
    let v = vjp(&traced.jaxpr.jaxpr, &traced.arg_names).unwrap();
    let line = v.residuals.iter().find(|r| matches!(r.kind, ResidualKind::Output(_))).unwrap().to_string();
    // `g`'s body, `w.dot(x).sin()`, in the function `g`.
    assert!(line.starts_with("f32[5] output of sin from crates/ad/tests/traced.rs:"), "{line}");
    assert!(line.ends_with(" (g)"), "{line}");
    println!("{line}");
}

/// The residuals of the vjp of `n` chained `sin`s of a scalar, recursively checkpointed.
fn recursive_residuals(n: usize) -> (Vec<Residual>, f64, f64) {
    let sins = vec![|x: Tensor| x.sin(); n];
    let f = recursive_checkpoint(&sins);
    let traced = make_jaxpr(f, &Aval::scalar(DType::F32)).unwrap();
    let v = vjp(&traced.jaxpr.jaxpr, &["x".to_string()]).unwrap();
    // The gradient against the chain rule: prod of cos at each step.
    let x0 = 0.7f64;
    let arg = Array::F32(ndarray::arr0(x0 as f32).into_dyn());
    let fwd = eval_jaxpr(&v.fwd, &traced.jaxpr.consts, &[arg]).unwrap();
    let mut bwd_args = fwd[1..].to_vec();
    bwd_args.push(Array::F32(ndarray::arr0(1.0f32).into_dyn()));
    let grad = eval_jaxpr(&v.bwd, &[], &bwd_args).unwrap()[0].to_f64_vec()[0];
    let (mut x, mut want) = (x0, 1.0);
    for _ in 0..n {
        want *= x.cos();
        x = x.sin();
    }
    (v.residuals, grad, want)
}

#[test]
fn recursive_checkpointing_keeps_logarithmically_many_residuals() {
    let mut counts = Vec::new();
    for k in 1..=7 {
        let n = 1 << k;
        let (residuals, grad, want) = recursive_residuals(n);
        assert!((grad - want).abs() <= 1e-5 * want.abs().max(1e-3), "n={n}: grad {grad}, chain rule {want}");
        counts.push((n, residuals.len()));
    }
    // JAX's numbers for 8 and 16 (the seed cases), then one more per doubling.
    assert_eq!(counts, [(2, 2), (4, 3), (8, 4), (16, 5), (32, 6), (64, 7), (128, 8)]);
    // Without checkpoints, a chain saves one `cos` per `sin`.
    let traced = make_jaxpr(chain(64), &Aval::scalar(DType::F32)).unwrap();
    assert_eq!(vjp(&traced.jaxpr.jaxpr, &[]).unwrap().residuals.len(), 64);
}

#[test]
fn constants_are_saved_from_a_constant() {
    // `jnp.sum(jnp.sin(x) * c)` with a NumPy constant `c`: JAX saves the constant and cos x.
    let c = Array::F32(ndarray::arr1(&[1.0f32, 2.0, 3.0]).into_dyn());
    let f = |x: Tensor| (x.sin() * remat_trace::numpy::constant(c.clone())).sum();
    let traced = make_jaxpr(f, &named("x", Aval::new(DType::F32, vec![3]))).unwrap();
    assert_eq!(traced.jaxpr.jaxpr.constvars.len(), 1);
    let v = vjp(&traced.jaxpr.jaxpr, &traced.arg_names).unwrap();
    let lines: Vec<String> = v.residuals.iter().map(|r| r.to_string()).collect();
    assert_eq!(lines[0], "f32[3] from a constant");
    assert!(lines[1].starts_with("f32[3] output of cos from crates/ad/tests/traced.rs:"), "{lines:?}");
    assert_eq!(lines.len(), 2);
    // The forward half takes the constant as its constvar.
    let x = Array::F32(ndarray::arr1(&[0.1f32, 0.2, 0.3]).into_dyn());
    let fwd = eval_jaxpr(&v.fwd, &traced.jaxpr.consts, &[x]).unwrap();
    let mut bwd_args = fwd[1..].to_vec();
    bwd_args.push(Array::F32(ndarray::arr0(1.0f32).into_dyn()));
    let grad = eval_jaxpr(&v.bwd, &[], &bwd_args).unwrap()[0].to_f64_vec();
    for (i, g) in grad.iter().enumerate() {
        let want = (i as f64 + 1.0) * (0.1 * (i as f64 + 1.0)).cos();
        assert!((g - want).abs() < 1e-5, "{grad:?}");
    }
}

/// `grad` with respect to some inputs does none of the work for the others, inside
/// checkpoints too: the input cotangent of a checkpointed first layer is dropped from its
/// `remat2` and the product behind it is gone (JAX's `value_and_grad` of an MLP in the
/// parameters has one product fewer than in parameters and input).
#[test]
fn grad_in_some_arguments_prunes_checkpointed_cotangents_of_the_others() {
    let ck = checkpoint(|(w, x): (Tensor, Tensor)| w.dot(&x).tanh()).policy(Policy::NothingSaveable);
    let f = |(w1, w2, x): (Tensor, Tensor, Tensor)| ck.call((w2, ck.call((w1, x)))).sum();
    let avals = (Aval::new(DType::F32, vec![4, 3]), Aval::new(DType::F32, vec![5, 4]), Aval::new(DType::F32, vec![3]));
    let jaxpr = make_jaxpr(f, &avals).expect("traces").jaxpr;
    let dots = |j: &remat_ir::Jaxpr| remat_ir::pp_jaxpr(j).matches("dot_general").count();
    let all = remat_ad::grad(&jaxpr.jaxpr, &[0, 1, 2]).expect("grad");
    let params = remat_ad::grad(&jaxpr.jaxpr, &[0, 1]).expect("grad");
    // Forward 1 (the second layer's forward only feeds the loss value, which `grad` does
    // not return), recomputed 2, weight cotangents 2, input cotangents 2 (x's and the
    // hidden layer's); without x's, one fewer.
    assert_eq!(dots(&all), 7, "{}", remat_ir::pp_jaxpr(&all));
    assert_eq!(dots(&params), 6, "{}", remat_ir::pp_jaxpr(&params));
    assert_eq!(params.invars.len(), 3);
}
