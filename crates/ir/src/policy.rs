//! Remat policies as data, printed and parsed as JAX's reprs (`DotsSaveable(...)`,
//! `SaveOnlyTheseNames(saveable_names=frozenset({'a'}))`, ...). What a policy decides is
//! the autodiff crate's business; here a policy is only stored, printed and read.

use crate::param::Param;

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

    pub fn to_param(&self) -> Param {
        let call = |func: &str, kwargs: Vec<(&str, Param)>| Param::Call {
            func: func.to_string(),
            args: Vec::new(),
            kwargs: kwargs.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
        };
        let set = |names: &[String]| Param::FrozenSet(names.to_vec());
        match self {
            Policy::EverythingSaveable => call("EverythingSaveable", vec![]),
            Policy::NothingSaveable => call("NothingSaveable", vec![]),
            Policy::DotsSaveable { only_if_no_batch_dims } => {
                call("DotsSaveable", vec![("only_if_no_batch_dims", Param::Bool(*only_if_no_batch_dims))])
            }
            Policy::SaveOnlyTheseNames { names } => call("SaveOnlyTheseNames", vec![("saveable_names", set(names))]),
            Policy::SaveAnyNamesButThese { names } => call("SaveAnyNamesButThese", vec![("names", set(names))]),
            Policy::SaveAnythingExceptTheseNames { names } => {
                call("SaveAnythingExceptTheseNames", vec![("names", set(names))])
            }
            Policy::SaveFromBothPolicies { policy_1, policy_2 } => {
                call("SaveFromBothPolicies", vec![("policy_1", policy_1.to_param()), ("policy_2", policy_2.to_param())])
            }
            Policy::SaveAndOffloadOnlyTheseNames { saved, offloaded, offload_src, offload_dst } => call(
                "SaveAndOffloadOnlyTheseNames",
                vec![
                    ("names_which_can_be_saved", set(saved)),
                    ("names_which_can_be_offloaded", set(offloaded)),
                    ("offload_src", Param::Str(offload_src.clone())),
                    ("offload_dst", Param::Str(offload_dst.clone())),
                ],
            ),
            Policy::OffloadDotWithNoBatchDims { offload_src, offload_dst } => call(
                "OffloadDotWithNoBatchDims",
                vec![
                    ("offload_src", Param::Str(offload_src.clone())),
                    ("offload_dst", Param::Str(offload_dst.clone())),
                ],
            ),
            Policy::Function { repr, .. } | Policy::Opaque { repr, .. } => Param::Opaque(repr.clone()),
        }
    }

    /// The function that made an opaque policy: `save_and_offload_only_these_names` for
    /// `<function save_and_offload_only_these_names.<locals>.policy at 0x...>`, `<lambda>`
    /// for a user lambda.
    pub fn opaque_factory(repr: &str) -> Option<&str> {
        let name = repr.strip_prefix("<function ")?.split_whitespace().next()?;
        Some(name.split_once(".<locals>.").map_or(name, |(factory, _)| factory))
    }

    /// Reads a policy from its parameter form; `Ok(None)` for `None`.
    pub fn from_param(p: &Param) -> Result<Option<Policy>, String> {
        match p {
            Param::None => Ok(None),
            Param::Opaque(repr) => {
                let name = repr
                    .strip_prefix("<function ")
                    .and_then(|r| r.split_whitespace().next())
                    .ok_or_else(|| format!("expected a policy, found {repr}"))?;
                // A closure (`f.<locals>.policy`) or a lambda is not known by its name.
                if name.contains('<') {
                    return Ok(Some(Policy::Opaque { repr: repr.clone(), meaning: None }));
                }
                Ok(Some(Policy::Function { name: name.to_string(), repr: repr.clone() }))
            }
            Param::Call { func, args, kwargs } => {
                if !args.is_empty() {
                    return Err(format!("policy {func} takes keyword arguments only"));
                }
                let mut kw = Kwargs { func, kwargs, used: Vec::new() };
                let policy = match func.as_str() {
                    "EverythingSaveable" => Policy::EverythingSaveable,
                    "NothingSaveable" => Policy::NothingSaveable,
                    "DotsSaveable" => Policy::DotsSaveable { only_if_no_batch_dims: kw.bool("only_if_no_batch_dims")? },
                    "SaveOnlyTheseNames" => Policy::SaveOnlyTheseNames { names: kw.set("saveable_names")? },
                    "SaveAnyNamesButThese" => Policy::SaveAnyNamesButThese { names: kw.set("names")? },
                    "SaveAnythingExceptTheseNames" => Policy::SaveAnythingExceptTheseNames { names: kw.set("names")? },
                    "SaveFromBothPolicies" => Policy::SaveFromBothPolicies {
                        policy_1: Box::new(kw.policy("policy_1")?),
                        policy_2: Box::new(kw.policy("policy_2")?),
                    },
                    "SaveAndOffloadOnlyTheseNames" => Policy::SaveAndOffloadOnlyTheseNames {
                        saved: kw.set("names_which_can_be_saved")?,
                        offloaded: kw.set("names_which_can_be_offloaded")?,
                        offload_src: kw.str("offload_src")?,
                        offload_dst: kw.str("offload_dst")?,
                    },
                    "OffloadDotWithNoBatchDims" => Policy::OffloadDotWithNoBatchDims {
                        offload_src: kw.str("offload_src")?,
                        offload_dst: kw.str("offload_dst")?,
                    },
                    other => return Err(format!("unknown policy {other}")),
                };
                kw.finish()?;
                Ok(Some(policy))
            }
            other => Err(format!("expected a policy, found {}", other.kind())),
        }
    }
}

struct Kwargs<'a> {
    func: &'a str,
    kwargs: &'a [(String, Param)],
    used: Vec<&'a str>,
}

impl<'a> Kwargs<'a> {
    fn get(&mut self, key: &'a str) -> Result<&'a Param, String> {
        self.used.push(key);
        self.kwargs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v)
            .ok_or_else(|| format!("policy {} is missing {key}=", self.func))
    }

    fn bool(&mut self, key: &'a str) -> Result<bool, String> {
        match self.get(key)? {
            Param::Bool(b) => Ok(*b),
            other => Err(format!("{}: {key} must be True or False, found {}", self.func, other.kind())),
        }
    }

    fn set(&mut self, key: &'a str) -> Result<Vec<String>, String> {
        match self.get(key)? {
            Param::FrozenSet(xs) => Ok(xs.clone()),
            other => Err(format!("{}: {key} must be a frozenset, found {}", self.func, other.kind())),
        }
    }

    fn str(&mut self, key: &'a str) -> Result<String, String> {
        match self.get(key)? {
            Param::Str(s) => Ok(s.clone()),
            other => Err(format!("{}: {key} must be a string, found {}", self.func, other.kind())),
        }
    }

    fn policy(&mut self, key: &'a str) -> Result<Policy, String> {
        Policy::from_param(self.get(key)?)?.ok_or_else(|| format!("{}: {key} must be a policy, not None", self.func))
    }

    fn finish(self) -> Result<(), String> {
        for (k, _) in self.kwargs {
            if !self.used.contains(&k.as_str()) {
                return Err(format!("policy {} has no parameter {k}", self.func));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
