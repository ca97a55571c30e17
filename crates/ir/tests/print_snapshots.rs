//! Printer snapshots for jaxprs built through the API (not parsed), covering the layout
//! rules one at a time: one-line jaxprs, `_` for unused binders, literals of every dtype,
//! memory spaces, constvars, `jit`'s shared binder names, hoisting of shared sub-jaxprs,
//! and long binder lists. Expected texts are what JAX 0.10.2 printed for the same programs
//! (`jax.make_jaxpr` of the equivalent Python functions).

use std::sync::Arc;

use remat_ir::{
    pp_jaxpr, Atom, Aval, BinaryOp, ClosedJaxpr, DType, Eqn, Jaxpr, LitValue, Literal, MemorySpace, Policy, Primitive,
    SourceInfo, UnaryOp, Var,
};

fn f32s(shape: &[usize]) -> Aval {
    Aval::new(DType::F32, shape.to_vec())
}

fn lit(value: LitValue) -> Atom {
    Atom::Lit(Literal::new(value))
}

fn push(j: &mut Jaxpr, prim: Primitive, invars: Vec<Atom>, out: Aval) -> Var {
    let v = j.new_var(out);
    j.eqns.push(Eqn::new(prim, invars, vec![v], SourceInfo::unknown()));
    v
}

/// `{ lambda ; x. let y = sin x; z = mul y 2.0 in (z,) }` over `shape`.
fn sin_twice(shape: &[usize]) -> Jaxpr {
    let mut j = Jaxpr::default();
    let x = j.new_var(f32s(shape));
    j.invars.push(x);
    let y = push(&mut j, Primitive::Unary(UnaryOp::Sin), vec![x.into()], f32s(shape));
    let z = push(&mut j, Primitive::Binary(BinaryOp::Mul), vec![y.into(), lit(LitValue::F32(2.0))], f32s(shape));
    j.outvars.push(z.into());
    j
}

#[test]
fn short_jaxpr_prints_on_one_line() {
    insta::assert_snapshot!(pp_jaxpr(&sin_twice(&[3])), @"{ lambda ; a:f32[3]. let b:f32[3] = sin a; c:f32[3] = mul b 2.0:f32[] in (c,) }");
}

#[test]
fn unused_top_level_binders_print_as_underscore_and_literals_keep_their_dtype() {
    let mut j = Jaxpr::default();
    let x = j.new_var(f32s(&[2]));
    let n = j.new_var(Aval::scalar(DType::I32));
    j.invars.extend([x, n]);
    push(&mut j, Primitive::Unary(UnaryOp::Cos), vec![x.into()], f32s(&[2]));
    let m = push(
        &mut j,
        Primitive::Binary(BinaryOp::Max),
        vec![lit(LitValue::F32(f32::NEG_INFINITY)), x.into()],
        f32s(&[2]),
    );
    let k = push(
        &mut j,
        Primitive::Binary(BinaryOp::Add),
        vec![n.into(), lit(LitValue::I32(-3))],
        Aval::scalar(DType::I32),
    );
    let d = push(
        &mut j,
        Primitive::Binary(BinaryOp::Mul),
        vec![lit(LitValue::F64(1e-5)), lit(LitValue::F64(0.1))],
        Aval::scalar(DType::F64),
    );
    let b = push(
        &mut j,
        Primitive::Compare(remat_ir::CompareOp::Eq),
        vec![lit(LitValue::Bool(true)), lit(LitValue::Bool(false))],
        Aval::scalar(DType::Bool),
    );
    j.outvars.extend([m.into(), k.into(), d.into(), b.into(), lit(LitValue::F32(f32::NAN))]);
    insta::assert_snapshot!(pp_jaxpr(&j), @r"
    { lambda ; a:f32[2] b:i32[]. let
        _:f32[2] = cos a
        c:f32[2] = max -inf:f32[] a
        d:i32[] = add b -3:i32[]
        e:f64[] = mul 1e-05:f64[] 0.1:f64[]
        f:bool[] = eq True:bool[] False:bool[]
      in (c, d, e, f, nan:f32[]) }
    ");
}

#[test]
fn constvars_and_memory_spaces() {
    let mut j = Jaxpr::default();
    let c = j.new_var(f32s(&[3]));
    let x = j.new_var(f32s(&[3]));
    j.constvars.push(c);
    j.invars.push(x);
    let y = push(&mut j, Primitive::Binary(BinaryOp::Add), vec![c.into(), x.into()], f32s(&[3]));
    let h = push(
        &mut j,
        Primitive::DevicePut {
            devices: vec![Some(MemorySpace::Host)],
            copy_semantics: vec![remat_ir::CopySemantics::AlwaysCopy],
        },
        vec![y.into()],
        f32s(&[3]).with_memory_space(MemorySpace::Host),
    );
    j.outvars.push(h.into());
    insta::assert_snapshot!(pp_jaxpr(&j), @r"
    { lambda a:f32[3]; b:f32[3]. let
        c:f32[3] = add a b
        d:f32<host>[3] = device_put[
          copy_semantics=(ArrayCopySemantics.ALWAYS_COPY,)
          devices=(MemorySpace.Host,)
          srcs=(None,)
        ] c
      in (d,) }
    ");
}

#[test]
fn jit_inner_binders_take_the_outer_names() {
    let inner = Arc::new(sin_twice(&[4]));
    let mut j = Jaxpr::default();
    let x = j.new_var(f32s(&[4]));
    j.invars.push(x);
    let e = push(&mut j, Primitive::Unary(UnaryOp::Exp), vec![x.into()], f32s(&[4]));
    let y = push(
        &mut j,
        Primitive::Jit { name: "g".into(), jaxpr: ClosedJaxpr::new(inner), options: Default::default() },
        vec![e.into()],
        f32s(&[4]),
    );
    j.outvars.push(y.into());
    insta::assert_snapshot!(pp_jaxpr(&j), @r"
    { lambda ; a:f32[4]. let
        b:f32[4] = exp a
        c:f32[4] = jit[
          name=g
          jaxpr={ lambda ; b:f32[4]. let
              d:f32[4] = sin b
              c:f32[4] = mul d 2.0:f32[]
            in (c,) }
        ] b
      in (c,) }
    ");
}

#[test]
fn a_sub_jaxpr_used_twice_is_hoisted() {
    let inner = Arc::new(sin_twice(&[]));
    let remat = |policy| Primitive::Remat2 { jaxpr: inner.clone(), prevent_cse: true, differentiated: false, policy };
    let mut j = Jaxpr::default();
    let x = j.new_var(f32s(&[]));
    j.invars.push(x);
    let a = push(&mut j, remat(None), vec![x.into()], f32s(&[]));
    let b = push(
        &mut j,
        remat(Some(Policy::SaveOnlyTheseNames { names: vec!["a".into(), "b".into()] })),
        vec![a.into()],
        f32s(&[]),
    );
    j.outvars.push(b.into());
    insta::assert_snapshot!(pp_jaxpr(&j), @r"
    let jaxpr = { lambda ; a:f32[]. let
        b:f32[] = sin a
        c:f32[] = mul b 2.0:f32[]
      in (c,) } in
    { lambda ; d:f32[]. let
        e:f32[] = remat2[
          differentiated=False
          jaxpr=jaxpr
          policy=None
          prevent_cse=True
        ] d
        f:f32[] = remat2[
          differentiated=False
          jaxpr=jaxpr
          policy=SaveOnlyTheseNames(saveable_names=frozenset({'a', 'b'}))
          prevent_cse=True
        ] e
      in (f,) }
    ");
}

#[test]
fn long_binder_lists_fill_lines() {
    let mut j = Jaxpr::default();
    for _ in 0..14 {
        let v = j.new_var(f32s(&[128, 256]));
        j.invars.push(v);
    }
    j.outvars = j.invars.iter().rev().map(|v| Atom::Var(*v)).collect();
    // With no equations JAX leaves an indented empty line where they would be.
    let want = "{ lambda ; a:f32[128,256] b:f32[128,256] c:f32[128,256] d:f32[128,256] e:f32[128,256]
    f:f32[128,256] g:f32[128,256] h:f32[128,256] i:f32[128,256] j:f32[128,256] k:f32[128,256]
    l:f32[128,256] m:f32[128,256] n:f32[128,256]. let
    \n  in (n, m, l, k, j, i, h, g, f, e, d, c, b, a) }";
    assert_eq!(pp_jaxpr(&j), want);
}

#[test]
fn empty_jaxpr_keeps_jax_double_space() {
    let mut j = Jaxpr::default();
    let x = j.new_var(f32s(&[]));
    j.invars.push(x);
    j.outvars.push(x.into());
    assert_eq!(pp_jaxpr(&j), "{ lambda ; a:f32[]. let  in (a,) }");
}

/// JAX measures a jaxpr's closing ` }` when deciding whether it fits on one line: 79
/// characters stay on one line, 81 break (both texts printed by JAX 0.10.2).
#[test]
fn the_closing_brace_counts_toward_the_line_width() {
    let unary = |shape: &[usize], prim: Primitive| {
        let mut j = Jaxpr::default();
        let x = j.new_var(f32s(shape));
        j.invars.push(x);
        let out = if let Primitive::Transpose { permutation } = &prim {
            f32s(&permutation.iter().map(|&p| shape[p]).collect::<Vec<_>>())
        } else {
            f32s(shape)
        };
        let y = push(&mut j, prim, vec![x.into()], out);
        j.outvars.push(y.into());
        pp_jaxpr(&j)
    };
    assert_eq!(
        unary(&[2; 8], Primitive::Unary(UnaryOp::Sin)),
        "{ lambda ; a:f32[2,2,2,2,2,2,2,2]. let b:f32[2,2,2,2,2,2,2,2] = sin a in (b,) }"
    );
    assert_eq!(
        unary(&[2, 2], Primitive::Transpose { permutation: vec![1, 0] }),
        "{ lambda ; a:f32[2,2]. let\n    b:f32[2,2] = transpose[permutation=(1, 0)] a\n  in (b,) }"
    );
}
