//! The jaxpr printer: writes a jaxpr exactly as JAX 0.10.2's `jax.make_jaxpr` prints it.
//!
//! What it keeps true (each is JAX's behaviour, checked against recorded JAX output):
//! - variable names come from one counter across all nested jaxprs (a..z, ba, bb, ...),
//!   assigned in the order the text is produced, skipping names of hoisted jaxprs;
//! - a `jit`'s inner binders reuse the names of the call's operands and results;
//! - top-level binders that are never read print as `_`;
//! - a nested jaxpr referenced twice, or with more than 10 equations, is hoisted to the
//!   front as `let jaxpr = {...} in` and referenced by name;
//! - parameters print in sorted order (`jit` and `custom_jvp_call` put `name` first), and
//!   line breaking follows JAX's layout rules at width 80 (see [`crate::pp`]).

use std::collections::{HashMap, HashSet, VecDeque};
use std::fmt;
use std::sync::Arc;

use crate::jaxpr::{Atom, ClosedJaxpr, Eqn, Jaxpr, LitValue, Literal, Var};
use crate::param::{py_float_repr, strip_numpy_ints, Param};
use crate::pp::{self, brk, concat, group, join, nest, text, Doc};
use crate::primitive::Primitive;

/// The width JAX lays jaxprs out in.
pub const WIDTH: usize = 80;

/// Prints a jaxpr as `jax.make_jaxpr` does.
pub fn pp_jaxpr(jaxpr: &Jaxpr) -> String {
    pp::format(&toplevel_doc(jaxpr), WIDTH)
}

impl fmt::Display for Jaxpr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&pp_jaxpr(self))
    }
}

impl fmt::Display for ClosedJaxpr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&pp_jaxpr(&self.jaxpr))
    }
}

/// Prints a literal as JAX does: `2.0:f32[]`, `-inf:f32[]`, `0:i32[]`, `True:bool[]`.
pub fn pp_literal(lit: &Literal) -> String {
    format!("{}:{}", literal_value_text(lit.value), lit.aval())
}

fn literal_value_text(v: LitValue) -> String {
    match v {
        LitValue::F32(x) => py_float_repr(x as f64),
        LitValue::F64(x) => py_float_repr(x),
        LitValue::I32(x) => x.to_string(),
        LitValue::Bool(b) => (if b { "True" } else { "False" }).to_string(),
    }
}

/// Identity of a jaxpr for naming and hoisting: its address.
type JaxprId = usize;

fn id_of(j: &Jaxpr) -> JaxprId {
    j as *const Jaxpr as usize
}

fn encode_digits_alphabetic(mut n: usize) -> String {
    let mut s = Vec::new();
    loop {
        s.push(b'a' + (n % 26) as u8);
        n /= 26;
        if n == 0 {
            break;
        }
    }
    s.reverse();
    String::from_utf8(s).unwrap()
}

struct Ctx {
    names: HashMap<(JaxprId, Var), String>,
    counter: usize,
    shared_names: HashSet<String>,
    shared: HashMap<JaxprId, String>,
}

impl Ctx {
    fn fresh(&mut self) -> String {
        loop {
            let name = encode_digits_alphabetic(self.counter);
            self.counter += 1;
            if !self.shared_names.contains(&name) {
                return name;
            }
        }
    }

    fn var_name(&mut self, j: &Jaxpr, v: Var) -> String {
        let key = (id_of(j), v);
        if let Some(n) = self.names.get(&key) {
            return n.clone();
        }
        if j.vars[v.index()].dropped {
            return "_".into();
        }
        let n = self.fresh();
        self.names.insert(key, n.clone());
        n
    }

    fn atom_text(&mut self, j: &Jaxpr, a: &Atom) -> String {
        match a {
            Atom::Var(v) => self.var_name(j, *v),
            Atom::Lit(l) => pp_literal(l),
        }
    }

    /// JAX's `suggest_same_var_names`: inner binders take the names of the outer atoms
    /// they alias, where the inner binder is still unnamed.
    fn suggest_same_var_names(&mut self, inner: &Jaxpr, for_vars: &[Atom], outer: &Jaxpr, like_vars: &[Atom]) {
        if for_vars.len() != like_vars.len() {
            return;
        }
        let mut used: HashSet<Var> = HashSet::new();
        for (for_v, like_v) in for_vars.iter().zip(like_vars) {
            let (Atom::Var(for_v), Atom::Var(like_v)) = (for_v, like_v) else { continue };
            if used.contains(like_v) || self.names.contains_key(&(id_of(inner), *for_v)) {
                continue;
            }
            used.insert(*like_v);
            let name = self.var_name(outer, *like_v);
            self.names.insert((id_of(inner), *for_v), name);
        }
    }
}

fn toplevel_doc(top: &Jaxpr) -> Doc {
    let mut ctx = Ctx { names: HashMap::new(), counter: 0, shared_names: HashSet::new(), shared: HashMap::new() };

    // Binders of the top-level jaxpr that are never read print as `_`.
    let mut used: HashSet<Var> = top.outvars.iter().filter_map(Atom::as_var).collect();
    for eqn in top.eqns.iter().rev() {
        for v in &eqn.outvars {
            if !used.contains(v) {
                ctx.names.insert((id_of(top), *v), "_".into());
            }
        }
        used.extend(eqn.invars.iter().filter_map(Atom::as_var));
    }

    // Count uses of every nested jaxpr, breadth first, as JAX does.
    let mut order: Vec<(JaxprId, &Jaxpr)> = Vec::new();
    let mut counts: HashMap<JaxprId, usize> = HashMap::new();
    let mut hoist_names: HashMap<JaxprId, String> = HashMap::new();
    let mut queue: VecDeque<&Jaxpr> = VecDeque::from([top]);
    while let Some(j) = queue.pop_front() {
        let id = id_of(j);
        let c = counts.entry(id).or_insert_with(|| {
            order.push((id, j));
            0
        });
        *c += 1;
        if id != id_of(top) && j.eqns.len() > 10 {
            *c += 1;
        }
        for eqn in &j.eqns {
            let subs = eqn.primitive.subjaxprs();
            match eqn.primitive.hoist_name() {
                None => queue.extend(subs.into_iter().map(|s| &**s)),
                Some(name) => {
                    let name = name.trim_matches(|c| c == '<' || c == '>');
                    for s in subs {
                        queue.push_back(s);
                        hoist_names.entry(id_of(s)).or_insert_with(|| name.to_string());
                    }
                }
            }
        }
    }

    let mut name_counts: HashMap<String, usize> = HashMap::new();
    let mut shared: Vec<(String, &Jaxpr)> = Vec::new();
    for (id, j) in order {
        if counts[&id] == 1 {
            continue;
        }
        let mut name = hoist_names.get(&id).cloned().unwrap_or_else(|| "jaxpr".into());
        let count = name_counts.get(&name).copied().unwrap_or(0);
        *name_counts.entry(name.clone()).or_insert(0) += 1;
        if count > 0 {
            name = format!("{name}{count}");
            *name_counts.entry(name.clone()).or_insert(0) += 1;
        }
        ctx.shared_names.insert(name.clone());
        ctx.shared.insert(id, name.clone());
        shared.push((name, j));
    }

    let mut docs = Vec::new();
    for (name, j) in shared {
        let skeleton = skeleton_doc(&mut ctx, j);
        docs.push(concat(vec![text("let "), text(name), text(" = "), skeleton, text(" in"), brk(" ")]));
    }
    docs.push(jaxpr_doc(&mut ctx, top));
    concat(docs)
}

fn jaxpr_doc(ctx: &mut Ctx, j: &Jaxpr) -> Doc {
    if let Some(name) = ctx.shared.get(&id_of(j)) {
        return text(name.clone());
    }
    skeleton_doc(ctx, j)
}

/// `pp_vars`: names joined by `sep` and a break that is its own group, so long lists fill
/// lines rather than breaking everywhere.
fn vars_doc(items: Vec<String>, sep: &'static str) -> Doc {
    let sep_doc = concat(vec![text(sep), group(brk(" "))]);
    nest(2, group(join(sep_doc, items.into_iter().map(text).collect())))
}

fn binders_doc(ctx: &mut Ctx, j: &Jaxpr, vars: &[Var]) -> Doc {
    let items = vars.iter().map(|v| format!("{}:{}", ctx.var_name(j, *v), j.aval(*v))).collect();
    vars_doc(items, "")
}

fn skeleton_doc(ctx: &mut Ctx, j: &Jaxpr) -> Doc {
    let constvars = binders_doc(ctx, j, &j.constvars);
    let invars = binders_doc(ctx, j, &j.invars);
    let eqn_docs: Vec<Doc> = j.eqns.iter().map(|e| eqn_doc(ctx, j, e)).collect();
    let eqns = join(brk("; "), eqn_docs);
    let outs: Vec<String> = j.outvars.iter().map(|a| ctx.atom_text(j, a)).collect();
    let close = if j.outvars.len() == 1 { ",)" } else { ")" };
    let outvars = concat(vec![text("("), vars_doc(outs, ","), text(close)]);
    // The closing ` }` is inside the group, so it counts when deciding whether the
    // jaxpr fits on one line.
    group(concat(vec![
        nest(
            2,
            concat(vec![
                text("{ "),
                text("lambda "),
                constvars,
                text("; "),
                invars,
                text(". "),
                text("let"),
                nest(2, concat(vec![brk(" "), eqns])),
                brk(" "),
                text("in "),
                outvars,
            ]),
        ),
        text(" }"),
    ]))
}

fn eqn_doc(ctx: &mut Ctx, j: &Jaxpr, eqn: &Eqn) -> Doc {
    if let Primitive::Jit { jaxpr, .. } = &eqn.primitive {
        let inner: &Jaxpr = &jaxpr.jaxpr;
        if !ctx.shared.contains_key(&id_of(inner)) {
            let inner_invars: Vec<Atom> = inner.invars.iter().map(|v| Atom::Var(*v)).collect();
            ctx.suggest_same_var_names(inner, &inner_invars, j, &eqn.invars);
            let outer_outvars: Vec<Atom> = eqn.outvars.iter().map(|v| Atom::Var(*v)).collect();
            ctx.suggest_same_var_names(inner, &inner.outvars, j, &outer_outvars);
        }
    }
    let lhs_items = eqn.outvars.iter().map(|v| format!("{}:{}", ctx.var_name(j, *v), j.aval(*v))).collect();
    let lhs = vars_doc(lhs_items, "");
    let params = eqn.primitive.params();
    let kv = if params.is_empty() {
        Doc::Nil
    } else {
        let pairs: Vec<Doc> = params.iter().map(|(k, v)| kv_doc(ctx, eqn, k, v)).collect();
        group(concat(vec![nest(2, concat(vec![text("["), brk(""), join(brk(" "), pairs)])), brk(""), text("]")]))
    };
    let args: Vec<String> = eqn.invars.iter().map(|a| ctx.atom_text(j, a)).collect();
    let rhs = vec![text(eqn.primitive.name()), kv, concat(vec![text(" "), vars_doc(args, "")])];
    if eqn.outvars.is_empty() {
        concat(rhs)
    } else {
        let mut parts = vec![lhs, text(" = ")];
        parts.extend(rhs);
        concat(parts)
    }
}

fn kv_doc(ctx: &mut Ctx, eqn: &Eqn, key: &str, value: &Param) -> Doc {
    let value_doc = match value {
        Param::Jaxpr(sub) => jaxpr_doc(ctx, sub),
        // `pp_jaxprs`: a tuple of jaxprs (`cond`'s `branches`), one per line when it breaks.
        Param::Tuple(items) if !items.is_empty() && items.iter().all(|p| matches!(p, Param::Jaxpr(_))) => {
            let docs: Vec<Doc> = items
                .iter()
                .map(|p| match p {
                    Param::Jaxpr(sub) => jaxpr_doc(ctx, sub),
                    _ => Doc::Nil,
                })
                .collect();
            group(concat(vec![nest(2, concat(vec![text("("), brk(""), join(brk(" "), docs)])), brk(""), text(")")]))
        }
        _ => {
            let canonical = mask_addresses(&value.repr());
            let spelled = eqn.spelling.iter().find(|(k, _)| k == key).map(|(_, raw)| raw);
            match spelled {
                Some(raw) if strip_numpy_ints(raw) == canonical => text(raw.clone()),
                _ => text(canonical),
            }
        }
    };
    concat(vec![text(format!("{key}=")), value_doc])
}

/// JAX masks object addresses in parameter reprs: ` at 0x7f12` becomes ` at 0xXXXX`.
fn mask_addresses(s: &str) -> String {
    let Some(i) = s.find(" at 0x") else { return s.to_string() };
    let start = i + " at 0x".len();
    let hex_len = s[start..].chars().take_while(char::is_ascii_hexdigit).count();
    format!("{}{}{}", &s[..start], "X".repeat(hex_len), mask_addresses(&s[start + hex_len..]))
}

/// A nested jaxpr referenced from several places: identity is the `Arc`'s address.
pub fn same_jaxpr(a: &Arc<Jaxpr>, b: &Arc<Jaxpr>) -> bool {
    Arc::ptr_eq(a, b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alphabetic_names() {
        let names: Vec<String> =
            [0, 1, 25, 26, 27, 51, 52, 701, 702].iter().map(|&n| encode_digits_alphabetic(n)).collect();
        assert_eq!(names, ["a", "b", "z", "ba", "bb", "bz", "ca", "baz", "bba"]);
    }

    #[test]
    fn addresses_are_masked() {
        assert_eq!(mask_addresses("<function f at 0x7f3a2b>"), "<function f at 0xXXXXXX>");
    }
}
