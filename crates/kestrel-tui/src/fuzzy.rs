//! A small fuzzy matcher for menus, pickers and file mentions: the query's characters
//! must appear in order (case-insensitively); matches at the start, after a separator
//! and in runs score higher, long candidates a little lower.

/// The match score of `query` in `candidate`, higher is better; `None` when it does not
/// match. An empty query matches everything with score 0.
pub(crate) fn score(query: &str, candidate: &str) -> Option<i64> {
    if query.is_empty() {
        return Some(0);
    }
    let mut score = 0i64;
    let mut previous_match: Option<usize> = None;
    let mut query_chars = query.chars().flat_map(char::to_lowercase).peekable();
    let mut previous_char: Option<char> = None;
    for (index, ch) in candidate.chars().enumerate() {
        let Some(&wanted) = query_chars.peek() else { break };
        let lower = ch.to_lowercase().next().unwrap_or(ch);
        if lower == wanted {
            query_chars.next();
            score += 10;
            if index == 0 {
                score += 15;
            }
            if previous_char.is_some_and(|before| matches!(before, '/' | '_' | '-' | '.' | ' ')) {
                score += 10;
            }
            if previous_match.is_some_and(|before| before + 1 == index) {
                score += 8;
            }
            previous_match = Some(index);
        }
        previous_char = Some(ch);
    }
    if query_chars.peek().is_some() {
        return None;
    }
    let length = i64::try_from(candidate.chars().count()).unwrap_or(i64::MAX);
    Some(score - length / 4)
}

/// The indices of `candidates` matching `query`, best first (ties keep their order),
/// at most `limit`.
pub(crate) fn rank<'a>(
    query: &str,
    candidates: impl IntoIterator<Item = &'a str>,
    limit: usize,
) -> Vec<usize> {
    let mut scored: Vec<(i64, usize)> = candidates
        .into_iter()
        .enumerate()
        .filter_map(|(index, candidate)| score(query, candidate).map(|score| (score, index)))
        .collect();
    scored.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    scored.into_iter().take(limit).map(|(_, index)| index).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subsequences_match_and_better_matches_rank_first() {
        assert!(score("mrs", "src/main.rs").is_some());
        assert!(score("xyz", "src/main.rs").is_none());
        let files = ["docs/readme.md", "src/main.rs", "src/mod/main_test.rs"];
        assert_eq!(rank("main", files, 10), [1, 2]);
        assert_eq!(rank("", files, 2), [0, 1]);
    }
}
