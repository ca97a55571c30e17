//! Parse errors are data: each malformed input below and the error it gives, in one
//! snapshot. Every message names the line and column, what was expected and what was found.

const CASES: &[(&str, &str)] = &[
    ("empty input", ""),
    ("not a jaxpr", "hello"),
    ("missing lambda", "{ lam ; a:f32[]. let in (a,) }"),
    ("missing semicolon", "{ lambda a:f32[]. let in (a,) }"),
    ("unknown dtype", "{ lambda ; a:f16[3]. let in (a,) }"),
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
    ("use of dropped binder", "{ lambda ; a:f32[]. let\n    _:f32[] = sin a\n    c:f32[] = cos _\n  in (c,) }"),
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
