//! Properties over generated cases: `dot_general` with any dimension numbers agrees with a
//! naive sum, `pad` agrees with its index formula, and layout primitives given arbitrary
//! (often invalid) parameters return a value or an error but never panic.

use ndarray::{ArrayD, IxDyn};
use proptest::prelude::*;
use remat_interp::eval_primitive;
use remat_ir::{Array, Aval, DType, DotDimensionNumbers, Primitive};

/// Small integers as floats, so every sum is exact.
fn iota_like(shape: &[usize], salt: usize) -> ArrayD<f32> {
    let n: usize = shape.iter().product();
    ArrayD::from_shape_vec(IxDyn(shape), (0..n).map(|i| ((i * 7 + salt) % 5) as f32 - 2.0).collect())
        .expect("sizes match")
}

/// Every index of `shape` in row-major order.
fn indices(shape: &[usize]) -> Vec<Vec<usize>> {
    let mut out = vec![vec![]];
    for &d in shape {
        out = out.into_iter().flat_map(|ix| (0..d).map(move |i| [ix.clone(), vec![i]].concat())).collect();
    }
    out
}

/// Extents of batch, contracting, lhs-free and rhs-free axes, and how each operand's axes
/// are permuted from the logical orders (batch, free, contracting) and (batch, contracting, free).
#[derive(Debug, Clone)]
struct DotCase {
    batch: Vec<usize>,
    contract: Vec<usize>,
    lhs_free: Vec<usize>,
    rhs_free: Vec<usize>,
    lhs_perm: Vec<usize>,
    rhs_perm: Vec<usize>,
}

fn dot_case() -> impl Strategy<Value = DotCase> {
    let extents = || prop::collection::vec(1usize..=3, 0..=2);
    (extents(), extents(), extents(), extents()).prop_flat_map(|(batch, contract, lhs_free, rhs_free)| {
        let nl = batch.len() + contract.len() + lhs_free.len();
        let nr = batch.len() + contract.len() + rhs_free.len();
        (
            Just(batch),
            Just(contract),
            Just(lhs_free),
            Just(rhs_free),
            Just((0..nl).collect::<Vec<_>>()).prop_shuffle(),
            Just((0..nr).collect::<Vec<_>>()).prop_shuffle(),
        )
            .prop_map(|(batch, contract, lhs_free, rhs_free, lhs_perm, rhs_perm)| DotCase {
                batch,
                contract,
                lhs_free,
                rhs_free,
                lhs_perm,
                rhs_perm,
            })
    })
}

/// Physical axis j of an operand holds logical axis `perm[j]`.
fn physical(perm: &[usize], logical: &[usize]) -> Vec<usize> {
    perm.iter().map(|&p| logical[p]).collect()
}

fn position(perm: &[usize], logical_axis: usize) -> usize {
    perm.iter().position(|&p| p == logical_axis).expect("perm is a permutation")
}

proptest! {
    #[test]
    fn dot_general_matches_a_naive_sum(c in dot_case()) {
        let (nb, nc, nlf) = (c.batch.len(), c.contract.len(), c.lhs_free.len());
        let lhs_logical = [c.batch.clone(), c.lhs_free.clone(), c.contract.clone()].concat();
        let rhs_logical = [c.batch.clone(), c.contract.clone(), c.rhs_free.clone()].concat();
        let lhs = iota_like(&physical(&c.lhs_perm, &lhs_logical), 1);
        let rhs = iota_like(&physical(&c.rhs_perm, &rhs_logical), 3);
        let dn = DotDimensionNumbers {
            lhs_batch: (0..nb).map(|i| position(&c.lhs_perm, i)).collect(),
            rhs_batch: (0..nb).map(|i| position(&c.rhs_perm, i)).collect(),
            lhs_contracting: (0..nc).map(|i| position(&c.lhs_perm, nb + nlf + i)).collect(),
            rhs_contracting: (0..nc).map(|i| position(&c.rhs_perm, nb + i)).collect(),
        };
        // Free axes appear in the output in their physical order: free_order[j] is the
        // logical free index of the j-th free output axis.
        let free_order = |perm: &[usize], first: usize, count: usize| -> Vec<usize> {
            perm.iter().filter(|&&p| p >= first && p < first + count).map(|&p| p - first).collect()
        };
        let (lf_order, rf_order) = (free_order(&c.lhs_perm, nb, nlf), free_order(&c.rhs_perm, nb + nc, c.rhs_free.len()));
        let out_shape: Vec<usize> = c.batch.iter().copied()
            .chain(lf_order.iter().map(|&i| c.lhs_free[i]))
            .chain(rf_order.iter().map(|&i| c.rhs_free[i]))
            .collect();
        let prim = Primitive::DotGeneral { dimension_numbers: dn.clone(), preferred_element_type: Some(DType::F32), precision: None };
        let out = eval_primitive(&prim, &[Array::F32(lhs.clone()), Array::F32(rhs.clone())], &[Aval::new(DType::F32, out_shape.clone())])
            .map_err(|e| TestCaseError::fail(e.to_string()))?
            .remove(0);

        let mut want = Vec::new();
        for o in indices(&out_shape) {
            let (b, rest) = o.split_at(nb);
            let (m_out, n_out) = rest.split_at(nlf);
            let (mut m, mut n) = (vec![0; nlf], vec![0; n_out.len()]);
            lf_order.iter().zip(m_out).for_each(|(&i, &v)| m[i] = v);
            rf_order.iter().zip(n_out).for_each(|(&i, &v)| n[i] = v);
            let mut acc = 0.0f32;
            for k in indices(&c.contract) {
                let l = physical(&c.lhs_perm, &[b, &m, &k].concat());
                let r = physical(&c.rhs_perm, &[b, &k, &n].concat());
                acc += lhs[IxDyn(&l)] * rhs[IxDyn(&r)];
            }
            want.push(acc);
        }
        prop_assert_eq!(out.to_f64_vec(), want.iter().map(|&x| x as f64).collect::<Vec<_>>());

        // The integer path agrees.
        let prim_i = Primitive::DotGeneral { dimension_numbers: dn, preferred_element_type: Some(DType::I32), precision: None };
        let (li, ri) = (lhs.mapv(|x| x as i32), rhs.mapv(|x| x as i32));
        let out_i = eval_primitive(&prim_i, &[Array::I32(li), Array::I32(ri)], &[Aval::new(DType::I32, out_shape)])
            .map_err(|e| TestCaseError::fail(e.to_string()))?
            .remove(0);
        prop_assert_eq!(out_i.to_f64_vec(), want.iter().map(|&x| x as f64).collect::<Vec<_>>());
    }

    #[test]
    fn pad_matches_its_index_formula(
        shape in prop::collection::vec(0usize..=3, 1..=2),
        config in prop::collection::vec((-3i64..=3, -3i64..=3, 0i64..=2), 2),
    ) {
        let config = config[..shape.len()].to_vec();
        let x = iota_like(&shape, 0).mapv(|v| v + 10.0);
        let out_shape: Option<Vec<usize>> = config.iter().zip(&shape).map(|(&(lo, hi, int), &d)| {
            let d = d as i64;
            usize::try_from(lo + hi + d + (d - 1).max(0) * int).ok()
        }).collect();
        let prim = Primitive::Pad { padding_config: config.clone() };
        let args = [Array::F32(x.clone()), Array::F32(ArrayD::from_elem(IxDyn(&[]), -1.0))];
        let Some(out_shape) = out_shape else {
            prop_assert!(eval_primitive(&prim, &args, &[]).is_err());
            return Ok(());
        };
        let out = eval_primitive(&prim, &args, &[Aval::new(DType::F32, out_shape.clone())])
            .map_err(|e| TestCaseError::fail(e.to_string()))?
            .remove(0);
        let mut want = ArrayD::from_elem(IxDyn(&out_shape), -1.0f32);
        for ix in indices(&shape) {
            let p: Vec<i64> = ix.iter().zip(&config).map(|(&i, &(lo, _, int))| lo + i as i64 * (int + 1)).collect();
            if p.iter().zip(&out_shape).all(|(&p, &n)| p >= 0 && (p as usize) < n) {
                let p: Vec<usize> = p.iter().map(|&p| p as usize).collect();
                want[IxDyn(&p)] = x[IxDyn(&ix)];
            }
        }
        prop_assert_eq!(out, Array::F32(want));
    }

    #[test]
    fn layout_primitives_never_panic(
        shape in prop::collection::vec(0usize..=3, 0..=3),
        a in prop::collection::vec(0usize..=4, 0..=4),
        b in prop::collection::vec(0usize..=4, 0..=4),
        s in prop::collection::vec(0usize..=3, 0..=4),
        pads in prop::collection::vec((-4i64..=4, -4i64..=4, -1i64..=2), 0..=4),
        starts in prop::collection::vec(-5i32..=5, 0..=4),
        dim in 0usize..=4,
    ) {
        let x = Array::F32(iota_like(&shape, 0));
        let indices: Vec<Array> = starts.iter().map(|&i| Array::I32(ArrayD::from_elem(IxDyn(&[]), i))).collect();
        let with_indices = |first: Vec<Array>| -> Vec<Array> { first.into_iter().chain(indices.iter().cloned()).collect() };
        let cases = vec![
            (Primitive::Transpose { permutation: a.clone() }, vec![x.clone()]),
            (Primitive::Reshape { new_sizes: a.clone(), dimensions: None }, vec![x.clone()]),
            (Primitive::Squeeze { dimensions: a.clone() }, vec![x.clone()]),
            (Primitive::ExpandDims { dimensions: a.clone() }, vec![x.clone()]),
            (Primitive::BroadcastInDim { shape: a.clone(), broadcast_dimensions: b.clone() }, vec![x.clone()]),
            (Primitive::Slice { start_indices: a.clone(), limit_indices: b.clone(), strides: Some(s.clone()) }, vec![x.clone()]),
            (Primitive::Pad { padding_config: pads.clone() }, vec![x.clone(), Array::F32(ArrayD::from_elem(IxDyn(&[]), 0.0))]),
            (Primitive::Concatenate { dimension: dim }, vec![x.clone(), x.clone()]),
            (Primitive::DynamicSlice { slice_sizes: s.clone() }, with_indices(vec![x.clone()])),
            (Primitive::DynamicUpdateSlice, with_indices(vec![x.clone(), x.clone()])),
            (Primitive::Iota { dtype: DType::I32, shape: a.clone(), dimension: dim }, vec![]),
            (Primitive::Reduce { op: remat_ir::ReduceOp::Max, axes: a.clone() }, vec![x.clone()]),
            (Primitive::Argmax { axes: vec![dim], index_dtype: DType::I32 }, vec![x.clone()]),
            (Primitive::DotGeneral {
                dimension_numbers: DotDimensionNumbers { lhs_contracting: a.clone(), rhs_contracting: b.clone(), lhs_batch: s.clone(), rhs_batch: vec![dim] },
                preferred_element_type: None,
                precision: None,
            }, vec![x.clone(), x.clone()]),
        ];
        for (prim, args) in cases {
            // Either outcome is fine; a panic fails the test.
            let _ = eval_primitive(&prim, &args, &[]);
        }
    }
}
