//! `jnp.repeat`, as JAX 0.10.2 lowers it: with a static count, one `broadcast_in_dim`
//! (a new axis of `repeats` copies after `axis`) and one `reshape` that merges it.

use std::panic::Location;

use remat_ir::Primitive;

use super::normalize_axes;
use crate::tensor::Tensor;
use crate::trace::record_error;

impl Tensor {
    /// `jnp.repeat(x, repeats, axis)` with a static count: each element of `x` repeated
    /// `repeats` times along `axis` (`None`: along the flattened `x`), so
    /// `repeat([a, b], 2, 0)` is `[a, a, b, b]` (nearest-neighbour upsampling when used on
    /// the spatial axes). Records `broadcast_in_dim` then `reshape`.
    #[track_caller]
    pub fn repeat(&self, repeats: usize, axis: Option<isize>) -> Tensor {
        let loc = Location::caller();
        let (x, axis) = match axis {
            None => (self.reshape_at(&[self.size()], loc), 0),
            Some(a) => {
                if self.ndim() == 0 {
                    record_error(loc, format!("repeat: {} has no axis {a}", self.aval()));
                    return Tensor::placeholder(self.aval().clone());
                }
                match normalize_axes("repeat", self, &[a], loc) {
                    Some(a) => (self.clone(), a[0]),
                    None => return Tensor::placeholder(self.aval().clone()),
                }
            }
        };
        let mut aux_shape = x.shape().to_vec();
        aux_shape.insert(axis + 1, repeats);
        let dims: Vec<usize> = (0..aux_shape.len()).filter(|&i| i != axis + 1).collect();
        let aux = x.apply_at(Primitive::BroadcastInDim { shape: aux_shape, broadcast_dimensions: dims }, loc);
        let mut out_shape = x.shape().to_vec();
        out_shape[axis] *= repeats;
        aux.reshape_at(&out_shape, loc)
    }
}
