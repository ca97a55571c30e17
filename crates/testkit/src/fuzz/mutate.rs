//! The text mutator and generators of the fuzz targets: mutations of real programs and
//! JSON inputs (character flips, token deletions, duplications and swaps, splices between
//! seeds, huge numbers, deep nesting, odd unicode, truncation), and texts generated from
//! scratch (jaxprs from a skeleton of the grammar, JSON arrays from random trees).
//!
//! Everything is driven by one seeded [`Prng`], so a seed reproduces a run exactly.

/// A small, fast, seeded generator (splitmix64).
#[derive(Clone, Debug)]
pub struct Prng(pub u64);

impl Prng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    pub fn chance(&mut self, one_in: usize) -> bool {
        self.below(one_in) == 0
    }

    pub fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len())]
    }
}

/// Numbers that sit on or past a boundary: of `u32`, `u64`, `i64`, `usize`, `f32`, `f64`.
pub const HUGE_NUMBERS: [&str; 22] = [
    "0",
    "-0",
    "-1",
    "4294967295",
    "4294967296",
    "9223372036854775807",
    "9223372036854775808",
    "18446744073709551615",
    "18446744073709551616",
    "99999999999999999999999999999999",
    "1e308",
    "1e309",
    "-1e999",
    "3.5e38",
    "1e-400",
    "0.1e1",
    "00",
    "1_000",
    "0x10",
    "NaN",
    "1.",
    "-",
];

/// Characters that are not ASCII or not printable: a NUL, a BOM, a zero-width space,
/// right-to-left override, a combining mark, a character outside the BMP, CR, tab, the
/// replacement character, a full-width digit and a Greek letter.
pub const ODD_CHARS: [char; 13] =
    ['\0', '\u{feff}', '\u{200b}', '\u{202e}', '\u{301}', '𝔸', '\r', '\t', '\u{fffd}', '１', 'λ', '\u{7f}', 'é'];

/// ASCII characters a jaxpr or a JSON text is made of.
const PUNCT: &[u8] = b" \n{}[]()<>,;:=.'\"_-+0123456789abcefilnprstuxyz";

/// The text cut into tokens: runs of word characters, runs of whitespace, and single other
/// characters. Each token is a byte range of `text` on character boundaries.
pub fn tokens(text: &str) -> Vec<(usize, usize)> {
    let class = |c: char| {
        if c.is_alphanumeric() || c == '_' || c == '.' {
            0
        } else if c.is_whitespace() {
            1
        } else {
            2
        }
    };
    let mut out = Vec::new();
    let mut start = 0;
    let mut prev = None;
    for (i, c) in text.char_indices() {
        let k = class(c);
        if prev.is_some() && (prev != Some(k) || k == 2) {
            out.push((start, i));
            start = i;
        }
        prev = Some(k);
    }
    if start < text.len() {
        out.push((start, text.len()));
    }
    out
}

/// A character boundary of `text` near `at`.
fn boundary(text: &str, mut at: usize) -> usize {
    at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

/// One to four mutations of `text`, with `others` (the seeds) to splice from and `words`
/// (the tokens seen in the seeds) to substitute.
pub fn mutate(rng: &mut Prng, text: &str, others: &[String], words: &[String]) -> String {
    let mut s = text.to_string();
    for _ in 0..1 + rng.below(4) {
        s = mutate_once(rng, &s, others, words);
    }
    s
}

fn mutate_once(rng: &mut Prng, s: &str, others: &[String], words: &[String]) -> String {
    let toks = tokens(s);
    let at = boundary(s, rng.below(s.len() + 1));
    let tok = if toks.is_empty() { None } else { Some(*rng.pick(&toks)) };
    let mut out = String::with_capacity(s.len() + 16);
    match rng.below(12) {
        // A character replaced by an ASCII one.
        0 => {
            let c = *rng.pick(PUNCT) as char;
            let end = s[at..].chars().next().map_or(at, |ch| at + ch.len_utf8());
            out.push_str(&s[..at]);
            out.push(c);
            out.push_str(&s[end..]);
        }
        // A byte flipped (the text read back lossily, as a file's bytes would be).
        1 => {
            let mut bytes = s.as_bytes().to_vec();
            if !bytes.is_empty() {
                let i = rng.below(bytes.len());
                bytes[i] ^= 1 << rng.below(8);
            }
            out = String::from_utf8_lossy(&bytes).into_owned();
        }
        // A token deleted.
        2 => match tok {
            Some((a, b)) => {
                out.push_str(&s[..a]);
                out.push_str(&s[b..]);
            }
            None => out.push_str(s),
        },
        // A token duplicated.
        3 => match tok {
            Some((a, b)) => {
                out.push_str(&s[..b]);
                out.push_str(&s[a..]);
            }
            None => out.push_str(s),
        },
        // Two tokens swapped.
        4 => match (tok, toks.is_empty()) {
            (Some((a, b)), false) => {
                let (c, d) = *rng.pick(&toks);
                let ((a, b), (c, d)) = if a <= c { ((a, b), (c, d)) } else { ((c, d), (a, b)) };
                if b <= c {
                    out.push_str(&s[..a]);
                    out.push_str(&s[c..d]);
                    out.push_str(&s[b..c]);
                    out.push_str(&s[a..b]);
                    out.push_str(&s[d..]);
                } else {
                    out.push_str(s);
                }
            }
            _ => out.push_str(s),
        },
        // A token replaced by a word of the seeds (a primitive, a parameter, a dtype).
        5 => match tok {
            Some((a, b)) if !words.is_empty() => {
                out.push_str(&s[..a]);
                out.push_str(rng.pick(words).as_str());
                out.push_str(&s[b..]);
            }
            _ => out.push_str(s),
        },
        // A slice of another seed spliced in (inserted, or replacing a range).
        6 => {
            let other = rng.pick(others);
            let x = boundary(other, rng.below(other.len() + 1));
            let y = boundary(other, x + rng.below(200));
            out.push_str(&s[..at]);
            out.push_str(&other[x..y.max(x)]);
            let skip = if rng.chance(2) { boundary(s, at + rng.below(64)) } else { at };
            out.push_str(&s[skip..]);
        }
        // A number replaced by a huge or malformed one.
        7 => {
            let digits: Vec<&(usize, usize)> =
                toks.iter().filter(|(a, _)| s[*a..].starts_with(|c: char| c.is_ascii_digit())).collect();
            let huge = rng.pick(&HUGE_NUMBERS);
            match digits.is_empty() {
                false => {
                    let &(a, b) = *rng.pick(&digits);
                    out.push_str(&s[..a]);
                    out.push_str(huge);
                    out.push_str(&s[b..]);
                }
                true => {
                    out.push_str(&s[..at]);
                    out.push_str(huge);
                    out.push_str(&s[at..]);
                }
            }
        }
        // Deep nesting: many openers (and sometimes their closers) at one place.
        8 => {
            let (open, close) =
                *rng.pick(&[("(", ")"), ("[", "]"), ("{", "}"), ("<", ">"), ("{ lambda ; . let in (", ") }")]);
            let n = (*rng.pick(&[8usize, 63, 64, 65, 129, 1000, 20000])).min(40_000 / open.len());
            out.push_str(&s[..at]);
            out.push_str(&open.repeat(n));
            if rng.chance(2) {
                out.push_str(&close.repeat(n));
            }
            out.push_str(&s[at..]);
        }
        // Odd unicode inserted.
        9 => {
            out.push_str(&s[..at]);
            out.push(*rng.pick(&ODD_CHARS));
            out.push_str(&s[at..]);
        }
        // Truncated.
        10 => out.push_str(&s[..at]),
        // A range deleted.
        _ => {
            let end = boundary(s, at + rng.below(40));
            out.push_str(&s[..at]);
            out.push_str(&s[end.max(at)..]);
        }
    }
    out
}

/// The distinct word tokens of `texts` (names of primitives, parameters, dtypes, policies).
pub fn words(texts: &[String]) -> Vec<String> {
    let mut set = std::collections::BTreeSet::new();
    for t in texts {
        for (a, b) in tokens(t) {
            let w = &t[a..b];
            if w.chars().next().is_some_and(|c| c.is_alphabetic() || c == '_') && w.len() < 40 {
                set.insert(w.to_string());
            }
        }
    }
    set.into_iter().collect()
}

const DTYPES: [&str; 14] =
    ["f32", "f64", "bf16", "f16", "i8", "i16", "i32", "i64", "u8", "u32", "bool", "key<fry>", "f8", "float32"];

fn shape_text(rng: &mut Prng) -> String {
    let rank = rng.below(4);
    let dims: Vec<String> = (0..rank)
        .map(|_| if rng.chance(8) { rng.pick(&HUGE_NUMBERS).to_string() } else { rng.below(5).to_string() })
        .collect();
    dims.join(",")
}

/// A jaxpr built on the grammar's skeleton: binders of random types, equations of
/// primitives named in `words` with parameters and operands drawn from what is in scope.
pub fn generate_jaxpr(rng: &mut Prng, words: &[String]) -> String {
    let mut names = Vec::new();
    let mut next = 0usize;
    let mut fresh = |names: &mut Vec<String>| {
        let n = crate::fuzz::var_name(next);
        next += 1;
        names.push(n.clone());
        n
    };
    let mut binder = |rng: &mut Prng, names: &mut Vec<String>| {
        let n = fresh(names);
        format!("{n}:{}[{}]", rng.pick(&DTYPES[..11]), shape_text(rng))
    };
    let consts: Vec<String> = (0..rng.below(2)).map(|_| binder(rng, &mut names)).collect();
    let invars: Vec<String> = (0..rng.below(4)).map(|_| binder(rng, &mut names)).collect();
    let mut eqns = Vec::new();
    for _ in 0..rng.below(6) {
        let operands: Vec<String> = (0..rng.below(3))
            .map(|_| match names.is_empty() || rng.chance(4) {
                true => {
                    format!("{}:{}[]", rng.pick(&["1.0", "2", "True", "nan", "-inf", "0.5"]), rng.pick(&DTYPES[..11]))
                }
                false => rng.pick(&names).clone(),
            })
            .collect();
        let outs: Vec<String> = (0..1 + rng.below(2)).map(|_| binder(rng, &mut names)).collect();
        let prim = if words.is_empty() { "sin".to_string() } else { rng.pick(words).clone() };
        let params = match rng.below(3) {
            0 => String::new(),
            _ => {
                let key = if words.is_empty() { "axes".to_string() } else { rng.pick(words).clone() };
                let value = match rng.below(5) {
                    0 => format!("({},)", rng.below(3)),
                    1 => "None".to_string(),
                    2 => rng.pick(&HUGE_NUMBERS).to_string(),
                    3 => format!("({}, {})", rng.below(3), rng.below(3)),
                    _ => rng.pick(&DTYPES).to_string(),
                };
                format!("[{key}={value}]")
            }
        };
        eqns.push(format!("    {} = {prim}{params} {}", outs.join(" "), operands.join(" ")));
    }
    let outvars: Vec<String> = (0..rng.below(3))
        .map(|_| if names.is_empty() { "1.0:f32[]".into() } else { rng.pick(&names).clone() })
        .collect();
    format!(
        "{{ lambda {}; {}. let\n{}\n  in ({}{}) }}",
        consts.join(" "),
        invars.join(" "),
        eqns.join("\n"),
        outvars.join(", "),
        if outvars.len() == 1 { "," } else { "" }
    )
}

/// A JSON list of arrays as the command line reads them, built from random trees: dtypes
/// right and wrong, shapes small, huge, negative or fractional, data nested or flat, with
/// numbers past every dtype's range.
pub fn generate_json(rng: &mut Prng) -> String {
    let n = rng.below(3);
    let arrays: Vec<String> = (0..n).map(|_| generate_array(rng)).collect();
    match rng.below(4) {
        0 => format!("{{\"args\": [{}]}}", arrays.join(", ")),
        _ => format!("[{}]", arrays.join(", ")),
    }
}

fn generate_array(rng: &mut Prng) -> String {
    let dtype = rng.pick(&DTYPES);
    let rank = rng.below(4);
    let dims: Vec<String> = (0..rank)
        .map(|_| match rng.below(10) {
            0 => rng.pick(&HUGE_NUMBERS).to_string(),
            1 => "0".to_string(),
            _ => (1 + rng.below(3)).to_string(),
        })
        .collect();
    let count: usize = dims.iter().map(|d| d.parse::<usize>().unwrap_or(1).min(4)).product::<usize>()
        * if *dtype == "key<fry>" { 2 } else { 1 };
    let element = |rng: &mut Prng| -> String {
        match rng.below(12) {
            0 => rng.pick(&HUGE_NUMBERS).to_string(),
            1 => format!("\"{}\"", rng.pick(&["nan", "inf", "-inf", "NaN", "Infinity", "x", ""])),
            2 => rng.pick(&["true", "false", "null", "[]", "{}"]).to_string(),
            3 => format!("{}.5", rng.below(300)),
            _ => rng.below(256).to_string(),
        }
    };
    let flat: Vec<String> = (0..count + usize::from(rng.chance(10))).map(|_| element(rng)).collect();
    let data = if rank > 1 && rng.chance(2) && count > 0 {
        let per = flat.len().div_ceil(2);
        let rows: Vec<String> = flat.chunks(per.max(1)).map(|c| format!("[{}]", c.join(", "))).collect();
        format!("[{}]", rows.join(", "))
    } else {
        format!("[{}]", flat.join(", "))
    };
    let mut fields = vec![
        format!("\"dtype\": \"{dtype}\""),
        format!("\"shape\": [{}]", dims.join(", ")),
        format!("\"data\": {data}"),
    ];
    if rng.chance(10) {
        fields.remove(rng.below(fields.len()));
    }
    format!("{{{}}}", fields.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_cover_the_text() {
        let text = "{ lambda ; a:f32[3]. let b:f32[3] = sin a in (b,) }";
        let toks = tokens(text);
        let joined: String = toks.iter().map(|&(a, b)| &text[a..b]).collect();
        assert_eq!(joined, text);
        assert!(toks.iter().any(|&(a, b)| &text[a..b] == "lambda"));
    }

    #[test]
    fn mutations_keep_character_boundaries() {
        let seeds = vec!["{ lambda ; a:f32[3]. let b:f32[3] = sin a in (b,) } é𝔸".to_string()];
        let words = words(&seeds);
        let mut rng = Prng(7);
        for _ in 0..2000 {
            let m = mutate(&mut rng, &seeds[0], &seeds, &words);
            // Slicing off a character boundary would have panicked; growth stays bounded.
            assert!(m.len() < 400_000, "{}", m.len());
        }
    }
}
