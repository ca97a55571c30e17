//! A small pretty-printing document language with the layout JAX's printer uses.
//!
//! A `group` prints flat (its breaks as their text) when its own flat text fits in what is
//! left of the line; otherwise its direct breaks become newlines indented by the enclosing
//! `nest`. Unlike Lindig's algorithm, only the group itself is measured, not the text that
//! follows it on the line: that is how JAX decides, and matching it is what makes printed
//! jaxprs byte-identical to JAX's.

#[derive(Clone, Debug)]
pub enum Doc {
    Nil,
    Text(String),
    Concat(Vec<Doc>),
    /// A break: its text when flat, a newline and indentation when broken.
    Brk(&'static str),
    Group(Box<Doc>),
    Nest(usize, Box<Doc>),
}

pub fn text(s: impl Into<String>) -> Doc {
    Doc::Text(s.into())
}

pub fn concat(docs: Vec<Doc>) -> Doc {
    Doc::Concat(docs)
}

pub fn brk(s: &'static str) -> Doc {
    Doc::Brk(s)
}

pub fn group(d: Doc) -> Doc {
    Doc::Group(Box::new(d))
}

pub fn nest(n: usize, d: Doc) -> Doc {
    Doc::Nest(n, Box::new(d))
}

/// `docs` separated by `sep`.
pub fn join(sep: Doc, docs: Vec<Doc>) -> Doc {
    let mut out = Vec::with_capacity(docs.len() * 2);
    for (i, d) in docs.into_iter().enumerate() {
        if i > 0 {
            out.push(sep.clone());
        }
        out.push(d);
    }
    match out.len() {
        0 => Doc::Nil,
        1 => out.pop().unwrap(),
        _ => Doc::Concat(out),
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Flat,
    Break,
}

/// Lays the document out in `width` columns.
pub fn format(doc: &Doc, width: usize) -> String {
    let mut out = String::new();
    let mut col: usize = 0;
    let mut agenda: Vec<(usize, Mode, &Doc)> = vec![(0, Mode::Break, doc)];
    while let Some((indent, mode, d)) = agenda.pop() {
        match d {
            Doc::Nil => {}
            Doc::Text(s) => {
                out.push_str(s);
                col += s.chars().count();
            }
            Doc::Concat(ds) => agenda.extend(ds.iter().rev().map(|c| (indent, mode, c))),
            Doc::Brk(s) => match mode {
                Mode::Flat => {
                    out.push_str(s);
                    col += s.chars().count();
                }
                Mode::Break => {
                    out.push('\n');
                    out.extend(std::iter::repeat_n(' ', indent));
                    col = indent;
                }
            },
            Doc::Nest(n, child) => agenda.push((indent + n, mode, child)),
            Doc::Group(child) => {
                let m = if mode == Mode::Flat || fits(child, width as isize - col as isize) {
                    Mode::Flat
                } else {
                    Mode::Break
                };
                agenda.push((indent, m, child));
            }
        }
    }
    out
}

/// Whether `doc`, laid out flat, takes at most `room` columns.
fn fits(doc: &Doc, mut room: isize) -> bool {
    let mut stack = vec![doc];
    while let Some(d) = stack.pop() {
        if room < 0 {
            return false;
        }
        match d {
            Doc::Nil => {}
            Doc::Text(s) => room -= s.chars().count() as isize,
            Doc::Brk(s) => room -= s.chars().count() as isize,
            Doc::Concat(ds) => stack.extend(ds.iter().rev()),
            Doc::Nest(_, c) | Doc::Group(c) => stack.push(c),
        }
    }
    room >= 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_breaks_only_when_it_does_not_fit() {
        let d = group(nest(2, concat(vec![text("let"), brk(" "), text("x = 1"), brk("; "), text("y = 2")])));
        assert_eq!(format(&d, 80), "let x = 1; y = 2");
        assert_eq!(format(&d, 10), "let\n  x = 1\n  y = 2");
    }

    #[test]
    fn only_the_group_itself_is_measured() {
        // The trailing text does not count against the group: JAX's rule.
        let d = concat(vec![group(concat(vec![text("aaaa"), brk(" "), text("bbbb")])), text(" cccccccc")]);
        assert_eq!(format(&d, 10), "aaaa bbbb cccccccc");
    }
}
