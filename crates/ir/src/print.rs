//! The jaxpr printer: writes a jaxpr exactly as JAX 0.10.2's `jax.make_jaxpr` prints it.
//!
//! What it keeps true (each is JAX's behaviour, checked against recorded JAX output):
//! - variable names come from one counter across all nested jaxprs (a..z, ba, bb, ...),
//!   assigned in the order the text is produced, skipping names of hoisted jaxprs;
//! - a `jit`'s inner binders reuse the names of the call's operands and results;
//! - a variable is named once: nested jaxprs the text wrote alike (JAX's distinct jaxprs
//!   sharing variable objects, `Spelling::var_group`) print with the first one's names;
//! - top-level binders that are never read print as `_`;
//! - a nested jaxpr referenced twice, or with more than 10 equations, is hoisted to the
//!   front as `let jaxpr = {...} in` and referenced by name;
//! - parameters print in sorted order (`jit` and `custom_jvp_call` put `name` first), and
//!   line breaking follows JAX's layout rules at width 80 (see [`crate::pp`]).

use std::collections::{HashMap, HashSet, VecDeque};
use std::fmt;
use std::sync::Arc;

use crate::jaxpr::{Atom, ClosedJaxpr, Eqn, Jaxpr, LitValue, Literal, Spelling, Var, VarDecl};
use crate::param::{strip_numpy_ints, Param};
use crate::pp::{self, brk, concat, group, join, nest, text, Doc};
use crate::primitive::{is_result_sharding, Primitive};
use crate::syntax::{is_name_char, is_name_start, literal_value_text};

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

/// Whose variables a jaxpr's variables are, for naming: its own (by address), or those of
/// the group of jaxprs the text wrote alike ([`crate::Spelling::var_group`]), when this
/// jaxpr has the same variables as the group's first (so a transformed copy that kept the
/// spelling but not the variables is named on its own).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum NameScope {
    Jaxpr(JaxprId),
    Group(u32),
}

/// A jaxpr's variables, binders first: what the jaxprs of one variable group must share.
type VarsOf = (Vec<VarDecl>, Vec<Var>, Vec<Var>);

struct Ctx {
    names: HashMap<(NameScope, Var), String>,
    /// The variables of each variable group's first jaxpr met.
    groups: HashMap<u32, VarsOf>,
    /// Each jaxpr's [`NameScope`], decided once.
    scopes: HashMap<JaxprId, NameScope>,
    counter: usize,
    shared_names: HashSet<String>,
    shared: HashMap<JaxprId, String>,
}

impl Ctx {
    fn new() -> Ctx {
        Ctx {
            names: HashMap::new(),
            groups: HashMap::new(),
            scopes: HashMap::new(),
            counter: 0,
            shared_names: HashSet::new(),
            shared: HashMap::new(),
        }
    }

    /// Whose names `j`'s variables take (see [`NameScope`]).
    fn scope(&mut self, j: &Jaxpr) -> NameScope {
        let Some(g) = j.spelling.var_group else { return NameScope::Jaxpr(id_of(j)) };
        if let Some(&scope) = self.scopes.get(&id_of(j)) {
            return scope;
        }
        let first = self.groups.entry(g).or_insert_with(|| (j.vars.clone(), j.constvars.clone(), j.invars.clone()));
        let scope = if first.0 == j.vars && first.1 == j.constvars && first.2 == j.invars {
            NameScope::Group(g)
        } else {
            NameScope::Jaxpr(id_of(j))
        };
        self.scopes.insert(id_of(j), scope);
        scope
    }

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
        let key = (self.scope(j), v);
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
            let inner_scope = self.scope(inner);
            if used.contains(like_v) || self.names.contains_key(&(inner_scope, *for_v)) {
                continue;
            }
            let name = self.var_name(outer, *like_v);
            // An outer binder that prints as `_` (never read) gives its inner alias no name:
            // the inner one is read (it is the body's output), and `_` cannot be read back
            // (issue 22's fuzzer).
            if name == "_" {
                continue;
            }
            used.insert(*like_v);
            self.names.insert((inner_scope, *for_v), name);
        }
    }
}

fn toplevel_doc(top: &Jaxpr) -> Doc {
    let mut ctx = Ctx::new();

    // Binders of the top-level jaxpr that are never read print as `_`.
    let mut used: HashSet<Var> = top.outvars.iter().filter_map(Atom::as_var).collect();
    for eqn in top.eqns.iter().rev() {
        for v in &eqn.outvars {
            if !used.contains(v) {
                ctx.names.insert((NameScope::Jaxpr(id_of(top)), *v), "_".into());
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
            let subs = eqn.primitive.jaxprs_in_params();
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
        // A `jit`'s name is any Python string; only a name the parser reads as one (and no
        // keyword) may name a hoisted jaxpr, or the text would not read back (issue 22's
        // fuzzer printed `let lam\0 = ...` from `jit[name=<lam\0>]`).
        let readable =
            |n: &str| n.starts_with(is_name_start) && n.chars().all(is_name_char) && !["let", "in"].contains(&n);
        let mut name = hoist_names.get(&id).filter(|n| readable(n)).cloned().unwrap_or_else(|| "jaxpr".into());
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
    let outs: Vec<String> =
        j.outvars.iter().enumerate().map(|(i, a)| spelled_atom_text(ctx, j, &j.spelling, i, a)).collect();
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
    let kv = kv_pairs_doc(ctx, eqn, &eqn.primitive.params());
    let args: Vec<String> =
        eqn.invars.iter().enumerate().map(|(i, a)| spelled_atom_text(ctx, j, &eqn.spelling, i, a)).collect();
    let rhs = vec![text(eqn.primitive.name()), kv, concat(vec![text(" "), vars_doc(args, "")])];
    if eqn.outvars.is_empty() {
        concat(rhs)
    } else {
        let mut parts = vec![lhs, text(" = ")];
        parts.extend(rhs);
        concat(parts)
    }
}

/// `core.pp_kv_pairs`: `[`, the pairs at +2, `]`, all on one line if they fit.
fn kv_pairs_doc(ctx: &mut Ctx, eqn: &Eqn, params: &[(&str, Param)]) -> Doc {
    if params.is_empty() {
        return Doc::Nil;
    }
    let pairs: Vec<Doc> = params.iter().map(|(k, v)| kv_doc(ctx, eqn, k, v)).collect();
    group(concat(vec![nest(2, concat(vec![text("["), brk(""), join(brk(" "), pairs)])), brk(""), text("]")]))
}

/// Atom `i` of an equation's operands or a jaxpr's outputs, as the text it was read from
/// wrote it where that still denotes its value (`0.1:f32[]`).
fn spelled_atom_text(ctx: &mut Ctx, j: &Jaxpr, spelling: &Spelling, i: usize, a: &Atom) -> String {
    let raw = spelling.literals.iter().find(|(k, _)| *k == i).map(|(_, raw)| raw.as_str());
    match (a, raw) {
        (Atom::Lit(lit), Some(raw)) if spelling_denotes(raw, lit) => format!("{raw}:{}", lit.aval()),
        _ => ctx.atom_text(j, a),
    }
}

/// Whether `raw` (a Python float such as `0.1`) still denotes `lit` in its dtype.
fn spelling_denotes(raw: &str, lit: &Literal) -> bool {
    let dtype = lit.value.dtype();
    dtype.is_float() && raw.parse::<f64>().is_ok_and(|x| LitValue::from_f64(dtype, x) == lit.value)
}

/// `core.pp_jaxprs`: a tuple of jaxprs (`cond`'s `branches`), `(`, then each jaxpr on its
/// own line at +2, then `)`, unless the whole tuple fits on the line.
fn jaxprs_doc(ctx: &mut Ctx, jaxprs: &[&Jaxpr]) -> Doc {
    let docs: Vec<Doc> = jaxprs.iter().map(|j| jaxpr_doc(ctx, j)).collect();
    group(concat(vec![nest(2, concat(vec![text("("), brk(""), join(brk(" "), docs)])), brk(""), text(")")]))
}

fn kv_doc(ctx: &mut Ctx, eqn: &Eqn, key: &str, value: &Param) -> Doc {
    let value_doc = match value {
        Param::Jaxpr(sub) => jaxpr_doc(ctx, sub),
        Param::Tuple(items) if items.iter().all(|p| matches!(p, Param::Jaxpr(_))) && !items.is_empty() => {
            let subs: Vec<&Jaxpr> =
                items.iter().filter_map(|p| if let Param::Jaxpr(j) = p { Some(&**j) } else { None }).collect();
            jaxprs_doc(ctx, &subs)
        }
        _ => {
            let canonical = match value {
                // JAX's `pp_kv_pair` prints a frozenset parameter with braces even when empty.
                Param::FrozenSet(xs) => {
                    let items: Vec<String> = xs.iter().map(Param::repr).collect();
                    format!("frozenset({{{}}})", items.join(", "))
                }
                _ => mask_addresses(&value.repr()),
            };
            let spelled = eqn.spelling.params.iter().find(|(k, _)| k == key).map(|(_, raw)| raw);
            match spelled {
                Some(raw) if strip_numpy_ints(raw) == canonical => text(raw.clone()),
                Some(raw) if is_result_sharding(eqn.primitive.name(), key) && canonical == "None" => text(raw.clone()),
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

    /// `{ lambda ; x:f32[]. let y:f32[] = OP x in (y,) }`.
    fn unary_body(op: crate::UnaryOp) -> Arc<Jaxpr> {
        let mut j = Jaxpr::default();
        let x = j.new_var(crate::Aval::scalar(crate::DType::F32));
        let y = j.new_var(crate::Aval::scalar(crate::DType::F32));
        j.invars.push(x);
        j.eqns.push(Eqn::new(Primitive::Unary(op), vec![x.into()], vec![y], crate::SourceInfo::unknown()));
        j.outvars.push(y.into());
        Arc::new(j)
    }

    /// A tuple of jaxprs lays out as JAX's `pp_jaxprs` (`cond`'s `branches`): the text is
    /// JAX's for `lax.cond(p, jnp.sin, jnp.cos, x)`, the equation at its usual place.
    #[test]
    fn a_tuple_of_jaxprs_prints_one_per_line() {
        let mut ctx = Ctx { counter: 4, ..Ctx::new() };
        let eqn = Eqn::new(Primitive::SelectN, vec![], vec![], crate::SourceInfo::unknown());
        let branches = Param::Tuple(vec![
            Param::Jaxpr(unary_body(crate::UnaryOp::Cos)),
            Param::Jaxpr(unary_body(crate::UnaryOp::Sin)),
        ]);
        let params = kv_pairs_doc(&mut ctx, &eqn, &[("branches", branches)]);
        let doc = concat(vec![text("    "), nest(4, concat(vec![text("d:f32[] = cond"), params, text(" c b")]))]);
        let want = "    d:f32[] = cond[
      branches=(
        { lambda ; e:f32[]. let f:f32[] = cos e in (f,) }
        { lambda ; g:f32[]. let h:f32[] = sin g in (h,) }
      )
    ] c b";
        assert_eq!(pp::format(&doc, WIDTH), want);
        // Short enough, the tuple stays on one line.
        let mut ctx = Ctx::new();
        let one = Param::Tuple(vec![Param::Jaxpr(unary_body(crate::UnaryOp::Sin))]);
        let doc = kv_pairs_doc(&mut ctx, &eqn, &[("branches", one)]);
        assert_eq!(pp::format(&doc, WIDTH), "[branches=({ lambda ; a:f32[]. let b:f32[] = sin a in (b,) })]");
    }

    #[test]
    fn addresses_are_masked() {
        assert_eq!(mask_addresses("<function f at 0x7f3a2b>"), "<function f at 0xXXXXXX>");
    }
}
