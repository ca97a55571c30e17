//! The transpose rules of `gather` and `scatter-add` (JAX 0.10.2's `slicing.py`): each is
//! the other with its dimension numbers renamed.

use std::sync::Arc;

use remat_ir::{Atom, Aval, FillValue, GatherDimensionNumbers, Jaxpr, Primitive, ScatterDimensionNumbers, ScatterOp};

use crate::builder::Builder;
use crate::AdError;

/// `{ lambda ; a:T[] b:T[]. let c:T[] = add a b in (c,) }`: `scatter_add`'s `update_jaxpr`.
fn add_jaxpr(aval: &Aval) -> Result<Arc<Jaxpr>, AdError> {
    let mut b = Builder::new();
    let scalar = Aval::new(aval.dtype, Vec::new());
    let x = Atom::Var(b.invar(scalar.clone()));
    let y = Atom::Var(b.invar(scalar));
    let z = b.add(x, y)?;
    Ok(Arc::new(b.finish(vec![z])))
}

/// `_gather_transpose_rule`: `scatter-add` of the cotangent into zeros of the operand.
pub(crate) fn gather_transpose(
    b: &mut Builder,
    prim: &Primitive,
    ct: Atom,
    operand: &Aval,
    indices: Atom,
) -> Result<Atom, AdError> {
    let Primitive::Gather { dimension_numbers: dn, indices_are_sorted, mode, unique_indices, .. } = prim else {
        return Err(AdError::Unsupported { primitive: prim.name(), message: "is not a gather".into() });
    };
    let zeros = b.zeros(operand)?;
    let scatter = Primitive::Scatter {
        op: ScatterOp::Add,
        dimension_numbers: ScatterDimensionNumbers {
            update_window_dims: dn.offset_dims.clone(),
            inserted_window_dims: dn.collapsed_slice_dims.clone(),
            scatter_dims_to_operand_dims: dn.start_index_map.clone(),
            operand_batching_dims: dn.operand_batching_dims.clone(),
            scatter_indices_batching_dims: dn.start_indices_batching_dims.clone(),
        },
        indices_are_sorted: *indices_are_sorted,
        mode: *mode,
        unique_indices: *unique_indices,
        update_jaxpr: Some(add_jaxpr(operand)?),
    };
    b.bind1(scatter, vec![zeros, indices, ct])
}

/// `_scatter_add_transpose_rule`, the updates' cotangent: a gather of the cotangent
/// (`fill_value=0`).
pub(crate) fn scatter_add_transpose_updates(
    b: &mut Builder,
    prim: &Primitive,
    ct: Atom,
    updates: &Aval,
    indices: Atom,
) -> Result<Atom, AdError> {
    let Primitive::Scatter { dimension_numbers: dn, indices_are_sorted, mode, unique_indices, .. } = prim else {
        return Err(AdError::Unsupported { primitive: prim.name(), message: "is not a scatter".into() });
    };
    let rank = b.aval(&ct).rank();
    let mut window = dn.update_window_dims.iter();
    let mut slice_sizes = Vec::with_capacity(rank);
    for i in 0..rank {
        if dn.inserted_window_dims.contains(&i) || dn.operand_batching_dims.contains(&i) {
            slice_sizes.push(1);
        } else {
            let &u = window.next().ok_or_else(|| AdError::Unsupported {
                primitive: prim.name(),
                message: "has fewer update window dims than operand window axes".into(),
            })?;
            slice_sizes.push(updates.shape[u]);
        }
    }
    let gather = Primitive::Gather {
        dimension_numbers: GatherDimensionNumbers {
            offset_dims: dn.update_window_dims.clone(),
            collapsed_slice_dims: dn.inserted_window_dims.clone(),
            start_index_map: dn.scatter_dims_to_operand_dims.clone(),
            operand_batching_dims: dn.operand_batching_dims.clone(),
            start_indices_batching_dims: dn.scatter_indices_batching_dims.clone(),
        },
        fill_value: Some(FillValue::Int(0)),
        indices_are_sorted: *indices_are_sorted,
        mode: *mode,
        slice_sizes,
        unique_indices: *unique_indices,
    };
    b.bind1(gather, vec![ct, indices])
}
