-- wrk: POST /orders with one Idempotency-Key for every request: after the
-- first, every answer is the stored response, replayed. Run one request with
-- the key before wrk starts (bench.sh does), so that no request of the run
-- meets the first one still in progress.
--
--   IDEM_BENCH_KEY=k wrk -t2 -c32 -d10s --latency -s replays.lua http://127.0.0.1:8080

function init(args)
  key = os.getenv("IDEM_BENCH_KEY") or "bench-replay"
  req = wrk.format("POST", "/orders", {
    ["Idempotency-Key"] = key,
    ["Content-Type"] = "application/json",
  }, '{"item":"book","qty":1}')
end

function request()
  return req
end
