//! `trace.json` read piece by piece for the bundle reader ([`super`]): the
//! text is checked once as a whole, then objects are maps of their members'
//! raw text, arrays are visited element by element and only small leaves
//! (numbers, strings) are parsed into [`Value`]s. A description so costs its
//! text plus one element at a time, whatever it holds: parsed whole into a
//! `serde_json::Value` it took 17 times its size (800 MB for 47 MB listing
//! 10^6 threads), and about 75 times for an array of `{"a":1}` objects.

use std::collections::HashMap;
use std::fmt;
use std::ops::ControlFlow;

use serde::de::{DeserializeSeed, Deserializer, Error as _, SeqAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::Value;

/// The largest leaf parsed (a number or a string: LLDB's longest are
/// paths); a bigger value is only described.
const LEAF_MAX: usize = 64 << 10;

/// A value shown in a message at most this long; a longer one is cut.
const SHOWN_MAX: usize = 80;

/// A JSON object's members, each as its raw text.
pub type Object<'a> = HashMap<String, &'a RawValue>;

/// The first byte of `raw` that is not a blank.
fn first(raw: &RawValue) -> Option<u8> {
    raw.get().bytes().find(|b| !b.is_ascii_whitespace())
}

/// The object `raw` is, or `None` when it is another kind of value.
pub fn object(raw: &RawValue) -> Option<Object<'_>> {
    if first(raw) != Some(b'{') {
        return None;
    }
    serde_json::from_str(raw.get()).ok()
}

/// Whether `raw` is `null`.
pub fn is_null(raw: &RawValue) -> bool {
    raw.get().trim() == "null"
}

/// Whether `raw` is an array.
pub fn is_array(raw: &RawValue) -> bool {
    first(raw) == Some(b'[')
}

/// `raw` parsed, when it is no longer than [`LEAF_MAX`]: a number, a
/// string, or a small object or array to show in a message.
pub fn leaf(raw: &RawValue) -> Option<Value> {
    if raw.get().len() > LEAF_MAX {
        return None;
    }
    serde_json::from_str(raw.get()).ok()
}

/// `raw` as a message shows it: its text, cut after [`SHOWN_MAX`] bytes
/// (at a character boundary) with its length said.
pub fn shown(raw: &RawValue) -> String {
    crate::text::cut(raw.get().trim(), SHOWN_MAX).into_owned()
}

/// Calls `f` with the index and raw text of each element of the array
/// `raw`, in order, until it says [`ControlFlow::Break`]. The elements are
/// never held together. `raw` must be an array ([`is_array`]) of text
/// already checked as JSON (the description as a whole was); anything else
/// visits nothing.
pub fn each<'a>(raw: &'a RawValue, mut f: impl FnMut(usize, &'a RawValue) -> ControlFlow<()>) {
    let mut de = serde_json::Deserializer::from_str(raw.get());
    // An error is the visit stopped by `f` (or `raw` not an array): there
    // is nothing more to do either way.
    let _ = Each(&mut f).deserialize(&mut de);
}

/// The visitor of [`each`].
struct Each<'f, 'a>(&'f mut dyn FnMut(usize, &'a RawValue) -> ControlFlow<()>);

impl<'de> DeserializeSeed<'de> for Each<'_, 'de> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for Each<'_, 'de> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an array")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut i = 0;
        while let Some(e) = seq.next_element::<&'de RawValue>()? {
            if (self.0)(i, e).is_break() {
                // serde_json would check that the array ends here: an
                // error is the way out.
                return Err(A::Error::custom("stopped"));
            }
            i += 1;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(s: &str) -> &RawValue {
        serde_json::from_str(s).unwrap()
    }

    #[test]
    fn arrays_are_visited_element_by_element() {
        let a = raw(r#"[1, {"a": [2, 3]}, "x", null]"#);
        assert!(is_array(a));
        let mut seen = Vec::new();
        each(a, |i, e| {
            seen.push((i, e.get().to_string()));
            ControlFlow::Continue(())
        });
        assert_eq!(
            seen,
            [
                (0, "1".to_string()),
                (1, r#"{"a": [2, 3]}"#.to_string()),
                (2, "\"x\"".to_string()),
                (3, "null".to_string())
            ]
        );
        let mut n = 0;
        each(a, |_, _| {
            n += 1;
            if n == 2 {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        });
        assert_eq!(n, 2);
        // Not an array: nothing visited.
        each(raw("{}"), |_, _| panic!("visited"));
    }

    #[test]
    fn objects_leaves_and_what_messages_show() {
        let o = object(raw(r#" {"pid": 5, "name": "a\u00e9", "x": null}"#)).unwrap();
        assert_eq!(leaf(o["pid"]), Some(serde_json::json!(5)));
        assert_eq!(leaf(o["name"]), Some(serde_json::json!("aé")));
        assert!(is_null(o["x"]));
        assert!(object(raw("[1]")).is_none());
        let long = format!("\"{}\"", "é".repeat(100));
        let long = raw(&long);
        let s = shown(long);
        assert!(s.ends_with("... (202 bytes)"), "{s}");
        assert!(s.len() < 100, "{s}");
        let big = format!("[{}1]", "1,".repeat(LEAF_MAX));
        assert_eq!(leaf(raw(&big)), None);
    }
}
