//! Integer index arithmetic for the random-program generator, written as JAX writes a traced
//! index, and the indexing primitives it feeds.
//!
//! An index is an `i32` scalar of the pool as it is (`lax.dynamic_slice(x, (i,), ...)` of a
//! loop counter), or starts from an integer scalar of the pool (a loop counter, a carried or
//! stacked index, an input) and goes through one to three of the operations JAX's `x[i]`,
//! `lax.switch` and `fori_loop` bodies print: `select_n(lt(i, 0), i, add(i, n))` (a negative
//! index counted from the end), `clamp`, `add`, `mul`, `rem`, `convert_element_type` between
//! integer types, ending as the `i32[]` the indexing primitives take. Every index computed is
//! remembered ([`Builder::indices`]) so that later steps read it again, loop bodies return it
//! as a carry or a stacked output, and `dynamic_slice`, `dynamic_update_slice`, `gather` and
//! `scatter` (with index vectors built by `broadcast_in_dim` and `concatenate` of scalars, as
//! JAX builds them) consume it.

use remat_ir::{
    Atom, Aval, BinaryOp, CompareOp, DType, GatherDimensionNumbers, GatherScatterMode, Primitive,
    ScatterDimensionNumbers, ScatterOp, Var,
};

use super::{lit, value_of, Builder, Gen};

/// The integer dtypes an index passes through.
const INT_DTYPES: [DType; 6] = [DType::I32, DType::I64, DType::I16, DType::I8, DType::U8, DType::U32];

/// An `i32[]` index into an axis of `n` elements (it may be out of range: every primitive
/// that takes it defines what that does).
pub(super) fn index(b: &mut Builder, g: &mut Gen, n: usize) -> Atom {
    let computed: Vec<Var> = b.indices.iter().copied().filter(|&v| b.aval(v) == Aval::scalar(DType::I32)).collect();
    if !computed.is_empty() && g.chance(40) {
        return g.pick(&computed).into();
    }
    // A counter or an `i32` input as it is (`lax.dynamic_slice(x, (i,), ...)`): the offset
    // is then a loop's carry buffer itself.
    if g.chance(20) {
        if let Some(v) = b.of(g, |a| *a == Aval::scalar(DType::I32)) {
            return v.into();
        }
    }
    let mut i: Atom = match b.of(g, |a| a.dtype.is_integer() && a.rank() == 0) {
        Some(v) if g.chance(85) => v.into(),
        _ => lit(DType::I32, g.pick(&[-3.0, -1.0, 0.0, 1.0, 2.0, 7.0])),
    };
    let n = n as f64;
    for _ in 0..1 + g.below(3) {
        let d = b.jaxpr.atom_aval(&i).dtype;
        let next = match g.below(8) {
            0 => b.eqn(Primitive::ConvertElementType { new_dtype: g.pick(&INT_DTYPES), weak_type: false }, vec![i]),
            1 => b.eqn(Primitive::Binary(BinaryOp::Mul), vec![i, lit(d, g.pick(&[2.0, 3.0, -1.0]))]),
            2 => b.eqn(Primitive::Binary(BinaryOp::Add), vec![i, lit(d, g.pick(&[1.0, -1.0, n]))]),
            3 => b.eqn(Primitive::Binary(BinaryOp::Rem), vec![i, lit(d, n.max(1.0))]),
            4 | 5 => normalized(b, i, n),
            6 => b.eqn(Primitive::Clamp, vec![lit(d, 0.0), i, lit(d, (n - 1.0).max(0.0))]),
            _ => match b.of(g, |a| a.dtype == d && a.rank() == 0) {
                Some(j) => {
                    b.eqn(Primitive::Binary(g.pick(&[BinaryOp::Add, BinaryOp::Sub, BinaryOp::Max])), vec![i, j.into()])
                }
                None => None,
            },
        };
        // An operation the shape rules reject (a literal the dtype cannot hold) is left out.
        if let Some(v) = next {
            i = v[0].into();
        }
    }
    if b.jaxpr.atom_aval(&i).dtype != DType::I32 {
        let to_i32 = Primitive::ConvertElementType { new_dtype: DType::I32, weak_type: false };
        if let Some(v) = b.eqn(to_i32, vec![i]) {
            i = v[0].into();
        } else {
            i = lit(DType::I32, 0.0);
        }
    }
    if let Atom::Var(v) = i {
        if !b.indices.contains(&v) {
            b.indices.push(v);
        }
    }
    i
}

/// JAX's traced `x[i]` on an axis of `n`: `select_n(lt(i, 0), i, add(i, n))`.
fn normalized(b: &mut Builder, i: Atom, n: f64) -> Option<Vec<Var>> {
    let d = b.jaxpr.atom_aval(&i).dtype;
    let negative = b.eqn(Primitive::Compare(CompareOp::Lt), vec![i, lit(d, 0.0)])?[0];
    let wrapped = b.eqn(Primitive::Binary(BinaryOp::Add), vec![i, lit(d, n)])?[0];
    b.eqn(Primitive::SelectN, vec![negative.into(), i, wrapped.into()])
}

/// The index vector `i32[k]` of the scalar indices `idx`, as JAX builds it: each scalar
/// broadcast to `i32[1]`, then concatenated.
fn index_vector(b: &mut Builder, idx: &[Atom]) -> Option<Atom> {
    let ones = idx
        .iter()
        .map(|&i| {
            b.eqn(Primitive::BroadcastInDim { shape: vec![1], broadcast_dimensions: vec![] }, vec![i])
                .map(|v| Atom::from(v[0]))
        })
        .collect::<Option<Vec<Atom>>>()?;
    if ones.len() == 1 {
        return Some(ones[0]);
    }
    b.eqn(Primitive::Concatenate { dimension: 0 }, ones).map(|v| v[0].into())
}

/// One indexing equation on a random operand whose start indices are computed by
/// [`index`]: `dynamic_slice`, `dynamic_update_slice`, a point or row `gather`, a `scatter`.
pub(super) fn step(b: &mut Builder, g: &mut Gen) -> Option<()> {
    let x = b.of(g, |a| a.rank() > 0 && a.dtype != DType::Key)?;
    step_on(b, g, x)
}

/// [`step`] on the operand `x` (of rank > 0, not keys).
pub(super) fn step_on(b: &mut Builder, g: &mut Gen, x: Var) -> Option<()> {
    let xa = b.aval(x);
    let r = xa.rank();
    match g.below(6) {
        0 | 1 => {
            let sizes: Vec<usize> =
                xa.shape.iter().map(|&d| if g.chance(60) { 1.min(d) } else { g.below(d + 1) }).collect();
            let idx: Vec<Atom> =
                xa.shape.iter().map(|&d| if g.chance(75) { index(b, g, d) } else { lit(DType::I32, 0.0) }).collect();
            b.eqn(Primitive::DynamicSlice { slice_sizes: sizes }, [vec![Atom::from(x)], idx].concat())?;
        }
        2 => {
            let shape: Vec<usize> =
                xa.shape.iter().map(|&d| if g.chance(60) { 1.min(d) } else { g.below(d + 1) }).collect();
            let update = value_of(b, g, &Aval::new(xa.dtype, shape))?;
            let idx: Vec<Atom> =
                xa.shape.iter().map(|&d| if g.chance(75) { index(b, g, d) } else { lit(DType::I32, 0.0) }).collect();
            b.eqn(Primitive::DynamicUpdateSlice, [vec![Atom::from(x), update], idx].concat())?;
        }
        k => {
            // The leading `m` axes indexed by scalars, the others taken whole.
            let m = 1 + g.below(r);
            let idx: Vec<Atom> = xa.shape[..m].iter().map(|&d| index(b, g, d)).collect();
            let indices = index_vector(b, &idx)?;
            let indexed: Vec<usize> = (0..m).collect();
            let rest: Vec<usize> = xa.shape[m..].to_vec();
            let mode =
                g.pick(&[GatherScatterMode::Clip, GatherScatterMode::FillOrDrop, GatherScatterMode::PromiseInBounds]);
            if k == 3 || k == 4 {
                let dn = GatherDimensionNumbers {
                    offset_dims: (0..r - m).collect(),
                    collapsed_slice_dims: indexed.clone(),
                    start_index_map: indexed,
                    ..Default::default()
                };
                let slice_sizes = [vec![1; m], rest].concat();
                let prim = Primitive::Gather {
                    dimension_numbers: dn,
                    fill_value: None,
                    indices_are_sorted: true,
                    mode,
                    slice_sizes,
                    unique_indices: true,
                };
                b.eqn(prim, vec![x.into(), indices])?;
            } else {
                let updates = value_of(b, g, &Aval::new(xa.dtype, rest))?;
                let dn = ScatterDimensionNumbers {
                    update_window_dims: (0..r - m).collect(),
                    inserted_window_dims: indexed.clone(),
                    scatter_dims_to_operand_dims: indexed,
                    ..Default::default()
                };
                let op = g.pick(&ScatterOp::ALL);
                let prim = Primitive::Scatter {
                    op,
                    dimension_numbers: dn,
                    indices_are_sorted: true,
                    mode,
                    unique_indices: true,
                    update_jaxpr: None,
                };
                b.eqn(prim, vec![x.into(), indices, updates])?;
            }
        }
    }
    Some(())
}
