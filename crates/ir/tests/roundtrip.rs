//! Round trip: every jaxpr JAX printed in the conformance cases and benchmark programs
//! parses and prints back character for character.

use remat_ir::{parse_jaxpr, pp_jaxpr, Atom, Aval, BinaryOp, DType, Jaxpr, LitValue, Primitive, SourceInfo};

fn check(name: &str, text: &str) -> Result<(), String> {
    let j = parse_jaxpr(text, name).map_err(|e| format!("{name}: parse error: {e}"))?;
    let printed = pp_jaxpr(&j);
    if printed != text {
        let (i, (a, b)) = printed
            .lines()
            .zip(text.lines())
            .enumerate()
            .find(|(_, (a, b))| a != b)
            .unwrap_or((0, ("<length differs>", "")));
        return Err(format!("{name}: line {}:\n  printed: {a}\n  jax:     {b}", i + 1));
    }
    Ok(())
}

/// Checks every `(name, text)` and asserts how many there were and that all passed.
fn check_all(texts: Vec<(String, String)>, expected: impl Fn(usize) -> bool, what: &str) {
    let n = texts.len();
    assert!(expected(n), "{what}: found {n}");
    let failures: Vec<String> = texts.iter().filter_map(|(name, text)| check(name, text).err()).collect();
    assert!(failures.is_empty(), "{} of {n} failed:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn conformance_jaxprs_round_trip() {
    check_all(remat_testkit::conformance_texts(), |n| n == 96, "expected 32 cases with 3 jaxprs each");
}

/// The per-primitive cases (`tests/data/primitives`): each case's jaxpr and JAX's forward
/// and backward jaxprs.
#[test]
fn primitive_case_jaxprs_round_trip() {
    let mut texts = Vec::new();
    for (name, case) in remat_testkit::primitive_cases() {
        for field in ["jaxpr", "jax_fwd_jaxpr", "jax_bwd_jaxpr"] {
            texts.push((format!("{name}.{field}"), case[field].as_str().expect("a jaxpr").to_string()));
        }
    }
    check_all(texts, |n| n >= 75, "expected at least 25 primitive cases with 3 jaxprs each");
}

/// The sharded cases (`tests/data/sharded`, issue 46): each program (`jit` with shardings,
/// `shard_map` with collectives and varying manual axes, `sharding_constraint`), JAX's forward
/// and backward jaxprs, and the program under each recorded checkpoint policy.
#[test]
fn sharded_case_jaxprs_round_trip() {
    let mut texts = Vec::new();
    for (name, case) in remat_testkit::sharded_cases() {
        for field in ["jaxpr", "jax_fwd_jaxpr", "jax_bwd_jaxpr"] {
            texts.push((format!("{name}.{field}"), case[field].as_str().expect("a jaxpr").to_string()));
        }
        for p in case["policies"].as_array().expect("policies") {
            let policy = p["policy"].as_str().expect("a policy name");
            texts.push((format!("{name}.{policy}"), p["jaxpr"].as_str().expect("a jaxpr").to_string()));
        }
    }
    let unverified: Vec<String> = texts
        .iter()
        .filter_map(|(name, text)| {
            let j = parse_jaxpr(text, name).ok()?;
            remat_ir::verify(&j).err().map(|e| format!("{name}: {e}"))
        })
        .collect();
    assert!(unverified.is_empty(), "{}", unverified.join("\n"));
    check_all(texts, |n| n == 40, "expected 8 sharded cases with 5 jaxprs each");
}

#[test]
fn benchmark_programs_round_trip() {
    check_all(remat_testkit::jaxpr_files("bench"), |n| n == 25, "expected 25 benchmark programs");
}

#[test]
fn reduced_benchmark_programs_round_trip() {
    let texts = remat_testkit::reduced_bench_cases()
        .into_iter()
        .map(|(name, case)| (name, case["jaxpr"].as_str().expect("a jaxpr").to_string()))
        .collect();
    check_all(texts, |n| n == 13, "expected 13 reduced-size model programs");
}

/// JAX names a variable once per variable object: a `jit` body cached under two calls whose
/// enclosing jaxprs were rebuilt prints the second time with the names of the first
/// (`cnn_dots`: the `relu` body keeps `bc`/`bd` inside a call whose own binder is `ca`).
/// Nested jaxprs written alike share their names; one written differently does not.
#[test]
fn jaxprs_written_alike_share_their_variable_names() {
    let text = "{ lambda ; a:f32[3] b:f32[3]. let
    c:f32[3] = custom_jvp_call[
      name=relu
      call_jaxpr={ lambda ; d:f32[3]. let
          e:f32[3] = jit[name=relu jaxpr={ lambda ; d:f32[3]. let e:f32[3] = max d 0.0:f32[] in (e,) }] d
        in (e,) }
      jvp=jvp
      symbolic_zeros=False
    ] a
    f:f32[3] = custom_jvp_call[
      name=relu
      call_jaxpr={ lambda ; g:f32[3]. let
          h:f32[3] = jit[name=relu jaxpr={ lambda ; d:f32[3]. let e:f32[3] = max d 0.0:f32[] in (e,) }] g
        in (h,) }
      jvp=jvp
      symbolic_zeros=False
    ] b
  in (c, f) }";
    let printed = pp_jaxpr(&parse_jaxpr(text, "t").expect("parses"));
    assert_eq!(
        printed.matches("jaxpr={ lambda ; d:f32[3]. let e:f32[3] = max d 0.0:f32[] in (e,) }").count(),
        2,
        "{printed}"
    );
    assert!(printed.contains("call_jaxpr={ lambda ; g:f32[3]."), "{printed}");
    // Without the shared text, the second body is named afresh, after its call's operands.
    let apart = text.replacen("e:f32[3] = max d 0.0:f32[] in (e,) }] g", "e:f32[3] = max d 1.0:f32[] in (e,) }] g", 1);
    let printed = pp_jaxpr(&parse_jaxpr(&apart, "t").expect("parses"));
    assert!(printed.contains("jaxpr={ lambda ; g:f32[3]. let h:f32[3] = max g 1.0:f32[] in (h,) }"), "{printed}");
}

/// Complex literals as JAX prints them (Python's complex repr), including the words
/// `nanj`/`infj` and signed zeros, read back to the same value and text.
#[test]
fn complex_literals_round_trip() {
    let text = "{ lambda ; a:c64[3] b:c128[]. let\n    c:c64[3] = mul a (2+1j):c64[]\n    d:c64[3] = add c 1j:c64[]\n    e:c64[3] = sub d (-0-1j):c64[]\n    f:c64[3] = mul e infj:c64[]\n    g:c64[3] = add f (nan+nanj):c64[]\n    h:c128[] = mul b (1e+20-0.5j):c128[]\n    i:f32[3] = real g\n    j:c64[3] = conj[input_dtype=float32] i\n  in (j, h) }";
    check("complex", text).unwrap();
    let j = parse_jaxpr(text, "complex").unwrap();
    let Atom::Lit(l) = j.eqns[0].invars[1] else { panic!("a literal") };
    assert_eq!(l.value, LitValue::C64(remat_ir::c64::new(2.0, 1.0)));
    assert_eq!(j.aval(j.eqns[7].outvars[0]), &Aval::new(DType::C64, vec![3]));
}

#[test]
fn extra_jax_texts_round_trip() {
    check_all(remat_testkit::jaxpr_files("jax_extra"), |n| n >= 4, "expected the extra JAX texts");
}

/// `case.field` and text of every jaxpr the zoo records (some cases are forward only).
fn zoo_texts() -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (name, case) in remat_testkit::zoo_cases() {
        for field in ["jaxpr", "jax_fwd_jaxpr", "jax_bwd_jaxpr"] {
            if let Some(text) = case[field].as_str() {
                out.push((format!("{name}.{field}"), text.to_string()));
            }
        }
    }
    out
}

/// Whether a parse error is one the primitives or dtypes still missing from remat explain
/// (others add them), rather than a printing form the parser does not read.
fn is_missing_primitive_or_dtype(e: &remat_ir::ParseError) -> bool {
    e.message.starts_with("unknown primitive `")
        || e.message.starts_with("expected a dtype")
        || e.message.contains(": unsupported dtype `")
}

#[test]
fn zoo_jaxprs_round_trip_or_lack_only_primitives() {
    let texts = zoo_texts();
    assert!(texts.len() >= 40, "expected the zoo's jaxprs, found {}", texts.len());
    let mut failures = Vec::new();
    let mut parsed = 0;
    for (name, text) in &texts {
        match parse_jaxpr(text, name) {
            Ok(_) => {
                parsed += 1;
                if let Err(e) = check(name, text) {
                    failures.push(e);
                }
            }
            Err(e) if is_missing_primitive_or_dtype(&e) => eprintln!("{name}: not yet: {e}"),
            Err(e) => failures.push(format!("{name}: parse error: {e}")),
        }
    }
    eprintln!("{parsed} of {} zoo jaxprs parse and round-trip", texts.len());
    assert!(failures.is_empty(), "{} failed:\n{}", failures.len(), failures.join("\n"));
}

// ---- The printing forms of real programs, in texts JAX 0.10.2 printed ----

/// Two hoisted jits, the first calling the second before its definition (JAX prints hoisted
/// jaxprs in breadth-first order of discovery): `outer` twice, each calling `inner`.
const FORWARD_REFERENCE: &str = "let outer = { lambda ; a:f32[]. let
    b:f32[] = jit[name=inner jaxpr=inner] a
    c:f32[] = add b 1.0:f32[]
  in (c,) } in
let inner = { lambda ; d:f32[]. let
    e:f32[] = sin d
    f:f32[] = mul e 2.0:f32[]
  in (f,) } in
{ lambda ; g:f32[]. let
    h:f32[] = jit[name=outer jaxpr=outer] g
    i:f32[] = add g 1.0:f32[]
    j:f32[] = jit[name=outer jaxpr=outer] i
    k:f32[] = mul h j
  in (k,) }";

/// `x * 0.1` (a weak Python float, never rounded: `0.1`) and `np.float32(0.1) * x` (the
/// `f32` value's repr).
const WEAK_AND_STRONG_LITERALS: &str = "{ lambda ; a:f32[]. let
    b:f32[] = mul a 0.1:f32[]
    c:f32[] = convert_element_type[new_dtype=float32 weak_type=False] a
    d:f32[] = mul 0.10000000149011612:f32[] c
    e:f32[] = convert_element_type[new_dtype=float32 weak_type=False] b
    f:f32[] = add e d
  in (f,) }";

/// NaN and infinity literals, and a literal last before a jit's wrapped operands.
const SPECIAL_FLOAT_LITERALS: &str = "{ lambda ; a:f32[3]. let
    b:f32[3] = max a nan:f32[]
    c:f32[3] = min a -inf:f32[]
    d:f32[3] = add b c
    e:bool[3] = gt a 0.0:f32[]
    f:f32[3] = jit[
      name=_where
      jaxpr={ lambda ; e:bool[3] a:f32[3] g:f32[]. let
          h:f32[3] = broadcast_in_dim g
          f:f32[3] = select_n e h a
        in (f,) }
    ] e a inf:f32[]
    i:f32[3] = add d f
  in (i,) }";

/// Boolean and `f64` literals (with `jax_enable_x64`), a one-line body, and an operand-free
/// equation's trailing space.
const BOOL_AND_F64_LITERALS: &str = "{ lambda ; a:f64[] b:f64[]. let
    c:f64[] = select_n True:bool[] a b
    d:f64[] = min a -inf:f64[]
    e:f64[] = add c d
    f:f64[] = max b nan:f64[]
    g:f64[] = add e f
  in (g,) }";
const ONE_LINE: &str = "{ lambda ; a:f64[]. let b:bool[3] = broadcast_in_dim False:bool[] in (b,) }";
const IOTA: &str = "{ lambda ; a:f32[]. let
    b:f32[3] = iota[dimension=0 dtype=float32 shape=(3,) sharding=None] 
    c:f32[3] = mul b a
  in (c,) }";

/// NumPy integers in parameters (the transpose of `slice`, `x[1:3]`).
const NUMPY_INTS: &str = "{ lambda ; a:f32[4]. let
    b:f32[2] = slice[limit_indices=(3,) start_indices=(1,) strides=None] a
    c:f32[2] = sin b
    d:f32[2] = cos b
    e:f32[1] = slice[limit_indices=(1,) start_indices=(0,) strides=None] a
    f:f32[] = squeeze[dimensions=(0,)] e
    g:f32[2] = mul c f
    _:f32[] = reduce_sum[axes=(0,) out_sharding=None] g
    h:f32[2] = broadcast_in_dim 1.0:f32[]
    i:f32[2] = mul c h
    j:f32[] = reduce_sum[axes=(0,) out_sharding=None] i
    k:f32[2] = mul h f
    l:f32[1] = broadcast_in_dim j
    m:f32[4] = pad[padding_config=((0, np.int64(3), 0),)] l 0.0:f32[]
    n:f32[2] = mul k d
    o:f32[4] = pad[padding_config=((1, np.int64(1), 0),)] n 0.0:f32[]
    p:f32[4] = add_any m o
  in (p,) }";

/// Weak float literals among a jaxpr's outputs (`lambda x: (x, 0.1)`; a cond branch
/// `lambda x: 0.1` prints `{ lambda ; e:f32[]. let  in (0.1:f32[],) }`).
const LITERAL_OUTPUT: &str = "{ lambda ; a:f32[]. let  in (a, 0.1:f32[]) }";

/// An empty body (`let  in`, two spaces) in a jit of `lambda y: y`.
const EMPTY_BODY: &str = "{ lambda ; a:f32[4]. let
    b:f32[4] = sin a
    c:f32[4] = jit[name=<lambda> jaxpr={ lambda ; a:f32[4]. let  in (a,) }] a
    d:f32[4] = add b c
  in (d,) }";

/// Equations without outputs (what JAX prints after its own dead-code elimination of a
/// `jit`'s results; `jax_extra/where_without_outputs.jaxpr` has one JAX printed), on one
/// line between others and first in a body.
const NO_OUTPUTS: &str = "{ lambda ; a:f32[] b:f32[]. let
    jit[name=f jaxpr={ lambda ; a:f32[]. let  in () }] a
    c:f32[] = sin a
    jit[name=g jaxpr={ lambda ; c:f32[] d:f32[]. let  in () }] c 1.0:f32[]
    jit[name=h jaxpr={ lambda ; b:f32[]. let  in () }] b
    e:f32[] = cos c
  in (e,) }";

#[test]
fn printing_forms_round_trip() {
    let texts = [
        ("forward reference", FORWARD_REFERENCE),
        ("weak and strong literals", WEAK_AND_STRONG_LITERALS),
        ("special float literals", SPECIAL_FLOAT_LITERALS),
        ("bool and f64 literals", BOOL_AND_F64_LITERALS),
        ("one line", ONE_LINE),
        ("iota", IOTA),
        ("numpy ints", NUMPY_INTS),
        ("empty body", EMPTY_BODY),
        ("literal output", LITERAL_OUTPUT),
        ("equations without outputs", NO_OUTPUTS),
    ];
    let failures: Vec<String> = texts.iter().filter_map(|(name, text)| check(name, text).err()).collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn a_hoisted_name_is_one_shared_jaxpr_even_when_used_before_its_definition() {
    let j = parse_jaxpr(FORWARD_REFERENCE, "fwd.jaxpr").unwrap();
    let call = |e: &remat_ir::Eqn| match &e.primitive {
        Primitive::Jit { jaxpr, .. } => jaxpr.jaxpr.clone(),
        other => panic!("expected a jit, found {other}"),
    };
    let (outer1, outer2) = (call(&j.eqns[0]), call(&j.eqns[2]));
    assert!(std::sync::Arc::ptr_eq(&outer1, &outer2));
    assert_eq!(call(&outer1.eqns[0]).eqns.len(), 2, "outer calls inner, defined after it");
}

#[test]
fn weak_and_strong_literals_hold_the_same_f32_and_keep_their_text() {
    let j = parse_jaxpr(WEAK_AND_STRONG_LITERALS, "lit.jaxpr").unwrap();
    let lit = |a: &Atom| match a {
        Atom::Lit(l) => l.value,
        Atom::Var(v) => panic!("expected a literal, found {v:?}"),
    };
    assert_eq!(lit(&j.eqns[0].invars[1]), LitValue::F32(0.1));
    assert_eq!(lit(&j.eqns[2].invars[0]), LitValue::F32(0.1));
    // A spelling that no longer denotes the value is not used.
    let mut changed = j.clone();
    changed.eqns[0].invars[1] = Atom::Lit(remat_ir::Literal::new(LitValue::F32(0.25)));
    assert!(pp_jaxpr(&changed).contains("b:f32[] = mul a 0.25:f32[]"));
}

/// A chain of `x = max(x, nan)` long enough that JAX's variable names reach `in` (#221),
/// `inf` (#5751), `let` (#7559) and `nan` (#8801): the NaN literal operand of one equation
/// is followed by the binder `nan` of the next. The lines are JAX's (the whole text, 297,937
/// bytes, was checked equal to JAX's once).
#[test]
fn variables_named_in_inf_let_and_nan_are_variables() {
    let mut j = Jaxpr::default();
    let mut x = j.new_var(Aval::scalar(DType::F32));
    j.invars.push(x);
    for _ in 0..8803 {
        let y = j.new_var(Aval::scalar(DType::F32));
        let nan = Atom::Lit(remat_ir::Literal::new(LitValue::F32(f32::NAN)));
        let eqn =
            remat_ir::Eqn::new(Primitive::Binary(BinaryOp::Max), vec![x.into(), nan], vec![y], SourceInfo::unknown());
        j.eqns.push(eqn);
        x = y;
    }
    j.outvars.push(x.into());
    let text = pp_jaxpr(&j);
    for line in [
        "    in:f32[] = max im nan:f32[]\n    io:f32[] = max in nan:f32[]\n",
        "    inf:f32[] = max ine nan:f32[]\n    ing:f32[] = max inf nan:f32[]\n",
        "    let:f32[] = max les nan:f32[]\n    leu:f32[] = max let nan:f32[]\n",
        "    nam:f32[] = max nal nan:f32[]\n    nan:f32[] = max nam nan:f32[]\n    nao:f32[] = max nan nan:f32[]\n",
    ] {
        assert!(text.contains(line), "missing JAX's lines\n{line}");
    }
    assert!(text.ends_with("    nap:f32[] = max nao nan:f32[]\n  in (nap,) }"));
    let parsed = parse_jaxpr(&text, "chain.jaxpr").unwrap();
    assert_eq!(parsed.eqns.len(), 8803);
    for (i, eqn) in parsed.eqns.iter().enumerate() {
        assert!(
            matches!(eqn.invars[0], Atom::Var(v) if i == 0 || Some(v) == parsed.eqns[i - 1].outvars.first().copied())
        );
        assert!(matches!(eqn.invars[1], Atom::Lit(l) if l.value.as_f64().is_nan()), "eqn {i}");
    }
    assert_eq!(pp_jaxpr(&parsed), text);
}

/// Texts JAX printed with `source_info=True` (`jax_extra/source_info/`, the form the Python
/// package reads): the comments give each equation its Python source, also where one line
/// holds several equations (their sources follow on lines of their own), and the program
/// is the plain text's, printing back as JAX printed that.
#[test]
fn source_comments_give_equations_their_python_source() {
    let dir = remat_testkit::data_dir().join("jax_extra/source_info");
    for name in ["one_line", "nested", "loop"] {
        let with = std::fs::read_to_string(dir.join(format!("{name}.src.txt"))).unwrap();
        let plain = std::fs::read_to_string(dir.join(format!("{name}.txt"))).unwrap();
        let j = parse_jaxpr(&with, name).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(pp_jaxpr(&j), plain, "{name}");
        // Every equation's source, nested ones included, in the order of the comments.
        fn sources(j: &Jaxpr, out: &mut Vec<String>) {
            for e in &j.eqns {
                out.push(e.source.to_string());
                for sub in e.primitive.subjaxprs() {
                    sources(sub, out);
                }
            }
        }
        let mut got = Vec::new();
        sources(&j, &mut got);
        let short: Vec<String> = got.iter().map(|s| s.rsplit('/').next().unwrap_or(s).to_string()).collect();
        match name {
            "one_line" => {
                assert_eq!(short, ["gen_source_info.py:10:19 (one_line)", "gen_source_info.py:10:11 (one_line)"])
            }
            "nested" => assert_eq!(
                short,
                [
                    "gen_source_info.py:14:11 (nested)",
                    "gen_source_info.py:14:37 (nested.<locals>.<lambda>)",
                    "gen_source_info.py:14:29 (nested.<locals>.<lambda>)",
                    "gen_source_info.py:14:11 (nested)",
                ]
            ),
            _ => {
                // An equation JAX printed with an empty comment has no source.
                assert!(got.iter().any(String::is_empty), "{got:?}");
                assert!(short.iter().any(|s| s == "gen_source_info.py:22:11 (loop)"), "{short:?}");
            }
        }
    }
}
