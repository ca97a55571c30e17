//! The jaxpr parser: reads what JAX prints (and what [`crate::print`] writes).
//!
//! Grammar (whitespace, including newlines, separates tokens anywhere):
//!
//! ```text
//! file    := ("let" NAME "=" jaxpr "in")* jaxpr     a hoisted NAME may be used before it is defined
//! jaxpr   := "{" "lambda" binder* ";" binder* "." "let" eqn* "in" "(" atom ("," atom)* [","] ")" "}"
//! binder  := NAME ":" aval                      NAME is a..z, ba.., or "_"
//! aval    := DTYPE ["<host>"] "[" [INT ("," INT)*] "]"
//! eqn     := binder+ "=" PRIM ["[" (KEY "=" value)* "]"] atom* [";"]
//! atom    := NAME | literal                     literal := VALUE ":" DTYPE "[]"
//! value   := "None" | "True" | "False" | INT | STRING | WORD ("." WORD)* ["(" args ")"]
//!          | "(" [value ("," value)* [","]] ")" | "[" [value ("," value)*] "]"
//!          | "{" value ("," value)* "}" | "<" ... ">" | jaxpr | NAME-of-a-hoisted-jaxpr
//! ```
//!
//! Where a token's meaning depends on layout, JAX's printer decides it (`print.rs`): an
//! operand never carries a type and a literal always does, so `nan` is a variable and
//! `nan:f32[]` a literal; but a line that starts with `nan:f32[]` at the column of the
//! equation being read starts the next equation (a variable may be named `nan` or `inf`),
//! while one indented further continues the operands (JAX wraps operands at +2).
//!
//! Every error names the line and column, what was expected and what was found. The
//! parser never panics and always advances, so it terminates on any input.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use crate::jaxpr::{Atom, Eqn, Jaxpr, LitValue, Literal, SourceInfo, Spelling, Var, VarDecl};
use crate::param::Param;
use crate::primitive::{is_result_sharding, not_a_primitive, sharding_of, Primitive, PrimitiveKind};
use crate::syntax::{is_name_char, is_name_start, literal_value_text};
use crate::types::{Aval, DType, MemorySpace, Vma};

/// A parse error at a position in the text (1-based line and column).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct ParseError {
    pub line: usize,
    pub column: usize,
    pub message: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}, column {}: {}", self.line, self.column, self.message)
    }
}

/// Parses a whole jaxpr text, such as `jax.make_jaxpr` output. `file` names the text in
/// the equations' source locations.
pub fn parse_jaxpr(src: &str, file: &str) -> Result<Jaxpr, ParseError> {
    let line_starts = std::iter::once(0).chain(src.match_indices('\n').map(|(i, _)| i + 1)).collect();
    let mut p = Parser {
        src,
        pos: 0,
        file: Arc::from(file),
        hoisted: HashMap::new(),
        depth: 0,
        line_starts,
        var_groups: HashMap::new(),
        comments: source_comments(src),
        eqns_on_line: HashMap::new(),
    };
    p.file_()
}

/// The `# ...` comments of a text that `jaxpr.pretty_print(source_info=True)` printed,
/// by line (1-based): each comment's text and whether it is alone on its line. JAX puts
/// an equation's source after the line the equation starts on; where one line holds
/// several equations (a jaxpr printed on one line), their sources follow on lines of their
/// own, one each, in order. Quotes are skipped: a `#` inside a string is not a comment.
fn source_comments(src: &str) -> HashMap<usize, (String, bool)> {
    let mut out = HashMap::new();
    if !src.contains('#') {
        return out;
    }
    for (k, line) in src.lines().enumerate() {
        let mut quote = None;
        for (i, c) in line.char_indices() {
            match (quote, c) {
                (Some(q), c) if c == q => quote = None,
                (Some(_), _) => {}
                (None, '\'' | '"') => quote = Some(c),
                (None, '#') => {
                    let alone = line[..i].trim().is_empty();
                    out.insert(k + 1, (line[i + 1..].trim().to_string(), alone));
                    break;
                }
                (None, _) => {}
            }
        }
    }
    out
}

/// A source comment's text (`<string>:5:8 (f)`, JAX's `source_info_util.summarize`) as
/// the equation's source; an empty one (JAX's for equations without a user frame), or one
/// that is not `file:line[:column] [(function)]`, is unknown.
fn comment_source(text: &str) -> SourceInfo {
    let (place, function) = match text.strip_suffix(')').and_then(|t| t.rsplit_once(" (")) {
        Some((place, f)) => (place, Some(Arc::from(f))),
        None => (text, None),
    };
    let mut parts = place.rsplitn(3, ':');
    let last = parts.next().and_then(|n| n.parse::<u32>().ok());
    let middle = parts.next();
    let (file, line, column) = match (last, middle.and_then(|m| m.parse::<u32>().ok()), parts.next()) {
        (Some(col), Some(line), Some(file)) => (file.to_string(), line, col),
        (Some(line), _, _) => (place.rsplit_once(':').map_or("", |(f, _)| f).to_string(), line, 0),
        _ => return SourceInfo::unknown(),
    };
    if file.is_empty() {
        return SourceInfo::unknown();
    }
    SourceInfo { file: Arc::from(file.as_str()), line, column, function }
}

/// Nesting limit for jaxprs and parameter values, so hostile input cannot overflow the stack.
const MAX_DEPTH: usize = 64;

struct Parser<'s> {
    src: &'s str,
    pos: usize,
    file: Arc<str>,
    /// The hoisted jaxprs (`let NAME = {...} in`) by name. A hoisted jaxpr may refer to one
    /// defined after it (JAX prints them in breadth-first order of discovery), so each is
    /// parsed when first needed.
    hoisted: HashMap<String, Hoisted>,
    depth: usize,
    /// The byte offset at which each line starts, so that an equation's line and column
    /// cost a binary search rather than a scan from the start of the text (which made
    /// parsing quadratic in the number of equations).
    line_starts: Vec<usize>,
    /// The groups of nested jaxprs written alike ([`crate::Spelling::var_group`]), by their
    /// text with whitespace runs collapsed.
    var_groups: HashMap<String, u32>,
    /// Source comments by line ([`source_comments`]): a text JAX printed with
    /// `source_info=True` gives each equation its Python source.
    comments: HashMap<usize, (String, bool)>,
    /// How many equations start on each line so far.
    eqns_on_line: HashMap<usize, usize>,
}

/// The parameter keys whose values are jaxprs (or tuples of jaxprs, `branches`): JAX's
/// `jaxprs_in_params` finds them by type; a word in their place names a hoisted jaxpr.
/// Python reprs that JAX prints inside parameters whose insides are not parameter syntax
/// (`composite`'s attributes: a pytree's structure, a NumPy array): read and printed back
/// as written.
const OPAQUE_CALLS: [&str; 2] = ["PyTreeDef", "HashableArray"];

const JAXPR_KEYS: [&str; 6] = ["jaxpr", "call_jaxpr", "branches", "cond_jaxpr", "body_jaxpr", "update_jaxpr"];

/// A hoisted jaxpr: where its text starts, and the jaxpr once parsed.
struct Hoisted {
    start: usize,
    state: HoistState,
}

enum HoistState {
    Unparsed,
    /// Being parsed: a reference now is a cycle.
    Parsing,
    Parsed(Arc<Jaxpr>),
}

/// The literals words start: `True:bool[]`, `nan:f32[]`, `inf:f32[]` (`-inf` starts with
/// `-`; `nanj:c64[]` and `infj:c64[]` are complex). Variables may be named `nan` and `inf`,
/// never `True` or `False`.
const WORD_LITERALS: [&str; 6] = ["True", "False", "nan", "inf", "nanj", "infj"];

/// One jaxpr's names in scope.
#[derive(Default)]
struct Scope {
    jaxpr: Jaxpr,
    names: HashMap<String, Var>,
}

impl<'s> Parser<'s> {
    // ---- positions and errors ----

    fn line_col(&self, pos: usize) -> (usize, usize) {
        // The last line starting at or before `pos` (line_starts[0] = 0, so there is one).
        let line = self.line_starts.partition_point(|&start| start <= pos);
        let col = self.src[self.line_starts[line - 1]..pos].chars().count() + 1;
        (line, col)
    }

    fn err_at(&self, pos: usize, message: impl Into<String>) -> ParseError {
        let (line, column) = self.line_col(pos);
        let mut message = message.into();
        // An error in the text's last word, with nothing after it: most likely a truncated
        // file, which the message should say rather than blame the word.
        let rest = &self.src[pos.min(self.src.len())..];
        let looks_like_jaxpr = self.src.trim_start().starts_with('{') || self.src.trim_start().starts_with("let");
        let in_a_word = rest.starts_with(|c: char| is_name_char(c) || c == '.');
        let at_end = !rest.trim_end().contains(char::is_whitespace);
        if looks_like_jaxpr && in_a_word && at_end && !message.contains("end of input") {
            message.push_str(" (the text ends there: is it truncated?)");
        }
        ParseError { line, column, message }
    }

    /// "expected X, found Y" at the current token.
    fn expected(&mut self, what: &str) -> ParseError {
        self.skip_ws();
        let found = self.found();
        self.err_at(self.pos, format!("expected {what}, found {found}"))
    }

    fn found(&self) -> String {
        let rest = &self.src[self.pos..];
        match rest.chars().next() {
            None => "end of input".into(),
            Some(c) if is_name_start(c) || c.is_ascii_digit() => {
                let tok: String = rest.chars().take_while(|&c| is_name_char(c) || c == '.').take(24).collect();
                format!("`{tok}`")
            }
            Some(c) => format!("`{c}`"),
        }
    }

    // ---- characters ----

    /// Skips whitespace and `#` comments (a source comment is read by line, in `eqn`).
    fn skip_ws(&mut self) {
        loop {
            let rest = &self.src[self.pos..];
            self.pos += rest.len() - rest.trim_start().len();
            if !self.src[self.pos..].starts_with('#') {
                return;
            }
            self.pos += self.src[self.pos..].find('\n').unwrap_or(self.src.len() - self.pos);
        }
    }

    fn peek(&mut self) -> Option<char> {
        self.skip_ws();
        self.src[self.pos..].chars().next()
    }

    fn peek_str(&mut self, s: &str) -> bool {
        self.skip_ws();
        self.src[self.pos..].starts_with(s)
    }

    fn eat(&mut self, s: &str) -> bool {
        if self.peek_str(s) {
            self.pos += s.len();
            true
        } else {
            false
        }
    }

    fn expect(&mut self, s: &str, what: &str) -> Result<(), ParseError> {
        if self.eat(s) {
            Ok(())
        } else {
            Err(self.expected(what))
        }
    }

    /// A keyword: the word `kw` not followed by a name character.
    fn peek_keyword(&mut self, kw: &str) -> bool {
        self.peek_str(kw) && !self.src[self.pos + kw.len()..].starts_with(is_name_char)
    }

    fn eat_keyword(&mut self, kw: &str) -> bool {
        if self.peek_keyword(kw) {
            self.pos += kw.len();
            true
        } else {
            false
        }
    }

    fn name(&mut self) -> Option<&'s str> {
        self.skip_ws();
        let rest = &self.src[self.pos..];
        if !rest.starts_with(is_name_start) {
            return None;
        }
        let len = rest.find(|c| !is_name_char(c)).unwrap_or(rest.len());
        self.pos += len;
        Some(&rest[..len])
    }

    /// A primitive's name: a name that may contain `-` (`scatter-add`).
    fn primitive_name(&mut self) -> Option<&'s str> {
        self.skip_ws();
        let rest = &self.src[self.pos..];
        if !rest.starts_with(is_name_start) {
            return None;
        }
        let len = rest.find(|c| !(is_name_char(c) || c == '-')).unwrap_or(rest.len());
        self.pos += len;
        Some(&rest[..len])
    }

    /// What follows the next name, without consuming anything.
    fn char_after_name(&mut self) -> Option<char> {
        self.skip_ws();
        let rest = &self.src[self.pos..];
        let len = rest.find(|c| !is_name_char(c)).unwrap_or(rest.len());
        rest[len..].trim_start().chars().next()
    }

    fn enter(&mut self) -> Result<(), ParseError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(self.err_at(self.pos, format!("nesting deeper than {MAX_DEPTH} levels")));
        }
        Ok(())
    }

    // ---- structure ----

    fn file_(&mut self) -> Result<Jaxpr, ParseError> {
        // First the extent of every hoisted jaxpr, then each parsed in order (a reference to
        // a later one parses that one first), then the main jaxpr.
        let mut names = Vec::new();
        while self.peek_keyword("let") {
            let start = self.pos;
            self.pos += 3;
            let name = self.name().ok_or_else(|| self.expected("a name for the hoisted jaxpr"))?;
            if self.hoisted.contains_key(name) {
                return Err(self.err_at(start, format!("jaxpr `{name}` is defined twice")));
            }
            self.expect("=", "`=`")?;
            self.skip_ws();
            let body = self.pos;
            self.skip_braced()?;
            if !self.eat_keyword("in") {
                return Err(self.expected("`in` after a hoisted jaxpr"));
            }
            self.hoisted.insert(name.to_string(), Hoisted { start: body, state: HoistState::Unparsed });
            names.push((name, body));
        }
        let main = self.pos;
        for (name, body) in names {
            self.hoisted_jaxpr(name, body)?;
        }
        self.pos = main;
        let j = self.jaxpr()?;
        if self.peek().is_some() {
            return Err(self.expected("end of input after the jaxpr"));
        }
        Ok(j)
    }

    /// Skips a `{ ... }` whose braces balance (outside quoted strings), without reading it.
    fn skip_braced(&mut self) -> Result<(), ParseError> {
        let start = self.pos;
        if !self.src[start..].starts_with('{') {
            return Err(self.expected("`{` to open a jaxpr"));
        }
        let mut depth = 0usize;
        let mut quote = None;
        let mut comment = false;
        for (i, c) in self.src[start..].char_indices() {
            if comment {
                comment = c != '\n';
                continue;
            }
            match (quote, c) {
                (Some((q, _)), c) if c == q => quote = None,
                (Some((q, at)), '\n') => {
                    return Err(self.err_at(start + at, format!("unterminated string: no closing {q} on its line")))
                }
                (Some(_), _) => {}
                (None, '\'' | '"') => quote = Some((c, i)),
                (None, '#') => comment = true,
                (None, '{') => depth += 1,
                (None, '}') => {
                    depth -= 1;
                    if depth == 0 {
                        self.pos = start + i + 1;
                        return Ok(());
                    }
                }
                (None, _) => {}
            }
        }
        // Where the text ends is where something is missing (a truncated file); the brace
        // that is still open is named too.
        let (line, column) = self.line_col(start);
        let what = match quote {
            Some((q, at)) => {
                let (l, c) = self.line_col(start + at);
                format!("the text ends inside a string opened by {q} at line {l}, column {c}")
            }
            None => format!("the text ends inside the jaxpr whose `{{` opens at line {line}, column {column}"),
        };
        Err(self.err_at(self.src.len(), what))
    }

    /// The hoisted jaxpr `name`, parsed now if it was not yet; `at` is where it is needed.
    fn hoisted_jaxpr(&mut self, name: &str, at: usize) -> Result<Arc<Jaxpr>, ParseError> {
        let Some(h) = self.hoisted.get_mut(name) else {
            return Err(self.err_at(at, format!("`{name}` is not a jaxpr defined with `let {name} = ...`")));
        };
        let start = h.start;
        match &h.state {
            HoistState::Parsed(j) => return Ok(j.clone()),
            HoistState::Parsing => {
                return Err(self.err_at(at, format!("jaxpr `{name}` refers to itself")));
            }
            HoistState::Unparsed => h.state = HoistState::Parsing,
        }
        let resume = self.pos;
        self.pos = start;
        let j = Arc::new(self.jaxpr()?);
        self.pos = resume;
        if let Some(h) = self.hoisted.get_mut(name) {
            h.state = HoistState::Parsed(j.clone());
        }
        Ok(j)
    }

    fn jaxpr(&mut self) -> Result<Jaxpr, ParseError> {
        let start = self.pos;
        let mut jaxpr = self.jaxpr_body()?;
        if self.depth > 0 {
            // A nested jaxpr: jaxprs written alike share their variables' names.
            let key = self.src[start..self.pos].split_whitespace().collect::<Vec<_>>().join(" ");
            let next = u32::try_from(self.var_groups.len()).unwrap_or(u32::MAX);
            jaxpr.spelling.var_group = Some(*self.var_groups.entry(key).or_insert(next));
        }
        Ok(jaxpr)
    }

    fn jaxpr_body(&mut self) -> Result<Jaxpr, ParseError> {
        self.enter()?;
        self.expect("{", "`{` to open a jaxpr")?;
        if !self.eat_keyword("lambda") {
            return Err(self.expected("`lambda`"));
        }
        let mut scope = Scope::default();
        scope.jaxpr.constvars = self.binders(&mut scope)?;
        self.expect(";", "`;` after the constvars")?;
        scope.jaxpr.invars = self.binders(&mut scope)?;
        self.expect(".", "`.` after the invars")?;
        if !self.eat_keyword("let") {
            return Err(self.expected("`let`"));
        }
        loop {
            // `in` followed by `(` ends the equations; a variable may itself be called `in`.
            if self.peek_keyword("in") && self.char_after_name() == Some('(') {
                self.pos += 2;
                break;
            }
            if self.peek().is_none() {
                return Err(self.expected("an equation or `in`"));
            }
            let eqn = self.eqn(&mut scope)?;
            scope.jaxpr.eqns.push(eqn);
            self.eat(";");
        }
        self.expect("(", "`(` to open the outputs")?;
        let mut outvars = Vec::new();
        let mut literals = Vec::new();
        while !self.eat(")") {
            self.operand(&scope, &mut outvars, &mut literals)?;
            if !self.eat(",") && !self.peek_str(")") {
                return Err(self.expected("`,` or `)` in the outputs"));
            }
        }
        scope.jaxpr.outvars = outvars;
        scope.jaxpr.spelling.literals = literals;
        self.expect("}", "`}` to close the jaxpr")?;
        self.depth -= 1;
        Ok(scope.jaxpr)
    }

    /// Binders up to the next token that does not start `NAME :`.
    fn binders(&mut self, scope: &mut Scope) -> Result<Vec<Var>, ParseError> {
        let mut vars = Vec::new();
        while self.peek().is_some_and(is_name_start) && self.char_after_name() == Some(':') {
            vars.push(self.binder(scope)?);
        }
        Ok(vars)
    }

    fn binder(&mut self, scope: &mut Scope) -> Result<Var, ParseError> {
        self.skip_ws();
        let start = self.pos;
        let name = self.name().ok_or_else(|| self.expected("a variable name"))?;
        self.expect(":", "`:` after the variable name")?;
        let aval = self.aval()?;
        let v = scope.jaxpr.new_var(aval);
        if name == "_" {
            scope.jaxpr.vars[v.index()] = VarDecl { aval: scope.jaxpr.vars[v.index()].aval.clone(), dropped: true };
        } else if scope.names.insert(name.to_string(), v).is_some() {
            return Err(self.err_at(start, format!("variable `{name}` is defined twice in this jaxpr")));
        }
        Ok(v)
    }

    fn aval(&mut self) -> Result<Aval, ParseError> {
        self.skip_ws();
        let start = self.pos;
        let dt = self.name().ok_or_else(|| self.expected(&format!("a dtype ({})", dtype_names())))?;
        let dtype = if dt == "key" {
            // A PRNG key: `key<fry>`; threefry is the only implementation.
            let impl_start = self.pos;
            if !self.eat("<fry>") {
                return Err(self.err_at(impl_start, "expected `<fry>` after `key` (threefry keys are the only ones)"));
            }
            DType::Key
        } else {
            DType::from_short_name(dt)
                .ok_or_else(|| self.err_at(start, format!("expected a dtype ({}), found `{dt}`", dtype_names())))?
        };
        let mut memory_space = MemorySpace::Device;
        if self.src[self.pos..].starts_with('<') {
            self.pos += 1;
            let ms_start = self.pos;
            let ms = self.name().unwrap_or("");
            memory_space = match ms {
                "host" | "pinned_host" => MemorySpace::Host,
                "device" => MemorySpace::Device,
                other => return Err(self.err_at(ms_start, format!("expected memory space `host`, found `{other}`"))),
            };
            self.expect(">", "`>` after the memory space")?;
        }
        if !self.src[self.pos..].starts_with('[') {
            return Err(self.expected("`[` to open the shape"));
        }
        self.pos += 1;
        let mut shape = Vec::new();
        while !self.eat("]") {
            self.skip_ws();
            let dstart = self.pos;
            let digits = self.src[self.pos..].chars().take_while(char::is_ascii_digit).count();
            if digits == 0 {
                return Err(self.expected("a dimension size or `]`"));
            }
            self.pos += digits;
            let d: usize =
                self.src[dstart..self.pos].parse().map_err(|_| self.err_at(dstart, "dimension size is too large"))?;
            shape.push(d);
            if self.src[self.pos..].starts_with('@') {
                return Err(self.err_at(
                    self.pos,
                    "a dimension sharded in its type (`8@data`: a mesh with explicit axes); remat reads \
                     programs on meshes with `Auto` axes (`jax.make_mesh(..., axis_types=(AxisType.Auto, ...))`) \
                     and `shard_map`, not explicit sharding in types yet",
                ));
            }
            if !self.eat(",") && !self.peek_str("]") {
                return Err(self.expected("`,` or `]` in the shape"));
            }
        }
        let vma = if self.src[self.pos..].starts_with('{') { self.vma()? } else { Vma::default() };
        Ok(Aval { dtype, shape, memory_space, vma })
    }

    /// After a shape, the varying manual axes: `{V:model}`, `{V:(data,model)}`.
    fn vma(&mut self) -> Result<Vma, ParseError> {
        let start = self.pos;
        let end = self.src[self.pos..].find('}').map(|i| self.pos + i);
        let Some(end) = end.filter(|&e| !self.src[start..e].contains('\n')) else {
            return Err(self.err_at(start, "unclosed `{` after the shape"));
        };
        let body = &self.src[start + 1..end];
        let Some(names) = body.strip_prefix("V:") else {
            return Err(self.err_at(
                start,
                format!(
                    "expected the varying manual axes `{{V:axis}}` or `{{V:(a,b)}}` after the shape, found `{{{body}}}` \
                     (unreduced `U:` and reduced `R:` axes are not read yet)"
                ),
            ));
        };
        let names = names.strip_prefix('(').and_then(|n| n.strip_suffix(')')).unwrap_or(names);
        let names: Vec<&str> = names.split(',').collect();
        if names.iter().any(|n| n.is_empty() || !n.chars().all(is_name_char)) {
            return Err(self.err_at(start, format!("expected axis names in `{{{body}}}`")));
        }
        if names.iter().enumerate().any(|(i, n)| names[..i].contains(n)) {
            return Err(self.err_at(start, format!("an axis is named twice in `{{{body}}}`")));
        }
        self.pos = end + 1;
        Ok(Vma::new(names))
    }

    fn eqn(&mut self, scope: &mut Scope) -> Result<Eqn, ParseError> {
        self.skip_ws();
        let start = self.pos;
        let outvars = self.binders(scope)?;
        if outvars.is_empty() {
            // An equation with no outputs (`jit[name=_where jaxpr={ ... in () }] a b`, what
            // JAX prints after its own dead-code elimination) starts with its primitive.
            if !self.peek_equation_without_outputs(scope) {
                let rest = &self.src[self.pos..];
                let len = rest.find(|c| !(is_name_char(c) || c == '-')).unwrap_or(rest.len());
                if len > 0 && rest[len..].starts_with('[') {
                    // A primitive's name and parameters, where no primitive has that name.
                    return Err(self.err_at(self.pos, not_a_primitive(&rest[..len])));
                }
                return Err(self.expected("an equation (`name:type = primitive ...`)"));
            }
        } else {
            self.expect("=", "`=` after the equation's binders")?;
        }
        self.skip_ws();
        let prim_pos = self.pos;
        let prim_name = self.primitive_name().ok_or_else(|| self.expected("a primitive name"))?;
        if PrimitiveKind::from_name(prim_name).is_none() {
            return Err(self.err_at(prim_pos, not_a_primitive(prim_name)));
        }
        let mut params = Vec::new();
        let mut spelling = Vec::new();
        if self.src[self.pos..].starts_with('[') {
            self.pos += 1;
            while !self.eat("]") {
                self.skip_ws();
                let key = self.name().ok_or_else(|| self.expected("a parameter name or `]`"))?;
                self.expect("=", "`=` after the parameter name")?;
                self.skip_ws();
                let vstart = self.pos;
                let mut value = self.value(key)?;
                let raw = &self.src[vstart..self.pos];
                // A result's sharding (`sharding=NamedSharding(...)`, `out_sharding=...`) says
                // where the result lives and changes no value: checked, kept as written, and
                // read as `None` by the primitive.
                if is_result_sharding(prim_name, key) && !matches!(value, Param::None) {
                    sharding_of(&value).map_err(|m| self.err_at(prim_pos, format!("{prim_name}: {key}: {m}")))?;
                    spelling.push((key.to_string(), raw.to_string()));
                    value = Param::None;
                }
                // Nested jaxprs keep their own equations' spellings.
                let holds_jaxpr = |v: &Param| matches!(v, Param::Jaxpr(_));
                let is_jaxprs = holds_jaxpr(&value) || value.as_seq().is_some_and(|xs| xs.iter().any(holds_jaxpr));
                if raw.contains("np.") && !is_jaxprs {
                    spelling.push((key.to_string(), raw.to_string()));
                }
                params.push((key.to_string(), value));
            }
        }
        let eqn_column = self.column_if_first_on_line(start);
        let mut invars = Vec::new();
        let mut literals = Vec::new();
        loop {
            match self.peek() {
                Some(c) if is_name_start(c) => {
                    let after = self.char_after_name();
                    if after == Some(':') && self.peek_word_literal() {
                        // `nan:f32[]` first on a line at this equation's column is the next
                        // equation's binder (a variable named `nan`); elsewhere a literal.
                        let next_eqn = eqn_column.is_some() && self.column_if_first_on_line(self.pos) == eqn_column;
                        let is_bool = self.peek_str("True") || self.peek_str("False");
                        if next_eqn && !is_bool {
                            break;
                        }
                    } else if after == Some(':') || after == Some('=') {
                        break; // the next equation's binders
                    } else if self.peek_keyword("in") && after == Some('(') {
                        break;
                    } else if self.peek_equation_without_outputs(scope)
                        && (self.src[self.pos..].trim_start_matches(is_name_char).starts_with('[')
                            || (eqn_column.is_some() && self.column_if_first_on_line(self.pos) == eqn_column))
                    {
                        // The next equation, which has no outputs: a primitive's name
                        // followed by its parameters, or first on its line at this
                        // equation's column.
                        break;
                    }
                    self.operand(scope, &mut invars, &mut literals)?;
                }
                // `(2+1j):c64[]`: a complex literal.
                Some(c) if c.is_ascii_digit() || c == '-' || c == '[' || c == '(' => {
                    self.operand(scope, &mut invars, &mut literals)?
                }
                _ => break,
            }
        }
        let out_avals: Vec<Aval> = outvars.iter().map(|v| scope.jaxpr.aval(*v).clone()).collect();
        let primitive = Primitive::from_params(prim_name, params, &out_avals).map_err(|m| self.err_at(prim_pos, m))?;
        let (line, column) = self.line_col(start);
        let nth = self.eqns_on_line.entry(line).or_insert(0);
        let comment = match *nth {
            0 => self.comments.get(&line),
            k => self.comments.get(&(line + k)).filter(|(_, alone)| *alone),
        };
        *nth += 1;
        let source = match comment {
            Some((text, _)) => comment_source(text),
            None => SourceInfo { file: self.file.clone(), line: line as u32, column: column as u32, function: None },
        };
        let mut eqn = Eqn::new(primitive, invars, outvars, source);
        eqn.spelling = Spelling { params: spelling, literals, var_group: None };
        Ok(eqn)
    }

    /// One operand (or output), noting the text of a literal whose text is not its value's
    /// repr, by its index in `atoms`.
    fn operand(
        &mut self,
        scope: &Scope,
        atoms: &mut Vec<Atom>,
        literals: &mut Vec<(usize, String)>,
    ) -> Result<(), ParseError> {
        self.skip_ws();
        let start = self.pos;
        let atom = self.atom(scope)?;
        if let Atom::Lit(lit) = atom {
            let text = &self.src[start..self.pos];
            let value_text = text.split(':').next().unwrap_or(text);
            if value_text != literal_value_text(lit.value) {
                literals.push((atoms.len(), value_text.to_string()));
            }
        }
        atoms.push(atom);
        Ok(())
    }

    /// Whether the next token starts an equation without outputs: a known primitive's name
    /// followed by its parameters (`[`: a variable never is), or one that is not a variable
    /// in scope and is not a binder (`:`) or a parameter (`=`).
    fn peek_equation_without_outputs(&mut self, scope: &Scope) -> bool {
        self.skip_ws();
        let rest = &self.src[self.pos..];
        if !rest.starts_with(is_name_start) {
            return false;
        }
        let len = rest.find(|c| !(is_name_char(c) || c == '-')).unwrap_or(rest.len());
        let name = &rest[..len];
        let next = rest[len..].chars().next();
        PrimitiveKind::from_name(name).is_some()
            && (next == Some('[') || (!scope.names.contains_key(name) && !matches!(next, Some(':' | '='))))
    }

    /// Whether the next token is a literal's word followed by `:` (`nan:f32[]`).
    fn peek_word_literal(&mut self) -> bool {
        self.skip_ws();
        let rest = &self.src[self.pos..];
        WORD_LITERALS.iter().any(|w| rest.starts_with(w) && rest[w.len()..].starts_with(':'))
    }

    /// The column of `pos` if only spaces precede it on its line.
    fn column_if_first_on_line(&self, pos: usize) -> Option<usize> {
        // The line's start by binary search, and the scan stops at its first non-space, so
        // this costs little even on a very long line.
        let line = self.line_starts.partition_point(|&start| start <= pos);
        let before = &self.src[self.line_starts[line - 1]..pos];
        before.bytes().all(|b| b == b' ').then_some(before.len())
    }

    fn atom(&mut self, scope: &Scope) -> Result<Atom, ParseError> {
        self.skip_ws();
        let start = self.pos;
        let c = self.peek().ok_or_else(|| self.expected("a variable or literal"))?;
        let is_word_literal = self.peek_word_literal();
        if is_name_start(c) && !is_word_literal {
            let name = self.name().unwrap_or_default();
            return match scope.names.get(name) {
                Some(v) => Ok(Atom::Var(*v)),
                None if name == "_" => Err(self.err_at(start, "`_` cannot be used as an operand")),
                None => Err(self.err_at(start, format!("undefined variable `{name}`"))),
            };
        }
        if !(c.is_ascii_digit() || c == '-' || c == '[' || c == '(' || is_word_literal) {
            return Err(self.expected("a variable or literal"));
        }
        if c == '[' {
            return Err(
                self.err_at(start, "non-scalar literals (`[...]`) cannot be read back: their values are not printed")
            );
        }
        // A literal: VALUE ":" DTYPE "[]" (a complex VALUE in parentheses: `(2+1j)`).
        let len = match c {
            '(' => self.src[self.pos..].find(')').map(|i| i + 1).unwrap_or(self.src.len() - self.pos),
            _ => self.src[self.pos..]
                .find(|c: char| c == ':' || c.is_whitespace() || c == ')' || c == ',')
                .unwrap_or(self.src.len() - self.pos),
        };
        let value_text = &self.src[self.pos..self.pos + len];
        self.pos += len;
        self.expect(":", "`:` and a type after the literal")?;
        let aval = self.aval()?;
        if !aval.shape.is_empty() {
            return Err(self.err_at(start, format!("literal `{value_text}` must be a scalar, found type {aval}")));
        }
        let value = literal_value(aval.dtype, value_text)
            .ok_or_else(|| self.err_at(start, format!("`{value_text}` is not a valid {} literal", aval.dtype)))?;
        Ok(Atom::Lit(Literal::new(value)))
    }

    // ---- parameter values ----

    fn value(&mut self, key: &str) -> Result<Param, ParseError> {
        self.enter()?;
        let v = self.value_inner(key);
        self.depth -= 1;
        v
    }

    fn value_inner(&mut self, key: &str) -> Result<Param, ParseError> {
        self.skip_ws();
        let start = self.pos;
        let Some(c) = self.peek() else { return Err(self.expected("a parameter value")) };
        match c {
            '(' | '[' => {
                let close = if c == '(' { ")" } else { "]" };
                self.pos += 1;
                let mut items = Vec::new();
                let mut trailing_comma = false;
                while !self.eat(close) {
                    items.push(self.value(key)?);
                    trailing_comma = self.eat(",");
                    // A tuple of jaxprs (`branches=(...)`, JAX's `pp_jaxprs`) separates them by
                    // spaces or line breaks, not commas; each is inline or a hoisted name.
                    let jaxpr_follows = matches!(items.last(), Some(Param::Jaxpr(_)))
                        && self.peek().is_some_and(|c| c == '{' || is_name_start(c));
                    if !trailing_comma && !self.peek_str(close) && !jaxpr_follows {
                        return Err(self.expected(&format!("`,` or `{close}`")));
                    }
                }
                let one_jaxpr = matches!(items.as_slice(), [Param::Jaxpr(_)]);
                Ok(if c == '[' {
                    Param::List(items)
                } else if items.len() == 1 && !trailing_comma && !one_jaxpr {
                    items.pop().unwrap() // a parenthesised value, not a tuple (a jaxpr's is one)
                } else {
                    Param::Tuple(items)
                })
            }
            '{' => {
                let is_jaxpr = self.src[self.pos + 1..].trim_start().starts_with("lambda");
                if is_jaxpr {
                    let j = self.jaxpr()?;
                    Ok(Param::Jaxpr(Arc::new(j)))
                } else {
                    Err(self.err_at(start, "a set is only expected inside `frozenset(...)`"))
                }
            }
            '<' => {
                // Angle brackets nest: `<function f.<locals>.policy at 0xXXXX>`.
                let mut depth = 0usize;
                let end = self.src[self.pos..]
                    .char_indices()
                    .find(|&(_, c)| {
                        match c {
                            '<' => depth += 1,
                            '>' => depth -= 1,
                            _ => {}
                        }
                        depth == 0
                    })
                    .map(|(i, _)| i)
                    .ok_or_else(|| self.err_at(start, "unclosed `<`"))?;
                let text = &self.src[self.pos..self.pos + end + 1];
                if text.contains('\n') {
                    return Err(self.err_at(start, "unclosed `<` on this line"));
                }
                self.pos += end + 1;
                Ok(Param::Opaque(text.to_string()))
            }
            '\'' | '"' => Ok(Param::Str(self.py_string()?)),
            c if c.is_ascii_digit() || c == '-' => {
                let rest = &self.src[self.pos..];
                let len = 1 + rest[1..].find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len() - 1);
                // A float (`1.5`, `1e-05`, `-inf`) runs on past the integer digits.
                let float_len =
                    1 + rest[1..].find(|c: char| !(c.is_ascii_alphanumeric() || c == '.')).unwrap_or(rest.len() - 1);
                let float_len = float_len + exponent_sign_len(&rest[float_len..], &rest[..float_len]);
                if float_len > len {
                    let t = &rest[..float_len];
                    let x: f64 =
                        t.parse().map_err(|_| self.err_at(start, format!("expected a number, found `{t}`")))?;
                    self.pos += float_len;
                    return Ok(Param::Float(x));
                }
                let t = &rest[..len];
                let x: i64 = t.parse().map_err(|_| self.err_at(start, format!("expected an integer, found `{t}`")))?;
                self.pos += len;
                Ok(Param::Int(x))
            }
            c if is_name_start(c) => {
                let mut word = self.name().unwrap_or_default().to_string();
                while self.src[self.pos..].starts_with('.') && self.src[self.pos + 1..].starts_with(is_name_start) {
                    self.pos += 1;
                    word.push('.');
                    word.push_str(self.name().unwrap_or_default());
                }
                match word.as_str() {
                    "None" => return Ok(Param::None),
                    "True" => return Ok(Param::Bool(true)),
                    "False" => return Ok(Param::Bool(false)),
                    _ => {}
                }
                if self.src[self.pos..].starts_with('(') && OPAQUE_CALLS.contains(&word.as_str()) {
                    return self.opaque_call(start);
                }
                if self.src[self.pos..].starts_with('(') {
                    self.pos += 1;
                    if word == "frozenset" {
                        return self.frozenset_body();
                    }
                    let mut args = Vec::new();
                    let mut kwargs = Vec::new();
                    while !self.eat(")") {
                        let is_kw = self.peek().is_some_and(is_name_start) && self.char_after_name() == Some('=');
                        if is_kw {
                            let k = self.name().unwrap_or_default().to_string();
                            self.expect("=", "`=`")?;
                            kwargs.push((k, self.value(key)?));
                        } else {
                            let arg = self.value(key)?;
                            // `Mesh('data': 4, ...)` lists its axes as `key: value` entries.
                            if self.eat(":") {
                                args.push(Param::Entry(Box::new(arg), Box::new(self.value(key)?)));
                            } else {
                                args.push(arg);
                            }
                        }
                        if !self.eat(",") && !self.peek_str(")") {
                            return Err(self.expected("`,` or `)`"));
                        }
                    }
                    return Ok(Param::Call { func: word, args, kwargs });
                }
                // A reference to a hoisted jaxpr.
                if JAXPR_KEYS.contains(&key) {
                    return Ok(Param::Jaxpr(self.hoisted_jaxpr(&word, start)?));
                }
                Ok(Param::Word(word))
            }
            _ => Err(self.expected("a parameter value")),
        }
    }

    /// A Python repr `Name(...)` from `start`, kept as written up to its balanced closing
    /// parenthesis on the same line (quoted strings skipped), for the reprs whose insides
    /// are not parameter syntax (`OPAQUE_CALLS`).
    fn opaque_call(&mut self, start: usize) -> Result<Param, ParseError> {
        let mut depth = 0usize;
        let mut quote: Option<char> = None;
        for (i, c) in self.src[self.pos..].char_indices() {
            match (quote, c) {
                (_, '\n') => break,
                (Some(q), c) if c == q => quote = None,
                (Some(_), _) => {}
                (None, '\'' | '"') => quote = Some(c),
                (None, '(' | '[' | '{') => depth += 1,
                (None, ')' | ']' | '}') => {
                    depth -= 1;
                    if depth == 0 {
                        let end = self.pos + i + 1;
                        let text = self.src[start..end].to_string();
                        self.pos = end;
                        return Ok(Param::Opaque(text));
                    }
                }
                (None, _) => {}
            }
        }
        Err(self.err_at(start, "unclosed `(` on this line"))
    }

    /// After `frozenset(`: `{'a', 'b'})` or `)`.
    fn frozenset_body(&mut self) -> Result<Param, ParseError> {
        let mut items = Vec::new();
        if self.eat(")") {
            return Ok(Param::FrozenSet(items));
        }
        self.expect("{", "`{` in frozenset")?;
        while !self.eat("}") {
            match self.peek() {
                Some('\'' | '"') => items.push(Param::Str(self.py_string()?)),
                Some(c) if c.is_ascii_digit() => items.push(self.value("frozenset")?),
                _ => return Err(self.expected("a quoted name or an integer in the frozenset")),
            }
            if !self.eat(",") && !self.peek_str("}") {
                return Err(self.expected("`,` or `}` in the frozenset"));
            }
        }
        self.expect(")", "`)` to close frozenset")?;
        Ok(Param::FrozenSet(items))
    }

    fn py_string(&mut self) -> Result<String, ParseError> {
        self.skip_ws();
        let start = self.pos;
        let quote = self.src[self.pos..].chars().next().unwrap_or('\'');
        self.pos += 1;
        let mut out = String::new();
        let mut chars = self.src[self.pos..].char_indices();
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => match chars.next() {
                    Some((_, 'n')) => out.push('\n'),
                    Some((_, 't')) => out.push('\t'),
                    Some((_, 'r')) => out.push('\r'),
                    Some((_, e)) => out.push(e),
                    None => break,
                },
                '\n' => break,
                c if c == quote => {
                    self.pos += i + 1;
                    return Ok(out);
                }
                c => out.push(c),
            }
        }
        Err(self.err_at(start, "unterminated string"))
    }
}

/// The value of a literal of `dtype` written `text`, as Python writes it (`2.0`, `1e-05`,
/// `nan`, `-inf`, `7`, `True`); `None` if `text` is not one, or is out of range.
fn literal_value(dtype: DType, text: &str) -> Option<LitValue> {
    if dtype == DType::Bool {
        return match text {
            "True" => Some(LitValue::from_f64(dtype, 1.0)),
            "False" => Some(LitValue::from_f64(dtype, 0.0)),
            _ => None,
        };
    }
    if dtype.is_complex() {
        let (re, im) = crate::syntax::parse_py_complex(text)?;
        return Some(match dtype {
            DType::C64 => LitValue::C64(crate::array::c64::new(re as f32, im as f32)),
            _ => LitValue::C128(crate::array::c128::new(re, im)),
        });
    }
    if dtype.is_float() {
        let x: f64 = match text {
            "inf" => f64::INFINITY,
            "-inf" => f64::NEG_INFINITY,
            "nan" | "-nan" => f64::NAN,
            t if t.chars().all(|c| c.is_ascii_digit() || "+-.eE".contains(c)) => t.parse().ok()?,
            _ => return None,
        };
        return Some(LitValue::from_f64(dtype, x));
    }
    // An integer, exactly, in its dtype's range (no literal of a key).
    let x: i128 = text.parse().ok()?;
    Some(match dtype {
        DType::I8 => LitValue::I8(x.try_into().ok()?),
        DType::I16 => LitValue::I16(x.try_into().ok()?),
        DType::I32 => LitValue::I32(x.try_into().ok()?),
        DType::I64 => LitValue::I64(x.try_into().ok()?),
        DType::U8 => LitValue::U8(x.try_into().ok()?),
        DType::U32 => LitValue::U32(x.try_into().ok()?),
        DType::F32 | DType::F64 | DType::BF16 | DType::F16 | DType::Bool | DType::Key | DType::C64 | DType::C128 => {
            return None
        }
    })
}

/// `f32, f64, bf16, ...`: the dtypes an aval may have, for error messages.
fn dtype_names() -> String {
    DType::ALL.map(DType::short_name).join(", ")
}

/// After a number's leading part `head` ending in `e` (`1e`), the length of an exponent's
/// sign and digits in `rest` (`-05`), else 0.
fn exponent_sign_len(rest: &str, head: &str) -> usize {
    if !head.ends_with(['e', 'E']) || !rest.starts_with(['-', '+']) {
        return 0;
    }
    1 + rest[1..].find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len() - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A parameter value read as key `key`, with the hoisted jaxprs of `hoisted` in scope.
    fn value(key: &str, text: &str, hoisted: &str) -> Result<Param, ParseError> {
        let src = format!("{hoisted}{text}");
        let line_starts = std::iter::once(0).chain(src.match_indices('\n').map(|(i, _)| i + 1)).collect();
        let mut p = Parser {
            src: &src,
            pos: 0,
            file: Arc::from("t"),
            hoisted: HashMap::new(),
            depth: 0,
            line_starts,
            var_groups: HashMap::new(),
            comments: HashMap::new(),
            eqns_on_line: HashMap::new(),
        };
        // Register the hoisted definitions as `file_` does, then read the value.
        while p.peek_keyword("let") {
            p.pos += 3;
            let name = p.name().unwrap().to_string();
            p.expect("=", "`=`")?;
            p.skip_ws();
            let start = p.pos;
            p.skip_braced()?;
            assert!(p.eat_keyword("in"));
            p.hoisted.insert(name, Hoisted { start, state: HoistState::Unparsed });
        }
        p.value(key)
    }

    fn jaxprs(p: &Param) -> Vec<usize> {
        match p {
            Param::Tuple(xs) => xs
                .iter()
                .map(|x| match x {
                    Param::Jaxpr(j) => j.eqns.len(),
                    other => panic!("expected a jaxpr, found {other}"),
                })
                .collect(),
            other => panic!("expected a tuple, found {other}"),
        }
    }

    /// `cond`'s `branches` as JAX prints them: one per line, or on one line with a hoisted
    /// name among them (both texts are JAX's).
    #[test]
    fn a_tuple_of_jaxprs_has_no_commas() {
        let broken = "(
        { lambda ; s:f32[6]. let t:f32[6] = cos s; u:f32[6] = sub t s in (u,) }
        { lambda ; v:f32[6]. let  in (v,) }
      )";
        assert_eq!(jaxprs(&value("branches", broken, "").unwrap()), [2, 0]);
        let hoisted = "let jaxpr = { lambda ; a:f32[]. let b:f32[] = sin a in (b,) } in\n";
        let flat = "({ lambda ; q:f32[]. let r:f32[] = cos q in (r,) } jaxpr)";
        assert_eq!(jaxprs(&value("branches", flat, hoisted).unwrap()), [1, 1]);
        // One jaxpr in parentheses is a tuple of one: JAX never parenthesises a lone jaxpr.
        assert_eq!(jaxprs(&value("branches", "(jaxpr)", hoisted).unwrap()), [1]);
        let err = value("branches", "({ lambda ; a:f32[]. let  in (a,) } 3)", "").unwrap_err();
        assert!(err.message.contains("expected `,` or `)`"), "{err}");
    }
}
