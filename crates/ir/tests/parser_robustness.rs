//! No input makes the parser panic or loop: truncations and byte-level mutations of real
//! JAX texts either parse (and then print without panicking) or give an error.

use proptest::prelude::*;

fn corpus() -> &'static [String] {
    static CORPUS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    CORPUS.get_or_init(read_corpus)
}

fn read_corpus() -> Vec<String> {
    remat_testkit::conformance_texts().into_iter().map(|(_, text)| text).collect()
}

fn parse_and_print(text: &str) {
    if let Ok(j) = remat_ir::parse_jaxpr(text, "fuzz.jaxpr") {
        let _ = remat_ir::pp_jaxpr(&j);
    }
}

#[test]
fn every_prefix_of_a_case_is_handled() {
    let texts = corpus();
    let text = texts.iter().find(|t| t.contains("remat2") && t.contains("let jaxpr")).unwrap();
    for (i, _) in text.char_indices() {
        parse_and_print(&text[..i]);
    }
}

const ALPHABET: &[u8] = b" \n{}[]()<>,;:=.'_-0123456789abcfinlmprstxyz";

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn mutations_never_panic(case in 0usize..96, edits in proptest::collection::vec((any::<prop::sample::Index>(), 0usize..3, any::<prop::sample::Index>()), 1..6)) {
        let texts = corpus();
        let mut bytes = texts[case % texts.len()].clone().into_bytes();
        for (pos, kind, ch) in edits {
            if bytes.is_empty() {
                break;
            }
            let at = pos.index(bytes.len());
            let c = ALPHABET[ch.index(ALPHABET.len())];
            match kind {
                0 => bytes[at] = c,
                1 => { bytes.remove(at); }
                _ => bytes.insert(at, c),
            }
        }
        let text = String::from_utf8_lossy(&bytes).into_owned();
        parse_and_print(&text);
    }
}
