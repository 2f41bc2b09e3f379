// Package fakeserver is a faithful idempotent HTTP server with fault
// injection, used to prove that a client never turns a lost response into a
// second side effect.
//
// It behaves like a well-run payment API (Stripe style): every mutating
// request carries an idempotency key; the first request with a key records
// the key and a digest of the request, performs the side effect (it creates a
// resource with a fresh id such as "ord_000001") and stores the response, all
// atomically; a repeat of the same request replays the stored response; a
// different request with the same key is refused. Keys are scoped per caller
// and expire after a retention window, after which the same key executes
// again, as on real servers.
//
// Users reach it through the public test helper package
// github.com/idemkit/idem/idemtest and the command cmd/idem-fakeserver.
//
// # HTTP surface
//
// POST, PUT, PATCH and DELETE to any path that does not start with
// "/operations/" or "/_" is a submit:
//
//   - no key: 400 {"error":"missing Idempotency-Key header"} (naming the
//     configured header); a malformed key: 400. A key is accepted bare (abc)
//     or as an RFC 8941 sf-string ("abc", with \" and \\ escapes); a bare key
//     is 1 to [MaxKeyLen] visible ASCII characters other than '"' and '\'.
//   - first request with a key: 201
//     {"state":"succeeded","resourceId":"ord_000001","key":"abc"}.
//   - the same key and the same request (method, request URI with its query,
//     body bytes): the stored status and body, with the header
//     "Idempotent-Replayed: true", and no side effect.
//   - the same key and a different request: 422 {"error":"idempotency key
//     reused with a different request"} (the status is the behaviour's).
//   - the same key while the first request is still executing (or, with the
//     [SlowProcessing] fault, still processing): 409 with Retry-After and
//     {"error":"request with this key is in progress"}.
//   - a new key while [Config.MaxKeys] keys are stored: 503
//     {"error":"key store full"}; a body over [Config.MaxBody]: 413.
//
// GET /operations/{key} (the key path-escaped, scoped by the same scope
// header) answers 200 {"state":"processing|succeeded|failed","resourceId":
// "…","key":"…"} with "reason" when failed, or 404 {"error":"not found"}.
//
// Control endpoints, which are neither counted nor logged: GET /_stats
// answers [Stats] as JSON; GET /_key?key=K&scope=S the [KeyStats] of one
// key; GET /_behavior the [Behavior], defaults filled in; POST /_faults
// with a [Fault] as JSON injects it (204); POST /_reset resets the server
// (204).
//
// Every JSON response has Content-Type application/json and every error body
// is {"error":"…"}.
//
// # Behaviours
//
// Real Idempotency-Key middlewares answer differently from the above, which
// is the IETF draft. [Config.Behavior] selects how the server answers; the
// presets ([Behaviors]) model the shapes met in practice: stored server
// errors replayed with the replay header ([StoredErrors]), no request
// comparison, so a used key silently replays its first answer
// ([NoBodyCompare]), another status for a changed request ([Conflict417]),
// a 30-minute key window ([ShortWindow]). [ClientOrderID] is no
// middleware but an order API whose key is a client order id in the JSON
// body (Alpaca's client_order_id, Binance's newClientOrderId, KuCoin's
// clientOid; [Behavior.KeyMember]): it reads no key header, refuses a
// repeated id whose order exists with Binance's 400 {"code":-2010,"msg":
// "Duplicate order sent."} whatever the body, never replays, answers
// orders in Binance's spot shape (200 {"symbol","orderId","orderListId",
// "clientOrderId","status"}) and answers GET /operations/{key} with the
// order whose client order id is key, or 400 {"code":-2013,"msg":"Order
// does not exist."} (developers.binance.com, Spot API, "Trading
// endpoints" and "Error codes"). [Server.Preempt] and the
// [Preempt] fault make someone else use a key first; [KeyStats] counts, per
// key, the side effects of requests received and of someone else's, and
// the submits that arrived once the key's answer could no longer change.
//
// # Faults
//
// A [Fault] is scripted with [Server.Inject] and applies to the next
// [Fault.Count] matching requests; a [Profile] applies faults at random, with
// probabilities per submit drawn from an RNG seeded by [Config.Seed], so a
// soak run is reproducible. Scripted faults take precedence over the profile;
// a request gets at most one fault. See [FaultKind] for what each fault does
// and which requests it matches.
package fakeserver
