//! The jaxpr parser: reads what JAX prints (and what [`crate::print`] writes).
//!
//! Grammar (whitespace, including newlines, separates tokens anywhere):
//!
//! ```text
//! file    := ("let" NAME "=" jaxpr "in")* jaxpr
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
//! Every error names the line and column, what was expected and what was found. The
//! parser never panics and always advances, so it terminates on any input.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use crate::jaxpr::{Atom, Eqn, Jaxpr, LitValue, Literal, SourceInfo, Var, VarDecl};
use crate::param::Param;
use crate::primitive::{Primitive, PrimitiveKind};
use crate::types::{Aval, DType, MemorySpace};

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
    let mut p = Parser { src, pos: 0, file: Arc::from(file), shared: HashMap::new(), depth: 0, line_starts };
    p.file_()
}

/// Nesting limit for jaxprs and parameter values, so hostile input cannot overflow the stack.
const MAX_DEPTH: usize = 64;

struct Parser<'s> {
    src: &'s str,
    pos: usize,
    file: Arc<str>,
    shared: HashMap<String, Arc<Jaxpr>>,
    depth: usize,
    /// The byte offset at which each line starts, so that an equation's line and column
    /// cost a binary search rather than a scan from the start of the text (which made
    /// parsing quadratic in the number of equations).
    line_starts: Vec<usize>,
}

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
        ParseError { line, column, message: message.into() }
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

    fn skip_ws(&mut self) {
        let rest = &self.src[self.pos..];
        self.pos += rest.len() - rest.trim_start().len();
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
        while self.peek_keyword("let") {
            let start = self.pos;
            self.pos += 3;
            let name = self.name().ok_or_else(|| self.expected("a name for the hoisted jaxpr"))?;
            if self.shared.contains_key(name) {
                return Err(self.err_at(start, format!("jaxpr `{name}` is defined twice")));
            }
            self.expect("=", "`=`")?;
            let j = self.jaxpr()?;
            if !self.eat_keyword("in") {
                return Err(self.expected("`in` after a hoisted jaxpr"));
            }
            self.shared.insert(name.to_string(), Arc::new(j));
        }
        let j = self.jaxpr()?;
        if self.peek().is_some() {
            return Err(self.expected("end of input after the jaxpr"));
        }
        Ok(j)
    }

    fn jaxpr(&mut self) -> Result<Jaxpr, ParseError> {
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
        while !self.eat(")") {
            outvars.push(self.atom(&scope)?);
            if !self.eat(",") && !self.peek_str(")") {
                return Err(self.expected("`,` or `)` in the outputs"));
            }
        }
        scope.jaxpr.outvars = outvars;
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
        let dt = self.name().ok_or_else(|| self.expected("a dtype (f32, f64, i32, bool)"))?;
        let dtype = DType::from_short_name(dt)
            .ok_or_else(|| self.err_at(start, format!("expected a dtype (f32, f64, i32, bool), found `{dt}`")))?;
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
            if !self.eat(",") && !self.peek_str("]") {
                return Err(self.expected("`,` or `]` in the shape"));
            }
        }
        Ok(Aval { dtype, shape, memory_space })
    }

    fn eqn(&mut self, scope: &mut Scope) -> Result<Eqn, ParseError> {
        self.skip_ws();
        let start = self.pos;
        let outvars = self.binders(scope)?;
        if outvars.is_empty() {
            return Err(self.expected("an equation (`name:type = primitive ...`)"));
        }
        self.expect("=", "`=` after the equation's binders")?;
        self.skip_ws();
        let prim_pos = self.pos;
        let prim_name = self.name().ok_or_else(|| self.expected("a primitive name"))?;
        if PrimitiveKind::from_name(prim_name).is_none() {
            return Err(self.err_at(prim_pos, format!("unknown primitive `{prim_name}`")));
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
                let value = self.value(key)?;
                let raw = &self.src[vstart..self.pos];
                if raw.contains("np.") {
                    spelling.push((key.to_string(), raw.to_string()));
                }
                params.push((key.to_string(), value));
            }
        }
        let mut invars = Vec::new();
        loop {
            match self.peek() {
                Some(c) if is_name_start(c) => {
                    let after = self.char_after_name();
                    let word_is_literal = {
                        let rest = &self.src[self.pos..];
                        ["True", "False", "inf", "nan"]
                            .iter()
                            .any(|w| rest.starts_with(w) && !rest[w.len()..].starts_with(is_name_char))
                    };
                    if after == Some(':') && word_is_literal {
                        invars.push(self.atom(scope)?);
                    } else if after == Some(':') || after == Some('=') {
                        break; // the next equation's binders
                    } else if self.peek_keyword("in") && after == Some('(') {
                        break;
                    } else {
                        invars.push(self.atom(scope)?);
                    }
                }
                Some(c) if c.is_ascii_digit() || c == '-' || c == '[' => invars.push(self.atom(scope)?),
                _ => break,
            }
        }
        let out_avals: Vec<Aval> = outvars.iter().map(|v| scope.jaxpr.aval(*v).clone()).collect();
        let primitive = Primitive::from_params(prim_name, params, &out_avals).map_err(|m| self.err_at(prim_pos, m))?;
        let (line, column) = self.line_col(start);
        let source = SourceInfo { file: self.file.clone(), line: line as u32, column: column as u32, function: None };
        let mut eqn = Eqn::new(primitive, invars, outvars, source);
        eqn.spelling = spelling;
        Ok(eqn)
    }

    fn atom(&mut self, scope: &Scope) -> Result<Atom, ParseError> {
        self.skip_ws();
        let start = self.pos;
        let c = self.peek().ok_or_else(|| self.expected("a variable or literal"))?;
        let is_word_literal = ["True", "False", "inf", "nan"].iter().any(|w| {
            let rest = &self.src[self.pos..];
            rest.starts_with(w) && !rest[w.len()..].starts_with(is_name_char)
        });
        if is_name_start(c) && !is_word_literal {
            let name = self.name().unwrap_or_default();
            return match scope.names.get(name) {
                Some(v) => Ok(Atom::Var(*v)),
                None if name == "_" => Err(self.err_at(start, "`_` cannot be used as an operand")),
                None => Err(self.err_at(start, format!("undefined variable `{name}`"))),
            };
        }
        if !(c.is_ascii_digit() || c == '-' || c == '[' || is_word_literal) {
            return Err(self.expected("a variable or literal"));
        }
        if c == '[' {
            return Err(
                self.err_at(start, "non-scalar literals (`[...]`) cannot be read back: their values are not printed")
            );
        }
        // A literal: VALUE ":" DTYPE "[]".
        let len = self.src[self.pos..]
            .find(|c: char| c == ':' || c.is_whitespace() || c == ')' || c == ',')
            .unwrap_or(self.src.len() - self.pos);
        let value_text = &self.src[self.pos..self.pos + len];
        self.pos += len;
        self.expect(":", "`:` and a type after the literal")?;
        let aval = self.aval()?;
        if !aval.shape.is_empty() {
            return Err(self.err_at(start, format!("literal `{value_text}` must be a scalar, found type {aval}")));
        }
        let bad = || format!("`{value_text}` is not a valid {} literal", aval.dtype);
        let value = match aval.dtype {
            DType::F32 | DType::F64 => {
                let x: f64 = match value_text {
                    "inf" => f64::INFINITY,
                    "-inf" => f64::NEG_INFINITY,
                    "nan" | "-nan" => f64::NAN,
                    t if t.chars().all(|c| c.is_ascii_digit() || "+-.eE".contains(c)) => {
                        t.parse().map_err(|_| self.err_at(start, bad()))?
                    }
                    _ => return Err(self.err_at(start, bad())),
                };
                LitValue::from_f64(aval.dtype, x)
            }
            DType::I32 => LitValue::I32(value_text.parse().map_err(|_| self.err_at(start, bad()))?),
            DType::Bool => match value_text {
                "True" => LitValue::Bool(true),
                "False" => LitValue::Bool(false),
                _ => return Err(self.err_at(start, bad())),
            },
        };
        Ok(Atom::Lit(Literal { value }))
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
                    // `pp_jaxprs` (`cond`'s `branches=(`) separates jaxprs, written out or by
                    // the name of a hoisted one, by whitespace only.
                    let jaxpr_follows = matches!(items.last(), Some(Param::Jaxpr(_))) && {
                        self.skip_ws();
                        matches!(self.peek(), Some(c) if c == '{' || c == '_' || c.is_ascii_alphabetic())
                    };
                    if !trailing_comma && !jaxpr_follows && !self.peek_str(close) {
                        return Err(self.expected(&format!("`,` or `{close}`")));
                    }
                }
                Ok(if c == '[' {
                    Param::List(items)
                } else if items.len() == 1 && !trailing_comma {
                    items.pop().unwrap() // a parenthesised value, not a tuple
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
                let end = self.src[self.pos..].find('>').ok_or_else(|| self.err_at(start, "unclosed `<`"))?;
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
                            args.push(self.value(key)?);
                        }
                        if !self.eat(",") && !self.peek_str(")") {
                            return Err(self.expected("`,` or `)`"));
                        }
                    }
                    return Ok(Param::Call { func: word, args, kwargs });
                }
                // A reference to a hoisted jaxpr.
                if matches!(key, "jaxpr" | "call_jaxpr" | "branches" | "body_jaxpr" | "cond_jaxpr") {
                    if let Some(j) = self.shared.get(&word) {
                        return Ok(Param::Jaxpr(j.clone()));
                    }
                    return Err(self.err_at(start, format!("`{word}` is not a jaxpr defined with `let {word} = ...`")));
                }
                Ok(Param::Word(word))
            }
            _ => Err(self.expected("a parameter value")),
        }
    }

    /// After `frozenset(`: `{'a', 'b'})` or `)`.
    fn frozenset_body(&mut self) -> Result<Param, ParseError> {
        let mut items = Vec::new();
        if self.eat(")") {
            return Ok(Param::FrozenSet(items));
        }
        self.expect("{", "`{` in frozenset")?;
        while !self.eat("}") {
            if !matches!(self.peek(), Some('\'' | '"')) {
                return Err(self.expected("a quoted name in the frozenset"));
            }
            items.push(self.py_string()?);
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

fn is_name_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_'
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}
