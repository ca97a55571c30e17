//! Call-like primitives: `name` and `device_put` (identities on values; memory spaces do not
//! change values), `jit`, `custom_jvp_call` and `remat2` (evaluate the inner jaxpr), and
//! `scan` (a loop over the leading axis of its xs), `cond` (one branch, chosen at run time),
//! `while` (a loop until its cond_jaxpr says stop) and `custom_vjp_call` (its call_jaxpr).
//!
//! Errors inside a called jaxpr come back wrapped in [`EvalError::Nested`], which says which
//! call (and which scan iteration) they happened in.

use ndarray::{ArrayD, ArrayViewD, Axis};
use remat_ir::{cond_branch, Array, Aval, ClosedJaxpr, Jaxpr};

use crate::elem::{map_array, typed, Elem};
use crate::{eval_jaxpr_refs, EvalError};
use remat_math::element::Element;
use remat_math::with_dtype;

/// `name` and `device_put`: each operand is its own result.
pub(crate) fn identity(args: &[&Array], expected: usize) -> Result<Vec<Array>, String> {
    if args.len() != expected {
        return Err(format!("expected {expected} operand{}, got {}", if expected == 1 { "" } else { "s" }, args.len()));
    }
    Ok(args.iter().map(|&a| a.clone()).collect())
}

/// Evaluates a called jaxpr; `context` names the call in errors (``jit `f` ``).
pub(crate) fn call(
    primitive: &'static str,
    context: String,
    jaxpr: &Jaxpr,
    consts: &[Array],
    args: &[&Array],
) -> Result<Vec<Array>, EvalError> {
    let consts: Vec<&Array> = consts.iter().collect();
    eval_jaxpr_refs(jaxpr, &consts, args).map_err(|error| EvalError::Nested {
        primitive,
        context,
        error: Box::new(error),
    })
}

/// The parameters of a `scan` equation.
#[derive(Debug)]
pub(crate) struct Scan<'a> {
    pub body: &'a ClosedJaxpr,
    pub length: usize,
    pub reverse: bool,
    pub num_consts: usize,
    pub num_carry: usize,
}

/// `scan`: operands are consts, initial carries, then xs with leading axis `length`.
///
/// ```text
/// body:    (consts, carries, x[i]) -> (carries', y[i])
/// result:  (final carries, ys stacked along a new leading axis)
/// ```
///
/// With `reverse`, i runs from `length - 1` down to 0 and `y[i]` still lands at index i.
pub(crate) fn scan(s: &Scan, args: &[&Array]) -> Result<Vec<Array>, EvalError> {
    let invalid = |message: String| EvalError::Invalid { primitive: "scan", message };
    let (num_consts, num_carry, length) = (s.num_consts, s.num_carry, s.length);
    if args.len() < num_consts + num_carry {
        return Err(invalid(format!(
            "expected at least {} operands ({num_consts} consts and {num_carry} carries), got {}",
            num_consts + num_carry,
            args.len()
        )));
    }
    let (consts, rest) = args.split_at(num_consts);
    let (init, xs) = rest.split_at(num_carry);
    for (i, x) in xs.iter().enumerate() {
        if x.shape().first() != Some(&length) {
            return Err(invalid(format!(
                "xs operand {i} is {}, but its leading axis must have the scan length {length}",
                x.aval()
            )));
        }
    }
    let body = &s.body.jaxpr;
    let y_avals: Vec<Aval> = match body.outvars.get(num_carry..) {
        Some(ys) => ys.iter().map(|a| body.atom_aval(a)).collect(),
        None => {
            return Err(invalid(format!(
                "the body has {} outputs, fewer than the {num_carry} carries",
                body.outvars.len()
            )));
        }
    };
    let body_consts: Vec<&Array> = s.body.consts.iter().collect();

    let mut carry: Vec<Array> = init.iter().map(|&a| a.clone()).collect();
    let mut ys_per_step: Vec<Vec<Array>> = Vec::with_capacity(length);
    for step in 0..length {
        let i = if s.reverse { length - 1 - step } else { step };
        let x_slices: Vec<Array> = xs.iter().map(|x| map_array!(x, a => a.index_axis(Axis(0), i).to_owned())).collect();
        let inputs: Vec<&Array> = consts.iter().copied().chain(&carry).chain(&x_slices).collect();
        let mut outs = eval_jaxpr_refs(body, &body_consts, &inputs).map_err(|error| EvalError::Nested {
            primitive: "scan",
            context: format!("scan iteration {i} of {length}"),
            error: Box::new(error),
        })?;
        ys_per_step.push(outs.split_off(num_carry.min(outs.len())));
        carry = outs;
    }
    if s.reverse {
        ys_per_step.reverse();
    }

    let mut results = carry;
    for (j, aval) in y_avals.iter().enumerate() {
        let stacked_shape: Vec<usize> = std::iter::once(length).chain(aval.shape.iter().copied()).collect();
        if length == 0 {
            results.push(Array::zeros(&Aval::new(aval.dtype, stacked_shape)));
            continue;
        }
        let stacked = with_dtype!(aval.dtype, T => stack::<T>(&ys_per_step, j).map(T::wrap)).map_err(invalid)?;
        results.push(stacked);
    }
    Ok(results)
}

/// Output `j` of every step, stacked along a new leading axis.
fn stack<T: Elem>(per_step: &[Vec<Array>], j: usize) -> Result<ArrayD<T>, String> {
    let views = per_step
        .iter()
        .map(|ys| {
            ys.get(j).ok_or_else(|| format!("the body gave no output {j}")).and_then(typed::<T>).map(ArrayD::view)
        })
        .collect::<Result<Vec<ArrayViewD<T>>, String>>()?;
    ndarray::stack(Axis(0), &views).map_err(|e| e.to_string())
}

/// `cond`: `args[0]` is the `i32[]` index; the chosen branch (XLA's `Case`: an index out
/// of range runs the last branch, [`cond_branch`]) runs on the other operands.
pub(crate) fn cond(branches: &[ClosedJaxpr], args: &[&Array]) -> Result<Vec<Array>, EvalError> {
    let invalid = |message: String| EvalError::Invalid { primitive: "cond", message };
    let (index, ops) = args.split_first().ok_or_else(|| invalid("expected an index operand".into()))?;
    let i = match index {
        Array::I32(a) if a.ndim() == 0 => i64::from(a.iter().next().copied().unwrap_or(0)),
        other => return Err(invalid(format!("the index must be an i32[] scalar, got {}", other.aval()))),
    };
    if branches.is_empty() {
        return Err(invalid("a cond needs at least one branch".into()));
    }
    let b = cond_branch(i, branches.len());
    call("cond", format!("cond branch {b} of {}", branches.len()), &branches[b].jaxpr, &branches[b].consts, ops)
}

/// The parameters of a `while` equation.
#[derive(Debug)]
pub(crate) struct While<'a> {
    pub cond: &'a ClosedJaxpr,
    pub body: &'a ClosedJaxpr,
    pub cond_nconsts: usize,
    pub body_nconsts: usize,
}

/// `while`: operands are the cond consts, the body consts, then the initial carries.
///
/// ```text
/// while cond(cconsts, carry): carry = body(bconsts, carry)
/// ```
///
/// A batched predicate (`bool[n..]`, a prefix of every carry's shape; `vmap` of a
/// predicate the batch reaches) runs the loop while any element is true, and a trip
/// keeps the slices of the carries whose element is false (JAX's `_while_lowering`):
///
/// ```text
/// while any(p = cond(cconsts, carry)): carry = select_n(p, carry, body(bconsts, carry))
/// ```
pub(crate) fn while_loop(w: &While, args: &[&Array]) -> Result<Vec<Array>, EvalError> {
    let invalid = |message: String| EvalError::Invalid { primitive: "while", message };
    if args.len() < w.cond_nconsts + w.body_nconsts {
        return Err(invalid(format!(
            "expected at least {} operands ({} cond consts and {} body consts), got {}",
            w.cond_nconsts + w.body_nconsts,
            w.cond_nconsts,
            w.body_nconsts,
            args.len()
        )));
    }
    let (cconsts, rest) = args.split_at(w.cond_nconsts);
    let (bconsts, init) = rest.split_at(w.body_nconsts);
    let mut carry: Vec<Array> = init.iter().map(|&a| a.clone()).collect();
    for trip in 0usize.. {
        let cond_in: Vec<&Array> = cconsts.iter().copied().chain(&carry).collect();
        let pred =
            call("while", format!("while cond_jaxpr after {trip} trips"), &w.cond.jaxpr, &w.cond.consts, &cond_in)?;
        let pred = match pred.as_slice() {
            [Array::Bool(p)] => p.clone(),
            _ => return Err(invalid("cond_jaxpr must return one bool predicate".into())),
        };
        if !pred.iter().any(|&p| p) {
            break;
        }
        let body_in: Vec<&Array> = bconsts.iter().copied().chain(&carry).collect();
        let new = call("while", format!("while body_jaxpr trip {trip}"), &w.body.jaxpr, &w.body.consts, &body_in)?;
        carry = if pred.ndim() == 0 {
            new
        } else {
            let keep = |(old, new): (&Array, Array)| select_rows(&pred, old, &new).map_err(invalid);
            carry.iter().zip(new).map(keep).collect::<Result<_, _>>()?
        };
    }
    Ok(carry)
}

/// `select_n(p, old, new)` with the batched predicate `p` broadcast over the trailing axes
/// of the carry it has the leading shape of.
fn select_rows(pred: &ArrayD<bool>, old: &Array, new: &Array) -> Result<Array, String> {
    let shape = old.shape();
    if !shape.starts_with(pred.shape()) {
        return Err(format!(
            "a batched predicate of shape {:?} does not prefix a carry of shape {shape:?}",
            pred.shape()
        ));
    }
    let mut padded = pred.shape().to_vec();
    padded.resize(shape.len(), 1);
    let p = pred.view().into_shape_with_order(padded).map_err(|e| e.to_string())?;
    let p = p.broadcast(shape).ok_or("the batched predicate does not broadcast to a carry")?.to_owned();
    crate::elementwise::select_n(&[&Array::Bool(p), old, new])
}
