//! Locating a disagreement between the JIT and the interpreter (`compare.rs`): which
//! equations differ, each held to its own bound, and whether they explain the outputs that
//! differ.
//!
//! Every equation runs alone, compiled by the JIT, on the interpreter's values of its
//! operands, and keeps its bound. Its results are *tainted* where it differs alone, where
//! it is not exact (a sum, a transcendental: in the program the JIT may compile it
//! otherwise than alone, a sum in another order, within the same bound), or where it reads
//! a tainted value: a permitted difference may spread that far, and no further. An output
//! of the program that differs must be tainted; an output computed by exact equations from
//! untainted values must agree bit for bit, whatever else differs.
//!
//! An equation with a body (a loop, a cond, a call) is located inside, on the
//! interpreter's values: its body trip by trip (taint carried from trip to trip through the
//! carries and into the stacked outputs), the branch taken, the call's body. A loop result
//! that differs although nothing inside it reaches it that differs, or may, is a finding
//! (the loop's compilation differs: an index read from a buffer already overwritten, a
//! value written over one the next trip reads). A while with a batched predicate is not
//! located inside: it is held to the float tolerance as a whole.
//!
//! NaNs are compared payloads aside, except a float sum's: which NaN a sum gives depends on
//! the order it meets its NaN operands in, so a sum whose NaN bits differ taints what it
//! reaches (a `bitcast_convert_type` of it).

use remat_ir::{Array, Atom, Eqn, Jaxpr, Primitive};

use super::{accumulates, alone, exact, same, within_bound};
use crate::common::check_bits;

/// Explains a disagreement of the whole program `jaxpr` on `args` (see the module's
/// documentation): `Ok` with a note if every equation alone keeps its bound and every
/// output that differs is reached by one that differs, `Err` naming the equation out of
/// its bound or the output that differs where nothing it depends on does.
pub(crate) fn locate(jaxpr: &Jaxpr, args: &[Array]) -> Result<String, String> {
    let mut differing = Vec::new();
    let (_, taint) = locate_in(jaxpr, args, &vec![false; args.len()], "", &mut differing)?;
    let want = remat_interp::eval_jaxpr(jaxpr, &[], args).map_err(|e| format!("interpreter: {e}"))?;
    for cse in [remat_jit::CseScope::Off, remat_jit::CseScope::Auto, remat_jit::CseScope::AcrossCheckpoints] {
        let options = remat_jit::Options { cse, ..remat_jit::Options::default() };
        let compiled = remat_jit::compile_with_options(jaxpr, &[], &options).map_err(|e| format!("compile: {e}"))?;
        let got = compiled.run(args).map_err(|e| format!("run: {e}"))?;
        for (i, ((g, w), out)) in got.iter().zip(&want).zip(&jaxpr.outvars).enumerate() {
            if !tainted(&taint, out) {
                let what = format!("output {i} ({cse:?}), which no differing equation reaches,");
                check_bits(&what, std::slice::from_ref(g), std::slice::from_ref(w))
                    .map_err(|e| format!("{e}: the whole program's compilation differs"))?;
            }
        }
    }
    if differing.is_empty() {
        Err("every equation alone agrees bit for bit: the whole program's compilation differs".into())
    } else {
        Ok(format!("within the bounds of equations {}", differing.join(", ")))
    }
}

/// The bits of every element, NaN payloads included.
fn raw_bits(a: &Array) -> Vec<u64> {
    match a {
        Array::F32(x) => x.iter().map(|v| u64::from(v.to_bits())).collect(),
        Array::F64(x) => x.iter().map(|v| v.to_bits()).collect(),
        Array::BF16(x) => x.iter().map(|v| u64::from(v.to_bits())).collect(),
        Array::F16(x) => x.iter().map(|v| u64::from(v.to_bits())).collect(),
        other => crate::common::value_bits(other),
    }
}

/// The interpreter's value of each variable of a jaxpr (by index), where it has one.
type Env = Vec<Option<Array>>;

/// Whether an atom is tainted (a literal never is).
fn tainted(taint: &[bool], a: &Atom) -> bool {
    a.as_var().is_some_and(|v| taint[v.index()])
}

/// Runs each equation of `jaxpr` alone on the interpreter's values of its operands (`args`
/// the inputs, `args_taint` which of them are tainted) and holds it to its bound, noting
/// those that differ in `differing` (named after `at`, where `jaxpr` is in the program).
/// Returns the interpreter's values and the taint of every variable.
fn locate_in(
    jaxpr: &Jaxpr,
    args: &[Array],
    args_taint: &[bool],
    at: &str,
    differing: &mut Vec<String>,
) -> Result<(Env, Vec<bool>), String> {
    let mut env: Env = vec![None; jaxpr.vars.len()];
    let mut taint = vec![false; jaxpr.vars.len()];
    for ((&v, a), &t) in jaxpr.invars.iter().zip(args).zip(args_taint) {
        env[v.index()] = Some(a.clone());
        taint[v.index()] = t;
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
        // A float sum's NaN is whichever NaN its order meets first (x86 keeps a sum's first
        // NaN operand, and makes its own for `inf - inf`): its bits may differ where it is
        // one (seen through `bitcast_convert_type`). Any other equation's NaNs are compared
        // payloads aside, as everywhere, so that a difference in their bits that reaches an
        // output is a finding.
        let float_sum =
            accumulates(&eqn.primitive) && eqn.invars.first().is_some_and(|a| jaxpr.atom_aval(a).dtype.is_float());
        let differs = got.iter().zip(&want).any(|(g, w)| !same(g, w) || (float_sum && raw_bits(g) != raw_bits(w)));
        let in_taint: Vec<bool> = eqn.invars.iter().map(|a| tainted(&taint, a)).collect();
        // What an equation with a body gives is located inside it, on the interpreter's
        // values (also where it agrees alone: what inside it differs, or may, reaches
        // the program's outputs).
        let inner = if eqn.primitive.subjaxprs().is_empty() {
            Inside::Whole
        } else {
            inside(eqn, &operands(&env, eqn), &in_taint, &format!("{place}: "), differing)
                .map_err(|inner| format!("{what}\n{inner}"))?
        };
        let out_taint = match inner {
            Inside::Whole => {
                within_bound(jaxpr, eqn, &one, &ins, &got, &want, &what)?;
                if differs {
                    differing.push(place);
                }
                // An equation that is not exact may give other bits in the program than
                // alone (a sum compiled in another order there, into a transposed
                // destination or fused with its producer): what it reaches may differ.
                vec![differs || !exact(&one) || in_taint.contains(&true); eqn.outvars.len()]
            }
            Inside::Located(inner_taint) => {
                // A result that nothing inside may make differ agrees bit for bit.
                for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                    if !inner_taint[i] && !same(g, w) {
                        let what = format!("{what}, result {i}, which nothing that differs inside it reaches,");
                        check_bits(&what, std::slice::from_ref(g), std::slice::from_ref(w))
                            .map_err(|e| format!("{e}: its compilation differs"))?;
                    }
                }
                inner_taint
            }
        };
        for ((&v, w), t) in eqn.outvars.iter().zip(want).zip(out_taint) {
            env[v.index()] = Some(w);
            taint[v.index()] = t;
        }
    }
    Ok((env, taint))
}

/// The operands of `eqn`, from `env` and its literals.
fn operands(env: &Env, eqn: &Eqn) -> Vec<Array> {
    eqn.invars
        .iter()
        .map(|a| match a {
            Atom::Var(v) => env[v.index()].clone().expect("every operand has a value"),
            Atom::Lit(l) => literal_array(l),
        })
        .collect()
}

/// A literal operand as an array.
fn literal_array(l: &remat_ir::Literal) -> Array {
    let aval = l.aval();
    let one = Jaxpr { outvars: vec![Atom::Lit(*l)], ..Jaxpr::default() };
    remat_interp::eval_jaxpr(&one, &[], &[]).map(|mut v| v.remove(0)).unwrap_or_else(|_| Array::zeros(&aval))
}

/// What locating inside an equation with a body found.
enum Inside {
    /// It could not be located inside (a while with a batched predicate): the whole is held
    /// to its bound.
    Whole,
    /// Every equation inside keeps its bound; which results something inside that differs,
    /// or may differ in the program, reaches.
    Located(Vec<bool>),
}

/// The outputs of `jaxpr` that `taint` marks.
fn out_taint(jaxpr: &Jaxpr, taint: &[bool]) -> Vec<bool> {
    jaxpr.outvars.iter().map(|a| tainted(taint, a)).collect()
}

/// Locates the disagreement of `eqn`, an equation with a body, on its `operands`, of which
/// `in_taint` are tainted (see [`locate_in`]).
fn inside(
    eqn: &Eqn,
    operands: &[Array],
    in_taint: &[bool],
    at: &str,
    differing: &mut Vec<String>,
) -> Result<Inside, String> {
    let eval =
        |j: &Jaxpr, args: &[Array]| remat_interp::eval_jaxpr(j, &[], args).map_err(|e| format!("{at}interpreter: {e}"));
    let n = eqn.outvars.len();
    let located = |taint: Vec<bool>| Ok(Inside::Located(taint));
    match &eqn.primitive {
        Primitive::Scan { jaxpr, length, reverse, num_consts, num_carry, .. } if jaxpr.consts.is_empty() => {
            let (body, nc, nk) = (&jaxpr.jaxpr, *num_consts, *num_carry);
            let (consts, rest) = operands.split_at(nc);
            let (init, xs) = rest.split_at(nk);
            let mut carry = init.to_vec();
            let mut carry_taint = in_taint[nc..nc + nk].to_vec();
            let mut ys_taint = vec![false; n - nk];
            for step in 0..*length {
                let t = if *reverse { length - 1 - step } else { step };
                let slices =
                    xs.iter().map(|x| remat_ir::map_array!(x, a => a.index_axis(ndarray::Axis(0), t).to_owned()));
                let args: Vec<Array> = consts.iter().cloned().chain(carry).chain(slices).collect();
                let args_taint = [&in_taint[..nc], &carry_taint[..], &in_taint[nc + nk..]].concat();
                let (_, taint) = locate_in(body, &args, &args_taint, &format!("{at}trip {t}: "), differing)?;
                let outs = out_taint(body, &taint);
                carry_taint = outs[..nk].to_vec();
                ys_taint.iter_mut().zip(&outs[nk..]).for_each(|(y, &t)| *y |= t);
                carry = eval(body, &args)?;
                carry.truncate(nk);
            }
            located([carry_taint, ys_taint].concat())
        }
        Primitive::While { cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts }
            if cond_jaxpr.consts.is_empty()
                && body_jaxpr.consts.is_empty()
                && cond_jaxpr.jaxpr.outvars.first().is_some_and(|p| cond_jaxpr.jaxpr.atom_aval(p).rank() == 0) =>
        {
            let (cc, bc) = (*cond_nconsts, *body_nconsts);
            let (cconsts, rest) = operands.split_at(cc);
            let (bconsts, init) = rest.split_at(bc);
            let mut carry = init.to_vec();
            let mut carry_taint = in_taint[cc + bc..].to_vec();
            for trip in 0..1000 {
                let cargs: Vec<Array> = cconsts.iter().cloned().chain(carry.iter().cloned()).collect();
                let cargs_taint = [&in_taint[..cc], &carry_taint[..]].concat();
                let (_, taint) =
                    locate_in(&cond_jaxpr.jaxpr, &cargs, &cargs_taint, &format!("{at}cond {trip}: "), differing)?;
                if out_taint(&cond_jaxpr.jaxpr, &taint)[0] {
                    // The trip count itself may differ.
                    return located(vec![true; n]);
                }
                let go = match &eval(&cond_jaxpr.jaxpr, &cargs)?[..] {
                    [Array::Bool(p)] => p.iter().next().copied().unwrap_or(false),
                    _ => return Err(format!("{at}the predicate is not a bool[]")),
                };
                if !go {
                    return located(carry_taint);
                }
                let bargs: Vec<Array> = bconsts.iter().cloned().chain(carry).collect();
                let bargs_taint = [&in_taint[cc..cc + bc], &carry_taint[..]].concat();
                let (_, taint) =
                    locate_in(&body_jaxpr.jaxpr, &bargs, &bargs_taint, &format!("{at}trip {trip}: "), differing)?;
                carry_taint = out_taint(&body_jaxpr.jaxpr, &taint);
                carry = eval(&body_jaxpr.jaxpr, &bargs)?;
            }
            Err(format!("{at}not located: more than 1000 trips"))
        }
        Primitive::Cond { branches, .. } => {
            let index = match operands.first() {
                Some(Array::I32(i)) => i.iter().next().map_or(0, |&i| i64::from(i)),
                _ => return Err(format!("{at}the index is not an i32[]")),
            };
            let taken = remat_ir::cond_branch(index, branches.len());
            let branch = &branches[taken].jaxpr;
            let (_, taint) =
                locate_in(branch, &operands[1..], &in_taint[1..], &format!("{at}branch {taken}: "), differing)?;
            // Where the index differs, another branch may run.
            located(if in_taint[0] { vec![true; n] } else { out_taint(branch, &taint) })
        }
        Primitive::Jit { jaxpr, .. }
        | Primitive::ClosedCall { call_jaxpr: jaxpr }
        | Primitive::CustomJvpCall { call_jaxpr: jaxpr, .. }
        | Primitive::CustomVjpCall { call_jaxpr: jaxpr, .. }
            if jaxpr.consts.is_empty() =>
        {
            let (_, taint) = locate_in(&jaxpr.jaxpr, operands, in_taint, at, differing)?;
            located(out_taint(&jaxpr.jaxpr, &taint))
        }
        Primitive::Remat2 { jaxpr, .. } => {
            let (_, taint) = locate_in(jaxpr, operands, in_taint, at, differing)?;
            located(out_taint(jaxpr, &taint))
        }
        // Compared whole: the primitives without a nested program, and the loops and calls
        // above whose programs close over constants (or whose predicate is not a scalar).
        Primitive::Scan { .. }
        | Primitive::While { .. }
        | Primitive::Jit { .. }
        | Primitive::ClosedCall { .. }
        | Primitive::Composite { .. }
        | Primitive::CustomJvpCall { .. }
        | Primitive::CustomVjpCall { .. }
        | Primitive::Unary(_)
        | Primitive::Binary(_)
        | Primitive::Compare(_)
        | Primitive::IntegerPow { .. }
        | Primitive::SelectN
        | Primitive::Clamp
        | Primitive::RegularizedIncompleteBeta
        | Primitive::Complex
        | Primitive::Real
        | Primitive::Imag
        | Primitive::Conj { .. }
        | Primitive::Fft { .. }
        | Primitive::ConvertElementType { .. }
        | Primitive::ReducePrecision { .. }
        | Primitive::Round { .. }
        | Primitive::BitcastConvertType { .. }
        | Primitive::BroadcastInDim { .. }
        | Primitive::Reshape { .. }
        | Primitive::Transpose { .. }
        | Primitive::Rev { .. }
        | Primitive::Squeeze { .. }
        | Primitive::ExpandDims { .. }
        | Primitive::Slice { .. }
        | Primitive::Pad { .. }
        | Primitive::Concatenate { .. }
        | Primitive::DynamicSlice { .. }
        | Primitive::DynamicUpdateSlice
        | Primitive::Iota { .. }
        | Primitive::Reduce { .. }
        | Primitive::Argmax { .. }
        | Primitive::DotGeneral { .. }
        | Primitive::Name { .. }
        | Primitive::DevicePut { .. }
        | Primitive::Empty2 { .. }
        | Primitive::ConvGeneralDilated(_)
        | Primitive::ReduceWindow { .. }
        | Primitive::SelectAndScatterAdd { .. }
        | Primitive::SelectAndGatherAdd { .. }
        | Primitive::RandomSeed
        | Primitive::RandomWrap
        | Primitive::RandomUnwrap
        | Primitive::RandomSplit { .. }
        | Primitive::RandomFoldIn
        | Primitive::RandomBits { .. }
        | Primitive::RandomClone
        | Primitive::Threefry2x32
        | Primitive::Iota2x32Shape { .. }
        | Primitive::ShardingConstraint(_)
        | Primitive::Reshard
        | Primitive::ShardMap(_)
        | Primitive::AllReduce { .. }
        | Primitive::Pvary { .. }
        | Primitive::AllGather { .. }
        | Primitive::ReduceScatter { .. }
        | Primitive::Ppermute { .. }
        | Primitive::AxisIndex { .. }
        | Primitive::Pbroadcast { .. }
        | Primitive::AllToAll { .. }
        | Primitive::ShardAlike
        | Primitive::RngBitGenerator { .. }
        | Primitive::Split { .. }
        | Primitive::Stack { .. }
        | Primitive::Unstack { .. }
        | Primitive::Tile { .. }
        | Primitive::PlatformIndex { .. }
        | Primitive::OptimizationBarrier
        | Primitive::Gather { .. }
        | Primitive::Scatter { .. }
        | Primitive::Sort { .. }
        | Primitive::TopK { .. }
        | Primitive::ApproxTopK { .. }
        | Primitive::Cholesky
        | Primitive::TriangularSolve(_)
        | Primitive::Lu
        | Primitive::LuPivotsToPermutation { .. }
        | Primitive::Qr(_)
        | Primitive::Eigh(_)
        | Primitive::Svd(_)
        | Primitive::Geqrf
        | Primitive::HouseholderProduct
        | Primitive::Ormqr { .. }
        | Primitive::TridiagonalSolve { .. }
        | Primitive::SymmetricProduct { .. }
        | Primitive::Argmin { .. }
        | Primitive::Cumulative { .. }
        | Primitive::GenericReduce { .. }
        | Primitive::GenericReduceWindow { .. } => Ok(Inside::Whole),
    }
}
