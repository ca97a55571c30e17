//! The residual ledger: its sum is the planned peak, which is what the JIT's compiled plan
//! (`remat bench`) reports for the same program, on every conformance and zoo program
//! (their vjps as one program) and every benchmark program (as it is); its rows say why
//! each residual is saved and what recomputing it costs.

use remat::ledger::{explain_jaxpr, explain_program, Ledger, ResidualHome};
use remat::{checkpoint, named, Array, Options, Policy, Tensor};

fn check_sum(name: &str, l: &Ledger) {
    let p = &l.profile.peak;
    assert_eq!(l.residual_peak_bytes() + l.rest_bytes() + p.unused_bytes, l.peak_bytes(), "{name}: the sum");
    assert_eq!(l.residual_peak_bytes() + l.rest_bytes(), p.live_bytes, "{name}");
    assert!(l.text().contains(&format!("= {} bytes, the planned peak", l.peak_bytes())), "{name}");
    for r in &l.rows {
        assert!(r.first <= r.last, "{name}: {r:?}");
        assert!(!r.why.is_empty(), "{name}");
        if r.made_by.is_some() {
            assert!(r.recompute_eqns >= 1, "{name}: {r:?}");
        }
    }
}

#[test]
fn the_ledger_reaches_the_compiled_peak_of_every_conformance_and_zoo_vjp() {
    let cases = remat_testkit::conformance_cases().into_iter().chain(remat_testkit::zoo_cases());
    let mut explained = 0;
    for (name, case) in cases {
        if remat_testkit::forward_only(&case) {
            continue;
        }
        let jaxpr = remat_testkit::case_jaxpr(&case);
        let names = remat_testkit::arg_names(&case);
        if let Err(e) = remat::ad::vjp(&jaxpr, &names) {
            // An opaque policy without its meaning: the ledger says the same.
            let err = explain_jaxpr(&jaxpr, &[], &names, &Options::default()).expect_err("no vjp, no ledger");
            assert_eq!(err.to_string(), remat::Error::from(e).to_string(), "{name}");
            continue;
        }
        let l = explain_jaxpr(&jaxpr, &[], &names, &Options::default()).unwrap_or_else(|e| panic!("{name}: {e}"));
        let whole = remat::ad::vjp_program(&jaxpr, &names).expect("differentiates");
        let compiled = remat::ir::verify(&whole.jaxpr)
            .map_err(|e| e.to_string())
            .and_then(|()| remat_jit_compile(&whole.jaxpr))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(l.peak_bytes(), compiled, "{name}: the ledger's peak is the compiled plan's");
        assert_eq!(l.rows.len(), whole.vjp.residuals.len(), "{name}: one row per residual");
        check_sum(&name, &l);
        explained += 1;
    }
    assert!(explained >= 50, "{explained} programs");
}

fn remat_jit_compile(jaxpr: &remat::Jaxpr) -> Result<usize, String> {
    let c = remat::run::Program::new(
        remat::ClosedJaxpr::new(std::sync::Arc::new(jaxpr.clone())),
        &remat::run::RunOptions::default(),
    )
    .map_err(|e| e.to_string())?;
    Ok(c.compiled().expect("the JIT backend").plan().peak_bytes)
}

#[test]
fn the_ledger_of_every_benchmark_program_reaches_its_planned_peak() {
    for path in remat_testkit::data_files("bench", "jaxpr") {
        let name = path.display().to_string();
        let jaxpr = remat::ir::parse_jaxpr(&std::fs::read_to_string(&path).expect("reads"), &name).expect("parses");
        let l = explain_program(&jaxpr, &[], &Options::default()).expect("explains");
        let planned = remat_jit_compile(&jaxpr).expect("compiles");
        assert_eq!(l.peak_bytes(), planned, "{name}");
        assert!(l.rows.is_empty() && l.split.is_none());
        check_sum(&name, &l);
    }
}

fn mlp((w1, w2, x): (Tensor, Tensor, Tensor)) -> Tensor {
    w2.dot(&w1.dot(&x).tanh()).sin().powi(2).sum()
}

fn args() -> (Array, Array, Array) {
    let a = |shape: &[usize]| {
        let n: usize = shape.iter().product();
        Array::F32(ndarray::ArrayD::from_shape_vec(shape.to_vec(), (0..n).map(|i| i as f32 * 0.01).collect()).unwrap())
    };
    (a(&[64, 32]), a(&[16, 64]), a(&[32]))
}

/// Under `dots_saveable`, the two products are saved because the policy says so; the
/// arguments are read where they are; `tanh` (not a dot) is recomputed.
#[test]
fn rows_say_why_a_residual_is_saved_and_what_recomputing_it_costs() {
    let ck = checkpoint(mlp).policy(Policy::DotsSaveable { only_if_no_batch_dims: false });
    let l = remat::explain(|a| ck.call(a), &args()).expect("explains");
    check_sum("dots", &l);
    let dots: Vec<_> = l.rows.iter().filter(|r| r.residual.to_string().contains("output of dot_general")).collect();
    assert_eq!(dots.len(), 2, "{}", l.text());
    for r in &dots {
        assert_eq!(r.why, "dots_saveable: dot_general is saveable");
        assert!(r.made_by.is_some_and(|e| l.is_forward(e)));
    }
    // The first product (64x32 by 32): 2*64*32 FLOPs, from the inputs alone.
    let first = dots.iter().find(|r| r.residual.aval.shape == vec![64]).expect("w1 . x");
    assert_eq!((first.recompute_eqns, first.recompute_flops), (1, 2 * 64 * 32));
    assert!(l.rows.iter().any(|r| r.home == ResidualHome::Caller && r.why.starts_with("an argument")));
    assert!(!l.text().contains("output of tanh from"), "tanh is recomputed:\n{}", l.text());

    // Without a checkpoint everything needed is saved, at the top level.
    let plain = remat::explain(mlp, &args()).expect("explains");
    assert!(plain.rows.iter().any(|r| r.why == "needed by the backward half, outside any checkpoint"));
    check_sum("plain", &plain);
}

#[test]
fn names_give_the_rule_of_a_names_policy() {
    let f = |(w, x): (Tensor, Tensor)| {
        let h = remat::checkpoint_name(&w.dot(&x).sin(), "hidden");
        h.cos().sum()
    };
    let ck = checkpoint(f).policy(Policy::SaveOnlyTheseNames { names: vec!["hidden".into()] });
    let a = |shape: &[usize]| Array::F32(ndarray::ArrayD::from_elem(shape.to_vec(), 0.5f32));
    let l = remat::explain(|p| ck.call(p), &(named("w", a(&[8, 4])), named("x", a(&[4])))).expect("explains");
    let row = l.rows.iter().find(|r| r.residual.to_string().contains("named 'hidden'")).expect("saved");
    assert_eq!(row.why, "save_only_these_names('hidden'): named 'hidden' is saveable", "{}", l.text());
    check_sum("names", &l);
}
