//! The JIT's common-subexpression elimination: what it merges under each scope, that the
//! merged programs compute what the originals do, and how `Auto` chooses by memory.

mod common;

use common::{count_eqns, differential_with};
use remat_ir::{parse_jaxpr, pp_jaxpr, Array, Jaxpr, Primitive};
use remat_jit::{compile_with_options, cse, CseScope, Options};
use remat_testkit::{data_dir, Rng};

fn parse(text: &str) -> Jaxpr {
    parse_jaxpr(text, "test").expect("parses")
}

fn bench(name: &str) -> Jaxpr {
    let path = data_dir().join("bench").join(format!("{name}.jaxpr"));
    parse_jaxpr(&std::fs::read_to_string(path).expect("readable"), name).expect("parses")
}

/// `dot_general` equations, bodies included.
fn dots(jaxpr: &Jaxpr) -> usize {
    count_eqns(jaxpr, &|p| matches!(p, Primitive::DotGeneral { .. }))
}

fn with(cse: CseScope) -> Options {
    Options { cse, ..Options::default() }
}

#[test]
fn equal_equations_merge_and_different_literals_do_not() {
    let j = parse(
        "{ lambda ; a:f32[4] b:f32[4]. let
    c:f32[4] = sin a
    d:f32[4] = sin a
    e:f32[4] = mul c 0.0:f32[]
    f:f32[4] = mul d -0.0:f32[]
    g:f32[4] = mul d 0.0:f32[]
    h:f32[4] = add e f
    i:f32[4] = add h g
    j:f32[4] = sin b
  in (i, j, d) }",
    );
    let merged = cse(&j, CseScope::WithinCheckpoints).expect("cse");
    let want = "{ lambda ; a:f32[4] b:f32[4]. let
    c:f32[4] = sin a
    d:f32[4] = mul c 0.0:f32[]
    e:f32[4] = mul c -0.0:f32[]
    f:f32[4] = add d e
    g:f32[4] = add f d
    h:f32[4] = sin b
  in (g, h, c) }";
    assert_eq!(pp_jaxpr(&merged), want);
    assert_eq!(pp_jaxpr(&cse(&j, CseScope::Off).expect("cse")), pp_jaxpr(&j));
}

/// An equation merged into an earlier one whose binder JAX dropped (`_`) reads that binder:
/// it is no longer dropped, and the program verifies (the CNN's backward pass merges its
/// zeros with the forward pass's unused ones).
#[test]
fn merging_into_a_dropped_binder_keeps_the_program_valid() {
    let j = parse(
        "{ lambda ; a:f32[4]. let
    _:f32[4] = sin a
    b:f32[4] = sin a
    c:f32[4] = add a b
  in (c,) }",
    );
    let merged = cse(&j, CseScope::WithinCheckpoints).expect("cse");
    remat_ir::verify(&merged).expect("the merged program verifies");
    assert_eq!(pp_jaxpr(&merged), "{ lambda ; a:f32[4]. let b:f32[4] = sin a; c:f32[4] = add a b in (c,) }");
}

/// A `prevent_cse` checkpoint keeps its recompute apart unless the scope is
/// `AcrossCheckpoints`; one with `prevent_cse=False` and a `jit` are inlined and merged
/// under any scope but `Off`.
#[test]
fn checkpoints_are_barriers_only_when_they_prevent_cse() {
    let program = |prevent_cse: bool| {
        parse(&format!(
            "{{ lambda ; a:f32[4]. let
    b:f32[4] = sin a
    c:f32[4] = remat2[
      differentiated=True
      jaxpr={{ lambda ; d:f32[4]. let e:f32[4] = sin d; f:f32[4] = cos e in (f,) }}
      policy=None
      prevent_cse={}
    ] a
    g:f32[4] = jit[name=h jaxpr={{ lambda ; i:f32[4]. let j:f32[4] = sin i in (j,) }}] a
    k:f32[4] = add b c
    l:f32[4] = add k g
  in (l,) }}",
            if prevent_cse { "True" } else { "False" }
        ))
    };
    let inlined = "{ lambda ; a:f32[4]. let
    b:f32[4] = sin a
    c:f32[4] = cos b
    d:f32[4] = add b c
    e:f32[4] = add d b
  in (e,) }";
    let barrier = "{ lambda ; a:f32[4]. let
    b:f32[4] = sin a
    c:f32[4] = remat2[
      differentiated=True
      jaxpr={ lambda ; d:f32[4]. let
          e:f32[4] = sin d
          f:f32[4] = cos e
        in (f,) }
      policy=None
      prevent_cse=True
    ] a
    g:f32[4] = add b c
    h:f32[4] = add g b
  in (h,) }";
    let strict = cse(&program(true), CseScope::WithinCheckpoints).expect("cse");
    assert_eq!(pp_jaxpr(&strict), barrier);
    assert_eq!(pp_jaxpr(&cse(&program(true), CseScope::AcrossCheckpoints).expect("cse")), inlined);
    assert_eq!(pp_jaxpr(&cse(&program(false), CseScope::WithinCheckpoints).expect("cse")), inlined);
    let mut rng = Rng(3);
    let args: Vec<Array> = program(true).in_avals().iter().map(|a| rng.array(a)).collect();
    let all = [CseScope::Off, CseScope::WithinCheckpoints, CseScope::Auto, CseScope::AcrossCheckpoints].map(with);
    differential_with("barrier", &program(true), &args, 1e-6, 1e-6, &all).expect("agrees");
}

/// A body shared by two calls stays one body (the printer hoists it once), and a scan's
/// body is merged within itself only.
#[test]
fn bodies_are_merged_on_their_own_and_stay_shared() {
    let j = parse(
        "let body = { lambda ; a:f32[3] b:f32[3]. let
    c:f32[3] = exp b
    d:f32[3] = exp b
    e:f32[3] = add a c
    f:f32[3] = add e d
  in (f, c) } in
{ lambda ; g:f32[3] h:f32[5,3]. let
    i:f32[3] j:f32[5,3] = scan[
      jaxpr=body
      length=5
      num_carry=1
      num_consts=0
      reverse=False
      unroll=1
    ] g h
    k:f32[3] l:f32[5,3] = scan[
      jaxpr=body
      length=5
      num_carry=1
      num_consts=0
      reverse=True
      unroll=1
    ] g h
  in (i, j, k, l) }",
    );
    let merged = cse(&j, CseScope::WithinCheckpoints).expect("cse");
    remat_ir::verify(&merged).expect("verifies");
    let text = pp_jaxpr(&merged);
    assert!(text.starts_with("let jaxpr = { lambda ; a:f32[3] b:f32[3]. let\n    c:f32[3] = exp b\n    d:f32[3] = add a c\n    e:f32[3] = add d c\n"), "{text}");
    assert_eq!(text.matches("exp").count(), 1, "{text}");
    let mut rng = Rng(5);
    let args: Vec<Array> = j.in_avals().iter().map(|a| rng.array(a)).collect();
    differential_with("scan bodies", &j, &args, 1e-6, 1e-6, &[with(CseScope::WithinCheckpoints)]).expect("agrees");
}

/// XLA compiles JAX's `mlp_medium_nothing` with the 23 products of `mlp_medium_plain`: its
/// CSE merges the checkpoints' recompute with the forward pass. Across checkpoints remat's
/// CSE does the same; within them the 8 recomputed products stay.
#[test]
fn across_checkpoints_the_nothing_policy_does_the_products_of_no_checkpoint() {
    let plain = dots(&cse(&bench("mlp_medium_plain"), CseScope::WithinCheckpoints).expect("cse"));
    let nothing = bench("mlp_medium_nothing");
    assert_eq!(plain, 23);
    assert_eq!(dots(&cse(&nothing, CseScope::WithinCheckpoints).expect("cse")), 31);
    assert_eq!(dots(&cse(&nothing, CseScope::AcrossCheckpoints).expect("cse")), plain);
}

/// `Auto` merges across checkpoints when the planned peak does not grow (the MLPs, where
/// the fused forward keeps only the layer inputs the `nothing` policy keeps, and `dots`
/// then keeps less) and keeps the recompute when it would (the transformer, whose forward
/// would keep the attention probabilities).
#[test]
fn auto_merges_across_checkpoints_only_when_the_plan_does_not_grow() {
    let plan = |j: &Jaxpr, s: CseScope| compile_with_options(j, &[], &with(s)).expect("compiles").plan().clone();
    for name in ["mlp_small_nothing", "mlp_small_dots"] {
        let j = bench(name);
        let (strict, merged, auto) =
            (plan(&j, CseScope::WithinCheckpoints), plan(&j, CseScope::AcrossCheckpoints), plan(&j, CseScope::Auto));
        assert!(merged.peak_bytes <= strict.peak_bytes, "{name}: {merged:?} vs {strict:?}");
        assert_eq!(auto, merged, "{name}");
    }
    let j = bench("transformer_names");
    let (strict, merged, auto) =
        (plan(&j, CseScope::WithinCheckpoints), plan(&j, CseScope::AcrossCheckpoints), plan(&j, CseScope::Auto));
    assert!(merged.peak_bytes > strict.peak_bytes, "{merged:?} vs {strict:?}");
    assert_eq!(auto, strict);
}
