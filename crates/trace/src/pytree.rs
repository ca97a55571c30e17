//! `pytree!`: a user's parameter struct as a tree (JAX's `register_dataclass`), so that it
//! can be traced, returned, and get its gradients back in its own shape.
//!
//! The struct is written generic over its leaf type (`struct Mlp<T> { w1: T, b1: T }`):
//! `Mlp<Array>` holds values, `Mlp<Aval>` example types, `Mlp<Tensor>` what a traced
//! function receives, and the gradient of a function of `Mlp<Array>` is an `Mlp<Array>`.
//! A macro rather than a derive keeps the workspace free of a proc-macro crate; it
//! accepts one type parameter and named fields whose types are trees of it (`T`,
//! `Vec<T>`, `(T, T)`, `[T; 3]`, `BTreeMap<String, T>`, another `pytree!` struct `Layer<T>`).

/// Declares a struct and makes it a tree: [`ArgTree`](crate::ArgTree) (leaves named
/// `params.w1`, `params.layers[0]`, as JAX's `keystr` names a dataclass's fields),
/// [`TensorTree`](crate::TensorTree) and [`GradTree`](crate::GradTree).
///
/// ```
/// use remat_ir::{Aval, DType};
/// use remat_trace::{make_jaxpr, named, pytree, Tensor};
///
/// pytree! {
///     /// A two-layer perceptron's parameters.
///     #[derive(Clone, Debug)]
///     pub struct Mlp<T> {
///         pub w1: T,
///         pub layers: Vec<T>,
///     }
/// }
///
/// let f32s = |s: &[usize]| Aval::new(DType::F32, s.to_vec());
/// let params = Mlp { w1: f32s(&[3, 2]), layers: vec![f32s(&[3, 3])] };
/// let f = |p: Mlp<Tensor>| p.layers[0].dot(&p.w1).sum();
/// let traced = make_jaxpr(f, &named("params", params)).unwrap();
/// assert_eq!(traced.arg_names, ["params.w1", "params.layers[0]"]);
/// ```
#[macro_export]
macro_rules! pytree {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident<$t:ident> {
            $($(#[$fmeta:meta])* $fvis:vis $field:ident : $fty:ty),* $(,)?
        }
    ) => {
        $(#[$meta])*
        $vis struct $name<$t> {
            $($(#[$fmeta])* $fvis $field: $fty,)*
        }

        impl<$t: $crate::ArgTree> $crate::ArgTree for $name<$t> {
            type Traced = $name<<$t as $crate::ArgTree>::Traced>;
            fn specs(&self, path: &str, out: &mut ::std::vec::Vec<(::std::string::String, $crate::__private::Aval)>) {
                $($crate::ArgTree::specs(&self.$field, &::std::format!("{}.{}", path, ::std::stringify!($field)), out);)*
            }
            fn build(&self, leaves: &mut dyn ::std::iter::Iterator<Item = $crate::Tensor>) -> Self::Traced {
                $name { $($field: $crate::ArgTree::build(&self.$field, leaves),)* }
            }
            fn values<'a>(&'a self, out: &mut ::std::vec::Vec<::std::option::Option<&'a $crate::__private::Array>>) {
                $($crate::ArgTree::values(&self.$field, out);)*
            }
        }

        impl<$t: $crate::TensorTree> $crate::TensorTree for $name<$t> {
            fn flatten(&self, out: &mut ::std::vec::Vec<$crate::Tensor>) {
                $($crate::TensorTree::flatten(&self.$field, out);)*
            }
            fn rebuild(&self, leaves: &mut dyn ::std::iter::Iterator<Item = $crate::Tensor>) -> Self {
                $name { $($field: $crate::TensorTree::rebuild(&self.$field, leaves),)* }
            }
        }

        impl<$t: $crate::GradTree> $crate::GradTree for $name<$t> {
            type Grads = $name<<$t as $crate::GradTree>::Grads>;
            fn unflatten(
                &self,
                leaves: &mut dyn ::std::iter::Iterator<Item = $crate::__private::Array>,
            ) -> ::std::option::Option<Self::Grads> {
                ::std::option::Option::Some($name { $($field: $crate::GradTree::unflatten(&self.$field, leaves)?,)* })
            }
        }
    };
}
