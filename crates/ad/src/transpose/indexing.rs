//! The transpose rules of `gather` and `scatter-add` (JAX 0.10.2's `slicing.py`): each is
//! the other with its dimension numbers renamed.

use remat_ir::{Atom, Aval, FillValue, GatherDimensionNumbers, Primitive, ScatterDimensionNumbers, ScatterOp};

use crate::builder::Builder;
use crate::jvp::{add_jaxpr, window_slice_sizes};
use crate::AdError;

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
        update_jaxpr: Some(add_jaxpr(operand.dtype)?),
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
    let slice_sizes = window_slice_sizes(&b.aval(&ct), updates, dn);
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

/// `_scatter_transpose_rule` (unique indices): the operand's cotangent is the cotangent
/// with the scattered windows zeroed; the updates' is the gather of the windows.
pub(crate) fn scatter_transpose(
    b: &mut Builder,
    prim: &Primitive,
    ct: Atom,
    linear: (bool, bool),
    updates: &Aval,
    indices: Atom,
) -> Result<(Option<Atom>, Option<Atom>), AdError> {
    let Primitive::Scatter { unique_indices: true, .. } = prim else {
        return Err(AdError::Unsupported {
            primitive: prim.name(),
            message: "is transposed only with unique_indices=True, as in JAX".into(),
        });
    };
    let operand_t = if linear.0 {
        let zeros = b.zeros(updates)?;
        Some(b.bind1(prim.clone(), vec![ct, indices, zeros])?)
    } else {
        None
    };
    let update_t = if linear.1 { Some(scatter_add_transpose_updates(b, prim, ct, updates, indices)?) } else { None };
    Ok((operand_t, update_t))
}
