//! cjson in a bare Lua state: what it writes and reads, and its errors. That Redis answers
//! the same is tests/memory_syncguard.rs's, against a redis-server.

use super::{install, message_of};
use mlua::{Lua, LuaOptions, StdLib};

fn lua() -> Lua {
    let lua = Lua::new_with(
        StdLib::TABLE | StdLib::STRING | StdLib::MATH,
        LuaOptions::default(),
    )
    .expect("a Lua state");
    install(&lua).expect("cjson installed");
    lua
}

/// What `expression` gives as a string, or the message of the error it raises.
fn eval(lua: &Lua, expression: &str) -> Result<String, String> {
    let chunk = format!("return tostring({expression})");
    lua.load(&chunk)
        .set_name("=test")
        .eval::<String>()
        .map_err(|err| message_of(&err))
}

#[test]
fn encodes_as_lua_cjson_writes() {
    let lua = lua();
    let cases = [
        ("cjson.encode('a/b\"c\\\\')", r#""a\/b\"c\\""#),
        (
            "cjson.encode('\\1\\8\\9\\10\\12\\13\\31\\127é')",
            "\"\\u0001\\b\\t\\n\\f\\r\\u001f\\u007fé\"",
        ),
        ("cjson.encode(1717000000123)", "1717000000123"),
        ("cjson.encode(101795754377590)", "1.0179575437759e+14"),
        ("cjson.encode(0.1)", "0.1"),
        ("cjson.encode(-0.5)", "-0.5"),
        ("cjson.encode({})", "{}"),
        ("cjson.encode({1, 'x', true})", "[1,\"x\",true]"),
        ("cjson.encode({1, nil, 3})", "[1,null,3]"),
        ("cjson.encode({[1] = 'a', [3] = 'c'})", "[\"a\",null,\"c\"]"),
        ("cjson.encode({a = cjson.null})", "{\"a\":null}"),
        ("cjson.encode({[1.5] = 1})", "{\"1.5\":1}"),
        ("cjson.encode(nil)", "null"),
        ("cjson.encode(false)", "false"),
        ("cjson.encode({{{}}})", "[[{}]]"),
    ];
    for (expression, want) in cases {
        assert_eq!(
            eval(&lua, expression).as_ref().map(String::as_str),
            Ok(want),
            "{expression}"
        );
    }
}

#[test]
fn refuses_what_lua_cjson_refuses() {
    let lua = lua();
    let cases = [
        (
            "cjson.encode(0/0)",
            "test:1: Cannot serialise number: must not be NaN or Inf",
        ),
        (
            "cjson.encode(math.huge)",
            "test:1: Cannot serialise number: must not be NaN or Inf",
        ),
        (
            "cjson.encode({f = function() end})",
            "test:1: Cannot serialise function: type not supported",
        ),
        (
            "cjson.encode({[true] = 1})",
            "test:1: Cannot serialise boolean: table key must be a number or string",
        ),
        (
            "cjson.encode({[20] = 1})",
            "test:1: Cannot serialise table: excessively sparse array",
        ),
        (
            "cjson.encode()",
            "test:1: bad argument #1 to 'encode' (expected 1 argument)",
        ),
        (
            "cjson.decode({})",
            "test:1: bad argument #1 to 'decode' (string expected, got table)",
        ),
        (
            "cjson.decode('')",
            "test:1: Expected value but found T_END at character 1",
        ),
        (
            "cjson.decode('{')",
            "test:1: Expected object key string but found T_END at character 2",
        ),
        (
            "cjson.decode('{\"a\" 1}')",
            "test:1: Expected colon but found T_NUMBER at character 6",
        ),
        (
            "cjson.decode('[1 2]')",
            "test:1: Expected comma or array end but found T_NUMBER at character 4",
        ),
        (
            "cjson.decode('{\"a\":1 \"b\"}')",
            "test:1: Expected comma or object end but found T_STRING at character 8",
        ),
        (
            "cjson.decode('1 2')",
            "test:1: Expected the end but found T_NUMBER at character 3",
        ),
        (
            "cjson.decode('x')",
            "test:1: Expected value but found invalid token at character 1",
        ),
        (
            "cjson.decode('\"ab')",
            "test:1: Expected value but found unexpected end of string at character 4",
        ),
        (
            "cjson.decode('\"a\\\\q\"')",
            "test:1: Expected value but found invalid escape code at character 3",
        ),
        (
            "cjson.decode('\"\\\\ud800\"')",
            "test:1: Expected value but found invalid unicode escape code at character 2",
        ),
        (
            "cjson.decode('-x')",
            "test:1: Expected value but found invalid number at character 1",
        ),
        (
            "cjson.decode('a\\0')",
            "test:1: JSON parser does not support UTF-16 or UTF-32",
        ),
    ];
    for (expression, want) in cases {
        assert_eq!(
            eval(&lua, expression).as_ref().map_err(String::as_str),
            Err(want),
            "{expression}"
        );
    }
    let deep = format!("cjson.decode('{}')", "[".repeat(1001));
    assert_eq!(
        eval(&lua, &deep).as_ref().map_err(String::as_str),
        Err("test:1: Found too many nested data structures (1001) at character 1001")
    );
    let nested = "local t = {} t[1] = t\nreturn cjson.encode(t)";
    let err = lua
        .load(nested)
        .set_name("=test")
        .exec()
        .map_err(|err| message_of(&err));
    assert_eq!(
        err,
        Err("test:2: Cannot serialise, excessive nesting (1001)".to_owned())
    );
}

#[test]
fn decodes_as_lua_cjson_reads() {
    let lua = lua();
    let cases = [
        (r#"cjson.decode('{"a":[1,"x",null,true]}').a[2]"#, "x"),
        (
            r#"cjson.decode('{"a":[1,"x",null,true]}').a[3] == cjson.null"#,
            "true",
        ),
        (r#"#cjson.decode('[1,2,3]')"#, "3"),
        (r#"cjson.decode('"a\\/b\\u00e9\\ud83d\\ude00"')"#, "a/bé😀"),
        (r#"cjson.decode(' 12.5e1 ')"#, "125"),
        (r#"cjson.decode('-0.25')"#, "-0.25"),
        (r#"cjson.decode('1717000000123')"#, "1717000000123"),
        (r#"cjson.decode('0x10')"#, "16"),
        (r#"cjson.decode('01')"#, "1"),
        (r#"cjson.decode('+3')"#, "3"),
        (r#"tostring(cjson.decode('Infinity'))"#, "inf"),
        (r#"cjson.decode('NaN') ~= cjson.decode('NaN')"#, "true"),
        (r#"cjson.decode(12)"#, "12"),
        (r#"cjson.decode('{"a":1,"a":2}').a"#, "2"),
        (r#"next(cjson.decode('{}'))"#, "nil"),
        (r#"cjson.decode('[]')[1]"#, "nil"),
        (r#"cjson.decode('"a"\0junk')"#, "a"),
    ];
    for (expression, want) in cases {
        assert_eq!(
            eval(&lua, expression).as_ref().map(String::as_str),
            Ok(want),
            "{expression}"
        );
    }
}

#[test]
fn a_record_survives_a_round_trip() {
    let lua = lua();
    let script = r#"
        local record = {lockId = 'abc/def', expiresAtMs = 1717000030123,
                        acquiredAtMs = 1717000000123, key = 'k\n"é', fence = '000000000000042'}
        local back = cjson.decode(cjson.encode(record))
        for k, v in pairs(record) do
          if back[k] ~= v then return k end
        end
        for k in pairs(back) do
          if record[k] == nil then return k end
        end
        return 'same'
    "#;
    let out: String = lua.load(script).eval().expect("runs");
    assert_eq!(out, "same");
}
