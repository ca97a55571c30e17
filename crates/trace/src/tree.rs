//! Trees of arguments and results (JAX's pytrees): tensors, tuples, `Vec`s, arrays and
//! string-keyed maps, nested. Example arguments name their leaves as JAX does:
//! `params[0][1]`, `p['wq']`, or a name the user gives with [`named`].

use std::collections::BTreeMap;

use remat_ir::{Array, Aval};

use crate::tensor::Tensor;

/// Example arguments to trace with: a tree whose leaves are [`Aval`]s or [`Array`]s.
pub trait ArgTree {
    /// The same tree with a [`Tensor`] at every leaf: what the traced function receives.
    type Traced: TensorTree;
    /// Appends `(name, aval)` for every leaf, `path` being this subtree's name.
    fn specs(&self, path: &str, out: &mut Vec<(String, Aval)>);
    /// Builds the traced tree, taking one tensor per leaf in order.
    fn build(&self, leaves: &mut dyn Iterator<Item = Tensor>) -> Self::Traced;
    /// Appends every leaf's concrete value (`None` for an abstract [`Aval`] leaf).
    fn values<'a>(&'a self, out: &mut Vec<Option<&'a Array>>);
}

/// A tree of tensors: function results, and the arguments of functions passed to
/// `jit`, `checkpoint` and `scan`.
pub trait TensorTree: Sized {
    /// Appends every leaf in order.
    fn flatten(&self, out: &mut Vec<Tensor>);
    /// The same structure with new leaves, taken in order.
    fn rebuild(&self, leaves: &mut dyn Iterator<Item = Tensor>) -> Self;

    /// Every leaf, in order.
    fn leaves(&self) -> Vec<Tensor> {
        let mut v = Vec::new();
        self.flatten(&mut v);
        v
    }
}

/// An argument with the name JAX would give it from the Python parameter name
/// (`from the argument W1` in residual reports).
#[derive(Clone, Debug)]
pub struct Named<T> {
    /// The argument's name (`W1`, `params`); leaves below it are named from it.
    pub name: String,
    /// The argument: an [`Aval`], an [`Array`] or a tree of them.
    pub value: T,
}

/// Names an example argument: `make_jaxpr(f, &(named("W1", w1), named("x", x)))`.
pub fn named<T>(name: &str, value: T) -> Named<T> {
    Named { name: name.to_string(), value }
}

fn next_leaf(leaves: &mut dyn Iterator<Item = Tensor>) -> Tensor {
    leaves.next().expect("the flattened leaves match the tree they came from")
}

impl ArgTree for Aval {
    type Traced = Tensor;
    fn specs(&self, path: &str, out: &mut Vec<(String, Aval)>) {
        out.push((path.to_string(), self.clone()));
    }
    fn build(&self, leaves: &mut dyn Iterator<Item = Tensor>) -> Tensor {
        next_leaf(leaves)
    }
    fn values<'a>(&'a self, out: &mut Vec<Option<&'a Array>>) {
        out.push(None);
    }
}

impl ArgTree for Array {
    type Traced = Tensor;
    fn specs(&self, path: &str, out: &mut Vec<(String, Aval)>) {
        out.push((path.to_string(), self.aval()));
    }
    fn build(&self, leaves: &mut dyn Iterator<Item = Tensor>) -> Tensor {
        next_leaf(leaves)
    }
    fn values<'a>(&'a self, out: &mut Vec<Option<&'a Array>>) {
        out.push(Some(self));
    }
}

impl<T: ArgTree> ArgTree for Named<T> {
    type Traced = T::Traced;
    fn specs(&self, _path: &str, out: &mut Vec<(String, Aval)>) {
        self.value.specs(&self.name, out);
    }
    fn build(&self, leaves: &mut dyn Iterator<Item = Tensor>) -> T::Traced {
        self.value.build(leaves)
    }
    fn values<'a>(&'a self, out: &mut Vec<Option<&'a Array>>) {
        self.value.values(out);
    }
}

impl<T: ArgTree> ArgTree for Vec<T> {
    type Traced = Vec<T::Traced>;
    fn specs(&self, path: &str, out: &mut Vec<(String, Aval)>) {
        for (i, x) in self.iter().enumerate() {
            x.specs(&format!("{path}[{i}]"), out);
        }
    }
    fn build(&self, leaves: &mut dyn Iterator<Item = Tensor>) -> Self::Traced {
        self.iter().map(|x| x.build(leaves)).collect()
    }
    fn values<'a>(&'a self, out: &mut Vec<Option<&'a Array>>) {
        self.iter().for_each(|x| x.values(out));
    }
}

impl<T: ArgTree, const N: usize> ArgTree for [T; N] {
    type Traced = [T::Traced; N];
    fn specs(&self, path: &str, out: &mut Vec<(String, Aval)>) {
        for (i, x) in self.iter().enumerate() {
            x.specs(&format!("{path}[{i}]"), out);
        }
    }
    fn build(&self, leaves: &mut dyn Iterator<Item = Tensor>) -> Self::Traced {
        std::array::from_fn(|i| self[i].build(leaves))
    }
    fn values<'a>(&'a self, out: &mut Vec<Option<&'a Array>>) {
        self.iter().for_each(|x| x.values(out));
    }
}

impl<T: ArgTree> ArgTree for BTreeMap<String, T> {
    type Traced = BTreeMap<String, T::Traced>;
    fn specs(&self, path: &str, out: &mut Vec<(String, Aval)>) {
        for (k, x) in self {
            x.specs(&format!("{path}['{k}']"), out);
        }
    }
    fn build(&self, leaves: &mut dyn Iterator<Item = Tensor>) -> Self::Traced {
        self.iter().map(|(k, x)| (k.clone(), x.build(leaves))).collect()
    }
    fn values<'a>(&'a self, out: &mut Vec<Option<&'a Array>>) {
        self.values().for_each(|x| x.values(out));
    }
}

impl TensorTree for Tensor {
    fn flatten(&self, out: &mut Vec<Tensor>) {
        out.push(self.clone());
    }
    fn rebuild(&self, leaves: &mut dyn Iterator<Item = Tensor>) -> Tensor {
        next_leaf(leaves)
    }
}

impl TensorTree for () {
    fn flatten(&self, _out: &mut Vec<Tensor>) {}
    fn rebuild(&self, _leaves: &mut dyn Iterator<Item = Tensor>) {}
}

impl<T: TensorTree> TensorTree for Vec<T> {
    fn flatten(&self, out: &mut Vec<Tensor>) {
        self.iter().for_each(|x| x.flatten(out));
    }
    fn rebuild(&self, leaves: &mut dyn Iterator<Item = Tensor>) -> Self {
        self.iter().map(|x| x.rebuild(leaves)).collect()
    }
}

impl<T: TensorTree, const N: usize> TensorTree for [T; N] {
    fn flatten(&self, out: &mut Vec<Tensor>) {
        self.iter().for_each(|x| x.flatten(out));
    }
    fn rebuild(&self, leaves: &mut dyn Iterator<Item = Tensor>) -> Self {
        std::array::from_fn(|i| self[i].rebuild(leaves))
    }
}

impl<T: TensorTree> TensorTree for BTreeMap<String, T> {
    fn flatten(&self, out: &mut Vec<Tensor>) {
        self.values().for_each(|x| x.flatten(out));
    }
    fn rebuild(&self, leaves: &mut dyn Iterator<Item = Tensor>) -> Self {
        self.iter().map(|(k, x)| (k.clone(), x.rebuild(leaves))).collect()
    }
}

macro_rules! tuple_trees {
    ($(($($t:ident $i:tt),+)),+ $(,)?) => {$(
        impl<$($t: ArgTree),+> ArgTree for ($($t,)+) {
            type Traced = ($($t::Traced,)+);
            fn specs(&self, path: &str, out: &mut Vec<(String, Aval)>) {
                $(self.$i.specs(&format!("{path}[{}]", $i), out);)+
            }
            fn build(&self, leaves: &mut dyn Iterator<Item = Tensor>) -> Self::Traced {
                ($(self.$i.build(leaves),)+)
            }
            fn values<'a>(&'a self, out: &mut Vec<Option<&'a Array>>) {
                $(self.$i.values(out);)+
            }
        }
        impl<$($t: TensorTree),+> TensorTree for ($($t,)+) {
            fn flatten(&self, out: &mut Vec<Tensor>) {
                $(self.$i.flatten(out);)+
            }
            fn rebuild(&self, leaves: &mut dyn Iterator<Item = Tensor>) -> Self {
                ($(self.$i.rebuild(leaves),)+)
            }
        }
    )+};
}

tuple_trees!(
    (A 0),
    (A 0, B 1),
    (A 0, B 1, C 2),
    (A 0, B 1, C 2, D 3),
    (A 0, B 1, C 2, D 3, E 4),
    (A 0, B 1, C 2, D 3, E 4, F 5),
    (A 0, B 1, C 2, D 3, E 4, F 5, G 6),
    (A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7),
    (A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8),
    (A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9),
    (A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10),
    (A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10, L 11),
);

/// An argument tree whose gradients come back in its own structure: a tuple of arrays
/// gives a tuple of gradients, a `Vec` a `Vec`, a `BTreeMap` of named parameters the same
/// map, a user's struct (made a tree with [`pytree!`](crate::pytree)) the same struct. Each
/// leaf (an [`Array`] or an [`Aval`]) becomes an [`Array`].
pub trait GradTree: ArgTree {
    /// The tree's structure with an [`Array`] at every leaf.
    type Grads;
    /// Builds the structure, taking one array per leaf in order; `None` when `leaves`
    /// runs out first.
    fn unflatten(&self, leaves: &mut dyn Iterator<Item = Array>) -> Option<Self::Grads>;
}

impl GradTree for Array {
    type Grads = Array;
    fn unflatten(&self, leaves: &mut dyn Iterator<Item = Array>) -> Option<Array> {
        leaves.next()
    }
}

impl GradTree for Aval {
    type Grads = Array;
    fn unflatten(&self, leaves: &mut dyn Iterator<Item = Array>) -> Option<Array> {
        leaves.next()
    }
}

impl<T: GradTree> GradTree for Named<T> {
    type Grads = T::Grads;
    fn unflatten(&self, leaves: &mut dyn Iterator<Item = Array>) -> Option<T::Grads> {
        self.value.unflatten(leaves)
    }
}

impl<T: GradTree> GradTree for Vec<T> {
    type Grads = Vec<T::Grads>;
    fn unflatten(&self, leaves: &mut dyn Iterator<Item = Array>) -> Option<Self::Grads> {
        self.iter().map(|x| x.unflatten(leaves)).collect()
    }
}

impl<T: GradTree, const N: usize> GradTree for [T; N] {
    type Grads = [T::Grads; N];
    fn unflatten(&self, leaves: &mut dyn Iterator<Item = Array>) -> Option<Self::Grads> {
        let v: Vec<T::Grads> = self.iter().map(|x| x.unflatten(leaves)).collect::<Option<_>>()?;
        v.try_into().ok()
    }
}

impl<T: GradTree> GradTree for BTreeMap<String, T> {
    type Grads = BTreeMap<String, T::Grads>;
    fn unflatten(&self, leaves: &mut dyn Iterator<Item = Array>) -> Option<Self::Grads> {
        self.iter().map(|(k, x)| Some((k.clone(), x.unflatten(leaves)?))).collect()
    }
}

macro_rules! tuple_grad_trees {
    ($(($($t:ident $i:tt),+)),+ $(,)?) => {$(
        impl<$($t: GradTree),+> GradTree for ($($t,)+) {
            type Grads = ($($t::Grads,)+);
            fn unflatten(&self, leaves: &mut dyn Iterator<Item = Array>) -> Option<Self::Grads> {
                Some(($(self.$i.unflatten(leaves)?,)+))
            }
        }
    )+};
}

tuple_grad_trees!(
    (A 0),
    (A 0, B 1),
    (A 0, B 1, C 2),
    (A 0, B 1, C 2, D 3),
    (A 0, B 1, C 2, D 3, E 4),
    (A 0, B 1, C 2, D 3, E 4, F 5),
    (A 0, B 1, C 2, D 3, E 4, F 5, G 6),
    (A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7),
);
