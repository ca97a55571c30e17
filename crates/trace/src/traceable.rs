//! What the transformations accept as a function: a closure or `fn`, a [`Checkpoint`]
//! (recorded as `remat2`) or a [`Jit`] (recorded as `jit`), so that `grad(ck)`,
//! `jit(ck)`, `vjp(ck, ..)` and `scan(ck, ..)` need no `|a| ck.call(a)`.

use std::panic::Location;

use crate::transforms::{Checkpoint, Jit};
use crate::tree::TensorTree;

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

impl<A: TensorTree, R: TensorTree, F: Fn(A) -> R> TraceFn<A, R> for Checkpoint<F> {
    fn call_traced(&self, args: A, loc: &'static Location<'static>) -> R {
        self.call_at(args, loc)
    }
}

impl<A: TensorTree, R: TensorTree, F: Fn(A) -> R> TraceFn<A, R> for Jit<F> {
    fn call_traced(&self, args: A, loc: &'static Location<'static>) -> R {
        self.call_at(args, loc)
    }
}

/// A `scan` body, `(carry, x) -> (carry, y)`: a closure of two arguments, or a
/// [`Checkpoint`] (or [`Jit`]) of a function of the pair `(carry, x)`.
pub trait ScanBody<C, X, Y> {
    /// Calls the body inside the scan's trace (a checkpoint's `remat2` located at `loc`).
    fn call_body(&self, carry: C, x: X, loc: &'static Location<'static>) -> (C, Y);
}

impl<C, X, Y, F: Fn(C, X) -> (C, Y)> ScanBody<C, X, Y> for F {
    fn call_body(&self, carry: C, x: X, _loc: &'static Location<'static>) -> (C, Y) {
        self(carry, x)
    }
}

impl<C: TensorTree, X: TensorTree, Y: TensorTree, F: Fn((C, X)) -> (C, Y)> ScanBody<C, X, Y> for Checkpoint<F> {
    fn call_body(&self, carry: C, x: X, loc: &'static Location<'static>) -> (C, Y) {
        self.call_at((carry, x), loc)
    }
}

impl<C: TensorTree, X: TensorTree, Y: TensorTree, F: Fn((C, X)) -> (C, Y)> ScanBody<C, X, Y> for Jit<F> {
    fn call_body(&self, carry: C, x: X, loc: &'static Location<'static>) -> (C, Y) {
        self.call_at((carry, x), loc)
    }
}

impl<A: TensorTree, R: TensorTree, F: Fn(A) -> R> TraceFn<A, R> for &Checkpoint<F> {
    fn call_traced(&self, args: A, loc: &'static Location<'static>) -> R {
        self.call_at(args, loc)
    }
}

impl<A: TensorTree, R: TensorTree, F: Fn(A) -> R> TraceFn<A, R> for &Jit<F> {
    fn call_traced(&self, args: A, loc: &'static Location<'static>) -> R {
        self.call_at(args, loc)
    }
}

impl<C: TensorTree, X: TensorTree, Y: TensorTree, F: Fn((C, X)) -> (C, Y)> ScanBody<C, X, Y> for &Checkpoint<F> {
    fn call_body(&self, carry: C, x: X, loc: &'static Location<'static>) -> (C, Y) {
        self.call_at((carry, x), loc)
    }
}

impl<C: TensorTree, X: TensorTree, Y: TensorTree, F: Fn((C, X)) -> (C, Y)> ScanBody<C, X, Y> for &Jit<F> {
    fn call_body(&self, carry: C, x: X, loc: &'static Location<'static>) -> (C, Y) {
        self.call_at((carry, x), loc)
    }
}
