//! Shorthand for building histories in tests.
#![allow(dead_code)]

use fedraft_jepsen::history::{Call, Op, Outcome, Ret, Value};

pub fn op(process: u64, key: &str, span: (u64, u64), call: Call, outcome: Outcome) -> Op {
    Op {
        process,
        key: key.to_string(),
        invoke_ns: span.0,
        complete_ns: span.1,
        call,
        outcome,
    }
}

pub fn ok(ret: Ret) -> Outcome {
    Outcome::Ok { ret }
}

pub fn info() -> Outcome {
    Outcome::Info {
        error: "timeout".into(),
    }
}

pub fn fail() -> Outcome {
    Outcome::Fail {
        error: "conflict".into(),
    }
}

/// A successful read of `value` at `version` on key "r".
pub fn read(p: u64, span: (u64, u64), value: Option<Value>, version: u64) -> Op {
    op(p, "r", span, Call::Read, ok(Ret::Read { value, version }))
}

/// A successful unconditional write on key "r" that produced `version`.
pub fn write(p: u64, span: (u64, u64), value: Value, version: u64) -> Op {
    op(
        p,
        "r",
        span,
        Call::Write { value },
        ok(Ret::Written {
            version: Some(version),
        }),
    )
}

/// A successful CAS on key "r".
pub fn cas(p: u64, span: (u64, u64), expected: u64, value: Value, version: u64) -> Op {
    op(
        p,
        "r",
        span,
        Call::Cas { expected, value },
        ok(Ret::Written {
            version: Some(version),
        }),
    )
}
