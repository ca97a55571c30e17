//! How the fuzzing differential compares the JIT with the interpreter.
//!
//! A program whose operations are all exact ([`exact`]) must agree bit for bit. Any other
//! program is first compared within a float tolerance ([`close`]); where that fails, the
//! disagreement is located ([`locate`]): each equation is run alone by the JIT on the
//! interpreter's values of its operands and held to its own bound,
//!
//! - exact equations: bit for bit;
//! - float accumulations (`dot_general`, convolutions, sums, windowed sums, scatter-add,
//!   `select_and_scatter_add`, cumulative sums), which the backends sum in different
//!   orders: `|jit - interp| <= 3 n u S + n eta` per element, where `S` is the same
//!   equation evaluated by the interpreter on the operands' absolute values (the sum of the
//!   absolute terms), `n` bounds the number of terms (the operands' element count), `u` is
//!   the unit roundoff of the result's dtype and `eta` its smallest subnormal. Any two
//!   summation orders differ by at most `2 gamma_n S` (`gamma_n = n u / (1 - n u)`, Higham,
//!   *Accuracy and Stability of Numerical Algorithms*, 4.2), plus what underflow loses; where
//!   `S` itself is beyond the dtype's range (or not finite), some order overflows, and the
//!   element is unconstrained;
//! - everything else (transcendentals, `pow`, the special functions): [`close`].
//!
//! An equation out of its bound is a finding. So is a program that disagrees although every
//! equation alone agrees bit for bit (the difference then comes from compiling the whole
//! program: fusion, planning, CSE). A program whose equations all keep their bounds, some
//! of them differing, disagrees only by those permitted differences magnified downstream (a
//! comparison, a rounding, a cancellation after a sum): that is a difference within the
//! documented bounds, not a finding.

use remat_ir::{
    Array, Atom, BinaryOp, CumulativeOp, DType, Eqn, Jaxpr, Primitive, ReduceOp, ScatterOp, SourceInfo, UnaryOp,
};

use crate::common::{check_bits, value_bits};

/// Whether the JIT computes every value of `jaxpr` with the same operations, in the same
/// order, as the interpreter: no transcendentals (inline polynomials, within 2 ulp of libm),
/// no `pow`, no float sums or products (summed in other orders). Such programs must agree
/// bit for bit, integers, 16-bit floats and keys included.
pub(crate) fn exact(jaxpr: &Jaxpr) -> bool {
    jaxpr.eqns.iter().all(|e| {
        let float_in = || e.invars.first().is_some_and(|a| jaxpr.atom_aval(a).dtype.is_float());
        let ok = match &e.primitive {
            Primitive::Unary(op) => {
                !(matches!(
                    op,
                    UnaryOp::Exp
                        | UnaryOp::Log
                        | UnaryOp::Log1p
                        | UnaryOp::Expm1
                        | UnaryOp::Sin
                        | UnaryOp::Cos
                        | UnaryOp::Tan
                        | UnaryOp::Tanh
                        | UnaryOp::Logistic
                ) || (remat_math::UNARY_OPS.contains(op) && float_in()))
            }
            Primitive::Binary(BinaryOp::Pow) => false,
            // The special functions are one library for both backends, but a 16-bit
            // result may round from a 1-ulp different f32 one; compared within tolerance.
            Primitive::Binary(op) if remat_math::BINARY_OPS.contains(op) && float_in() => false,
            // Float accumulations: the backends may sum in different orders.
            Primitive::Reduce { op: ReduceOp::Sum, .. }
            | Primitive::DotGeneral { .. }
            | Primitive::ConvGeneralDilated(_)
            | Primitive::ReduceWindow { op: ReduceOp::Sum, .. }
            | Primitive::SelectAndScatterAdd { .. }
            | Primitive::Cumulative { .. }
            | Primitive::Scatter { .. } => !float_in(),
            _ => true,
        };
        ok && e.primitive.subjaxprs().into_iter().all(|j| exact(j))
    })
}

/// Within float tolerance: f32/f64 (and integers) at `rel 1e-4, abs 1e-5`, the 16-bit
/// floats at about one ulp of their own (a 2-ulp f32 difference of a transcendental can
/// round to neighbouring narrow values).
pub(crate) fn close(what: &str, got: &[Array], want: &[Array]) -> Result<(), String> {
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let (rel, abs) = match w.dtype() {
            DType::BF16 => (1.0 / 64.0, 1e-3),
            DType::F16 => (1.0 / 512.0, 1e-4),
            _ => (1e-4, 1e-5),
        };
        let what = format!("{what} {i}");
        remat_testkit::check_close(&what, std::slice::from_ref(g), std::slice::from_ref(w), rel, abs)?;
    }
    Ok(())
}

/// Whether `prim` on float operands sums terms whose order the backends may choose.
fn accumulates(prim: &Primitive) -> bool {
    match prim {
        Primitive::Reduce { op, .. } | Primitive::ReduceWindow { op, .. } => *op == ReduceOp::Sum,
        Primitive::Scatter { op, .. } => *op == ScatterOp::Add,
        Primitive::Cumulative { op, .. } => *op == CumulativeOp::Sum,
        Primitive::DotGeneral { .. } | Primitive::ConvGeneralDilated(_) | Primitive::SelectAndScatterAdd { .. } => true,
        _ => false,
    }
}

/// The unit roundoff and the smallest subnormal of a float dtype.
fn roundoff(d: DType) -> Option<(f64, f64, f64)> {
    // (u, eta, largest finite)
    match d {
        DType::F32 => Some((2f64.powi(-24), 2f64.powi(-149), f32::MAX as f64)),
        DType::F64 => Some((2f64.powi(-53), 0.0, f64::MAX)),
        DType::BF16 => Some((2f64.powi(-8), 2f64.powi(-133), remat_ir::bf16::MAX.to_f64())),
        DType::F16 => Some((2f64.powi(-11), 2f64.powi(-24), remat_ir::f16::MAX.to_f64())),
        _ => None,
    }
}

/// The absolute values of a float array (others as they are).
fn abs(a: &Array) -> Array {
    match a {
        Array::F32(x) => Array::F32(x.mapv(f32::abs)),
        Array::F64(x) => Array::F64(x.mapv(f64::abs)),
        Array::BF16(x) => Array::BF16(x.mapv(|v| remat_ir::bf16::from_bits(v.to_bits() & 0x7fff))),
        Array::F16(x) => Array::F16(x.mapv(|v| remat_ir::f16::from_bits(v.to_bits() & 0x7fff))),
        other => other.clone(),
    }
}

/// The one equation `eqn` of `jaxpr` as a program of its own (its variable operands become
/// the inputs, literals stay).
fn alone(jaxpr: &Jaxpr, eqn: &Eqn) -> Jaxpr {
    let mut body = Jaxpr::default();
    let ins: Vec<Atom> = eqn
        .invars
        .iter()
        .map(|a| match a {
            Atom::Var(v) => {
                let x = body.new_var(jaxpr.aval(*v).clone());
                body.invars.push(x);
                x.into()
            }
            lit => *lit,
        })
        .collect();
    let outs: Vec<remat_ir::Var> = eqn.outvars.iter().map(|&v| body.new_var(jaxpr.aval(v).clone())).collect();
    body.outvars = outs.iter().map(|&v| v.into()).collect();
    body.eqns.push(Eqn::new(eqn.primitive.clone(), ins, outs, SourceInfo::unknown()));
    body
}

/// `got` within the accumulation bound of the module's documentation, `sums` being the
/// equation on absolute values and `n` the number of terms.
pub(crate) fn within_sum_bound(what: &str, got: &Array, want: &Array, sums: &Array, n: usize) -> Result<(), String> {
    let Some((u, eta, max)) = roundoff(want.dtype()) else {
        return check_bits(what, std::slice::from_ref(got), std::slice::from_ref(want));
    };
    let (g, w, s) = (got.to_f64_vec(), want.to_f64_vec(), sums.to_f64_vec());
    let n = n as f64;
    for (j, ((&g, &w), &s)) in g.iter().zip(&w).zip(&s).enumerate() {
        let unconstrained = !s.is_finite() || s > max;
        let ok = unconstrained || (g.is_nan() && w.is_nan()) || g == w || (g - w).abs() <= 3.0 * n * u * s + n * eta;
        if !ok {
            return Err(format!(
                "{what}, element {j}: got {g}, expected {w}, beyond the summation bound {:e} (sum of |terms| {s})",
                3.0 * n * u * s + n * eta
            ));
        }
    }
    Ok(())
}

/// Whether two arrays hold the same values (bit for bit, NaNs as one).
fn same(a: &Array, b: &Array) -> bool {
    a.aval() == b.aval() && value_bits(a) == value_bits(b)
}

/// Explains a disagreement of the whole program `jaxpr` on `args` (see the module's
/// documentation): `Ok` with a note if every equation alone keeps its bound and some
/// differ, `Err` naming the equation out of its bound, or saying that none differs.
pub(crate) fn locate(jaxpr: &Jaxpr, args: &[Array]) -> Result<String, String> {
    let mut differing = Vec::new();
    locate_in(jaxpr, args, "", &mut differing)?;
    if differing.is_empty() {
        Err("every equation alone agrees bit for bit: the whole program's compilation differs".into())
    } else {
        Ok(format!("within the bounds of equations {}", differing.join(", ")))
    }
}

/// Runs each equation of `jaxpr` alone on the interpreter's values of its operands (`args`
/// the inputs) and holds it to its bound, noting those that differ in `differing` (named
/// after `at`, where `jaxpr` is in the program). An equation with a body (a loop, a cond,
/// a call) that is out of its bound as a whole is located inside, on the interpreter's
/// values: its body trip by trip, the branch taken, the call's body. Every equation there
/// that keeps its bound, some differing, explains the whole (permitted differences carried
/// from trip to trip); none differing is a finding (the loop's compilation differs).
fn locate_in(jaxpr: &Jaxpr, args: &[Array], at: &str, differing: &mut Vec<String>) -> Result<(), String> {
    let mut env: Vec<Option<Array>> = vec![None; jaxpr.vars.len()];
    for (&v, a) in jaxpr.invars.iter().zip(args) {
        env[v.index()] = Some(a.clone());
    }
    for (k, eqn) in jaxpr.eqns.iter().enumerate() {
        let place = format!("{at}{k} ({})", eqn.primitive.name());
        let one = alone(jaxpr, eqn);
        let ins: Vec<Array> = eqn
            .invars
            .iter()
            .filter_map(Atom::as_var)
            .map(|v| env[v.index()].clone().ok_or_else(|| format!("equation {place}: operand without a value")))
            .collect::<Result<_, _>>()?;
        let what = format!("equation {place} alone");
        let want = remat_interp::eval_jaxpr(&one, &[], &ins).map_err(|e| format!("{what}: interpreter: {e}"))?;
        let compiled = remat_jit::compile(&one).map_err(|e| format!("{what}: compile: {e}"))?;
        let got = compiled.run(&ins).map_err(|e| format!("{what}: run: {e}"))?;
        match within_bound(jaxpr, eqn, &one, &ins, &got, &want, &what) {
            Ok(()) => {
                if got.iter().zip(&want).any(|(g, w)| !same(g, w)) {
                    differing.push(place);
                }
            }
            Err(e) if !eqn.primitive.subjaxprs().is_empty() => {
                let before = differing.len();
                let operands: Vec<Array> = eqn
                    .invars
                    .iter()
                    .map(|a| match a {
                        Atom::Var(v) => env[v.index()].clone().expect("checked above"),
                        Atom::Lit(l) => literal_array(l),
                    })
                    .collect();
                inside(eqn, &operands, &format!("{place}: "), differing).map_err(|inner| format!("{e}\n{inner}"))?;
                if differing.len() == before {
                    return Err(format!(
                        "{e}\nevery equation of its body alone agrees bit for bit: its compilation differs"
                    ));
                }
            }
            Err(e) => return Err(e),
        }
        for (&v, w) in eqn.outvars.iter().zip(want) {
            env[v.index()] = Some(w);
        }
    }
    Ok(())
}

/// Whether equation `eqn` of `jaxpr` (as the program `one`), run alone on `ins`, keeps its
/// bound (the module's documentation).
fn within_bound(
    jaxpr: &Jaxpr,
    eqn: &Eqn,
    one: &Jaxpr,
    ins: &[Array],
    got: &[Array],
    want: &[Array],
    what: &str,
) -> Result<(), String> {
    let float_in = eqn.invars.first().is_some_and(|a| jaxpr.atom_aval(a).dtype.is_float());
    if exact(one) {
        check_bits(what, got, want)
    } else if accumulates(&eqn.primitive) && float_in {
        // The terms are the operands' elements, except `select_and_scatter_add`'s second
        // operand, which only selects where its first one's are added.
        let selects = matches!(eqn.primitive, Primitive::SelectAndScatterAdd { .. });
        let abs_ins: Vec<Array> =
            ins.iter().enumerate().map(|(i, a)| if selects && i > 0 { a.clone() } else { abs(a) }).collect();
        let sums = remat_interp::eval_jaxpr(one, &[], &abs_ins).map_err(|e| format!("{what}: |terms|: {e}"))?;
        let n: usize = ins.iter().map(Array::len).sum();
        for (i, ((g, w), s)) in got.iter().zip(want).zip(&sums).enumerate() {
            within_sum_bound(&format!("{what} {i}"), g, w, s, n)?;
        }
        Ok(())
    } else {
        close(what, got, want)
    }
}

/// A literal operand as an array.
fn literal_array(l: &remat_ir::Literal) -> Array {
    let aval = l.aval();
    let one = Jaxpr { outvars: vec![Atom::Lit(*l)], ..Jaxpr::default() };
    remat_interp::eval_jaxpr(&one, &[], &[]).map(|mut v| v.remove(0)).unwrap_or_else(|_| Array::zeros(&aval))
}

/// Locates the disagreement of `eqn`, an equation with a body, on its `operands` (see
/// [`locate_in`]).
fn inside(eqn: &Eqn, operands: &[Array], at: &str, differing: &mut Vec<String>) -> Result<(), String> {
    let eval =
        |j: &Jaxpr, args: &[Array]| remat_interp::eval_jaxpr(j, &[], args).map_err(|e| format!("{at}interpreter: {e}"));
    match &eqn.primitive {
        Primitive::Scan { jaxpr, length, reverse, num_consts, num_carry, .. } if jaxpr.consts.is_empty() => {
            let (consts, rest) = operands.split_at(*num_consts);
            let (init, xs) = rest.split_at(*num_carry);
            let mut carry = init.to_vec();
            for step in 0..*length {
                let t = if *reverse { length - 1 - step } else { step };
                let slices =
                    xs.iter().map(|x| remat_ir::map_array!(x, a => a.index_axis(ndarray::Axis(0), t).to_owned()));
                let args: Vec<Array> = consts.iter().cloned().chain(carry).chain(slices).collect();
                locate_in(&jaxpr.jaxpr, &args, &format!("{at}trip {t}: "), differing)?;
                carry = eval(&jaxpr.jaxpr, &args)?;
                carry.truncate(*num_carry);
            }
            Ok(())
        }
        Primitive::While { cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts }
            if cond_jaxpr.consts.is_empty()
                && body_jaxpr.consts.is_empty()
                && cond_jaxpr.jaxpr.outvars.first().is_some_and(|p| cond_jaxpr.jaxpr.atom_aval(p).rank() == 0) =>
        {
            let (cconsts, rest) = operands.split_at(*cond_nconsts);
            let (bconsts, init) = rest.split_at(*body_nconsts);
            let mut carry = init.to_vec();
            for trip in 0..1000 {
                let cargs: Vec<Array> = cconsts.iter().cloned().chain(carry.iter().cloned()).collect();
                locate_in(&cond_jaxpr.jaxpr, &cargs, &format!("{at}cond {trip}: "), differing)?;
                let go = match &eval(&cond_jaxpr.jaxpr, &cargs)?[..] {
                    [Array::Bool(p)] => p.iter().next().copied().unwrap_or(false),
                    _ => return Err(format!("{at}the predicate is not a bool[]")),
                };
                if !go {
                    return Ok(());
                }
                let bargs: Vec<Array> = bconsts.iter().cloned().chain(carry).collect();
                locate_in(&body_jaxpr.jaxpr, &bargs, &format!("{at}trip {trip}: "), differing)?;
                carry = eval(&body_jaxpr.jaxpr, &bargs)?;
            }
            Err(format!("{at}not located: more than 1000 trips"))
        }
        Primitive::Cond { branches } => {
            let index = match operands.first() {
                Some(Array::I32(i)) => i.iter().next().map_or(0, |&i| i64::from(i)),
                _ => return Err(format!("{at}the index is not an i32[]")),
            };
            let taken = remat_ir::cond_branch(index, branches.len());
            locate_in(&branches[taken].jaxpr, &operands[1..], &format!("{at}branch {taken}: "), differing)
        }
        Primitive::Jit { jaxpr, .. }
        | Primitive::CustomJvpCall { call_jaxpr: jaxpr, .. }
        | Primitive::CustomVjpCall { call_jaxpr: jaxpr, .. }
            if jaxpr.consts.is_empty() =>
        {
            locate_in(&jaxpr.jaxpr, operands, at, differing)
        }
        Primitive::Remat2 { jaxpr, .. } => locate_in(jaxpr, operands, at, differing),
        other => Err(format!("{at}not located inside a {}", other.name())),
    }
}
