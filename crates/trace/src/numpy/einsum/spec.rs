//! Reading an einsum's subscripts as opt_einsum's `parse_einsum_input` and
//! `contract_path` do: `...` becomes unused letters (the first ones not in the spec, the
//! last of them for the operand with fewer axes), an implicit output is the letters that
//! appear once, sorted (after the ellipsis letters), and every letter gets one size (a size
//! 1 broadcasts against another size).

/// One einsum with its letters resolved: `inputs[k]` names operand `k`'s axes, `output`
/// the result's, and `sizes` each letter's size.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Spec {
    pub inputs: Vec<Vec<char>>,
    pub output: Vec<char>,
    pub sizes: Vec<(char, usize)>,
}

const SYMBOLS: &str = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";

/// opt_einsum's `get_symbol(i)`: the 52 letters, then code points from 192 on.
fn symbol(i: usize) -> char {
    if i < 52 {
        SYMBOLS.as_bytes()[i] as char
    } else {
        let code = if i >= 55_296 { i + 2048 } else { i + 140 };
        char::from_u32(code as u32).unwrap_or('\u{fffd}')
    }
}

/// `n` symbols not in `used`, in `get_symbol` order.
fn unused_symbols(used: &[char], n: usize) -> Vec<char> {
    (0..).map(symbol).filter(|c| !used.contains(c)).take(n).collect()
}

/// The letters appearing exactly once in `subscripts`, sorted (`find_output_str`).
fn implicit_output(subscripts: &[char]) -> Vec<char> {
    let mut once: Vec<char> = subscripts
        .iter()
        .copied()
        .filter(|&c| c != ',' && subscripts.iter().filter(|&&d| d == c).count() == 1)
        .collect();
    once.sort_unstable();
    once
}

/// Parses `subscripts` for operands of `shapes`: the letters of each operand and of the
/// output, and each letter's size, or what is wrong with them.
pub(crate) fn parse(subscripts: &str, shapes: &[&[usize]]) -> Result<Spec, String> {
    if shapes.is_empty() {
        return Err("no operands".into());
    }
    let chars: Vec<char> = subscripts.chars().filter(|c| !c.is_whitespace()).collect();
    let text: String = chars.iter().collect();
    if let Some(&c) = chars.iter().find(|&&c| !(c.is_ascii_alphabetic() || ",.->".contains(c))) {
        return Err(format!("subscripts must be letters, `,`, `...` and one `->`, found {c:?}"));
    }
    let arrows = text.matches("->").count();
    if (text.contains('-') || text.contains('>'))
        && (arrows != 1 || text.matches('-').count() > 1 || text.matches('>').count() > 1)
    {
        return Err("subscripts can contain only one `->`".into());
    }
    let (ins, out) = match text.split_once("->") {
        Some((i, o)) => (i.to_string(), Some(o.to_string())),
        None => (text.clone(), None),
    };
    let mut inputs: Vec<Vec<char>> = ins.split(',').map(|s| s.chars().collect()).collect();
    if inputs.len() != shapes.len() {
        return Err(format!("{} operand subscripts for {} operands", inputs.len(), shapes.len()));
    }
    let mut output: Option<Vec<char>> = out.map(|o| o.chars().collect());
    if text.contains('.') {
        let used: Vec<char> = chars.iter().copied().filter(char::is_ascii_alphabetic).collect();
        let max_rank = shapes.iter().map(|s| s.len()).max().unwrap_or(0);
        let ellipsis = unused_symbols(&used, max_rank);
        let mut longest = 0;
        for (k, (term, shape)) in inputs.iter_mut().zip(shapes).enumerate() {
            if !term.contains(&'.') {
                continue;
            }
            let s: String = term.iter().collect();
            if s.matches('.').count() != 3 || s.matches("...").count() != 1 {
                return Err(format!("operand {k}'s subscripts {s:?} have a `.` that is not one `...`"));
            }
            let count = if shape.is_empty() { 0 } else { shape.len() as isize - (term.len() as isize - 3) };
            if count < 0 {
                return Err(format!("operand {k}'s subscripts {s:?} name more axes than its shape {shape:?} has"));
            }
            longest = longest.max(count as usize);
            let fill: String = ellipsis[ellipsis.len() - count as usize..].iter().collect();
            *term = s.replacen("...", &fill, 1).chars().collect();
        }
        let out_ellipsis: Vec<char> = ellipsis[ellipsis.len() - longest..].to_vec();
        output = Some(match output {
            Some(o) => {
                let s: String = o.iter().collect();
                let fill: String = out_ellipsis.iter().collect();
                s.replace("...", &fill).chars().collect()
            }
            None => {
                let all: Vec<char> = inputs.join(&',');
                let mut normal: Vec<char> =
                    implicit_output(&all).into_iter().filter(|c| !out_ellipsis.contains(c)).collect();
                normal.dedup();
                out_ellipsis.iter().copied().chain(normal).collect()
            }
        });
    }
    let output = output.unwrap_or_else(|| implicit_output(&inputs.join(&',')));
    for (k, &c) in output.iter().enumerate() {
        if c == '.' {
            return Err("the output has `...` but no operand does".into());
        }
        if output[..k].contains(&c) {
            return Err(format!("output subscript {c:?} appears more than once"));
        }
        if !inputs.iter().any(|t| t.contains(&c)) {
            return Err(format!("output subscript {c:?} is not in any operand's subscripts"));
        }
    }
    let mut sizes: Vec<(char, usize)> = Vec::new();
    for (k, (term, shape)) in inputs.iter().zip(shapes).enumerate() {
        if term.len() != shape.len() {
            let s: String = term.iter().collect();
            return Err(format!("operand {k} has {} axes {shape:?} but subscripts {s:?}", shape.len()));
        }
        for (&c, &d) in term.iter().zip(shape.iter()) {
            match sizes.iter_mut().find(|(l, _)| *l == c) {
                Some((_, s)) if *s == 1 => *s = d,
                Some((_, s)) if d != 1 && *s != d => {
                    return Err(format!("subscript {c:?} has size {s} in an earlier operand but {d} in operand {k}"));
                }
                Some(_) => {}
                None => sizes.push((c, d)),
            }
        }
    }
    Ok(Spec { inputs, output, sizes })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(s: &str, shapes: &[&[usize]]) -> (Vec<String>, String) {
        let spec = parse(s, shapes).unwrap();
        (spec.inputs.iter().map(|t| t.iter().collect()).collect(), spec.output.iter().collect())
    }

    #[test]
    fn implicit_outputs_are_the_letters_seen_once_sorted() {
        assert_eq!(parsed("ij,jk", &[&[2, 3], &[3, 4]]), (vec!["ij".into(), "jk".into()], "ik".into()));
        assert_eq!(parsed("ba", &[&[2, 3]]).1, "ab");
        assert_eq!(parsed("ii", &[&[3, 3]]).1, "");
    }

    #[test]
    fn ellipses_become_the_first_unused_letters() {
        // What opt_einsum's `parse_einsum_input` makes of them (max rank 3: `b`, `c`, `d`).
        let (ins, out) = parsed("...a,...a->...", &[&[4, 4], &[4, 4, 4]]);
        assert_eq!((ins, out), (vec!["da".into(), "cda".into()], "cd".into()));
        let (ins, out) = parsed("...ij,...jk", &[&[5, 2, 3], &[3, 4]]);
        assert_eq!((ins, out), (vec!["cij".into(), "jk".into()], "cik".into()));
        let (ins, out) = parsed("...,...", &[&[], &[3]]);
        assert_eq!((ins, out), (vec!["".into(), "a".into()], "a".into()));
    }

    #[test]
    fn bad_subscripts_say_what_is_wrong() {
        let err = |s: &str, shapes: &[&[usize]]| parse(s, shapes).unwrap_err();
        assert_eq!(err("ij,jk->ik", &[&[2, 3]]), "2 operand subscripts for 1 operands");
        assert_eq!(
            err("ij,jk->ik", &[&[2, 3], &[4, 5]]),
            "subscript 'j' has size 3 in an earlier operand but 4 in operand 1"
        );
        assert_eq!(err("ij->ix", &[&[2, 3]]), "output subscript 'x' is not in any operand's subscripts");
        assert_eq!(err("ij->ii", &[&[2, 3]]), "output subscript 'i' appears more than once");
        assert_eq!(err("i1->i", &[&[2, 3]]), "subscripts must be letters, `,`, `...` and one `->`, found '1'");
        assert_eq!(err("ij->i->j", &[&[2, 3]]), "subscripts can contain only one `->`");
        assert_eq!(err("ijk", &[&[2, 3]]), "operand 0 has 2 axes [2, 3] but subscripts \"ijk\"");
        assert_eq!(err("..i.", &[&[2, 3]]), "operand 0's subscripts \"..i.\" have a `.` that is not one `...`");
        assert_eq!(
            err("...ijk", &[&[2, 3]]),
            "operand 0's subscripts \"...ijk\" name more axes than its shape [2, 3] has"
        );
        assert_eq!(err("ij", &[]), "no operands");
    }
}
