-- wrk: POST /orders with a new Idempotency-Key on every request, so that
-- every request claims a key, runs the handler and stores its response.
-- Also the load for the plain baseline (idem-demo --no-idem), which ignores
-- the key: the same bytes on the wire, without idem.
--
--   wrk -t2 -c32 -d10s --latency -s fresh_keys.lua http://127.0.0.1:8080
--
-- IDEM_BENCH_PATH (default /orders) names the endpoint, e.g. /transfers for
-- benchmarks/http/transfers_bench.sh.

local threads = {}

function setup(thread)
  thread:set("id", #threads + 1)
  table.insert(threads, thread)
end

function init(args)
  -- Unique across threads (id) and across runs against a durable store
  -- (the start time).
  prefix = string.format("bench-%d-%d-", os.time(), id)
  counter = 0
  body = '{"item":"book","qty":1}'
  path = os.getenv("IDEM_BENCH_PATH") or "/orders"
end

function request()
  counter = counter + 1
  return wrk.format("POST", path, {
    ["Idempotency-Key"] = prefix .. counter,
    ["Content-Type"] = "application/json",
  }, body)
end
