//! `memory://` answers syncguard's layout as Redis does: its Lua's `cjson` writes and reads
//! what Redis's does, and the five sg_*.lua scripts, sent to a real redis-server and to a
//! MemoryConnection, get the same replies and leave the same records, index keys, fence
//! counters and TTLs. lua-cjson writes an object's keys in Lua's table order; both run the
//! same Lua 5.1, whose order for the same inserts is the same, so records are compared byte
//! for byte.

mod common;

use common::RedisServer;
use native_redis_lock::core::api::MemoryConnection;
use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::{Cmd, Value};

struct Pair {
    real: MultiplexedConnection,
    memory: MemoryConnection,
}

impl Pair {
    async fn new(server: &RedisServer, name: &str) -> Self {
        let client = redis::Client::open(server.url()).expect("client");
        Pair {
            real: client
                .get_multiplexed_async_connection()
                .await
                .expect("connection"),
            memory: MemoryConnection::open(name, None),
        }
    }

    async fn both(&mut self, cmd: &Cmd) -> (Value, Value) {
        let real = self
            .real
            .req_packed_command(cmd)
            .await
            .expect("redis answers");
        let memory = self
            .memory
            .req_packed_command(cmd)
            .await
            .expect("memory answers");
        (real, memory)
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

fn eval(script: &str) -> Cmd {
    let mut cmd = redis::cmd("EVAL");
    cmd.arg(script).arg(0);
    cmd
}

/// Scripts whose reply does not depend on a table's iteration order: the same on both,
/// errors word for word.
#[test]
fn cjson_writes_reads_and_refuses_as_redis_does() {
    let server = RedisServer::start();
    runtime().block_on(async {
        let mut pair = Pair::new(&server, "sg-cjson").await;
        let scripts = [
            "return cjson.encode('a/b\"c\\\\ \\1\\8\\9\\10\\12\\13\\31\\127\\128\\255')",
            "return cjson.encode({1, 'x', true, false, cjson.null})",
            "return cjson.encode({1, nil, 3})",
            "return cjson.encode({[1] = 'a', [3] = 'c'})",
            "return cjson.encode({[1] = 'a', [10] = 'j'})",
            "return cjson.encode({a = {b = {c = {}}}})",
            "return cjson.encode({})",
            "return cjson.encode({lockId = 'id', expiresAtMs = 1717000030123, acquiredAtMs = 1717000000123, key = 'k', fence = '000000000000001'})",
            "return cjson.encode(cjson.decode('{\"lockId\":\"id\",\"expiresAtMs\":1717000030123,\"acquiredAtMs\":1717000000123,\"key\":\"k\",\"fence\":\"000000000000001\"}'))",
            "return cjson.encode({1, 2, x = 1, [4] = 4})",
            "return cjson.encode({[1.5] = 1})",
            "return cjson.encode({n = 1717000000123})",
            "return cjson.encode(101795754377590)",
            "return cjson.encode(1e17)",
            "return cjson.encode(-0.1)",
            "return cjson.encode(1/3)",
            "return cjson.encode(2^53)",
            "return cjson.encode(nil)",
            "return cjson.encode(0/0)",
            "return cjson.encode(-1/0)",
            "return cjson.encode(function() end)",
            "return cjson.encode({[true] = 1})",
            "return cjson.encode({[20] = 1})",
            "local t = {} t[1] = t return cjson.encode(t)",
            "return cjson.encode()",
            "return cjson.decode({})",
            "return cjson.decode('')",
            "return cjson.decode('{')",
            "return cjson.decode('{\"a\" 1}')",
            "return cjson.decode('[1 2]')",
            "return cjson.decode('{\"a\":1 \"b\"}')",
            "return cjson.decode('1 2')",
            "return cjson.decode('x')",
            "return cjson.decode('tru')",
            "return cjson.decode('\"ab')",
            "return cjson.decode('\"a\\\\q\"')",
            "return cjson.decode('\"\\\\ud800\"')",
            "return cjson.decode('\"\\\\udc00\"')",
            "return cjson.decode('\"\\\\u12\"')",
            "return cjson.decode('-x')",
            "return cjson.decode('a\\0')",
            "return cjson.decode(string.rep('[', 1001))",
            "return cjson.decode(string.rep('[', 999) .. string.rep(']', 999))[1] and 'deep'",
            "return cjson.decode('[1,\"x\",null,true,false]')",
            "return cjson.decode('[1,\"x\",null,true]')[3] == cjson.null and 'null'",
            "return cjson.decode('\"a\\\\/b\\\\u00e9\\\\ud83d\\\\ude00\\\\n\"')",
            "return tostring(cjson.decode(' 12.5e1 '))",
            "return tostring(cjson.decode('-0.25'))",
            "return tostring(cjson.decode('1717000000123'))",
            "return tostring(cjson.decode('0x10'))",
            "return tostring(cjson.decode('01'))",
            "return tostring(cjson.decode('+3'))",
            "return tostring(cjson.decode('1.'))",
            "return tostring(cjson.decode('-.5'))",
            "return tostring(cjson.decode('1e400'))",
            "return tostring(cjson.decode('Infinity'))",
            "return tostring(cjson.decode('-inf'))",
            "return tostring(cjson.decode('nan') ~= cjson.decode('nan'))",
            "return tostring(cjson.decode(12))",
            "return cjson.decode('{\"a\":1,\"a\":2}').a",
            "return cjson.decode('\"a\"\\0junk')",
            "return type(cjson.null) .. tostring(cjson.null == cjson.decode('null'))",
            "return cjson.decode(cjson.encode({k = 'a\\0b'})).k",
            // A pcall'd failure is caught alike; its error value is Redis's string but
            // memory's Rust error (cjson.rs `raise`), so only `ok` is compared.
            "local ok = pcall(cjson.decode, '[') return tostring(ok)",
        ];
        let mut differ = Vec::new();
        for script in scripts {
            let (real, memory) = pair.both(&eval(script)).await;
            if real != memory {
                differ.push(format!("{script}\n  redis:  {real:?}\n  memory: {memory:?}"));
            }
        }
        assert!(differ.is_empty(), "{}", differ.join("\n"));
    });
}
