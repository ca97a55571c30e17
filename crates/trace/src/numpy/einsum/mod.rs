//! `jnp.einsum` of any number of operands, recorded as JAX 0.10.2 records it.
//!
//! JAX asks opt_einsum for a contraction path (`contract_path(..., optimize='auto',
//! einsum_call=True)`), then performs each step, one or two operands at a time, inside an
//! inlined `jit` (so no call equation appears): a `reduce_sum` of letters only one operand
//! has, a diagonal (`iota`s, `eq`, `select_n`, `reduce_sum`) for a letter repeated within
//! an operand, one `dot_general` per pair (the operands in whichever order avoids a
//! `transpose`, if one does), a `transpose` into the step's result order. Here `spec`
//! reads the subscripts, `path` chooses the order exactly as opt_einsum does, this file
//! turns the path into steps (with opt_einsum's letter order for each intermediate) and
//! records them (`_einsum`'s code, step for step).

mod path;
mod pyset;
mod spec;

use std::collections::BTreeSet;
use std::panic::Location;

use remat_ir::{Aval, CompareOp, DType, DotDimensionNumbers, LitValue, Primitive};

pub use path::Optimize;
use path::{find_path, Ix, MAX_INDICES};
use spec::Spec;

use crate::elementwise::{compare_at, result_type};
use crate::tensor::Tensor;
use crate::trace::{bind, record_error};

/// `jnp.einsum`'s keyword arguments.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EinsumOptions {
    /// How the contraction order is chosen (`optimize=`; default `'auto'`).
    pub optimize: Optimize,
    /// `preferred_element_type=`: the dtype every product accumulates in and the result
    /// has (by default the operands' common dtype).
    pub preferred_element_type: Option<DType>,
}

/// One step of a contraction path: the operands it takes (positions in the current list,
/// largest first, as opt_einsum pops them), the letters it sums away, and its equation
/// (`"kl,jk->lj"`: the operands' letters, the result's).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EinsumStep {
    /// The operands' positions in the current list, largest first.
    pub operands: Vec<usize>,
    /// The letters summed away, sorted.
    pub summed: Vec<char>,
    /// `"kl,jk->lj"`.
    pub equation: String,
}

/// What `jnp.einsum_path` reports: the path in opt_einsum's linear form (each step's
/// positions in the current operand list, whose result goes to the end) and its steps.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EinsumPath {
    /// opt_einsum's path: `[[1, 2], [0, 1]]`.
    pub path: Vec<Vec<usize>>,
    /// One entry per step of `path`.
    pub steps: Vec<EinsumStep>,
}

/// A step with its letters as JAX's `_einsum` reads them.
struct Step {
    operands: Vec<usize>,
    summed: Vec<char>,
    inputs: Vec<Vec<char>>,
    result: Vec<char>,
}

/// `jnp.einsum(spec, *operands)`: Einstein summation over any number of operands.
/// `"bhqd,bhkd->bhqk"` contracts `d`, batches over `b` and `h`; without `->` the output is
/// the letters that appear once, sorted; `...` stands for the leading axes that the
/// letters do not name (broadcast across operands); a letter repeated within one operand
/// takes a diagonal; a size-1 axis broadcasts against its letter's size. The contraction
/// order is JAX's (opt_einsum's `'auto'` path), and so is every recorded equation.
#[track_caller]
pub fn einsum(spec: &str, operands: &[&Tensor]) -> Tensor {
    einsum_at(spec, operands, EinsumOptions::default(), Location::caller())
}

/// [`einsum`] with `optimize=` and `preferred_element_type=`.
#[track_caller]
pub fn einsum_with(spec: &str, operands: &[&Tensor], options: EinsumOptions) -> Tensor {
    einsum_at(spec, operands, options, Location::caller())
}

/// `jnp.einsum_path(spec, *operands, optimize=...)` for operands of these shapes: the
/// contraction order [`einsum`] follows, and each step's equation.
pub fn einsum_path(spec: &str, shapes: &[&[usize]], optimize: Optimize) -> Result<EinsumPath, String> {
    let spec = spec::parse(spec, shapes)?;
    let (path, steps) = contraction_steps(&spec, optimize)?;
    let steps = steps
        .into_iter()
        .map(|s| {
            let ins: Vec<String> = s.inputs.iter().map(|t| t.iter().collect()).collect();
            let out: String = s.result.iter().collect();
            EinsumStep { operands: s.operands, summed: s.summed, equation: format!("{}->{out}", ins.join(",")) }
        })
        .collect();
    Ok(EinsumPath { path, steps })
}

fn einsum_at(spec_text: &str, operands: &[&Tensor], options: EinsumOptions, loc: &'static Location<'static>) -> Tensor {
    let fail = |message: String| {
        record_error(loc, format!("einsum {spec_text:?}: {message}"));
        Tensor::placeholder(operands.first().map_or_else(|| Aval::scalar(DType::F32), |t| t.aval().clone()))
    };
    if let Some(t) = operands.iter().find(|t| matches!(t.dtype(), DType::Bool | DType::Key)) {
        return fail(format!("operands must be numbers, found {}", t.aval()));
    }
    if options.preferred_element_type.is_some_and(|d| matches!(d, DType::Bool | DType::Key)) {
        return fail("preferred_element_type must be a number type".into());
    }
    let shapes: Vec<&[usize]> = operands.iter().map(|t| t.shape()).collect();
    let steps = spec::parse(spec_text, &shapes).and_then(|spec| contraction_steps(&spec, options.optimize));
    match steps {
        Ok((_, steps)) => {
            let operands: Vec<Tensor> = operands.iter().map(|&t| t.clone()).collect();
            contract(operands, &steps, options.preferred_element_type, loc)
        }
        Err(message) => fail(message),
    }
}

/// The path `optimize` chooses for `spec`, and its steps as opt_einsum's `contract_path`
/// lists them: an intermediate's letters in the order they first appear among its
/// operands' (the last step's are the output's).
fn contraction_steps(spec: &Spec, optimize: Optimize) -> Result<(Vec<Vec<usize>>, Vec<Step>), String> {
    let letters: Vec<char> = spec.sizes.iter().map(|&(c, _)| c).collect();
    if letters.len() > MAX_INDICES {
        return Err(format!("{} distinct subscripts; at most {MAX_INDICES} are supported", letters.len()));
    }
    let bit = |c: char| -> Ix { 1 << letters.iter().position(|&l| l == c).expect("a letter of the spec") };
    let set = |t: &[char]| t.iter().fold(0, |acc, &c| acc | bit(c));
    let sizes: Vec<usize> = spec.sizes.iter().map(|&(_, s)| s).collect();
    let mut sets: Vec<Ix> = spec.inputs.iter().map(|t| set(t)).collect();
    let output = set(&spec.output);
    let path = find_path(&sets, output, &sizes, optimize);
    let mut terms = spec.inputs.clone();
    let mut steps = Vec::with_capacity(path.len());
    for (n, step) in path.iter().enumerate() {
        let mut positions = step.clone();
        positions.sort_unstable_by(|a, b| b.cmp(a));
        // `find_contraction`: what the step's operands have that the output or another
        // operand needs survives; the rest is summed.
        let contracted: Ix = positions.iter().fold(0, |acc, &p| acc | sets[p]);
        let inputs: Vec<Vec<char>> = positions.iter().map(|&p| terms.remove(p)).collect();
        for &p in &positions {
            sets.remove(p);
        }
        let kept = sets.iter().fold(output, |acc, &s| acc | s) & contracted;
        let mut summed: Vec<char> = letters.iter().copied().filter(|&c| contracted & !kept & bit(c) != 0).collect();
        summed.sort_unstable();
        let result: Vec<char> = if n + 1 == path.len() {
            spec.output.clone()
        } else {
            let mut seen = Vec::new();
            for &c in inputs.iter().flatten() {
                if kept & bit(c) != 0 && !seen.contains(&c) {
                    seen.push(c);
                }
            }
            seen
        };
        sets.push(kept);
        terms.push(result.clone());
        steps.push(Step { operands: positions, summed, inputs, result });
    }
    Ok((path, steps))
}

/// JAX's `_einsum`: performs `steps` on `operands`, then converts the result to the
/// accumulation dtype (and weak type) if it is not already.
fn contract(
    mut operands: Vec<Tensor>,
    steps: &[Step],
    preferred: Option<DType>,
    loc: &'static Location<'static>,
) -> Tensor {
    let (dtype, weak) = match preferred {
        Some(d) => (d, false),
        None => result_type(&operands.iter().map(|t| (t.dtype(), t.is_weak())).collect::<Vec<_>>()),
    };
    let ctx = Ctx { dtype, loc };
    for step in steps {
        let (operand, names) = match step.operands.as_slice() {
            [p] => {
                let x = operands.remove(*p);
                ctx.one(x, step.inputs[0].clone(), &step.summed, &step.result)
            }
            [p, q] => {
                let lhs = operands.remove(*p);
                let rhs = operands.remove(*q);
                ctx.two(lhs, step.inputs[0].clone(), rhs, step.inputs[1].clone(), &step.summed, &step.result)
            }
            _ => unreachable!("opt_einsum's paths take one or two operands at a time"),
        };
        operands.push(to_order(operand, &names, &step.result, loc));
    }
    operands.remove(0).to_type(dtype, weak, loc)
}

/// Transposes `x` from letter order `names` to `result` (nothing if they agree).
fn to_order(x: Tensor, names: &[char], result: &[char], loc: &'static Location<'static>) -> Tensor {
    let perm: Vec<usize> = result.iter().map(|c| names.iter().position(|n| n == c).expect("a letter of x")).collect();
    x.transpose_at(&perm, loc)
}

fn remove_letters(names: &[char], letters: &[char]) -> Vec<char> {
    names.iter().copied().filter(|c| !letters.contains(c)).collect()
}

fn count(names: &[char], c: char) -> usize {
    names.iter().filter(|&&n| n == c).count()
}

/// `collections.Counter(names)`: each letter once, in order of first appearance.
fn counts(names: &[char]) -> Vec<(char, usize)> {
    let mut out: Vec<(char, usize)> = Vec::new();
    for &c in names {
        match out.iter_mut().find(|(l, _)| *l == c) {
            Some((_, n)) => *n += 1,
            None => out.push((c, 1)),
        }
    }
    out
}

/// What every step shares: the accumulation dtype and the user's call site.
struct Ctx {
    dtype: DType,
    loc: &'static Location<'static>,
}

impl Ctx {
    /// `_einsum`'s `sum`: a `reduce_sum` over `axes` (in the order given), after a
    /// conversion to the accumulation dtype if that is wider.
    fn sum(&self, x: Tensor, axes: &[usize]) -> Tensor {
        let x = if result_type(&[(x.dtype(), x.is_weak()), (self.dtype, false)]).0 != x.dtype() {
            x.to_type(self.dtype, false, self.loc)
        } else {
            x
        };
        x.reduce_sum_at(axes, self.loc)
    }

    /// `sum_uniques`: sums away `uniques`, letters `x` has once.
    fn sum_uniques(&self, x: Tensor, names: Vec<char>, uniques: &[char]) -> (Tensor, Vec<char>) {
        if uniques.is_empty() {
            return (x, names);
        }
        let axes: Vec<usize> = uniques.iter().map(|c| names.iter().position(|n| n == c).expect("a letter")).collect();
        (self.sum(x, &axes), remove_letters(&names, uniques))
    }

    /// `sum_repeats`: for each letter `x` has more than once, zeroes all but its diagonal
    /// and sums the copies away (all of them unless `keep` has the letter: then one stays,
    /// the last).
    fn sum_repeats(
        &self,
        mut x: Tensor,
        mut names: Vec<char>,
        counts: &[(char, usize)],
        keep: &[char],
    ) -> (Tensor, Vec<char>) {
        for &(c, n) in counts {
            if n < 2 {
                continue;
            }
            let axes: Vec<usize> = names.iter().enumerate().filter(|(_, &l)| l == c).map(|(i, _)| i).collect();
            let eye = self.delta(x.shape(), &axes);
            let zeros = crate::numpy::full_at(x.shape(), LitValue::from_f64(x.dtype(), 0.0), self.loc);
            let weak = x.is_weak();
            x = bind(Primitive::SelectN, &[eye.into(), zeros.into(), x.into()], weak, self.loc).remove(0);
            if keep.contains(&c) {
                x = self.sum(x, &axes[..axes.len() - 1]);
                let mut dropped = 0;
                names.retain(|&l| {
                    let drop = l == c && dropped < n - 1;
                    dropped += drop as usize;
                    !drop
                });
            } else {
                x = self.sum(x, &axes);
                names.retain(|&l| l != c);
            }
        }
        (x, names)
    }

    /// `lax._delta(bool, shape, axes)`: true where the indices along `axes` agree
    /// (`iota`s compared in neighbouring pairs and `and`ed), broadcast to `shape`.
    fn delta(&self, shape: &[usize], axes: &[usize]) -> Tensor {
        let base: Vec<usize> = axes.iter().map(|&a| shape[a]).collect();
        let iotas: Vec<Tensor> = (0..base.len())
            .map(|d| {
                bind(Primitive::Iota { dtype: DType::U32, shape: base.clone(), dimension: d }, &[], false, self.loc)
                    .remove(0)
            })
            .collect();
        let eyes: Vec<Tensor> =
            iotas.windows(2).map(|w| compare_at(CompareOp::Eq, (&w[0]).into(), (&w[1]).into(), self.loc)).collect();
        let eye = eyes
            .into_iter()
            .reduce(|a, b| crate::elementwise::binary_at(remat_ir::BinaryOp::And, a.into(), b.into(), self.loc))
            .expect("a repeated letter has two axes");
        if base.len() == shape.len() && axes.iter().enumerate().all(|(i, &a)| i == a) {
            return eye;
        }
        eye.apply_at(Primitive::BroadcastInDim { shape: shape.to_vec(), broadcast_dimensions: axes.to_vec() }, self.loc)
    }

    /// A step with one operand: sums and diagonals.
    fn one(&self, x: Tensor, names: Vec<char>, summed: &[char], result: &[char]) -> (Tensor, Vec<char>) {
        let counts = counts(&names);
        let uniques: Vec<char> = summed.iter().copied().filter(|&c| count(&names, c) == 1).collect();
        let (x, names) = self.sum_uniques(x, names, &uniques);
        self.sum_repeats(x, names, &counts, result)
    }

    /// A step with two operands (`lhs` the one opt_einsum popped first, the later one in
    /// the list): size-1 axes against larger ones dropped, letters only one side has
    /// summed, diagonals taken, then one `dot_general`.
    fn two(
        &self,
        lhs: Tensor,
        lhs_names: Vec<char>,
        rhs: Tensor,
        rhs_names: Vec<char>,
        summed: &[char],
        result: &[char],
    ) -> (Tensor, Vec<char>) {
        let loc = self.loc;
        let (lhs, lhs_names) = filter_singletons(lhs, lhs_names, rhs.shape(), &rhs_names, loc);
        let (rhs, rhs_names) = filter_singletons(rhs, rhs_names, lhs.shape(), &lhs_names, loc);
        let (lhs_counts, rhs_counts) = (counts(&lhs_names), counts(&rhs_names));
        let n = |counts: &[(char, usize)], c: char| counts.iter().find(|(l, _)| *l == c).map_or(0, |&(_, k)| k);
        let lhs_uniques: Vec<char> =
            summed.iter().copied().filter(|&c| n(&lhs_counts, c) == 1 && n(&rhs_counts, c) == 0).collect();
        let (lhs, lhs_names) = self.sum_uniques(lhs, lhs_names, &lhs_uniques);
        let rhs_uniques: Vec<char> =
            summed.iter().copied().filter(|&c| n(&rhs_counts, c) == 1 && n(&lhs_counts, c) == 0).collect();
        let (rhs, rhs_names) = self.sum_uniques(rhs, rhs_names, &rhs_uniques);
        let keep: Vec<char> = result.iter().chain(&rhs_names).copied().collect();
        let (lhs, lhs_names) = self.sum_repeats(lhs, lhs_names, &lhs_counts, &keep);
        let keep: Vec<char> = result.iter().chain(&lhs_names).copied().collect();
        let (rhs, rhs_names) = self.sum_repeats(rhs, rhs_names, &rhs_counts, &keep);

        let contracted: Vec<char> =
            summed.iter().copied().filter(|c| lhs_names.contains(c) || rhs_names.contains(c)).collect();
        let batch: Vec<char> =
            result.iter().copied().filter(|c| lhs_names.contains(c) && rhs_names.contains(c)).collect();
        let pos = |names: &[char], c: &char| names.iter().position(|n| n == c).expect("a letter of the operand");
        let (lhs_batch, rhs_batch): (Vec<usize>, Vec<usize>) =
            batch.iter().map(|c| (pos(&lhs_names, c), pos(&rhs_names, c))).unzip();
        let (lhs_cont, rhs_cont): (Vec<usize>, Vec<usize>) =
            contracted.iter().map(|c| (pos(&lhs_names, c), pos(&rhs_names, c))).unzip();
        let deleted: Vec<char> = batch.iter().chain(&contracted).copied().collect();
        let (rest_lhs, rest_rhs) = (remove_letters(&lhs_names, &deleted), remove_letters(&rhs_names, &deleted));
        let swapped: Vec<char> = batch.iter().chain(&rest_rhs).chain(&rest_lhs).copied().collect();
        if swapped == result {
            let dn = DotDimensionNumbers {
                lhs_contracting: rhs_cont,
                rhs_contracting: lhs_cont,
                lhs_batch: rhs_batch,
                rhs_batch: lhs_batch,
            };
            return (self.dot(rhs, lhs, dn), swapped);
        }
        let names: Vec<char> = batch.iter().chain(&rest_lhs).chain(&rest_rhs).copied().collect();
        let dn = DotDimensionNumbers { lhs_contracting: lhs_cont, rhs_contracting: rhs_cont, lhs_batch, rhs_batch };
        (self.dot(lhs, rhs, dn), names)
    }

    /// `dot_general` accumulating in the step's dtype; the operands keep theirs.
    fn dot(&self, a: Tensor, b: Tensor, dn: DotDimensionNumbers) -> Tensor {
        let prim =
            Primitive::DotGeneral { dimension_numbers: dn, preferred_element_type: Some(self.dtype), precision: None };
        bind(prim, &[a.into(), b.into()], false, self.loc).remove(0)
    }
}

/// `filter_singleton_dims`: drops size-1 axes whose letter the other operand has with a
/// size other than 1.
fn filter_singletons(
    x: Tensor,
    names: Vec<char>,
    other_shape: &[usize],
    other_names: &[char],
    loc: &'static Location<'static>,
) -> (Tensor, Vec<char>) {
    let squeeze: BTreeSet<usize> = names
        .iter()
        .enumerate()
        .filter(|&(i, c)| {
            x.shape()[i] == 1 && other_names.iter().position(|n| n == c).is_some_and(|j| other_shape[j] != 1)
        })
        .map(|(i, _)| i)
        .collect();
    if squeeze.is_empty() {
        return (x, names);
    }
    let kept = names.iter().enumerate().filter(|(i, _)| !squeeze.contains(i)).map(|(_, &c)| c).collect();
    (x.squeeze_at(&squeeze.into_iter().collect::<Vec<_>>(), loc), kept)
}
