//! Redis's glob patterns (`SCAN MATCH`, `KEYS`): `*`, `?`, `[abc]`, `[^a-z]` and `\`
//! escapes, on bytes, so that a `watch` request's pattern keeps the keys its SCAN lists.

/// Whether `text` matches `pattern` as Redis's `stringmatchlen` decides (case-sensitive).
pub fn matches(pattern: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0, 0);
    // Where to go on after the latest `*`: the pattern after it, and the text it swallowed to.
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        match step(pattern, p, text[t]) {
            GlobStep::Star => {
                star = Some((p + 1, t));
                p += 1;
                continue;
            }
            GlobStep::Matched(next) => {
                p = next;
                t += 1;
                continue;
            }
            GlobStep::Failed => {}
        }
        match star {
            Some((after, swallowed)) => {
                p = after;
                t = swallowed + 1;
                star = Some((after, swallowed + 1));
            }
            None => return false,
        }
    }
    pattern[p..].iter().all(|&b| b == b'*')
}

enum GlobStep {
    Star,
    Matched(usize),
    Failed,
}

/// What the pattern at `p` does with the byte `c`.
fn step(pattern: &[u8], p: usize, c: u8) -> GlobStep {
    match pattern.get(p) {
        None => GlobStep::Failed,
        Some(b'*') => GlobStep::Star,
        Some(b'?') => GlobStep::Matched(p + 1),
        Some(b'\\') if p + 1 < pattern.len() => match pattern[p + 1] == c {
            true => GlobStep::Matched(p + 2),
            false => GlobStep::Failed,
        },
        Some(b'[') => class(pattern, p + 1, c),
        Some(&b) if b == c => GlobStep::Matched(p + 1),
        Some(_) => GlobStep::Failed,
    }
}

/// A `[...]` class starting at `p` (after the bracket); unclosed, it runs to the end.
fn class(pattern: &[u8], mut p: usize, c: u8) -> GlobStep {
    let negated = pattern.get(p) == Some(&b'^');
    if negated {
        p += 1;
    }
    let mut found = false;
    while p < pattern.len() && pattern[p] != b']' {
        if pattern[p] == b'\\' && p + 1 < pattern.len() {
            found |= pattern[p + 1] == c;
            p += 2;
        } else if p + 2 < pattern.len() && pattern[p + 1] == b'-' && pattern[p + 2] != b']' {
            let (low, high) = match pattern[p] <= pattern[p + 2] {
                true => (pattern[p], pattern[p + 2]),
                false => (pattern[p + 2], pattern[p]),
            };
            found |= (low..=high).contains(&c);
            p += 3;
        } else {
            found |= pattern[p] == c;
            p += 1;
        }
    }
    match found != negated {
        true => GlobStep::Matched((p + 1).min(pattern.len())),
        false => GlobStep::Failed,
    }
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn patterns_as_redis_reads_them() {
        let cases: [(&str, &str, bool); 16] = [
            ("*", "", true),
            ("*", "lock:a", true),
            ("lock:*", "lock:a", true),
            ("lock:*", "syncguard:a", false),
            ("*hot", "lock:hot", true),
            ("*hot", "lock:hot2", false),
            ("l?ck:*", "lock:x", true),
            ("*:*:x", "a:b:c:x", true),
            ("[ab]*", "b1", true),
            ("[^ab]*", "b1", false),
            ("[a-c]x", "bx", true),
            ("[c-a]x", "bx", true),
            ("a\\*", "a*", true),
            ("a\\*", "ab", false),
            ("a*b*c", "aXbYbZc", true),
            ("a*b*c", "aXbYbZ", false),
        ];
        for (pattern, text, expected) in cases {
            assert_eq!(
                matches(pattern.as_bytes(), text.as_bytes()),
                expected,
                "{pattern} on {text}"
            );
        }
    }
}
