//! The verifier on real programs and on broken ones: every jaxpr JAX printed in the
//! conformance cases and benchmark programs verifies clean, and each malformed program
//! below (which the parser accepts) is rejected with a message naming the problem and the
//! equation it is in.

use std::sync::Arc;

use remat_ir::{
    parse_jaxpr, verify, verify_closed, Array, Atom, ClosedJaxpr, Eqn, Jaxpr, Primitive, SourceInfo, UnaryOp,
    VerifyError,
};
use remat_ir::{Aval, DType};

fn check(name: &str, text: &str) -> Result<(), String> {
    let j = parse_jaxpr(text, name).map_err(|e| format!("{name}: parse error: {e}"))?;
    verify(&j).map_err(|e| format!("{name}:\n{e}"))
}

fn check_all(texts: Vec<(String, String)>) -> usize {
    let n = texts.len();
    let failures: Vec<String> = texts.iter().filter_map(|(name, text)| check(name, text).err()).collect();
    assert!(failures.is_empty(), "{} of {n} failed:\n{}", failures.len(), failures.join("\n"));
    n
}

#[test]
fn conformance_jaxprs_verify() {
    assert_eq!(check_all(remat_testkit::conformance_texts()), 96, "expected 32 cases with 3 jaxprs each");
}

#[test]
fn benchmark_programs_verify() {
    assert_eq!(check_all(remat_testkit::jaxpr_files("bench")), 25);
}

/// Parses `text` (which must parse) and returns the verifier's complaint, one problem a line.
fn rejected(text: &str) -> String {
    let j = parse_jaxpr(text, "bad.jaxpr").unwrap_or_else(|e| panic!("expected the parser to accept it: {e}"));
    match verify(&j) {
        Ok(()) => panic!("expected a verify error for\n{text}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn wrong_binder_type() {
    let err = rejected("{ lambda ; a:f32[3]. let\n    c:f32[4] = sin a\n  in (c,) }");
    assert_eq!(err, "eqn 0 (sin) at bad.jaxpr:2:5: binder 0 (%1) has type f32[4] but sin gives f32[3]");
}

#[test]
fn add_of_mismatched_shapes() {
    let err = rejected("{ lambda ; a:f32[3] b:f32[4]. let\n    c:f32[3] = add a b\n  in (c,) }");
    assert_eq!(err, "eqn 0 (add) at bad.jaxpr:2:5: add: operand shapes f32[3] and f32[4] differ");
}

#[test]
fn dot_general_with_wrong_contracting_size() {
    let err = rejected(
        "{ lambda ; a:f32[3,4] b:f32[5,6]. let
    c:f32[3,6] = dot_general[dimension_numbers=(([1], [0]), ([], [])) preferred_element_type=float32] a b
  in (c,) }",
    );
    assert_eq!(
        err,
        "eqn 0 (dot_general) at bad.jaxpr:2:5: dot_general: contracting dimension sizes differ: lhs dim 1 has 4, rhs dim 0 has 5"
    );
}

#[test]
fn reduce_over_a_missing_axis() {
    let err =
        rejected("{ lambda ; a:f32[3,4]. let\n    b:f32[3] = reduce_sum[axes=(2,) out_sharding=None] a\n  in (b,) }");
    assert_eq!(
        err,
        "eqn 0 (reduce_sum) at bad.jaxpr:2:5: reduce_sum: axes [2] include axis 2, out of range for f32[3,4]"
    );
}

#[test]
fn host_operand_of_an_elementwise_op() {
    let err = rejected("{ lambda ; a:f32<host>[3]. let\n    b:f32[3] = sin a\n  in (b,) }");
    assert_eq!(err, "eqn 0 (sin) at bad.jaxpr:2:5: operand 0 in host memory; only device_put can read it");
}

#[test]
fn use_before_binding_is_a_parse_error() {
    let e =
        parse_jaxpr("{ lambda ; a:f32[3]. let\n    b:f32[3] = sin c\n    c:f32[3] = cos a\n  in (b,) }", "bad.jaxpr")
            .unwrap_err();
    assert_eq!(e.to_string(), "line 2, column 20: undefined variable `c`");
}

fn sin(x: remat_ir::Var, out: remat_ir::Var) -> Eqn {
    Eqn::new(Primitive::Unary(UnaryOp::Sin), vec![Atom::Var(x)], vec![out], SourceInfo::unknown())
}

#[test]
fn rebinding_and_use_before_binding_in_a_built_jaxpr() {
    // { lambda ; a:f32[3]. let b = sin c; c = sin a; a = sin b in (a,) }
    let mut j = Jaxpr::default();
    let a = j.new_var(Aval::new(DType::F32, vec![3]));
    let b = j.new_var(Aval::new(DType::F32, vec![3]));
    let c = j.new_var(Aval::new(DType::F32, vec![3]));
    j.invars = vec![a];
    j.eqns = vec![sin(c, b), sin(a, c), sin(b, a)];
    j.outvars = vec![Atom::Var(a)];
    let err = verify(&j).unwrap_err();
    assert_eq!(
        err.to_string(),
        "eqn 0 (sin): variable %2:f32[3] is read before it is bound\n\
         eqn 2 (sin): variable %0 is bound again; it was bound by invar 0"
    );
}

#[test]
fn out_of_range_and_dropped_variables_in_a_built_jaxpr() {
    let mut j = Jaxpr::default();
    let a = j.new_var(Aval::new(DType::F32, vec![]));
    let b = j.new_var(Aval::new(DType::F32, vec![]));
    j.vars[b.index()].dropped = true;
    j.invars = vec![a];
    j.eqns = vec![sin(a, b)];
    j.outvars = vec![Atom::Var(b), Atom::Var(remat_ir::Var(7))];
    let err = verify(&j).unwrap_err();
    assert_eq!(
        err.to_string(),
        "outvars: variable %1:f32[] is a dropped binder (`_`) but is read\n\
         outvars: variable %7 is out of range (2 variables)"
    );
}

#[test]
fn error_inside_a_nested_remat2() {
    let err = rejected(
        "{ lambda ; a:f32[3]. let
    b:f32[4] = remat2[
      differentiated=False
      jaxpr={ lambda ; c:f32[3]. let
          d:f32[4] = sin c
        in (d,) }
      policy=None
      prevent_cse=True
    ] a
  in (b,) }",
    );
    assert_eq!(
        err,
        "in eqn 0 (remat2) param jaxpr, eqn 0 (sin) at bad.jaxpr:5:11: binder 0 (%1) has type f32[4] but sin gives f32[3]"
    );
}

#[test]
fn a_shared_nested_jaxpr_is_reported_once() {
    let err = rejected(
        "let jaxpr = { lambda ; c:f32[3]. let d:f32[4] = sin c in (d,) } in
{ lambda ; a:f32[3]. let
    b:f32[4] = remat2[differentiated=False jaxpr=jaxpr policy=None prevent_cse=True] a
    e:f32[4] = remat2[differentiated=False jaxpr=jaxpr policy=None prevent_cse=True] a
  in (b, e) }",
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("in eqn 0 (remat2) param jaxpr, eqn 0 (sin) at bad.jaxpr:1:38: "), "{err}");
}

#[test]
fn all_problems_are_reported_together() {
    let j = parse_jaxpr(
        "{ lambda ; a:f32[3] b:f32[4]. let
    c:f32[3] = add a b
    d:f32[5] = cos a
    e:f32[3] = sin a
  in (c, d, e) }",
        "bad.jaxpr",
    )
    .unwrap();
    let VerifyError { problems } = verify(&j).unwrap_err();
    let paths: Vec<&str> = problems.iter().map(|p| p.path.as_str()).collect();
    assert_eq!(paths, ["eqn 0 (add) at bad.jaxpr:2:5", "eqn 1 (cos) at bad.jaxpr:3:5"]);
    assert_eq!(problems[1].message, "binder 0 (%3) has type f32[5] but cos gives f32[3]");
}

#[test]
fn closed_jaxpr_consts_match_constvars() {
    let j = Arc::new(parse_jaxpr("{ lambda a:f32[3] ; b:f32[3]. let c:f32[3] = mul a b in (c,) }", "t").unwrap());
    let good = ClosedJaxpr { jaxpr: j.clone(), consts: vec![Array::F32(ndarray::ArrayD::zeros(vec![3]))] };
    assert_eq!(verify_closed(&good), Ok(()));
    let wrong = ClosedJaxpr { jaxpr: j.clone(), consts: vec![Array::I32(ndarray::ArrayD::zeros(vec![3]))] };
    assert_eq!(verify_closed(&wrong).unwrap_err().to_string(), "consts: const 0 is i32[3] but constvar %0 is f32[3]");
    let missing = ClosedJaxpr::new(j);
    assert_eq!(verify_closed(&missing).unwrap_err().to_string(), "consts: 0 consts for 1 constvars");
}

#[test]
fn gather_with_indices_of_the_wrong_vector_length() {
    let err = rejected(
        "{ lambda ; a:f32[4,5] b:i32[3,2]. let
    c:f32[3,5] = gather[dimension_numbers=GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,), operand_batching_dims=(), start_indices_batching_dims=()) fill_value=None indices_are_sorted=False mode=GatherScatterMode.CLIP slice_sizes=(1, 5) unique_indices=False] a b
  in (c,) }",
    );
    assert_eq!(
        err,
        "eqn 0 (gather) at bad.jaxpr:2:5: gather: the index vectors of i32[3,2] have 2 entries, expected 1"
    );
}

#[test]
fn gather_slice_larger_than_the_operand() {
    let err = rejected(
        "{ lambda ; a:f32[4,5] b:i32[3,1]. let
    c:f32[3,6] = gather[dimension_numbers=GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,), operand_batching_dims=(), start_indices_batching_dims=()) fill_value=None indices_are_sorted=False mode=GatherScatterMode.CLIP slice_sizes=(1, 6) unique_indices=False] a b
  in (c,) }",
    );
    assert_eq!(err, "eqn 0 (gather) at bad.jaxpr:2:5: gather: slice size 6 exceeds dimension 1 of f32[4,5]");
}

#[test]
fn scatter_updates_of_the_wrong_shape() {
    let err = rejected(
        "{ lambda ; a:f32[4,5] b:i32[3,1] c:f32[2,5]. let
    d:f32[4,5] = scatter-add[dimension_numbers=ScatterDimensionNumbers(update_window_dims=(1,), inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,), operand_batching_dims=(), scatter_indices_batching_dims=()) indices_are_sorted=False mode=GatherScatterMode.FILL_OR_DROP unique_indices=False update_consts=() update_jaxpr=None] a b c
  in (d,) }",
    );
    assert_eq!(
        err,
        "eqn 0 (scatter-add) at bad.jaxpr:2:5: scatter-add: scatter axis 0 of f32[2,5] and the indices' batch axes differ"
    );
}

#[test]
fn split_sizes_that_do_not_add_up() {
    let err =
        rejected("{ lambda ; a:f32[4,5]. let\n    b:f32[4,1] c:f32[4,3] = split[axis=1 sizes=(1, 3)] a\n  in (b, c) }");
    assert_eq!(err, "eqn 0 (split) at bad.jaxpr:2:5: split: sizes [1, 3] do not add up to dimension 1 of f32[4,5]");
}

#[test]
fn sort_of_operands_of_different_shapes_and_top_k_too_large() {
    let err = rejected("{ lambda ; a:f32[4] b:i32[5]. let\n    c:f32[4] d:i32[5] = sort[dimension=0 is_stable=True num_keys=1] a b\n  in (c, d) }");
    assert_eq!(err, "eqn 0 (sort) at bad.jaxpr:2:5: sort: operand 1 i32[5] and operand 0 f32[4] differ in shape");
    let err = rejected("{ lambda ; a:f32[4]. let\n    b:f32[5] c:i32[5] = top_k[axis=0 k=5] a\n  in (b, c) }");
    assert_eq!(err, "eqn 0 (top_k) at bad.jaxpr:2:5: top_k: k=5 exceeds dimension 0 of f32[4]");
}

/// The dtype rules of the bitwise, rounding and special-function ops, and the shapes of
/// `bitcast_convert_type` between widths.
#[test]
fn elementwise_dtype_rules() {
    for (text, want) in [
        (
            "a:f32[3] b:f32[3]. let\n    c:f32[3] = and a b",
            "and: operands must be integers or bool, found f32[3] and f32[3]",
        ),
        ("a:bool[3] b:bool[3]. let\n    c:bool[3] = shift_left a b", "shift_left: operands must be integers"),
        (
            "a:i32[3] b:f32[3]. let\n    c:i32[3] = shift_right_logical a b",
            "shift_right_logical: operand dtypes differ: i32[3] and f32[3]",
        ),
        ("a:f32[3] b:f32[3]. let\n    c:f32[3] = not a", "not: operand must be an integer or bool, found f32[3]"),
        ("a:i32[3] b:f32[3]. let\n    c:bool[3] = is_finite a", "is_finite: operand must be a float, found i32[3]"),
        ("a:i32[3] b:f32[3]. let\n    c:i32[3] = round[rounding_method=0] a", "round: operand must be a float"),
        ("a:i32[3] b:i32[3]. let\n    c:i32[3] = polygamma a b", "polygamma: operands must be floats"),
        ("a:bool[3] b:bool[3]. let\n    c:bool[3] = rem a b", "rem: operands must be numbers"),
        (
            "a:f32[3] b:f32[3]. let\n    c:f32[3] = lgamma a\n    d:i32[3] = erf_inv c",
            "binder 0 (%3) has type i32[3] but erf_inv gives f32[3]",
        ),
        (
            "a:i32[3] b:f32[3]. let\n    c:f64[] = bitcast_convert_type[new_dtype=float64] a",
            "bitcasting i32[3] to the wider f64 needs a last axis of 2",
        ),
        (
            "a:f64[3] b:f32[3]. let\n    c:i32[3] = bitcast_convert_type[new_dtype=int32] a",
            "bitcast_convert_type gives i32[3,2]",
        ),
        (
            "a:bool[3] b:f32[3]. let\n    c:i32[3] = bitcast_convert_type[new_dtype=int32] a",
            "cannot bitcast bool[3] to i32: bool has no bit width",
        ),
    ] {
        let err = rejected(&format!("{{ lambda ; {text}\n  in (b,) }}"));
        assert!(err.contains(want), "{text}:\n{err}");
    }
    // Accepted: a bool `is_finite`, bool `and`, and bitcasts between widths both ways.
    let ok = "{ lambda ; a:f32[3] b:f64[3] c:i32[3,2]. let\n    d:bool[3] = is_finite a\n    e:bool[3] = and d d\n    f:i32[3,2] = bitcast_convert_type[new_dtype=int32] b\n    g:f64[3] = bitcast_convert_type[new_dtype=float64] c\n  in (e, f, g) }";
    verify(&parse_jaxpr(ok, "ok.jaxpr").unwrap()).unwrap();
}

/// JAX prints no axis size on `all_to_all`: the enclosing `shard_map`'s mesh gives it, and
/// one outside any `shard_map` is an error saying so; inside one, its result's shape is
/// checked against the mesh's axis size.
#[test]
fn all_to_all_takes_its_axis_size_from_the_enclosing_mesh() {
    let outside = "{ lambda ; a:f32[4,4]. let
    b:f32[2,8] = all_to_all[axis_index_groups=None axis_name=x concat_axis=1 split_axis=0 tiled=True] a
  in (b,) }";
    let err = rejected(outside);
    assert!(err.contains("no enclosing shard_map's mesh gives the size of its axes"), "{err}");
    let inside = |out: &str| {
        let outer = if out == "f32[2,8]" { "4,8" } else { "8,4" };
        format!(
            "{{ lambda ; a:f32[8,4]. let
    b:f32[{outer}] = shard_map[
      check_vma=True
      in_specs=(P('x', None),)
      jaxpr={{ lambda ; c:f32[4,4]{{V:x}}. let
          d:{out}{{V:x}} = all_to_all[axis_index_groups=None axis_name=x concat_axis=1 split_axis=0 tiled=True] c
        in (d,) }}
      mesh=Mesh('x': 2, axis_types=(Auto,))
      newly_manual_axes=frozenset({{'x'}})
      out_specs=(P('x', None),)
    ] a
  in (b,) }}"
        )
    };
    let good = parse_jaxpr(&inside("f32[2,8]"), "a2a").unwrap();
    verify(&good).unwrap();
    assert!(remat_ir::pp_jaxpr(&good).contains("axis_name=x\n"), "{}", remat_ir::pp_jaxpr(&good));
    let err = rejected(&inside("f32[4,4]"));
    assert!(err.contains("all_to_all"), "{err}");
}
