use serde_json::json;

use super::*;

#[test]
fn summary_keeps_sizes_not_content() {
    // Refused arguments: their size only.
    assert_eq!(
        summarize_args(r#"{"old_str":"password=hunter2"}"#, None, false),
        json!({"bytes": 30})
    );
    // Valid ones: no string content without a schema saying it is a path.
    let s = summarize_args(
        r#"{"old_str":"hunter2","n":3,"xs":[1,2],"o":{"a":1},"b":true}"#,
        None,
        true,
    );
    assert_eq!(
        s["args"],
        json!({"old_str": "<string, 7 bytes>", "n": 3, "xs": "<array, 2 items>",
               "o": "<object, 1 members>", "b": true})
    );
    assert!(!s.to_string().contains("hunter2"));
}

#[test]
fn args_digest_is_of_the_canonical_form() {
    assert_eq!(
        args_sha256(r#"{"b":1,"a":2}"#),
        args_sha256(r#"{ "a": 2, "b": 1 }"#)
    );
    assert_ne!(args_sha256("{"), args_sha256("{}"));
}

#[test]
fn times_are_rfc3339_with_microseconds() {
    assert_eq!(
        format_us(1_700_000_000_000_250),
        "2023-11-14T22:13:20.000250Z"
    );
}
