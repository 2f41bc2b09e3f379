// Package idemtest runs a fake idempotent payment API for tests, in the
// style of net/http/httptest: [NewServer] starts it on 127.0.0.1, [Server.URL]
// and [Server.Client] reach it, [Server.Close] stops it.
//
// The fake server is faithful, not a stub. Every POST, PUT, PATCH or DELETE
// to a resource path (anything but /operations/… and /_…) must carry an
// Idempotency-Key header (bare, or an RFC 8941 quoted string). The first
// request with a key records it with a digest of the request, performs the
// side effect (it creates a resource "ord_000001", …) and answers 201
// {"state":"succeeded","resourceId":"ord_000001","key":"…"}; a repeat of the
// same request replays that answer with "Idempotent-Replayed: true" and no
// new side effect; the same key with a different request gets 422; the same
// key while the first request is still executing gets 409 with Retry-After.
// Keys are scoped by the Authorization header (see [WithScopeHeader]) and
// expire after a retention window (see [WithRetention]), after which the key
// executes again. GET /operations/{key} ([Server.ResultURL]) reports an
// operation's state; [Server.ResultTemplate] is its template for
// idem.WithResultEndpoint. Every answer carries a Date read from the
// server's clock ([WithClock]), as a real origin server's does (RFC 9110
// 6.6.1): idem judges Retry-After and the key window by it.
//
// # Proving "exactly one order per intent"
//
// [Server.Effects] counts the side effects for one key, across expiries, and
// [Stats].MaxEffectsPerKey the largest count for any key: a client is correct
// when, whatever the faults, every intent it settled has exactly one. A
// second order under a new key, or an order never made, leaves
// MaxEffectsPerKey at 1: compare [Stats].SideEffects with the number of
// intents as well.
// [Server.Requests] logs every request received, including those net/http
// resends by itself (its Transport silently resends a request that carries an
// Idempotency-Key header when a reused connection dies before any answer).
//
// # Behaviours
//
// Real Idempotency-Key middlewares answer differently from one another.
// [WithBehavior] picks how the server answers a key it has seen: the IETF
// draft above ([IETFDraft], the default), stored 500 and 503 replayed for
// the key's life ([StoredErrors]), a silent replay of a used key's answer
// whatever the body ([NoBodyCompare]), 417 for a used key with another
// body ([Conflict417]), a 30-minute key window ([ShortWindow]), an order
// API whose key is a client order id in the body, which refuses a repeated
// id with Binance's 400 -2010 "Duplicate order sent." and answers its result
// endpoint by client order id, never replaying ([ClientOrderID]), or an
// endpoint that ignores the key, executing every submit and marking its
// answers Idempotency-Status: ignored ([KeyIgnored]); the knobs of a
// [Behavior] combine. [Server.Preempt] (or the [Preempt] fault) makes
// someone else use a key first. [Server.KeyStats] counts, per key, the
// submits that arrived once the key's answer could no longer change, so a
// test can bound how often a client resends a settled key.
//
// # Faults
//
// [Server.Inject] scripts a [Fault] for the next requests that match it;
// [WithProfile] and [Server.SetProfile] apply faults at random with
// probabilities, reproducibly from [WithSeed]. The kinds: [DropAfterCommit],
// [DelayResponse], [ErrorAfterCommit], [ErrorBeforeCommit], [Throttle],
// [Unavailable], [QueryLag], [SlowProcessing], [GarbageBody],
// [TruncatedBody], [Decline], [Reject409], [Preempt], [StillRunning],
// [LostAnswerLag], [StillRunningDecline], [StillRunningProcessing]. A test
// in another
// process (or language) can script faults over HTTP: POST /_faults with a
// JSON fault such as {"kind":"unavailable","retry_after":"2s"} (the kind is
// the constant's name in kebab case); GET /_stats returns
// the [Stats] as JSON, GET /_key?key=K&scope=S the [KeyStats] of one key,
// GET /_behavior the [Behavior], and POST /_reset resets the server. The
// command cmd/idem-fakeserver runs the same server as a process.
//
// # Webhooks
//
// [WithWebhook] makes the server POST a signed [WebhookEvent] to a loopback
// URL for every state each committed operation reaches, echoing the
// request's metadata (where a client puts its key), with the faults real
// providers have: lost, duplicated and delayed (out of order) events, and
// deliveries retried within bounds. [Server.FlushWebhooks] waits for the
// deliveries, [Server.WebhookStats] counts them, and Close stops them.
// The events feed idem.Client.Confirm.
package idemtest
