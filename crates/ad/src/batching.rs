//! `vmap` on jaxprs: JAX's batching interpreter (`jax/_src/interpreters/batching.py`) as a
//! jaxpr-to-jaxpr pass, with one batching rule per primitive in `batching/rules.rs`.
//!
//! ```text
//! jaxpr   : (xs)                         -> (ys)
//! batched : (xs with a batch axis at in_dims[i], or none) -> (ys with one at out_dims[j])
//! ```
//!
//! Every value of the batched program carries where its batch axis is (`Option<usize>`,
//! JAX's `bdim`; `None` is `not_mapped`). An equation none of whose operands is batched is
//! copied unchanged, as JAX's trace never sees it; otherwise its primitive's rule emits
//! the equations JAX's rule emits (the same `moveaxis` transposes and `broadcast_in_dim`s,
//! and the `np.int64(..)` spelling of parameters JAX computes with NumPy), so that a
//! batched program prints as `jax.make_jaxpr(jax.vmap(f))` does. Every primitive has a
//! rule.
//!
//! JAX's helpers the rules share (`moveaxis`, `broadcast`, `bdim_at_front`, `matchaxis`,
//! and `np_tuple` for NumPy's spelling) are here, as they are in `batching.py`; the rule
//! files (`rules.rs` and the `control`, `indexing`, `window` files it dispatches to) use
//! them and not one another's.
//!
//! Architecture invariant: a rule sees the operands' atoms and batch axes and the
//! equation's parameters, never values; the output verifies (checked in debug builds).

mod control;
mod indexing;
mod rules;
mod window;

use std::sync::Arc;

use remat_ir::{Array, Atom, Aval, ClosedJaxpr, Jaxpr, Primitive};

use crate::builder::{Builder, VarMap};
use crate::{check, AdError};

/// A value of the batched program: its atom and where its batch axis is.
pub(crate) type Batched = (Atom, Option<usize>);

/// What a batched program does with each output's batch axis.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum OutAxes<'a> {
    /// Wherever the rules left it (JAX's `batch_jaxpr2`, for a `jit` body).
    Infer,
    /// At axis 0 if batched, unbatched otherwise (JAX's `zero_if_mapped`, for `remat2`
    /// and custom-derivative bodies).
    ZeroIfMapped,
    /// At these axes (`vmap`'s `out_axes`): `Some(axis)` moves (or, for an unbatched
    /// output, broadcasts) the batch axis there; `None` requires an unbatched output.
    Given(&'a [Option<usize>]),
}

/// A batched jaxpr: the unbatched one's constvars, then one per constant a rule made
/// (`new_consts` holds their values), and where each output's batch axis is.
#[derive(Debug)]
pub(crate) struct BatchedJaxpr {
    pub jaxpr: Jaxpr,
    pub new_consts: Vec<Array>,
    pub out_dims: Vec<Option<usize>>,
}

impl BatchedJaxpr {
    /// Closed over `consts` (the values of the unbatched jaxpr's constvars) and the new
    /// constants.
    pub fn close(self, consts: &[Array]) -> ClosedJaxpr {
        let consts = consts.iter().cloned().chain(self.new_consts).collect();
        ClosedJaxpr { jaxpr: Arc::new(self.jaxpr), consts }
    }

    /// The jaxpr of a body that cannot hold constants (`remat2`'s) with the constants the
    /// rules made as leading invars instead (JAX's `convert_constvars_jaxpr`), and their
    /// values, which the caller passes as leading operands.
    pub fn consts_as_invars(mut self) -> Result<(Jaxpr, Vec<Array>), AdError> {
        if self.jaxpr.constvars.len() != self.new_consts.len() {
            return Err(AdError::Invalid(format!(
                "vmap: a body with {} constvars of unknown value",
                self.jaxpr.constvars.len() - self.new_consts.len()
            )));
        }
        let consts = std::mem::take(&mut self.jaxpr.constvars);
        self.jaxpr.invars.splice(0..0, consts);
        Ok((self.jaxpr, self.new_consts))
    }
}

/// `jax.vmap(f, in_axes, out_axes)` on `closed`, for a batch of `axis_size`: the batched
/// program takes each invar with a batch axis at `in_dims[i]` (`None`: as it is) and gives
/// each output with one at `out_dims[j]`. Constvars stay unbatched constvars; constants the
/// rules make (the `i32[0]` start indices of a rank-0 `dynamic_slice`) are constvars after
/// them, with their values in the consts.
pub fn batch_jaxpr(
    closed: &ClosedJaxpr,
    axis_size: usize,
    in_dims: &[Option<usize>],
    out_dims: &[Option<usize>],
) -> Result<ClosedJaxpr, AdError> {
    if out_dims.len() != closed.jaxpr.outvars.len() {
        return Err(AdError::Invalid(format!(
            "vmap: out_axes has {} entries for {} outputs",
            out_dims.len(),
            closed.jaxpr.outvars.len()
        )));
    }
    let batched = batch_jaxpr_axes(&closed.jaxpr, axis_size, in_dims, OutAxes::Given(out_dims))?;
    check("vmap", &batched.jaxpr)?;
    Ok(batched.close(&closed.consts))
}

/// [`batch_jaxpr`] with the outputs' axes decided by `out`.
pub(crate) fn batch_jaxpr_axes(
    jaxpr: &Jaxpr,
    axis_size: usize,
    in_dims: &[Option<usize>],
    out: OutAxes<'_>,
) -> Result<BatchedJaxpr, AdError> {
    if in_dims.len() != jaxpr.invars.len() {
        return Err(AdError::Invalid(format!(
            "vmap: in_axes has {} entries for {} inputs",
            in_dims.len(),
            jaxpr.invars.len()
        )));
    }
    let mut b = Builder::new();
    let mut map = VarMap::new(jaxpr);
    let mut dims: Vec<Option<usize>> = vec![None; jaxpr.vars.len()];
    for &c in &jaxpr.constvars {
        map.set(c, b.constvar(jaxpr.aval(c).clone()));
    }
    for (&v, &d) in jaxpr.invars.iter().zip(in_dims) {
        let aval = jaxpr.aval(v);
        let aval = match d {
            None => aval.clone(),
            Some(d) if d <= aval.rank() => with_axis(aval, d, axis_size),
            Some(d) => {
                return Err(AdError::Invalid(format!(
                    "vmap: in_axes {d} is out of range for an input of rank {}",
                    aval.rank()
                )))
            }
        };
        map.set(v, b.invar(aval));
        dims[v.index()] = d;
    }
    let dim_of = |dims: &[Option<usize>], a: &Atom| match a {
        Atom::Var(v) => dims[v.index()],
        Atom::Lit(_) => None,
    };
    for eqn in &jaxpr.eqns {
        let ins: Vec<Batched> = eqn.invars.iter().map(|a| (map.get(a), dim_of(&dims, a))).collect();
        if ins.iter().all(|(_, d)| d.is_none()) {
            b.copy_eqn(jaxpr, eqn, &mut map);
            continue;
        }
        let prev = b.set_source(Some(eqn.source.clone()));
        let before = b.num_eqns();
        let results = rules::batch_eqn(&mut b, eqn, &ins, axis_size)?;
        b.keep_spelling(before, &eqn.spelling);
        b.set_source(prev);
        if results.len() != eqn.outvars.len() {
            return Err(AdError::Internal(format!(
                "vmap: the {} rule gave the wrong result count",
                eqn.primitive.name()
            )));
        }
        for (&o, (atom, d)) in eqn.outvars.iter().zip(results) {
            map.set(o, atom);
            dims[o.index()] = d;
        }
    }
    let mut outvars = Vec::with_capacity(jaxpr.outvars.len());
    let mut out_dims = Vec::with_capacity(jaxpr.outvars.len());
    for (j, a) in jaxpr.outvars.iter().enumerate() {
        let x = (map.get(a), dim_of(&dims, a));
        let want = match out {
            OutAxes::Infer => x.1,
            OutAxes::ZeroIfMapped => x.1.map(|_| 0),
            OutAxes::Given(given) => given[j],
        };
        outvars.push(match_axis(&mut b, x, want, axis_size, j)?);
        out_dims.push(want);
    }
    let new_consts = b.take_const_values();
    Ok(BatchedJaxpr { jaxpr: b.finish(outvars), new_consts, out_dims })
}

/// JAX's `batching.batch_jaxpr(jaxpr, batched, instantiate)`: inputs batched at axis 0
/// where `batched` says, outputs batched at axis 0 where the rules leave them batched or
/// `instantiate` says (broadcast if need be); returns which outputs are batched.
pub(crate) fn batch_jaxpr_bools(
    jaxpr: &Jaxpr,
    size: usize,
    batched: &[bool],
    instantiate: &[bool],
) -> Result<(BatchedJaxpr, Vec<bool>), AdError> {
    let in_dims: Vec<Option<usize>> = batched.iter().map(|&b| b.then_some(0)).collect();
    let j = batch_jaxpr_axes(jaxpr, size, &in_dims, OutAxes::ZeroIfMapped)?;
    let out: Vec<bool> = j
        .out_dims
        .iter()
        .enumerate()
        .map(|(i, d)| d.is_some() || instantiate.get(i).copied().unwrap_or(false))
        .collect();
    if out.iter().zip(&j.out_dims).all(|(o, d)| *o == d.is_some()) {
        return Ok((j, out));
    }
    let out_dims: Vec<Option<usize>> = out.iter().map(|&o| o.then_some(0)).collect();
    let j = batch_jaxpr_axes(jaxpr, size, &in_dims, OutAxes::Given(&out_dims))?;
    Ok((j, out))
}

/// `aval` with an axis of `size` inserted at `axis`.
pub(crate) fn with_axis(aval: &Aval, axis: usize, size: usize) -> Aval {
    let mut shape = aval.shape.clone();
    shape.insert(axis, size);
    Aval { shape, ..aval.clone() }
}

/// JAX's `matchaxis`: output `j`'s batch axis moved to `dst`, or broadcast there when it
/// has none.
fn match_axis(b: &mut Builder, x: Batched, dst: Option<usize>, size: usize, j: usize) -> Result<Atom, AdError> {
    match (x.1, dst) {
        (None, None) => Ok(x.0),
        (Some(src), Some(dst)) if src == dst => Ok(x.0),
        (Some(src), Some(dst)) => moveaxis(b, x.0, src, dst),
        (None, Some(dst)) => {
            let rank = b.aval(&x.0).rank();
            if dst > rank {
                return Err(AdError::Invalid(format!(
                    "vmap: out_axes {dst} is out of range for output {j} of rank {rank}"
                )));
            }
            broadcast(b, x.0, size, dst)
        }
        (Some(_), None) => Err(AdError::Invalid(format!(
            "vmap: output {j} is batched but its out_axes is None (JAX: vmap has mapped output but out_axes is None)"
        ))),
    }
}

/// A tuple of integers as JAX prints it, `np.int64(k)` where the flag says NumPy made it.
fn np_tuple(items: &[(usize, bool)]) -> String {
    let parts: Vec<String> =
        items.iter().map(|&(k, np)| if np { format!("np.int64({k})") } else { k.to_string() }).collect();
    match parts.len() {
        1 => format!("({},)", parts[0]),
        _ => format!("({})", parts.join(", ")),
    }
}

/// JAX's `moveaxis(x, src, dst)` (a `transpose`, none when `src == dst`).
fn moveaxis(b: &mut Builder, x: Atom, src: usize, dst: usize) -> Result<Atom, AdError> {
    if src == dst {
        return Ok(x);
    }
    let rank = b.aval(&x).rank();
    let mut perm: Vec<usize> = (0..rank).filter(|&i| i != src).collect();
    perm.insert(dst, src);
    b.transpose(x, &perm)
}

/// JAX's `batching.broadcast(x, size, axis)`: a new axis of `size` at `axis`
/// (`broadcast_in_dim`, its dimensions computed with NumPy).
fn broadcast(b: &mut Builder, x: Atom, size: usize, axis: usize) -> Result<Atom, AdError> {
    let aval = b.aval(&x);
    let mut shape = aval.shape.clone();
    shape.insert(axis, size);
    let dims: Vec<usize> = (0..shape.len()).filter(|&i| i != axis).collect();
    let out = b.bind1(Primitive::BroadcastInDim { shape, broadcast_dimensions: dims.clone() }, vec![x])?;
    if !dims.is_empty() {
        b.spell_last_param("broadcast_dimensions", np_tuple(&dims.iter().map(|&d| (d, true)).collect::<Vec<_>>()));
    }
    Ok(out)
}

/// `lax.broadcast(x, (size,))`: a new leading axis of `size`, its dimensions Python ints
/// (where JAX's batching rules call `lax.broadcast` rather than `batching.broadcast`).
fn lax_broadcast(b: &mut Builder, x: Atom, size: usize) -> Result<Atom, AdError> {
    let aval = b.aval(&x);
    let shape: Vec<usize> = std::iter::once(size).chain(aval.shape.iter().copied()).collect();
    let dims: Vec<usize> = (1..=aval.rank()).collect();
    b.bind1(Primitive::BroadcastInDim { shape, broadcast_dimensions: dims }, vec![x])
}

/// JAX's `bdim_at_front(x, bdim, size)`.
fn bdim_at_front(b: &mut Builder, x: Atom, d: Option<usize>, size: usize) -> Result<Atom, AdError> {
    match d {
        None => broadcast(b, x, size, 0),
        Some(d) => moveaxis(b, x, d, 0),
    }
}
