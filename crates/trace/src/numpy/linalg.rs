//! Products: `dot`, `matmul` and `einsum`, decomposed exactly as `jnp`'s (one
//! `dot_general`, with the `squeeze`, `reduce_sum` and `transpose` JAX adds around it).

use std::collections::BTreeSet;
use std::panic::Location;

use remat_ir::{DType, DotDimensionNumbers, Primitive};

use crate::tensor::{result_type, Tensor};
use crate::trace::{bind, record_error};

impl Tensor {
    /// `lax.dot_general(a, b, dimension_numbers)`: contracts the paired contracting axes and
    /// batches over the paired batch axes; the result's axes are the batch axes, then `a`'s
    /// free axes, then `b`'s. Operands of different dtypes are converted to their common
    /// dtype first (JAX's `dot_general` takes mixed dtypes; the IR's does not).
    #[track_caller]
    pub fn dot_general(&self, b: &Tensor, dimension_numbers: DotDimensionNumbers) -> Tensor {
        dot_general_at(self, b, dimension_numbers, Location::caller())
    }

    /// `jnp.dot(a, b)`: for 1-D and 2-D operands the vector or matrix product; in general
    /// the sum product over the last axis of `a` and the second-to-last axis of `b` (the
    /// only axis of a 1-D `b`). A scalar operand multiplies.
    #[track_caller]
    pub fn dot(&self, b: &Tensor) -> Tensor {
        dot_general_at(self, b, dot_numbers(self, b), Location::caller())
    }

    /// `jnp.dot(a, b, preferred_element_type=dtype)`: as [`Tensor::dot`], accumulating and
    /// returning `dtype` (`bf16` operands with an `f32` result, for mixed precision).
    #[track_caller]
    pub fn dot_preferred(&self, b: &Tensor, preferred_element_type: DType) -> Tensor {
        dot_general_typed(self, b, dot_numbers(self, b), Some(preferred_element_type), Location::caller())
    }

    /// `a @ b` (`jnp.matmul`): the matrix product over the last two axes, with the leading
    /// axes as batch axes that broadcast against each other (size 1 stretches); a 1-D
    /// operand is a vector. Records `dot_general`, plus JAX's `squeeze` of size-1 batch axes
    /// and `transpose` into the batch-first order.
    #[track_caller]
    pub fn matmul(&self, b: &Tensor) -> Tensor {
        matmul_at(self, b, Location::caller())
    }
}

/// `jnp.dot`'s dimension numbers.
pub(crate) fn dot_numbers(a: &Tensor, b: &Tensor) -> DotDimensionNumbers {
    let (ra, rb) = (a.ndim(), b.ndim());
    if ra == 0 || rb == 0 {
        return DotDimensionNumbers::default();
    }
    let rc = if rb == 1 { 0 } else { rb - 2 };
    DotDimensionNumbers { lhs_contracting: vec![ra - 1], rhs_contracting: vec![rc], ..Default::default() }
}

pub(crate) fn dot_general_at(
    a: &Tensor,
    b: &Tensor,
    dn: DotDimensionNumbers,
    loc: &'static Location<'static>,
) -> Tensor {
    dot_general_typed(a, b, dn, None, loc)
}

/// `dot_general` of `a` and `b` converted to their common dtype, producing `preferred`
/// (by default that common dtype).
fn dot_general_typed(
    a: &Tensor,
    b: &Tensor,
    dn: DotDimensionNumbers,
    preferred: Option<DType>,
    loc: &'static Location<'static>,
) -> Tensor {
    let (dtype, _) = result_type(&[(a.dtype(), a.is_weak()), (b.dtype(), b.is_weak())]);
    for (&l, &r) in dn.lhs_contracting.iter().zip(&dn.rhs_contracting) {
        if let (Some(x), Some(y)) = (a.shape().get(l), b.shape().get(r)) {
            if x != y {
                record_error(
                    loc,
                    format!(
                        "dot: contracting axis {l} of {} has size {x} but axis {r} of {} has size {y}",
                        a.aval(),
                        b.aval()
                    ),
                );
                return Tensor::placeholder(a.aval().clone());
            }
        }
    }
    let prim =
        Primitive::DotGeneral { dimension_numbers: dn, preferred_element_type: Some(preferred.unwrap_or(dtype)) };
    let (a, b) = (a.to_type(dtype, false, loc), b.to_type(dtype, false, loc));
    bind(prim, &[a.into(), b.into()], false, loc).remove(0)
}

/// `jnp.matmul`, following `jax/_src/numpy/tensor_contractions.py` step for step so the
/// recorded equations are JAX's.
pub(crate) fn matmul_at(a: &Tensor, b: &Tensor, loc: &'static Location<'static>) -> Tensor {
    if a.ndim() == 0 || b.ndim() == 0 {
        record_error(loc, format!("matmul: operands must have at least one axis, found {} and {}", a.aval(), b.aval()));
        return Tensor::placeholder(a.aval().clone());
    }
    let (a_is_mat, b_is_mat) = (a.ndim() > 1, b.ndim() > 1);
    let batch_of = |x: &Tensor, is_mat: bool| if is_mat { x.shape()[..x.ndim() - 2].to_vec() } else { vec![] };
    let (a_dims, b_dims) = (batch_of(a, a_is_mat), batch_of(b, b_is_mat));
    let nb = a_dims.len().max(b_dims.len());
    let pad = |d: Vec<usize>| -> Vec<Option<usize>> {
        std::iter::repeat_n(None, nb - d.len()).chain(d.into_iter().map(Some)).collect()
    };
    let (a_dims, b_dims) = (pad(a_dims), pad(b_dims));
    let (mut a_squeeze, mut b_squeeze, mut both_squeeze) = (vec![], vec![], vec![]);
    let (mut a_batch, mut b_batch) = (vec![], vec![]);
    let (mut idx_batch, mut idx_a_other, mut idx_b_other) = (vec![], vec![], vec![]);
    for (i, (ba, bb)) in a_dims.iter().zip(&b_dims).enumerate() {
        match (*ba, *bb) {
            (None, _) => idx_b_other.push(i),
            (_, None) => idx_a_other.push(i),
            (Some(1), Some(1)) => {
                a_squeeze.push(idx_batch.len() + idx_a_other.len() + a_squeeze.len());
                b_squeeze.push(idx_batch.len() + idx_b_other.len() + b_squeeze.len());
                both_squeeze.push(i);
            }
            (Some(1), _) => {
                idx_b_other.push(i);
                a_squeeze.push(idx_batch.len() + idx_a_other.len() + a_squeeze.len());
            }
            (_, Some(1)) => {
                idx_a_other.push(i);
                b_squeeze.push(idx_batch.len() + idx_b_other.len() + b_squeeze.len());
            }
            (Some(x), Some(y)) if x == y => {
                a_batch.push(idx_batch.len() + idx_a_other.len());
                b_batch.push(idx_batch.len() + idx_b_other.len());
                idx_batch.push(i);
            }
            _ => {
                record_error(loc, format!("matmul: batch axes of {} and {} do not broadcast", a.aval(), b.aval()));
                return Tensor::placeholder(a.aval().clone());
            }
        }
    }
    if a_is_mat {
        idx_a_other.push(nb);
    }
    if b_is_mat {
        idx_b_other.push(nb + a_is_mat as usize);
    }
    let order: Vec<usize> = idx_batch.iter().chain(&idx_a_other).chain(&idx_b_other).copied().collect();
    let mut perm: Vec<usize> = (0..order.len()).collect();
    perm.sort_by_key(|&i| order[i]);
    let a = a.squeeze_at(&a_squeeze, loc);
    let b = b.squeeze_at(&b_squeeze, loc);
    let dn = DotDimensionNumbers {
        lhs_contracting: vec![a.ndim() - 1],
        rhs_contracting: vec![b.ndim() - 1 - b_is_mat as usize],
        lhs_batch: a_batch,
        rhs_batch: b_batch,
    };
    let out = dot_general_at(&a, &b, dn, loc).transpose_at(&perm, loc);
    if both_squeeze.is_empty() {
        out
    } else {
        out.expand_dims_at(&both_squeeze, loc)
    }
}

/// `jnp.einsum(spec, a)` or `jnp.einsum(spec, a, b)`: `"bqd,bkd->bqk"` contracts the
/// letters missing from the output, batches over letters shared by both operands and the
/// output, and keeps the rest. Without `->`, the output is the letters that appear once,
/// in alphabetical order. Records what JAX records for one or two operands: `reduce_sum`
/// of letters only one operand has, one `dot_general` (operands in the order that avoids
/// a transpose, if one does), then a `transpose` into the output order if needed.
/// Repeated letters within an operand (diagonals) and `...` are not supported.
#[track_caller]
pub fn einsum(spec: &str, operands: &[&Tensor]) -> Tensor {
    let loc = Location::caller();
    match parse_spec(spec, operands) {
        Ok((inputs, output)) => match (operands, inputs.as_slice()) {
            ([x], [names]) => einsum1(x, names, &output, loc),
            ([x, y], [nx, ny]) => einsum2(x, nx, y, ny, &output, loc),
            _ => unreachable!("parse_spec checks the operand count"),
        },
        Err(message) => {
            record_error(loc, format!("einsum {spec:?}: {message}"));
            Tensor::placeholder(
                operands.first().map_or_else(|| remat_ir::Aval::scalar(DType::F32), |t| t.aval().clone()),
            )
        }
    }
}

/// The operands' letter strings and the output's, checked against the operands' shapes.
fn parse_spec(spec: &str, operands: &[&Tensor]) -> Result<(Vec<String>, String), String> {
    if !(1..=2).contains(&operands.len()) {
        return Err(format!("takes one or two operands, found {}", operands.len()));
    }
    let spec: String = spec.chars().filter(|c| !c.is_whitespace()).collect();
    let (ins, out) = match spec.split_once("->") {
        Some((i, o)) => (i.to_string(), Some(o.to_string())),
        None => (spec.clone(), None),
    };
    let inputs: Vec<String> = ins.split(',').map(str::to_string).collect();
    if inputs.len() != operands.len() {
        return Err(format!("{} operand subscripts for {} operands", inputs.len(), operands.len()));
    }
    let all = inputs.concat() + out.as_deref().unwrap_or("");
    if let Some(c) = all.chars().find(|c| !c.is_ascii_alphabetic()) {
        return Err(format!("subscripts must be letters (no `...`), found {c:?}"));
    }
    let mut sizes: Vec<(char, usize)> = Vec::new();
    for (names, x) in inputs.iter().zip(operands) {
        if names.len() != x.ndim() {
            return Err(format!("subscripts {names:?} do not match {}, which has {} axes", x.aval(), x.ndim()));
        }
        let mut seen = BTreeSet::new();
        for (c, &d) in names.chars().zip(x.shape()) {
            if !seen.insert(c) {
                return Err(format!("repeated subscript {c:?} in one operand is not supported"));
            }
            match sizes.iter_mut().find(|(l, _)| *l == c) {
                Some((_, s)) if *s == 1 => *s = d,
                Some((_, s)) if d != 1 && *s != d => {
                    return Err(format!("subscript {c:?} has sizes {s} and {d}"));
                }
                Some(_) => {}
                None => sizes.push((c, d)),
            }
        }
    }
    let output = match out {
        Some(o) => {
            for c in o.chars() {
                if !sizes.iter().any(|(l, _)| *l == c) {
                    return Err(format!("output subscript {c:?} is not in any operand"));
                }
            }
            o
        }
        None => {
            let once: BTreeSet<char> = all.chars().filter(|&c| all.matches(c).count() == 1).collect();
            once.into_iter().collect()
        }
    };
    Ok((inputs, output))
}

fn positions(names: &str, letters: &[char]) -> Vec<usize> {
    letters.iter().map(|&c| names.find(c).expect("letter of this operand")).collect()
}

fn remove(names: &str, letters: &[char]) -> String {
    names.chars().filter(|c| !letters.contains(c)).collect()
}

/// Sums out `letters` of `x` (JAX's `sum_uniques`).
fn sum_letters(x: Tensor, names: String, letters: &[char], loc: &'static Location<'static>) -> (Tensor, String) {
    if letters.is_empty() {
        return (x, names);
    }
    let axes = positions(&names, letters);
    (x.reduce_sum_at(&axes, loc), remove(&names, letters))
}

/// Transposes `x` from the letter order `names` to `output`.
fn to_output(x: Tensor, names: &str, output: &str, loc: &'static Location<'static>) -> Tensor {
    let out: Vec<char> = output.chars().collect();
    x.transpose_at(&positions(names, &out), loc)
}

fn einsum1(x: &Tensor, names: &str, output: &str, loc: &'static Location<'static>) -> Tensor {
    let contracted: Vec<char> =
        names.chars().filter(|&c| !output.contains(c)).collect::<BTreeSet<_>>().into_iter().collect();
    let (x, names) = sum_letters(x.clone(), names.to_string(), &contracted, loc);
    to_output(x, &names, output, loc)
}

/// Drops size-1 axes whose letter the other operand has with a size other than 1 (JAX's
/// `filter_singleton_dims`).
fn filter_singletons(
    x: &Tensor,
    names: &str,
    other: &Tensor,
    other_names: &str,
    loc: &'static Location<'static>,
) -> (Tensor, String) {
    let squeeze: Vec<usize> = names
        .chars()
        .enumerate()
        .filter(|&(i, c)| x.shape()[i] == 1 && other_names.find(c).is_some_and(|j| other.shape()[j] != 1))
        .map(|(i, _)| i)
        .collect();
    let kept: String = names.chars().enumerate().filter(|(i, _)| !squeeze.contains(i)).map(|(_, c)| c).collect();
    (x.squeeze_at(&squeeze, loc), kept)
}

/// Two operands, as JAX's `_einsum` does it: opt_einsum hands it the operands in reverse
/// order (`lhs` is the second operand, `rhs` the first).
fn einsum2(
    a: &Tensor,
    a_names: &str,
    b: &Tensor,
    b_names: &str,
    output: &str,
    loc: &'static Location<'static>,
) -> Tensor {
    let contracted: BTreeSet<char> = a_names.chars().chain(b_names.chars()).filter(|&c| !output.contains(c)).collect();
    let (lhs, lhs_names) = filter_singletons(b, b_names, a, a_names, loc);
    let (rhs, rhs_names) = filter_singletons(a, a_names, &lhs, &lhs_names, loc);
    let unique = |mine: &str, other: &str| -> Vec<char> {
        contracted.iter().copied().filter(|&c| mine.contains(c) && !other.contains(c)).collect()
    };
    let lhs_unique = unique(&lhs_names, &rhs_names);
    let (lhs, lhs_names) = sum_letters(lhs, lhs_names, &lhs_unique, loc);
    let rhs_unique = unique(&rhs_names, &lhs_names);
    let (rhs, rhs_names) = sum_letters(rhs, rhs_names, &rhs_unique, loc);
    let contracted: Vec<char> =
        contracted.into_iter().filter(|&c| lhs_names.contains(c) || rhs_names.contains(c)).collect();
    let batch: Vec<char> = output.chars().filter(|&c| lhs_names.contains(c) && rhs_names.contains(c)).collect();
    let deleted: Vec<char> = batch.iter().chain(&contracted).copied().collect();
    let (rest_lhs, rest_rhs) = (remove(&lhs_names, &deleted), remove(&rhs_names, &deleted));
    let batch_str: String = batch.iter().collect();
    let dims = |x: &str, y: &str| DotDimensionNumbers {
        lhs_contracting: positions(x, &contracted),
        rhs_contracting: positions(y, &contracted),
        lhs_batch: positions(x, &batch),
        rhs_batch: positions(y, &batch),
    };
    let names = format!("{batch_str}{rest_rhs}{rest_lhs}");
    if names == output {
        let out = dot_general_at(&rhs, &lhs, dims(&rhs_names, &lhs_names), loc);
        return out;
    }
    let names = format!("{batch_str}{rest_lhs}{rest_rhs}");
    let out = dot_general_at(&lhs, &rhs, dims(&lhs_names, &rhs_names), loc);
    to_output(out, &names, output, loc)
}
