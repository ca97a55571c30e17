//! The tolerance rule results are compared by: `|got - want| <= max(rel |want|, abs)`.
//! Each test names its own `rel` and `abs` (1e-4 and 1e-5 against JAX's float32 values).

use remat_ir::Array;

/// `|got - want| <= max(rel |want|, abs)`. Never true of a NaN; a test that accepts equal
/// values beyond the rule (infinities, NaNs) says so beside it.
pub fn within(got: f64, want: f64, rel: f64, abs: f64) -> bool {
    (got - want).abs() <= (rel * want.abs()).max(abs)
}

/// Same number of values, each of the same dtype and shape, and elementwise equal, both
/// NaN, or [`within`] `rel`/`abs`. The error names `what`, the value and the element.
pub fn check_close(what: &str, got: &[Array], want: &[Array], rel: f64, abs: f64) -> Result<(), String> {
    if got.len() != want.len() {
        return Err(format!("{what}: {} values, expected {}", got.len(), want.len()));
    }
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        if g.dtype() != w.dtype() || g.shape() != w.shape() {
            return Err(format!("{what} {i}: got {}, expected {}", g.aval(), w.aval()));
        }
        for (j, (a, b)) in g.to_f64_vec().into_iter().zip(w.to_f64_vec()).enumerate() {
            let close = a == b || (a.is_nan() && b.is_nan()) || within(a, b, rel, abs);
            if !close {
                return Err(format!("{what} {i}, element {j}: got {a}, expected {b}"));
            }
        }
    }
    Ok(())
}
