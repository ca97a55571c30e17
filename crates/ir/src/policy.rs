//! Remat policies as data. What a policy decides is the autodiff crate's business; here a
//! policy is only stored, named ([`Policy::BUILTINS`]) and compared. Its text form, JAX's
//! reprs (`DotsSaveable(...)`, `SaveOnlyTheseNames(saveable_names=frozenset({'a'}))`,
//! ...), is a parameter value's, in `param.rs` ([`Policy::to_param`],
//! [`Policy::from_param`]): a policy is a parameter of `remat2`, which the jaxpr holds, so
//! it sits below the jaxpr and the text form above.

/// A `remat2` policy. `policy=None` (JAX's default, which saves nothing) is
/// `Option::<Policy>::None` in [`crate::Primitive::Remat2`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Policy {
    EverythingSaveable,
    NothingSaveable,
    DotsSaveable {
        only_if_no_batch_dims: bool,
    },
    SaveOnlyTheseNames {
        names: Vec<String>,
    },
    SaveAnyNamesButThese {
        names: Vec<String>,
    },
    SaveAnythingExceptTheseNames {
        names: Vec<String>,
    },
    SaveFromBothPolicies {
        policy_1: Box<Policy>,
        policy_2: Box<Policy>,
    },
    SaveAndOffloadOnlyTheseNames {
        saved: Vec<String>,
        offloaded: Vec<String>,
        offload_src: String,
        offload_dst: String,
    },
    OffloadDotWithNoBatchDims {
        offload_src: String,
        offload_dst: String,
    },
    /// A function-valued policy as JAX prints it: `<function nothing_saveable at 0xXX>`.
    /// `name` is the function's name, which gives its meaning for the policies JAX ships.
    Function {
        name: String,
        repr: String,
    },
    /// A policy JAX made with a closure (`save_and_offload_only_these_names(...)` prints
    /// `<function save_and_offload_only_these_names.<locals>.policy at 0xXXXXXXXXXXXX>`)
    /// or a lambda: the text does not carry what it decides, so it is kept as printed, and
    /// its `meaning` is given by the caller (remat_ad's `with_policy_names`, the command
    /// line's `--policy-names`), carried with the program. It prints as `repr` either way.
    Opaque {
        repr: String,
        meaning: Option<Box<Policy>>,
    },
}

/// One of the policies JAX ships that take no arguments: the one home of their names.
#[derive(Clone, Debug)]
pub struct BuiltinPolicy {
    /// JAX's name (`jax.checkpoint_policies.dots_saveable`), as `policy_words` and the
    /// planner print it.
    pub name: &'static str,
    /// Other names JAX exports for the same function (`checkpoint_dots`).
    pub aliases: &'static [&'static str],
    /// The command line's short word (`--policy dots`).
    pub word: &'static str,
    /// The policy.
    pub policy: Policy,
}

impl Policy {
    /// JAX's argument-free policies, from the one that saves the most to the one that
    /// saves the least (the order the report's frontier lists them in).
    pub const BUILTINS: [BuiltinPolicy; 4] = [
        BuiltinPolicy {
            name: "everything_saveable",
            aliases: &[],
            word: "everything",
            policy: Policy::EverythingSaveable,
        },
        BuiltinPolicy {
            name: "dots_saveable",
            aliases: &["checkpoint_dots"],
            word: "dots",
            policy: Policy::DotsSaveable { only_if_no_batch_dims: false },
        },
        BuiltinPolicy {
            name: "dots_with_no_batch_dims_saveable",
            aliases: &["checkpoint_dots_with_no_batch_dims"],
            word: "dots_no_batch",
            policy: Policy::DotsSaveable { only_if_no_batch_dims: true },
        },
        BuiltinPolicy { name: "nothing_saveable", aliases: &[], word: "nothing", policy: Policy::NothingSaveable },
    ];

    /// The argument-free policy JAX names `name` (or an alias of it).
    pub fn builtin_named(name: &str) -> Option<Policy> {
        Policy::BUILTINS.iter().find(|b| b.name == name || b.aliases.contains(&name)).map(|b| b.policy.clone())
    }

    /// JAX's name of an argument-free policy; `None` for the others.
    pub fn builtin_name(&self) -> Option<&'static str> {
        Policy::BUILTINS.iter().find(|b| b.policy == *self).map(|b| b.name)
    }

    /// The function that made an opaque policy: `save_and_offload_only_these_names` for
    /// `<function save_and_offload_only_these_names.<locals>.policy at 0x...>`, `<lambda>`
    /// for a user lambda.
    pub fn opaque_factory(repr: &str) -> Option<&str> {
        let name = repr.strip_prefix("<function ")?.split_whitespace().next()?;
        Some(name.split_once(".<locals>.").map_or(name, |(factory, _)| factory))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::param::Param;

    #[test]
    fn closures_and_lambdas_are_opaque_module_functions_are_known_by_name() {
        let read = |repr: &str| Policy::from_param(&Param::Opaque(repr.into())).unwrap().unwrap();
        let offload = "<function save_and_offload_only_these_names.<locals>.policy at 0xXXXXXXXXXXXX>";
        assert_eq!(read(offload), Policy::Opaque { repr: offload.into(), meaning: None });
        assert_eq!(Policy::opaque_factory(offload), Some("save_and_offload_only_these_names"));
        assert_eq!(read(offload).to_param().repr(), offload);
        let lambda = "<function <lambda> at 0xXXXXXXXXXXXX>";
        assert_eq!(read(lambda), Policy::Opaque { repr: lambda.into(), meaning: None });
        assert_eq!(Policy::opaque_factory(lambda), Some("<lambda>"));
        let named = "<function nothing_saveable at 0xXXXXXXXXXXXX>";
        assert_eq!(read(named), Policy::Function { name: "nothing_saveable".into(), repr: named.into() });
    }
}
