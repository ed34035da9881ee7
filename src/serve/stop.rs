//! Stop strings over streamed text: text is released only once no stop string can start in
//! it, so a stop string split across tokens is still found and never reaches the client.

pub struct StopMatcher {
    stops: Vec<String>,
    /// Text that could be the start of a stop string, held back.
    held: String,
}

impl StopMatcher {
    pub fn new(stops: Vec<String>) -> StopMatcher {
        StopMatcher { stops, held: String::new() }
    }

    /// Feeds the next piece of text; returns the text that can go out now, and whether a stop
    /// string matched (then the text is everything before the earliest match, and nothing
    /// after it may follow).
    pub fn push(&mut self, text: &str) -> (String, bool) {
        self.held.push_str(text);
        if let Some(at) = self.stops.iter().filter_map(|s| self.held.find(s.as_str())).min() {
            let out = self.held[..at].to_string();
            self.held.clear();
            return (out, true);
        }
        let keep = self.stops.iter().map(|s| partial_suffix(&self.held, s)).max().unwrap_or(0);
        let out: String = self.held.drain(..self.held.len() - keep).collect();
        (out, false)
    }

    /// The text held back when the generation ends without a match.
    pub fn finish(&mut self) -> String {
        std::mem::take(&mut self.held)
    }
}

/// The length of the longest end of `text` that is a proper beginning of `stop`.
fn partial_suffix(text: &str, stop: &str) -> usize {
    (1..stop.len()).rev().find(|&k| stop.is_char_boundary(k) && text.ends_with(&stop[..k])).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every piece released, joined, and whether a stop matched.
    fn run(stops: &[&str], pieces: &[&str]) -> (String, bool) {
        let mut m = StopMatcher::new(stops.iter().map(|s| s.to_string()).collect());
        let mut out = String::new();
        for p in pieces {
            let (text, hit) = m.push(p);
            out.push_str(&text);
            if hit {
                return (out, true);
            }
        }
        out.push_str(&m.finish());
        (out, false)
    }

    #[test]
    fn a_stop_split_across_pieces_is_cut_and_never_sent() {
        assert_eq!(run(&["END"], &["abc E", "N", "D tail"]), ("abc ".into(), true));
        assert_eq!(run(&["\n\n"], &["one\n", "\ntwo"]), ("one".into(), true));
    }

    #[test]
    fn held_text_comes_out_when_it_stops_looking_like_a_stop() {
        let mut m = StopMatcher::new(vec!["END".into()]);
        assert_eq!(m.push("x E"), ("x ".into(), false));
        assert_eq!(m.push("NX"), ("ENX".into(), false));
        assert_eq!(run(&["END"], &["x EN"]), ("x EN".into(), false));
    }

    #[test]
    fn the_earliest_of_several_stops_wins() {
        assert_eq!(run(&["c", "ab"], &["xabc"]), ("x".into(), true));
        assert_eq!(run(&["é!"], &["caf", "é", "!"]), ("caf".into(), true));
    }
}
