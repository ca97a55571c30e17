//! What the transformations accept as a function: a closure or `fn`, a
//! [`Checkpoint`](crate::Checkpoint) (recorded as `remat2`) or a [`Jit`](crate::Jit)
//! (recorded as `jit`), so that `grad(ck)`, `jit(ck)`, `vjp(ck, ..)` and `scan(ck, ..)`
//! need no `|a| ck.call(a)`.
//!
//! This module holds the traits and their impls for closures; `Checkpoint` and `Jit`
//! implement them next to their own definitions (`transforms.rs`), so the traits know
//! nothing of the transformations that accept them.

use std::panic::Location;

/// A function from a tree of tensors `A` to a tree of tensors `R`.
pub trait TraceFn<A, R> {
    /// Calls the function inside a trace; an equation the call itself records (`remat2`,
    /// `jit`) is located at `loc`.
    fn call_traced(&self, args: A, loc: &'static Location<'static>) -> R;
}

impl<A, R, F: Fn(A) -> R> TraceFn<A, R> for F {
    fn call_traced(&self, args: A, _loc: &'static Location<'static>) -> R {
        self(args)
    }
}

/// A `scan` body, `(carry, x) -> (carry, y)`: a closure of two arguments, or a
/// [`Checkpoint`](crate::Checkpoint) (or [`Jit`](crate::Jit)) of a function of the pair
/// `(carry, x)`.
pub trait ScanBody<C, X, Y> {
    /// Calls the body inside the scan's trace (a checkpoint's `remat2` located at `loc`).
    fn call_body(&self, carry: C, x: X, loc: &'static Location<'static>) -> (C, Y);
}

impl<C, X, Y, F: Fn(C, X) -> (C, Y)> ScanBody<C, X, Y> for F {
    fn call_body(&self, carry: C, x: X, _loc: &'static Location<'static>) -> (C, Y) {
        self(carry, x)
    }
}
