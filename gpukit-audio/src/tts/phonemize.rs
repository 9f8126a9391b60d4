//! Text to phonemes: normalisation, sentence and clause splitting, then espeak-ng's IPA.
//!
//! espeak-ng runs as a separate program (`espeak-ng -q --ipa -v <voice>`, text on its standard
//! input), once per clause, so the clause punctuation Piper's voices were trained with can be
//! put back between the clauses' phonemes (espeak-ng's output drops it). Numbers are read by
//! espeak-ng itself; the normaliser expands what it would misread or what would split a
//! sentence: abbreviations with a period, currency and percent signs, ampersands.

use std::io::Write;
use std::process::{Command, Stdio};

use crate::{Error, Result};

/// Abbreviations expanded before splitting sentences (so their period ends none).
const ABBREVIATIONS: &[(&str, &str)] = &[
    ("Mr.", "Mister"),
    ("Mrs.", "Missus"),
    ("Ms.", "Miss"),
    ("Dr.", "Doctor"),
    ("Prof.", "Professor"),
    ("St.", "Saint"),
    ("Jr.", "Junior"),
    ("Sr.", "Senior"),
    ("Mt.", "Mount"),
    ("vs.", "versus"),
    ("etc.", "et cetera"),
    ("e.g.", "for example"),
    ("i.e.", "that is"),
    ("approx.", "approximately"),
    ("No.", "number"),
];

/// Clause punctuation kept in the phoneme string (each is in Piper's phoneme map).
const CLAUSE_END: &[char] = &[',', ';', ':', '.', '!', '?'];

/// Expands abbreviations, currency (`$12.50` → `12 dollars 50 cents`), `%` and `&`, and
/// collapses whitespace.
pub fn normalize(text: &str) -> String {
    let mut words = Vec::new();
    for word in text.split_whitespace() {
        let mut w = word.to_owned();
        if let Some((_, full)) = ABBREVIATIONS.iter().find(|(a, _)| w == *a) {
            w = (*full).to_owned();
        }
        w = w.replace('&', " and ").replace('%', " percent");
        if let Some(rest) = w.strip_prefix('$') {
            let len = rest
                .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == ','))
                .unwrap_or(rest.len());
            let digits = rest[..len].trim_end_matches(['.', ',']);
            let tail = &rest[digits.len()..];
            let amount = match digits.split_once('.') {
                Some((d, c)) if c.len() == 2 && !d.is_empty() => {
                    let cents = c.trim_start_matches('0');
                    if cents.is_empty() {
                        format!("{d} dollars")
                    } else {
                        format!("{d} dollars {cents} cents")
                    }
                }
                _ if !digits.is_empty() => {
                    let one = digits == "1";
                    format!("{digits} dollar{}", if one { "" } else { "s" })
                }
                _ => "dollars".to_owned(),
            };
            w = format!("{amount}{tail}");
        }
        words.push(w);
    }
    words
        .join(" ")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// Splits normalised text into sentences at `.`, `!` and `?` followed by a space or the end
/// (a period inside a number or word does not end one); each keeps its final punctuation.
pub fn sentences(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut start = 0;
    for i in 0..chars.len() {
        let end = matches!(chars[i], '.' | '!' | '?')
            && chars.get(i + 1).is_none_or(|c| c.is_whitespace())
            && chars.get(i + 1) != Some(&'.');
        if end {
            let s: String = chars[start..=i].iter().collect();
            if s.chars().any(char::is_alphanumeric) {
                out.push(s.trim().to_owned());
            }
            start = i + 1;
        }
    }
    let rest: String = chars[start..].iter().collect();
    if rest.chars().any(char::is_alphanumeric) {
        out.push(rest.trim().to_owned());
    }
    out
}

/// Splits a sentence into clauses, each with the punctuation that ends it (`None` for a
/// clause that ends without any).
fn clauses(sentence: &str) -> Vec<(String, Option<char>)> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let chars: Vec<char> = sentence.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        // A comma or period between digits belongs to the number.
        let in_number = matches!(c, ',' | '.')
            && i > 0
            && chars[i - 1].is_ascii_digit()
            && chars.get(i + 1).is_some_and(char::is_ascii_digit);
        if CLAUSE_END.contains(&c) && !in_number {
            if cur.chars().any(char::is_alphanumeric) {
                out.push((cur.trim().to_owned(), Some(c)));
            } else if let Some(last) = out.last_mut() {
                last.1 = Some(c);
            }
            cur.clear();
        } else {
            cur.push(c);
        }
    }
    if cur.chars().any(char::is_alphanumeric) {
        out.push((cur.trim().to_owned(), None));
    }
    out
}

/// The IPA phonemes of one sentence as Piper's voices expect them: each clause's phonemes from
/// espeak-ng, followed by the clause's punctuation, clauses joined by a space.
///
/// # Errors
/// [`Error::Phonemize`] if espeak-ng cannot be run (with how to install it) or fails.
pub fn phonemize(sentence: &str, espeak_voice: &str) -> Result<String> {
    let mut out = String::new();
    for (clause, punct) in clauses(sentence) {
        let ipa = espeak(&clause, espeak_voice)?;
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(&ipa);
        if let Some(p) = punct {
            out.push(p);
        }
    }
    Ok(out)
}

/// espeak-ng's IPA for a text, its lines joined by spaces.
fn espeak(text: &str, voice: &str) -> Result<String> {
    let spawn = Command::new("espeak-ng")
        .args(["-q", "--ipa", "-v", voice])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = spawn.map_err(|e| {
        Error::Phonemize(format!(
            "cannot run espeak-ng ({e}): install it (Debian/Ubuntu: `apt-get install espeak-ng`, \
             macOS: `brew install espeak-ng`) or put it on PATH"
        ))
    })?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(text.as_bytes())
            .map_err(|e| Error::Phonemize(format!("writing to espeak-ng: {e}")))?;
    }
    let out = child
        .wait_with_output()
        .map_err(|e| Error::Phonemize(format!("espeak-ng: {e}")))?;
    if !out.status.success() {
        return Err(Error::Phonemize(format!(
            "espeak-ng -v {voice} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    Ok(text.split_whitespace().collect::<Vec<_>>().join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalizes_abbreviations_currency_and_symbols() {
        assert_eq!(
            normalize("Dr.  Smith paid $12.50 & 5%  more."),
            "Doctor Smith paid 12 dollars 50 cents and 5 percent more."
        );
        assert_eq!(
            normalize("It is $1, not $30."),
            "It is 1 dollar, not 30 dollars."
        );
        assert_eq!(normalize("$3.00"), "3 dollars");
    }

    #[test]
    fn splits_sentences_and_clauses() {
        assert_eq!(
            sentences("Hello there. Pi is 3.14! Is it? yes"),
            ["Hello there.", "Pi is 3.14!", "Is it?", "yes"]
        );
        assert_eq!(sentences("Wait... what?"), ["Wait...", "what?"]);
        assert!(sentences("  ...  ").is_empty());
        assert_eq!(
            clauses("One, two; 1,000 three."),
            [
                ("One".to_owned(), Some(',')),
                ("two".to_owned(), Some(';')),
                ("1,000 three".to_owned(), Some('.'))
            ]
        );
    }
}
