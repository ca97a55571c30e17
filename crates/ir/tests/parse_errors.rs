//! Parse errors are data: each malformed input below and the error it gives, in one
//! snapshot. Every message names the line and column, what was expected and what was found.

const CASES: &[(&str, &str)] = &[
    ("empty input", ""),
    ("not a jaxpr", "hello"),
    ("missing lambda", "{ lam ; a:f32[]. let in (a,) }"),
    ("missing semicolon", "{ lambda a:f32[]. let in (a,) }"),
    ("unknown dtype", "{ lambda ; a:f8[3]. let in (a,) }"),
    ("key of an unknown implementation", "{ lambda ; a:key<rbg>[3]. let in (a,) }"),
    ("bad shape", "{ lambda ; a:f32[3,x]. let in (a,) }"),
    ("unclosed shape", "{ lambda ; a:f32[3. let in (a,) }"),
    ("bad memory space", "{ lambda ; a:f32<disk>[3]. let in (a,) }"),
    ("unknown primitive", "{ lambda ; a:f32[3]. let\n    b:f32[3] = frobnicate a\n  in (b,) }"),
    ("undefined variable", "{ lambda ; a:f32[3]. let\n    b:f32[3] = sin z\n  in (b,) }"),
    ("undefined output", "{ lambda ; a:f32[3]. let\n    b:f32[3] = sin a\n  in (q,) }"),
    ("binder defined twice", "{ lambda ; a:f32[3] a:f32[3]. let in (a,) }"),
    ("missing equals", "{ lambda ; a:f32[3]. let\n    b:f32[3] sin a\n  in (b,) }"),
    ("missing parameter", "{ lambda ; a:f32[3]. let\n    b:f32[3] = integer_pow a\n  in (b,) }"),
    ("unexpected parameter", "{ lambda ; a:f32[3]. let\n    b:f32[3] = sin[foo=1] a\n  in (b,) }"),
    ("wrong parameter type", "{ lambda ; a:f32[3]. let\n    b:f32[3] = integer_pow[y=True] a\n  in (b,) }"),
    ("bad dimension numbers", "{ lambda ; a:f32[3] b:f32[3]. let\n    c:f32[] = dot_general[dimension_numbers=(([0], [0]),) preferred_element_type=float32] a b\n  in (c,) }"),
    ("unknown policy", "{ lambda ; a:f32[]. let\n    b:f32[] = remat2[differentiated=False jaxpr={ lambda ; c:f32[]. let d:f32[] = sin c in (d,) } policy=SaveSomething() prevent_cse=True] a\n  in (b,) }"),
    ("policy missing argument", "{ lambda ; a:f32[]. let\n    b:f32[] = remat2[differentiated=False jaxpr={ lambda ; c:f32[]. let d:f32[] = sin c in (d,) } policy=DotsSaveable() prevent_cse=True] a\n  in (b,) }"),
    ("undefined hoisted jaxpr", "{ lambda ; a:f32[]. let\n    b:f32[] = remat2[differentiated=False jaxpr=jaxpr7 policy=None prevent_cse=True] a\n  in (b,) }"),
    ("bad literal", "{ lambda ; a:f32[]. let\n    b:f32[] = add a 1.0x:f32[]\n  in (b,) }"),
    ("literal with wrong dtype text", "{ lambda ; a:i32[]. let\n    b:i32[] = add a 1.5:i32[]\n  in (b,) }"),
    ("non-scalar literal", "{ lambda ; a:f32[3]. let\n    b:f32[3] = add a [...]:f32[3]\n  in (b,) }"),
    ("unterminated string", "{ lambda ; a:f32[]. let\n    b:f32[] = remat2[differentiated=False jaxpr={ lambda ; c:f32[]. let d:f32[] = sin c in (d,) } policy=SaveOnlyTheseNames(saveable_names=frozenset({'a)) prevent_cse=True] a\n  in (b,) }"),
    ("unclosed outputs", "{ lambda ; a:f32[]. let  in (a, }"),
    ("trailing garbage", "{ lambda ; a:f32[]. let  in (a,) } extra"),
    ("truncated", "{ lambda ; a:f32[]. let\n    b:f32[] = sin a"),
    ("truncated inside a hoisted jaxpr", "let jaxpr = { lambda ; a:f32[2] d:i32[]. let\n    k:i32[] = clamp 0:i32[] d 1:i32[]\n    l:f32[1] = dynamic_sl"),
    ("truncated inside a nested jaxpr", "{ lambda ; a:f32[]. let\n    b:f32[] = jit[\n      name=f\n      jaxpr={ lambda ; c:f32[]. let\n          d:f32[] = sin c\n"),
    ("truncated inside a string", "let jaxpr = { lambda ; a:f32[]. let\n    b:f32[] = remat2[differentiated=False jaxpr={ lambda ; c:f32[]. let d:f32[] = sin c in (d,) } policy=SaveOnlyTheseNames(saveable_names=frozenset({'a"),
    ("equation without outputs of an unknown primitive", "{ lambda ; a:f32[]. let\n    frobnicate[x=1] a\n  in (a,) }"),
    ("equation without outputs missing its operand", "{ lambda ; a:f32[]. let\n    jit[name=f jaxpr={ lambda ; b:f32[]. let  in () }] q\n  in (a,) }"),
    ("use of dropped binder", "{ lambda ; a:f32[]. let\n    _:f32[] = sin a\n    c:f32[] = cos _\n  in (c,) }"),
    ("hoisted jaxpr refers to itself", "let jaxpr = { lambda ; a:f32[]. let\n    b:f32[] = remat2[differentiated=False jaxpr=jaxpr policy=None prevent_cse=True] a\n  in (b,) } in\n{ lambda ; a:f32[]. let  in (a,) }"),
    ("hoisted jaxpr defined twice", "let f = { lambda ; a:f32[]. let  in (a,) } in\nlet f = { lambda ; a:f32[]. let  in (a,) } in\n{ lambda ; a:f32[]. let  in (a,) }"),
    ("unclosed hoisted jaxpr", "let jaxpr = { lambda ; a:f32[]. let  in (a,) in\n{ lambda ; a:f32[]. let  in (a,) }"),
    ("error inside a later hoisted jaxpr", "let jaxpr = { lambda ; a:f32[]. let\n    b:f32[] = jit[name=g jaxpr=g] a\n  in (b,) } in\nlet g = { lambda ; a:f32[]. let\n    b:f32[] = sin q\n  in (b,) } in\n{ lambda ; a:f32[]. let\n    b:f32[] = jit[name=f jaxpr=jaxpr] a\n  in (b,) }"),
    ("unclosed function repr", "{ lambda ; a:f32[]. let\n    b:f32[] = remat2[differentiated=False jaxpr={ lambda ; c:f32[]. let d:f32[] = sin c in (d,) } policy=<function f.<locals>.policy at 0xXXXX prevent_cse=True] a\n  in (b,) }"),
    ("nan literal of an integer dtype", "{ lambda ; a:i32[]. let\n    b:i32[] = add a nan:i32[]\n  in (b,) }"),
    ("unknown primitive with a hyphen", "{ lambda ; a:f32[3]. let\n    b:f32[3] = scatter-div[mode=None] a\n  in (b,) }"),
    ("empty2 memory space", "{ lambda ; . let\n    a:f32[] = empty2[dtype=float32 memory_space=MemorySpace.Pinned] \n  in (a,) }"),
    ("empty2 without dtype", "{ lambda ; . let\n    a:f32[] = empty2[memory_space=MemorySpace.Device] \n  in (a,) }"),
];

#[test]
fn parse_error_messages() {
    let mut report = String::new();
    for (what, text) in CASES {
        let err = match remat_ir::parse_jaxpr(text, "input.jaxpr") {
            Ok(j) => panic!("{what}: expected a parse error, got\n{}", remat_ir::pp_jaxpr(&j)),
            Err(e) => e,
        };
        report.push_str(&format!("{what}:\n    {err}\n"));
    }
    insta::assert_snapshot!(report);
}

/// Deep nesting is an error, not a stack overflow.
#[test]
fn deep_nesting_is_an_error() {
    let text = format!("{}{}", "(".repeat(10_000), ")".repeat(10_000));
    let src = format!("{{ lambda ; a:f32[]. let\n    b:f32[] = integer_pow[y={text}] a\n  in (b,) }}");
    let err = remat_ir::parse_jaxpr(&src, "deep.jaxpr").unwrap_err();
    assert!(err.message.contains("nesting deeper than"), "{err}");
}

/// The indexing, sorting and cumulative primitives' malformed parameters, in a snapshot of
/// their own.
const INDEXING_CASES: &[(&str, &str)] = &[
    ("unknown hyphenated primitive", "{ lambda ; a:f32[3]. let\n    b:f32[3] = scatter-frobnicate a\n  in (b,) }"),
    ("gather mode unknown", "{ lambda ; a:f32[4,5] b:i32[3,1]. let\n    c:f32[3,5] = gather[dimension_numbers=GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,), operand_batching_dims=(), start_indices_batching_dims=()) fill_value=None indices_are_sorted=False mode=GatherScatterMode.WRAP slice_sizes=(1, 5) unique_indices=False] a b\n  in (c,) }"),
    ("gather dimension numbers missing a field", "{ lambda ; a:f32[4,5] b:i32[3,1]. let\n    c:f32[3,5] = gather[dimension_numbers=GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,)) fill_value=None indices_are_sorted=False mode=GatherScatterMode.CLIP slice_sizes=(1, 5) unique_indices=False] a b\n  in (c,) }"),
    ("gather dimension numbers as a tuple", "{ lambda ; a:f32[4,5] b:i32[3,1]. let\n    c:f32[3,5] = gather[dimension_numbers=((1,), (0,), (0,), (), ()) fill_value=None indices_are_sorted=False mode=GatherScatterMode.CLIP slice_sizes=(1, 5) unique_indices=False] a b\n  in (c,) }"),
    ("gather fill_value not a number", "{ lambda ; a:f32[4,5] b:i32[3,1]. let\n    c:f32[3,5] = gather[dimension_numbers=GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,), operand_batching_dims=(), start_indices_batching_dims=()) fill_value='x' indices_are_sorted=False mode=GatherScatterMode.CLIP slice_sizes=(1, 5) unique_indices=False] a b\n  in (c,) }"),
    ("malformed float", "{ lambda ; a:f32[4,5] b:i32[3,1]. let\n    c:f32[3,5] = gather[dimension_numbers=GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,), operand_batching_dims=(), start_indices_batching_dims=()) fill_value=1.5.5 indices_are_sorted=False mode=GatherScatterMode.CLIP slice_sizes=(1, 5) unique_indices=False] a b\n  in (c,) }"),
    ("scatter update_consts", "{ lambda ; a:f32[4] b:i32[1,1] c:f32[1]. let\n    d:f32[4] = scatter-add[dimension_numbers=ScatterDimensionNumbers(update_window_dims=(), inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,), operand_batching_dims=(), scatter_indices_batching_dims=()) indices_are_sorted=False mode=GatherScatterMode.CLIP unique_indices=False update_consts=(1,) update_jaxpr=None] a b c\n  in (d,) }"),
    ("scatter update_jaxpr a name", "{ lambda ; a:f32[4] b:i32[1,1] c:f32[1]. let\n    d:f32[4] = scatter-add[dimension_numbers=ScatterDimensionNumbers(update_window_dims=(), inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,), operand_batching_dims=(), scatter_indices_batching_dims=()) indices_are_sorted=False mode=GatherScatterMode.CLIP unique_indices=False update_consts=() update_jaxpr=add_fn] a b c\n  in (d,) }"),
    ("sort missing num_keys", "{ lambda ; a:f32[4]. let\n    b:f32[4] = sort[dimension=0 is_stable=True] a\n  in (b,) }"),
    ("split sizes negative", "{ lambda ; a:f32[4]. let\n    b:f32[4] = split[axis=0 sizes=(-1, 5)] a\n  in (b,) }"),
    ("cumsum reverse not a bool", "{ lambda ; a:f32[4]. let\n    b:f32[4] = cumsum[axis=0 reverse=1] a\n  in (b,) }"),
];

#[test]
fn indexing_parse_error_messages() {
    let mut report = String::new();
    for (what, text) in INDEXING_CASES {
        let err = match remat_ir::parse_jaxpr(text, "input.jaxpr") {
            Ok(j) => panic!("{what}: expected a parse error, got\n{}", remat_ir::pp_jaxpr(&j)),
            Err(e) => e,
        };
        report.push_str(&format!("{what}:\n    {err}\n"));
    }
    insta::assert_snapshot!(report);
}

/// The parameters of `round` and `bitcast_convert_type`: a bad value is an error at the
/// equation that names the parameter, never a panic.
#[test]
fn elementwise_parameter_errors() {
    let eqn = |line: &str| format!("{{ lambda ; a:f32[3]. let\n    {line}\n  in (b,) }}");
    for (line, want) in [
        ("b:f32[3] = round a", "rounding_method"),
        ("b:f32[3] = round[rounding_method=2] a", "round: rounding_method=2 must be 0 (away from zero) or 1"),
        ("b:f32[3] = round[rounding_method=True] a", "rounding_method"),
        ("b:i32[3] = bitcast_convert_type a", "new_dtype"),
        ("b:i32[3] = bitcast_convert_type[new_dtype=int3] a", "int3"),
    ] {
        let err = match remat_ir::parse_jaxpr(&eqn(line), "input.jaxpr") {
            Ok(j) => panic!("{line}: expected a parse error, got\n{}", remat_ir::pp_jaxpr(&j)),
            Err(e) => e.to_string(),
        };
        assert!(err.contains(want), "{line}: {err}");
        assert!(err.starts_with("line 2, column "), "{line}: the error is not located: {err}");
    }
    // Both forms print back as JAX writes them.
    for line in ["b:f32[3] = round[rounding_method=1] a", "b:i32[3] = bitcast_convert_type[new_dtype=int32] a"] {
        let j = remat_ir::parse_jaxpr(&eqn(line), "input.jaxpr").unwrap();
        assert!(remat_ir::pp_jaxpr(&j).contains(line), "{}", remat_ir::pp_jaxpr(&j));
    }
}
