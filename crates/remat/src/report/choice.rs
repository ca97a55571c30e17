//! What one side of a report shows: the program as written, the program under a policy,
//! or under the memory planner's plan for a byte budget; and how a user writes it
//! (`remat report --policy P`, `--budget B`, `--compare nothing,dots,names:a,budget:64MiB`).
//!
//! The words (docs/report.md):
//!
//! ```text
//! as-written                         the file's own checkpoints and policies
//! everything | everything_saveable   jax.checkpoint_policies.everything_saveable
//! nothing    | nothing_saveable      nothing_saveable
//! dots       | dots_saveable         dots_saveable
//! dots_no_batch | dots_with_no_batch_dims_saveable
//! names:a+b                          save_only_these_names('a', 'b')
//! budget:64MiB                       the planner's plan for the budget (as `remat plan --budget`)
//! ```
//!
//! A policy replaces the policy of every checkpoint of the function (or, without one, the
//! whole function is checkpointed with it), as the frontier's built-in points do.

use std::fmt;

use remat_ir::Policy;
use remat_plan::Budget;

use crate::ledger::policy_words;

/// One side of a report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Choice {
    /// The program as written.
    AsWritten,
    /// Every checkpoint of the program under this policy.
    Policy(Policy),
    /// The memory planner's plan for this many bytes.
    Budget(usize),
}

/// A side written wrongly, in words for the user.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ChoiceError(pub String);

/// The most sides one report compares (each is a panel of its own).
pub const MAX_SIDES: usize = 6;

/// What `--policy` takes, for its error message: `as-written`, the built-in policies'
/// words, `names:`.
fn policy_words_accepted() -> String {
    let words: Vec<&str> = Policy::BUILTINS.iter().map(|b| b.word).collect();
    format!("as-written, {} or names:NAME+NAME", words.join(", "))
}

impl Choice {
    /// A policy as `--policy` takes it (no `budget:`; that is `--budget`).
    pub fn parse_policy(s: &str) -> Result<Choice, ChoiceError> {
        let t = s.trim();
        if t == "as-written" {
            return Ok(Choice::AsWritten);
        }
        let builtin = Policy::BUILTINS.iter().find(|b| b.word == t || b.name == t);
        let policy = match builtin {
            Some(b) => b.policy.clone(),
            None => match t.strip_prefix("names:") {
                Some(list) => {
                    let names: Vec<String> = list.split('+').map(|n| n.trim().to_string()).collect();
                    if names.iter().any(|n| n.is_empty() || n.chars().any(char::is_whitespace)) {
                        return Err(ChoiceError(format!(
                            "policy `{s}`: `names:` takes checkpoint names joined by `+`, such as names:attn_out+mlp_in"
                        )));
                    }
                    if let Some(twice) = names.iter().enumerate().find(|(i, n)| names[..*i].contains(n)) {
                        return Err(ChoiceError(format!("policy `{s}`: name `{}` is given twice", twice.1)));
                    }
                    Policy::SaveOnlyTheseNames { names }
                }
                None => {
                    return Err(ChoiceError(format!(
                        "unknown policy `{s}`: expected one of {}",
                        policy_words_accepted()
                    )));
                }
            },
        };
        Ok(Choice::Policy(policy))
    }

    /// Whether the side can be applied to `jaxpr`: every name of a `names:` policy must be
    /// a `checkpoint_name` of the program (a typo would otherwise save nothing, silently).
    pub fn check_names(&self, jaxpr: &remat_ir::Jaxpr) -> Result<(), ChoiceError> {
        let Choice::Policy(Policy::SaveOnlyTheseNames { names }) = self else { return Ok(()) };
        let known = jaxpr.checkpoint_names();
        let missing: Vec<&String> = names.iter().filter(|n| !known.contains(n)).collect();
        if missing.is_empty() {
            return Ok(());
        }
        let quote = |xs: &mut dyn Iterator<Item = &String>| xs.map(|n| format!("'{n}'")).collect::<Vec<_>>().join(", ");
        Err(ChoiceError(format!(
            "policy `{self}`: the program has no checkpoint_name {} ({})",
            quote(&mut missing.into_iter()),
            match known.is_empty() {
                true => "it names no values".to_string(),
                false => format!("its names: {}", quote(&mut known.iter())),
            }
        )))
    }

    /// A policy, or `budget:BYTES` with the units `remat plan --budget` takes.
    pub fn parse(s: &str) -> Result<Choice, ChoiceError> {
        match s.trim().strip_prefix("budget:") {
            Some(b) => Choice::parse_budget(b),
            None => Choice::parse_policy(s).map_err(|e| match e.0.starts_with("unknown policy") {
                true => ChoiceError(format!("{}, or budget:BYTES", e.0)),
                false => e,
            }),
        }
    }

    /// A byte budget as `remat plan --budget` takes it: `64MiB`, `1.5GB`, `1000000`.
    pub fn parse_budget(s: &str) -> Result<Choice, ChoiceError> {
        let b: Budget = s.parse().map_err(|e: remat_plan::PlanError| ChoiceError(e.to_string()))?;
        Ok(Choice::Budget(b.bytes_value()))
    }

    /// A `--compare` list: comma-separated sides, each once, at most [`MAX_SIDES`].
    pub fn parse_list(s: &str) -> Result<Vec<Choice>, ChoiceError> {
        let mut out: Vec<Choice> = Vec::new();
        for (k, part) in s.split(',').enumerate() {
            if part.trim().is_empty() {
                return Err(ChoiceError(format!(
                    "--compare `{s}`: entry {} is empty (write sides such as nothing,dots,names:a,budget:64MiB)",
                    k + 1
                )));
            }
            let c = Choice::parse(part).map_err(|e| ChoiceError(format!("--compare entry {}: {e}", k + 1)))?;
            if out.contains(&c) {
                return Err(ChoiceError(format!("--compare `{s}`: `{}` is given twice", part.trim())));
            }
            out.push(c);
        }
        if out.len() > MAX_SIDES {
            return Err(ChoiceError(format!(
                "--compare `{s}`: {} sides; a report compares at most {MAX_SIDES}",
                out.len()
            )));
        }
        Ok(out)
    }
}

impl fmt::Display for Choice {
    /// The side's label: `as written`, the policy as JAX spells it, `plan for 64.00 MiB`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Choice::AsWritten => f.write_str("as written"),
            Choice::Policy(p) => f.write_str(&policy_words(p)),
            Choice::Budget(b) => write!(f, "plan for {}", remat_plan::budget::human(*b)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sides_parse_strictly() {
        let list = Choice::parse_list("nothing, dots,names:attn_out+mlp,budget:64MiB,as-written").unwrap();
        assert_eq!(
            list,
            vec![
                Choice::Policy(Policy::NothingSaveable),
                Choice::Policy(Policy::DotsSaveable { only_if_no_batch_dims: false }),
                Choice::Policy(Policy::SaveOnlyTheseNames { names: vec!["attn_out".into(), "mlp".into()] }),
                Choice::Budget(64 << 20),
                Choice::AsWritten,
            ]
        );
        assert_eq!(list[2].to_string(), "save_only_these_names('attn_out', 'mlp')");
        assert_eq!(list[3].to_string(), "plan for 64.00 MiB");
        for (bad, words) in [
            ("nothing,,dots", "entry 2 is empty"),
            ("nothing,dotz", "entry 2: unknown policy `dotz`"),
            ("names:", "`names:` takes checkpoint names"),
            ("names:a+", "`names:` takes checkpoint names"),
            ("budget:12 parsecs", "expected a number of bytes"),
            ("dots,dots_saveable", "given twice"),
            ("nothing,dots,everything,dots_no_batch,as-written,names:a,budget:1", "at most 6"),
        ] {
            let e = Choice::parse_list(bad).unwrap_err().to_string();
            assert!(e.contains(words), "{bad}: {e}");
        }
        assert!(Choice::parse_policy("budget:64MiB").unwrap_err().to_string().contains("unknown policy"));
    }
}
