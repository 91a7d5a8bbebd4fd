// The peer of benchmarks/http/peers.sh: POST /orders answered as idem-demo's
// handler answers it (201, a JSON order with a new id and the request's
// body), on Express, behind node-idempotency (@node-idempotency/core with
// its Redis storage adapter, PEER_REDIS_URL), or without it
// (PEER_PLAIN=1). The registry these machines reach has no
// @node-idempotency/express, so the middleware is written here the way
// that package wires the core: onRequest before the route (a stored
// response is replayed, a key in progress or reused with another body is
// refused), onResponse with the response before it is sent. Listens on
// 127.0.0.1, port 0, and prints "listening on 127.0.0.1:<port>".
"use strict";
const crypto = require("crypto");
const express = require("express");

function idempotencyMiddleware(idempotency) {
  return async (req, res, next) => {
    const params = {
      headers: req.headers,
      path: req.path,
      body: req.body,
      method: req.method,
    };
    try {
      const stored = await idempotency.onRequest(params);
      if (stored) {
        res.status(stored.additional?.status ?? 200).json(stored.body);
        return;
      }
    } catch (e) {
      const conflict = e.code === "REQUEST_IN_PROGRESS";
      res.status(conflict ? 409 : 422).json({ error: e.code ?? String(e) });
      return;
    }
    const send = res.json.bind(res);
    res.json = (body) => {
      idempotency
        .onResponse(params, { body, additional: { status: res.statusCode } })
        .then(
          () => send(body),
          (e) => next(e),
        );
      return res;
    };
    next();
  };
}

async function main() {
  const app = express();
  app.use(express.json());
  if (process.env.PEER_PLAIN !== "1") {
    const { Idempotency } = require("@node-idempotency/core");
    const { RedisStorageAdapter } = require(
      "@node-idempotency/storage-adapter-redis",
    );
    const storage = new RedisStorageAdapter({
      url: process.env.PEER_REDIS_URL,
    });
    await storage.connect();
    app.use(idempotencyMiddleware(new Idempotency(storage)));
  }
  app.post("/orders", (req, res) => {
    res.status(201).json({
      id: crypto.randomUUID(),
      instance: "peer",
      request: JSON.stringify(req.body),
    });
  });
  const server = app.listen(0, "127.0.0.1", () => {
    console.log(`listening on 127.0.0.1:${server.address().port}`);
  });
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
