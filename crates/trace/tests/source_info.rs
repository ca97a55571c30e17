//! Every recorded equation carries the user's source location, and the user's function
//! name where one is given (`function_scope!()`, `function_scope(name)`, `in_function`,
//! a named `jit`), so that later reports can say `output of sin from model.rs:12:9 (g)`.

use remat_ir::{Aval, DType, Eqn, Jaxpr};
use remat_trace::{checkpoint, function_scope, in_function, jit, make_jaxpr, nn, Tensor};

fn f32s(shape: &[usize]) -> Aval {
    Aval::new(DType::F32, shape.to_vec())
}

/// The equations of `jaxpr` and of every jaxpr nested in it, in order.
fn all_eqns(jaxpr: &Jaxpr) -> Vec<&Eqn> {
    let mut out = Vec::new();
    for e in &jaxpr.eqns {
        out.push(e);
        for sub in e.primitive.subjaxprs() {
            out.extend(all_eqns(sub));
        }
    }
    out
}

/// `(primitive, line, function)` of every equation.
fn sources(jaxpr: &Jaxpr) -> Vec<(&'static str, u32, Option<String>)> {
    all_eqns(jaxpr)
        .iter()
        .map(|e| (e.primitive.name(), e.source.line, e.source.function.as_deref().map(String::from)))
        .collect()
}

fn g(w: &Tensor, x: &Tensor) -> Tensor {
    let _scope = function_scope!();
    w.dot(x).sin()
}

#[test]
fn equations_carry_the_users_line_and_function() {
    let line = line!() + 3;
    let f = |(w, x): (Tensor, Tensor)| {
        let h = g(&w, &x);
        h.cos()
    };
    let traced = make_jaxpr(f, &(f32s(&[3, 2]), f32s(&[2]))).unwrap();
    let g_line = line - 8;
    assert_eq!(
        sources(&traced.jaxpr.jaxpr),
        [("dot_general", g_line, Some("g".into())), ("sin", g_line, Some("g".into())), ("cos", line, None)]
    );
    let sin = &traced.jaxpr.jaxpr.eqns[1].source;
    assert_eq!(sin.file.as_ref(), file!());
    assert_eq!(sin.column, 14, "the column of `sin` in `w.dot(x).sin()`");
    assert_eq!(sin.to_string(), format!("{}:{g_line}:14 (g)", file!()));
}

#[test]
fn scopes_nest_and_end() {
    let traced = make_jaxpr(
        |x: Tensor| {
            let outer = function_scope("outer");
            let a = x.sin();
            let b = in_function("inner", || a.cos());
            let c = b.exp();
            drop(outer);
            c.tanh()
        },
        &f32s(&[2]),
    )
    .unwrap();
    let names: Vec<Option<String>> = sources(&traced.jaxpr.jaxpr).into_iter().map(|(_, _, f)| f).collect();
    assert_eq!(names, [Some("outer".into()), Some("inner".into()), Some("outer".into()), None]);
}

#[test]
fn a_named_jit_names_its_body() {
    let block = jit(|x: Tensor| x.sin()).name("block");
    let traced = make_jaxpr(|x: Tensor| block.call(x).cos(), &f32s(&[2])).unwrap();
    let found: Vec<_> = sources(&traced.jaxpr.jaxpr).into_iter().map(|(p, _, f)| (p, f)).collect();
    assert_eq!(found, [("jit", None), ("sin", Some("block".into())), ("cos", None)]);
}

/// `jit` of a Rust function takes its name, as JAX takes the Python function's.
fn double(x: Tensor) -> Tensor {
    &x + &x
}

#[test]
fn jit_of_a_function_takes_its_name() {
    let traced = make_jaxpr(|x: Tensor| jit(double).call(x), &f32s(&[2])).unwrap();
    assert!(traced.to_string().contains("jit[\n      name=double"), "{traced}");
    let traced = make_jaxpr(|x: Tensor| jit(|x: Tensor| x.sin()).call(x), &f32s(&[2])).unwrap();
    assert!(traced.to_string().contains("name=<lambda>"), "{traced}");
}

#[test]
fn library_functions_record_the_users_line() {
    let f = |x: Tensor| checkpoint(|x: Tensor| nn::relu(&nn::softmax(&x, -1))).call(x);
    let line = line!() - 1;
    let traced = make_jaxpr(f, &f32s(&[2, 3])).unwrap();
    for (prim, l, _) in sources(&traced.jaxpr.jaxpr) {
        assert_eq!(l, line, "{prim} is located in the library, not at the user's call");
    }
    assert!(all_eqns(&traced.jaxpr.jaxpr).iter().all(|e| e.source.file.as_ref() == file!()));
}

/// A jitted closure is named `<lambda>`, as JAX names an anonymous function, and a
/// closure called twice shares one body, which prints hoisted as `let lambda = ...` —
/// the text JAX 0.10.2 prints for the same program (tests/data/jax_extra).
#[test]
fn a_jitted_closure_prints_as_jax_prints_a_lambda() {
    let g = jit(|y: Tensor| y.cos() + 1.0);
    let traced = make_jaxpr(|x: Tensor| g.call(g.call(x)), &f32s(&[3])).unwrap();
    let path = remat_testkit::data_dir().join("jax_extra/jit_shared_lambda_hoisted.jaxpr");
    let want = std::fs::read_to_string(path).unwrap();
    assert_eq!(traced.to_string(), want.trim_end());
}
