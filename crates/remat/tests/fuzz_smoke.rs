//! The CI smoke run of the text fuzzer (issue 22): each target, a fixed number of mutated
//! and generated inputs from a fixed seed, no finding. The long runs are
//! `cargo run --release -p remat --example fuzz_text` (docs/reliability.md).

use std::sync::Arc;
use std::time::Duration;

use remat_testkit::fuzz::{self, check_json, check_parser, Config, Outcome, Target};

#[path = "../examples/fuzz_text/deep.rs"]
mod deep;

fn smoke(target: Target, count: u64) {
    let config = Config { target, seconds: 20.0, max_inputs: count, seed: 22, time_limit: Duration::from_secs(10) };
    let deep: Option<Arc<fuzz::Deep>> = match target {
        Target::Parser => Some(Arc::new(deep::deep_check)),
        Target::Json => None,
    };
    let report = fuzz::run(&config, deep, None);
    let findings: Vec<String> = report.findings.iter().map(|f| f.to_string()).collect();
    assert!(findings.is_empty(), "{} findings in {} inputs:\n{}", findings.len(), report.tried, findings.join("\n"));
    assert!(report.tried > 0 && report.accepted > 0, "{report:?}");
}

#[test]
fn parser_smoke_run() {
    smoke(Target::Parser, 3000);
}

#[test]
fn json_smoke_run() {
    smoke(Target::Json, 20_000);
}

/// Every finding of the long runs (docs/reliability.md), shrunk: the input and what it must
/// give now (`Accepted`: parses, verifies, round-trips and survives autodiff and the
/// interpreter; `Rejected`: a located error). Each was a panic or a round-trip failure.
const FINDINGS: &[(Target, &str, Outcome)] = &[
    // JSON: a zero extent with huge others: no element, but ndarray's stride check failed
    // and the reader's `expect` panicked. Now "shape ... has more elements than this
    // machine can address".
    (Target::Json, r#"[{"dtype":"u32","shape":[0,8446744073709551615,3],"data":[]}]"#, Outcome::Rejected),
    // The verifier did not look inside `cond`'s branches (a tuple of jaxprs), so a branch
    // with a `mul` of no operands reached autodiff, which panicked (index out of bounds in
    // the jvp rules; "variable %2 is not mapped" in the builder).
    (
        Target::Parser,
        "{lambda;a:i32[]b:f32[3]c:f32[3]d:f32[3]e:f32[3]f:f32[].let\ng:f32[3]=broadcast_in_dim f\nh:f32[3]=cond[branches=({lambda;i:f32[3]j:f32[3]k:f32[3]l:f32[3]m:f32[3].let n:f32[3]=mul in(n)}{lambda;o:f32[3]p:f32[3]q:f32[3]r:f32[3]s:f32[3].let t:f32[]=mul u:f32[]=mul q\nv:f32[]=ne w:f32[]x:f32[]=mul y:f32[3]=add_any in(y)})]a b c d e g\nin()}",
        Outcome::Rejected,
    ),
    (
        Target::Parser,
        "{lambda;a:f32[3].let b:f32[]=reduce_sum[axes=(0,)out_sharding=None]a c:bool[]=gt b 0:f32[]d:i32[]=convert_element_type[new_dtype=int32 weak_type=False]c e:f32[3]=cond[branches=({lambda;f:f32[3].let\ng:f32[]=exp h:f32[3]=add 0:f32[]in(h)}{lambda;i:f32[3].let j:f32[]=sin k:f32[]l:f32[3]=mul k in(l)})]d a m:f32[]=reduce_sum[axes=(0,)out_sharding=None]e in()}",
        Outcome::Rejected,
    ),
    // A `jit` named `<lam(>` (or `<>`) was hoisted under that name, which does not read
    // back; such a jaxpr is now hoisted as `jaxpr`.
    (
        Target::Parser,
        "let lambda={lambda;a:f32[3].let\nb:f32[3]=cos a c:f32[3]=add b 0:f32[]in(c)}in{lambda;d:f32[3].let\ne:f32[3]=jit[name=<lam(>jaxpr=lambda]d\nf:f32[3]=jit[name=<>jaxpr=lambda]e in()}",
        Outcome::Accepted,
    ),
    // A `jit` whose result is never read: its body's output took the outer binder's name,
    // `_`, which cannot be read back as an operand.
    (
        Target::Parser,
        "{lambda;a:f32[3,4]b:f32[3,4]c:f32[3,4]d:f32[].let e:f32[3,4]=broadcast_in_dim d f:f32[3,4]=mul c e\ng:f32[3,4]=mul e b h:f32[3,4]=jit[name=_ jaxpr={lambda;f:f32[3,4].let h:f32[3,4]=rev[dimensions=()]f in(h)}]f\ni:f32[3,4]=mul g a j:f32[3,4]=rev[dimensions=()]i in()}",
        Outcome::Accepted,
    ),
    // A `gather` that collapses a dimension of slice size 0 (JAX requires exactly 1) passed
    // the verifier, and the interpreter read outside the operand ("ndarray: index out of
    // bounds"); the shape rule now rejects it as JAX's does (seed 2611261, 2026-11-26).
    (
        Target::Parser,
        "{ lambda ; a:f32[6,5] s:i32[3,4]. let u:i32[3,4,1] = broadcast_in_dim[broadcast_dimensions=(0, 1)] s\nt:f32[3,4,5] = gather[dimension_numbers=GatherDimensionNumbers(offset_dims=(2,), collapsed_slice_dims=(0,), start_index_map=(0,), operand_batching_dims=(), start_indices_batching_dims=()) fill_value=None indices_are_sorted=False mode=GatherScatterMode.CLIP slice_sizes=(0, 5) unique_indices=False] a u in (t,) }",
        Outcome::Rejected,
    ),
];

#[test]
fn every_finding_of_the_long_runs_is_fixed() {
    for (target, input, want) in FINDINGS {
        let got = match target {
            Target::Parser => check_parser(input, Some(&deep::deep_check)),
            Target::Json => check_json(input),
        };
        assert_eq!(&got, want, "{input}");
    }
}
