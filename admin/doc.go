// Package admin serves a running Client's journal to operators over HTTP:
// JSON endpoints to list and inspect operations, read counts and health,
// and settle an operation by hand. It uses only the standard library.
//
// Mount it behind your own authentication and authorization middleware:
// whoever reaches it can read every operation's state and resolve
// operations. It serves only what is journaled, and not all of that: never
// a request or response body, never a header (credentials are never
// journaled in the first place).
//
//	mux.Handle("/idem/", http.StripPrefix("/idem", requireOperator(admin.NewHandler(client))))
//
// The idem command talks to it with -url (idem -url https://svc/idem/ list).
//
// # Endpoints
//
//	GET  /operations   list: ?state=unknown,pending&scope=S&flagged=true&older_than=1h&limit=100&cursor=C&timeline=false
//	GET  /operation    one operation with its attempt timeline: ?scope=S&key=K
//	GET  /stats        counts by state, oldest open and unknown ages, review count, retry-budget tokens
//	GET  /health       journal and Run state; 200 when ok, 503 otherwise
//	POST /resolve      {"key","state","reason","by"} (+ "scope", "resource_id", "force")
//	GET  /key-ignoring          the endpoints the Client takes to ignore the idempotency key
//	POST /key-ignoring/remove   {"endpoint"}: forget one, in the journal and in the Client's memory
//
// GET /key-ignoring answers {"endpoints": ["POST https://host/path", ...]}
// (idem.Client.KeyIgnoringEndpoints): an operation to one of them whose
// answer is lost is flagged for review, never resent under the same key.
// POST /key-ignoring/remove (idem.Client.ForgetKeyIgnoring) answers
// {"removed": endpoint}, or 404 for an endpoint not known (503, nothing
// removed, while an endpoint learnt meanwhile is still being journaled
// past 10 s: try again; 409, nothing removed, while the journal holds
// open operations a newer idem wrote, after a rollback: remove it with
// the newer idem); the open operations to it that may have
// executed are flagged "key ignored"
// first (never resent: the endpoint kept no key for them); they stay
// flagged, and teach it again (to this process at Resume or a Run pass
// that reads them, to any at its start): resolve them, then remove it
// again. Other processes on the journal keep it in memory until they
// restart.
//
// Both POSTs take only a Content-Type: application/json body, and the
// handler refuses any POST a browser sends for another site (Go's
// http.CrossOriginProtection: Sec-Fetch-Site, else Origin against Host).
// Cookie-based authentication lets such a request in with the operator's
// rights, and a form or a no-cors fetch can make its body parse as JSON:
// one click on another site could otherwise settle a payment as failed.
//
// A list without scope covers every scope, in (scope, key) order; its
// answer is {"operations": [...], "next": C}, and next is the cursor of
// the following page (absent on the last; a page that lost operations
// pruned while it was read holds fewer than limit, and still has next).
// No page lists a record written by a newer idem (a rollback left them);
// /stats counts them (newer_records): above zero, the list is not the
// whole journal. Errors are {"error": {"code", "message"}} with status 400
// (bad_request: a bad filter, a missing by or reason, a body that is too
// large or no JSON object of the fields wanted, a key-ignoring endpoint
// missing, not METHOD URL, or carrying a user:password@, query or
// fragment, which the message does not quote),
// 404 (not_found: unknown key, unknown key-ignoring endpoint, or unknown
// handler endpoint), 403 (forbidden: a cross-site browser request, or one
// WithOperator could not name), 405 (method_not_allowed), 409 (conflict:
// resolving a settled operation without force, or one flagged "key
// ignored" whose endpoint the journal, keeping as many as it can, cannot
// journal first: remove one no longer called, then resolve again), 415
// (unsupported_media_type: a body that is not application/json) or 503
// (unavailable: the Client is closed).
//
// # Fields
//
// The names are stable. Times are RFC 3339 in UTC; a zero time reads
// "0001-01-01T00:00:00Z".
//
//	operation   scope, key, ref, method, url, result_url, state, review,
//	            attempts (exchanges so far), result {resource_id,
//	            status_code, reason, replayed}, resolved {by, reason, at,
//	            from}, created, first_sent, updated, settled, next_due,
//	            timeline (one operation, or a list with timeline=true),
//	            confirmations
//	confirmations[]  source, event_id, state, resource_id, reason,
//	            status_code, at, effect (settled, agreed, conflicted)
//	timeline[]  number, kind (submit, query), start, wrote, done, replayed,
//	            refused, status, error, retry_after_seconds, duration_seconds
//	stats       by_state {state: count}, open, review, total, complete
//	            (by_state and total include settled operations),
//	            oldest_open_age_seconds, oldest_unknown_age_seconds,
//	            retry_tokens, retry_tokens_max
//	health      ok, journal_ok, journal_error, run_active, run_error,
//	            last_pass, consecutive_errors, last_journal_error,
//	            last_journal_error_at, retry_at, retry_tokens,
//	            retry_tokens_max, hosts (each: host, failed_visits,
//	            failing_since, last_failed_visit, down_since,
//	            slow_since, rest_until), hosts_omitted
//	resolve     from (the state before), operation
//	key-ignoring  endpoints; its remove: removed
//
// A resolve is recorded as the idem command's resolve is: who (by), why
// (reason), when (the Client's clock) and the state it replaced, and it is
// logged at Warn and reported to Hooks.Settle. Who is the body's by unless
// WithOperator names the login the service verified: then that name (403
// when it names nobody), with a differing by kept beside it.
package admin
