// Package idem calls payment and order APIs so that one business intent
// becomes exactly one side effect on the server, whatever the network and
// the process do.
//
// A timeout means "no answer", not "it failed": the server may have created
// the order and lost the response. idem gives each operation one
// idempotency key for its whole life, writes the key and the exact body to
// a local journal (package journal, a bbolt file) before the first byte is
// sent, reuses both on every retry and after every restart, and when it
// cannot tell what happened it says so ([ErrUnknownOutcome]) and keeps
// checking in the background.
//
// # Use
//
//	c, err := idem.Open("payments.journal",
//		idem.WithResultEndpoint("https://api.example.com/v1/operations/{key}"),
//		idem.WithRequestHook(func(r *http.Request) error {
//			r.Header.Set("Authorization", "Bearer "+token) // never journaled
//			return nil
//		}))
//	if err != nil { … } // journal.ErrLocked: another process holds the file
//	defer c.Close()
//
//	// At start-up, settle what the last process left open.
//	sum, err := c.Resume(ctx)
//	go c.Run(ctx) // background reconciler
//
//	res, err := c.Submit(ctx, idem.Request{
//		Key:  draft.ID, // its own id: a call made again is this operation (empty: a new UUIDv7 per call)
//		URL:  "https://api.example.com/v1/orders",
//		Body: body,
//	})
//	switch {
//	case err == nil && res.Review != "": // succeeded, flagged (perhaps made twice): a person looks
//	case err == nil: // res.State == StateSucceeded, res.ResourceID
//	case errors.Is(err, idem.ErrUnknownOutcome): // journaled; Run settles it,
//		// or a person (ErrNeedsReview: res.Review); never a new key
//	case errors.Is(err, idem.ErrKeyConflict):
//		// the key used with another body, refused by the server
//		// (ErrFailed) or held so by the journal (res nil): under an
//		// order-id key, an earlier call for this order, which may have
//		// paid; look it up under the key, never pay it again under a new one
//	case errors.Is(err, idem.ErrFailed): // the server refused it: res.Reason
//	default: // nothing journaled, nothing sent: retry under the same key
//	}
//
// [Client.Prepare] journals an operation without sending it; [Client.Do]
// drives a journaled one; [Client.Submit] does both with one journal commit
// fewer.
//
// [Client.Shutdown] refuses new calls, stops Run and Resume, lets calls in
// flight finish until its context ends, and closes the journal;
// [Client.Close] does the same without waiting. A call either one stops
// returns [ErrUnknownOutcome] (and [ErrClosed]) and its operation stays
// open, never failed, for the next [Client.Resume].
//
// # States
//
//	pending ──► processing ──► succeeded | failed   (terminal)
//	   │             │
//	   └──► unknown ◄┘   (budget spent, caller gone; due for reconciliation)
//
// pending: journaled, no send confirmed. processing: the server accepted it
// and has not finished. unknown: the call ended without a confirmed
// outcome; it stays in the journal and [Client.Resume] and [Client.Run]
// settle it. Only succeeded and failed are terminal, and a terminal
// operation is never sent again; only [Client.Resolve] (a recorded manual
// settlement) changes its outcome ([Client.Confirm] may flag it for review
// when an event contradicts it, never change it). A cancelled context
// never marks an operation failed.
//
// # Flagged operations
//
// An operation flagged for review (Result.Review, Operation.Review) is a
// person's to settle with [Client.Resolve], whatever its State, and every
// reader says so the same way. A flagged failure may have executed (the
// server's answer or an event contradicts it, [ReviewConfirmConflict]; an
// earlier copy may have run, [ReviewMaybeTwice]; the server made it twice,
// [ReviewMadeTwice]): [Client.Do] and [Client.Submit] report it as
// [ErrNeedsReview] with [ErrUnknownOutcome], never [ErrFailed], which
// would invite a retry under a new key, a second charge. So does a
// success that a failure contradicts (the server's answer or an event
// said failed, kept beside it: [ReviewConfirmConflict]; an operator
// forced it succeeded while a decline was on the way), unless that
// failure names another resource than the success: nil would ship what
// may be unpaid. A success flagged because it may have executed
// more than once ([ReviewMadeTwice], [ReviewMaybeTwice], an event naming
// another resource) keeps a nil error: the server did execute it (a
// payment made twice was made), and an error would tell a caller who
// reads err == nil as "charged" that it was not, whose next step may be
// a new key; Result.Review says a person must look (a second copy to
// refund), Hooks.Review fired when it was flagged, and it stays listed
// (Filter.Review) until Resolve. So does a success an event confirmed
// ([Client.Confirm]) while the operation was flagged [ReviewKeyInUse],
// or flagged [ReviewKeyIgnored] after a result query found another
// request's result under the key: the event found it by the key, which
// the other request's events carry too, and a person decides whose
// payment it names. [Summary] and [Stats] count
// every flagged operation as Review, settled or not, never as succeeded
// or failed. The readers that return a Result or an Operation without an
// error ([Client.Wait], [Client.Lookup], [Client.List], Hooks.Settle, the
// [WithSettleFunc] callback, [Client.Confirm]) give the journal's State
// with Review beside it: read Review before acting on a failed State.
//
// # Outcome table
//
// Each submit's answer is classified by a [Classifier]
// ([DefaultClassifier] unless replaced) and, for 2xx, read by a [Decoder]:
//
//	answer                                   meaning                 next step
//	2xx, body decodes                        settled (or processing) record, return
//	2xx, body does not decode                ambiguous               query the result endpoint
//	409, ours may have executed              ours in flight          processing: wait, query
//	409, nothing of ours executed            someone else's in flight wait, resend (never query)
//	  then a 2xx describing another request  theirs, stored          unknown, ReviewKeyInUse, ErrKeyConflict (Flexiti; Mercado Pago, PayPal, nested)
//	409 marked Idempotency-Status: ignored   the endpoint's refusal  failed (first attempt), else ReviewKeyIgnored (below)
//	  saying the order exists, paid or runs  maybe a copy of ours    ReviewKeyIgnored, never resent; a result query's "declined" fails it (below)
//	409 invalid_operation_error (Increase)   refused for the object's state as "other 4xx" (below)
//	409 BAD_VALUE (Klarna), Affirm's         refused for its values  as "other 4xx" (below)
//	  capture-*/partial-capture-instrument
//	422 naming the key, WithKeyConflictStatus key reused, other body failed, ErrKeyConflict, never resent
//	400 saying the key was used before       key reused, other body failed, ErrKeyConflict, never resent
//	409 saying the key's request differs     key reused, other body failed, ErrKeyConflict, never resent
//	  the three, not saying ours differs     maybe a copy of ours    unknown, ReviewKeyInUse, ErrKeyConflict
//	409/422/400 "order already paid", the    the order's state, or   never resent (Do and Submit too) nor failed: query by key (found settles;
//	  key in a header, to a payment          a copy of ours paid it  first attempt: not found past the lag fails, past the key window
//	                                                                 from the first attempt ReviewKeyExpired), else ReviewRefusedAfterSend;
//	  (unmarked, from an endpoint known to ignore the key: as its 409 marked ignored, ReviewKeyIgnored)
//	  "invoice already paid" too; a 2xx decoded failed saying so; a create's 409 "order already exists"
//	422/400 in progress, ours may have run   ours in flight          processing: wait, resend
//	422/400 in progress, nothing of ours     someone else's          unknown, ReviewKeyInUse, ErrKeyConflict
//	2xx decoded failed, saying in progress   as a 422/400 in progress (a GraphQL userError: Shopify's IDEMPOTENCY_CONCURRENT_REQUEST; WPG's XML error 9 "Request in progress")
//	2xx decoded failed, GraphQL internal err may have executed       query, then resend same key (INTERNAL_SERVER_ERROR; Braintree errorClass INTERNAL, SERVICE_AVAILABILITY)
//	2xx decoded failed, duplicate order      as a 400 saying the key was used (WPG's "Duplicate Order" with the key in a header; "already paid": as its 409)
//	429                                      throttled               wait max(backoff, Retry-After), resend
//	503                                      unavailable             wait max(backoff, Retry-After), resend
//	400 with AWS's ThrottlingException…      throttled               wait max(backoff, Retry-After), resend
//	408, 499, 3xx, 500, 502, 504, other 5xx  may have executed       query, then resend same key
//	301/307/308 to the URL ± a trailing slash or in https  not executed (a router)  failed, the reason names the URL
//	302/303 naming the key, decoded success  the API's answer (PayU) as a 2xx decoded so; read otherwise, as other 3xx
//	other 4xx (402 declined, 400, 403, …)    rejected                failed with the server's reason
//	transport error, request not written     not executed            backoff, resend
//	transport error after writing, timeout   ambiguous               query, then resend same key
//	any answer marked replayed               the key's final answer  never resent (below)
//	4xx naming the resource the key created  the key's final answer  as a replayed 2xx (below)
//	Idempotency-Status: ignored, maybe run   no de-duplication       unknown, ReviewKeyIgnored, never resent
//	  ... on a 2xx that settles it           may have run twice      settled, flagged ReviewMaybeTwice
//
// The "failed" rows are a first attempt's. After an attempt that may have
// executed, a refusal (a 4xx but 429, a 409 saying the key was used or
// refusing the request for its object's state or values as Increase's
// invalid_operation_error, Klarna's BAD_VALUE and Affirm's capture
// refusals do, a 2xx read as a refusal) that is not the key's stored
// answer (the replayed rows) may be a gateway's or an expired credential's, or
// refuse this copy for what the earlier one did: it is queried and
// resent, never failed, and the third is flagged [ReviewRefusedAfterSend].
// An answer saying the key's request still runs (a 409, or a 422, 400 or
// 2xx so worded) is a wait for ours, and is not counted among them.
//
// A replayed answer (Idempotent-Replayed: true or ?1, or the same marker
// named Idempotency-Replayed, X-Idempotent-Replayed or
// X-Idempotency-Replayed, or PPRO's Request-Idempotency, easypay's
// Idempotency-Replay, Flutterwave's X-Idempotency-Cache-Hit or
// Chargebee's Chargebee-Idempotency-Replayed; Idempotency-Status or
// X-Idempotency-Status: replayed; Worldline's
// X-GCS-Idempotence-Request-Timestamp on any answer but a 409, which says
// the key's first request still runs, or a 429) is the server's stored
// one for the key: a replayed 2xx settles only if an earlier attempt may
// have reached the server, else the key is another request's
// ([ReviewKeyInUse], an error matching [ErrKeyConflict],
// [ErrUnknownOutcome] and [ErrNeedsReview]), as it is when its body
// describes another request (an amount, currency, side, the merchant's
// reference… not the journaled body's: a server replaying the key's stored answer whatever the body,
// to a key that collided); a replayed 4xx settles
// failed; a replayed 5xx, 408 or 499 is flagged for review at once ([ErrNeedsReview]) and still
// queried. A key conflict (422, 400, 409 above) answered to a first
// attempt fails it only in words that say this request differs from the
// key's first ("same parameters", "does not match", "different payload",
// "mismatch", "another request"), or with a WithKeyConflictStatus status;
// one that says only that the key was used ("already exists",
// "duplicate_request") is what a server that never replays (BVNK,
// Airwallex) answers a copy of this very request, which a mesh's retry of
// a 503 or net/http's resend on a dead connection may have sent first: it
// is flagged [ReviewKeyInUse], never [ErrFailed], never resent. With the
// key in the body ([WithKeyInBody]), so is a 400 or 422 that says the
// order or the key's member is a duplicate without naming the key, as
// order APIs keyed by a client order id refuse the id sent again
// (Binance's "Duplicate order sent.", Alpaca's "client_order_id must be
// unique"), and a 2xx whose envelope carries such an error (Bybit's
// retCode 110072 "OrderLinkedID is duplicate", OKX's sCode 51016) that
// the Decoder cannot read or reads as failed, or any 2xx with such words
// it reads as failed (Kraken Futures' "clientOrderIdAlreadyExist" under
// "result": "success", PayU India's refund "status": 0 "Token already
// exists", Paytm's refund TXN_FAILURE "Refund Already Raised"), or a
// duplicate of the request's own UUID, which every copy carries
// (Trustly's JSON-RPC error 688 ERROR_DUPLICATE_UUID); "duplicate line
// item" or "duplicate email" is no such answer and fails as any
// validation error does. With the key in a header, a first attempt's 400
// or 422 that says the order in the body is a duplicate (dLocal's 5009
// "Order ID is duplicated.", Toss Payments' DUPLICATED_ORDER_ID) is
// flagged [ReviewKeyInUse] too: such a server checks the order id before,
// or without, its idempotency store, and the order it holds may be a copy
// of ours. A refusal that
// names the resource its key already created
// (GoCardless's 409 idempotent_creation_conflict with
// links.conflicting_resource_id, Primer's 409 IdempotencyKeyAlreadyExists
// or 400 TransactionRequestIdempotencyKeyAlreadyExists with paymentId,
// Banking Circle's 400 "IdempotencyKey … was already used at … creating
// entity …", Moov's 409 whose body is the key's transfer, its
// transferID, createdOn and status; Interchecks' 409 whose body is the
// key's first answer as it was, when it holds the key at a member named
// as a key, or the merchant's own reference at its member, and its
// resource's status says it finished, read as a 202's is: DOKU's bodies,
// with no id nor status, never are, and its 409s are read as bare) is
// judged as a replayed 2xx: succeeded with that resource only if an
// earlier attempt may have reached the server, unless the answer says
// the resource was declined or failed (Primer's paymentStatus, Moov's
// status), which
// settles failed, as a replayed 4xx. One whose body describes another
// request (Moov's transfer, its amount not the journaled one's: a key
// shared, or reused from a business id), or a payment or transfer other
// than the one the request's path acts on (a refund's), is flagged
// ReviewKeyInUse. One
// naming the resource the request's path names, the one it acted on
// (Primer's refund's 409 naming the payment refunded, and that payment's
// status), says only that the key's request was processed: flagged
// ReviewFinalAnswer after an attempt that may have executed.
//
// An answer that says this attempt did not execute (409 in flight, 429, a
// 4xx, a request never written) says nothing of earlier attempts: an
// operation is "maybe executed" only while some attempt may have reached
// the server without such an answer (503 is not among them). Only then is
// a refusal after it ambiguous, and it is queried rather than failed
// (with the key in the body, so is a 2xx whose envelope carries an error
// and that the Decoder reads as failed: Kraken's "EOrder:Insufficient
// funds" to a resend once the order filled); a
// result endpoint is asked only then, since before it the key's result is
// someone else's. "Not written" is told from "maybe written" with
// net/http/httptrace, not by matching error text; a transport that reports
// no trace events gets no benefit of the doubt, and a request net/http sent
// twice counts as maybe executed. Without a result endpoint, an ambiguous
// operation is settled by resending it with the same key (servers such as
// Stripe replay the stored response). A result query that answers 404 is
// not "never happened" (read replicas lag): the operation is resent with
// its key, which the server de-duplicates, after a backoff wait. An
// operation the server has said it holds (processing: a 202, a 409 for
// its key in flight, the endpoint's own answer) that has a result
// endpoint is never resent, whatever the endpoint answers later (404,
// 401, 500): a 404 may be a store that lost the key, to which a resend
// is a new request, and nothing the endpoint says later proves the store
// has the key again; it is only asked again, and past the key window
// flagged [ReviewKeyExpired]. With the key in the body ([WithKeyInBody]),
// a result query's 2xx that the Decoder cannot read but that holds the
// key as a member's value, with no error, found the order (Binance's
// order by origClientOrderId): a client order id unique among open
// orders only is free again once the order has filled, so the operation
// is held processing in the same way, asked again and never resent,
// until a Decoder that reads the API's orders settles it; and only an
// answer that does not find the order (a JSON 404, a 400 or 422 saying it is
// "not found", "does not exist" or, as Flutterwave's, "No transaction was
// found", a JSON 2xx with no error that does
// not name it) is followed by a resend, and only once the last send is
// older than [WithResultLag] (a read path behind its engine: Binance's
// -2013 for an order placed up to a minute ago; until then asked again),
// never a query that failed (no
// answer, a 5xx, a 401, a 400 about the query itself, a 2xx that is no
// JSON or carries an error, also as an envelope's code says one, a
// proxy's own 404, a cache's stored answer that does not name the key),
// which is asked again; a 503 to a submit,
// which may follow the work done, is asked about before any resend. A
// result query answered 410 Gone says the server has forgotten the key, as does a 404 whose body says the idempotency key "expired" or is "no longer" held:
// the operation is never resent, and stays unknown with [ReviewKeyExpired],
// unless it was flagged already for a reason that tells a person more
// ([ReviewKeyInUse], [ReviewKeyIgnored], [ReviewClockStepped],
// [ReviewMadeTwice]): that reason stays, and blocks resends as well.
// An answer whose Idempotency-Status (or X-Idempotency-Status) is
// "ignored" says the server does not de-duplicate by the key there
// (Solidgate's endpoints without idempotency support): if the operation
// may have executed and the answer does not settle it, a resend would be
// a second request, so it is flagged [ReviewKeyIgnored] and never resent,
// not even by [Client.Do]. Once an endpoint's answer has said so (a 429
// so marked is resent), a lost answer to a later submit to it, of this
// operation or another, is judged the same way, and net/http is not let
// send such a submit again on its own. Nor, until a 2xx not so marked has
// come from an endpoint in the process, a submit there written whole and
// not answered (an endpoint says it ignores the key only in its answers; a
// 1xx, such as 103 Early Hints, is no answer), over HTTP/1 or HTTP/2:
// net/http resends after an HTTP/2 stream's PROTOCOL_ERROR reset, which
// says nothing of whether it ran, and a stream the server refused cannot
// be told from it, so on first contact either is a lost answer idem
// settles itself under the same key. An empty body too, which net/http
// resends without rewinding: over HTTP/1 the key's field goes out named
// in lower case (idempotency-key, as HTTP/2 names it), which net/http
// does not read as making the request replayable; not a GET, HEAD,
// OPTIONS or TRACE, which net/http resends over HTTP/1 by its method.
// A 409 so marked is the endpoint's own refusal, not another request
// holding a key it does not read: failed with its reason to a first
// attempt, flagged [ReviewKeyIgnored] after a send that may have executed.
// Unless its words say the order exists, is a duplicate or was already
// paid (to a request that may pay, not a cancel or a refund), or that its
// payment is running: what they refer to may be a copy
// of this very request a proxy sent again (a mesh's retry), which the
// endpoint executed. Such a 409 to a first attempt is flagged
// [ReviewKeyIgnored] and never resent; the result endpoint, if any, is
// asked (again until the call's budget ends when the words say it runs),
// and settles it failed if it finds the payment declined. A payment it
// finds made may be another request's that paid the order under another
// key: like nothing found, it leaves the operation unknown for a person.
// An operation whose answers were lost before the endpoint said so is not
// resent either: the visit that finds it so flags it [ReviewKeyIgnored],
// whatever it ends in, so that what settles it after two such sends flags
// it [ReviewMaybeTwice]; a [Client.Confirm] that settles it before any
// visit flags it so too. The Client remembers such endpoints (method and
// URL without its query), and journals them when its Store keeps them
// ([KeyIgnoringStore]); a new one reads them again, once, from the journal
// and from the open operations flagged for them ([Client.Resume] too),
// before its first send, its first resend of what may have executed, or a
// Confirm of an operation two of whose sends may have.
// [Client.KeyIgnoringEndpoints] lists them; [Client.ForgetKeyIgnoring]
// ([RemoveKeyIgnoring] for a Store alone) forgets one, after flagging
// [ReviewKeyIgnored] the open operations to it that may have executed. A
// drive whose new attempt is journaled on an operation another process
// sharing the journal flagged so meanwhile (its Confirm, its drive) does
// not send it, and learns the endpoint.
// A 2xx so marked that settles an operation an earlier copy of which
// (idem's, or net/http's own resend) may have executed settles it and
// flags it [ReviewMaybeTwice]: the server may have executed it twice. If
// it settles it failed, the earlier copy may still have executed: the
// call ends in [ErrNeedsReview], not [ErrFailed]. An event
// ([Client.Confirm]) or a result query's answer that settles an operation
// flagged [ReviewKeyIgnored] more than one copy of which may have
// executed (idem's, or net/http's own resend, which the journal records)
// flags it [ReviewMaybeTwice] too: it tells of one copy.
// An operation the server said it holds (processing, naming its resource)
// is resent only without a result endpoint; an answer to such a resend,
// replayed or not, that names another resource says the server lost the
// key and made a second: the operation is flagged [ReviewMadeTwice] and
// never resent again, not even by [Client.Do] (settled as the answer
// says, if it settles; a confirmation that settles it keeps the flag).
//
// # Budgets and defaults
//
//	knob                         default                  option
//	initial wait, multiplier     500 ms, ×2, ±50% jitter  WithBackoff
//	longest wait                 30 s                     WithBackoff
//	attempts per call            5 (submits + queries)    WithMaxAttempts
//	time per call                60 s                     WithMaxElapsed
//	time per attempt             10 s                     WithAttemptTimeout
//	Retry-After cap              60 s                     WithRetryAfterCap
//	key window (from first send) 20 min (resent until 18) WithKeyRetention, WithHostKeyRetention
//	retry budget (token bucket)  100 tokens, 0.1 refund   WithRetryBudget
//	reconciler interval          30 s doubling to 1 h     WithReconcile
//	reconciliation deadline      72 h from creation       WithReconcile
//	settled kept, then pruned    7 days (≥ key window)    WithRetainSettled
//	response body read           1 MiB                    WithMaxResponseBytes
//
// A wait is never shorter than the server's Retry-After (as
// [ParseRetryAfterHeader] reads it), capped by WithRetryAfterCap; a 429
// without one waits as long as its rate-limit fields say the quota takes
// to reset (RateLimit's t, RateLimit-Reset, X-RateLimit-Reset: seconds,
// epoch seconds as GitHub's or milliseconds, or an HTTP-date), unless they say some of
// it remains. A wait that would outlast the
// call's budget ends the call at once with [ErrUnknownOutcome] and leaves
// the operation due for the reconciler when the wait ends. The wait
// outlives the call: a later Do or Resume, after a restart too, sends
// nothing before it ends. Each host has
// a retry budget: while a host's is low, retries to it are handed to the
// reconciler instead of adding load to a struggling server, and retries to
// other hosts go on; first attempts always go.
//
// # Key window
//
// Servers forget keys (Stripe after 24 h, the Fiber framework's middleware
// after 30 min by default). Past the key window from the first send that
// may have executed, less [KeyWindowMargin] (the server counts the window
// by its own clock, idem by a replica's), idem never resends: it only
// queries, and if that is inconclusive the operation stays unknown with
// [ReviewKeyExpired] for a person to settle ([Client.List] with Filter{Review: true}, [Client.Resolve],
// or the idem command). The default window, [DefaultKeyRetention] (20 min),
// is shorter than common servers' defaults, not than every server's
// (DynamoDB's token lives 10 min: [KeyRetentionDynamoDB]; Helcim's
// payment keys 5: [KeyRetentionHelcim]; Authorize.Net's duplicate
// window 2: [KeyRetentionAuthorizeNet]); name yours with
// [WithKeyRetention] or [WithHostKeyRetention] (presets such as
// [KeyRetentionStripe]). A journaled send time in the future (a clock
// stepped back) blocks resends for good: [ReviewClockStepped]. So does a
// key an earlier process first sent whose window, by the host's own
// clock (its answers' Date, RFC 9110 6.6.1, when that reads ahead of
// ours), has passed: a clock stepped back by more than the key's age
// (a VM restored from a snapshot, a wrong RTC at boot) leaves nothing
// in the future, and would make a forgotten key look fresh. The host's
// clock is learnt from its answers since the process started (a result
// query comes before any resend). Without a result endpoint, before the
// first resend of such an operation to a host none of whose answers has
// come back yet, idem may send one HEAD per host to the operation's URL
// (its path only: no key, no body, no journaled header, no request hook)
// to read the host's clock from its answer's Date, whatever the status;
// the resends to that host wait for it (at most two attempt timeouts),
// then are judged by it. Nothing else is ever sent without the key. A
// HEAD answered with no usable Date teaches nothing: the resends are
// judged by our clock alone. One refused at once (a host not up yet)
// holds the resends too, none sent by our clock alone: a call waits its
// backoff, the probe counted as an attempt, and asks again; Resume and
// Run hand the operation off, and their next visit asks. One that timed
// out (a silent host, or one slower than the attempt timeout) holds the
// resends: none is sent, each call ends unknown, and the first resend to
// the host an attempt timeout later asks again, at the host's root (a
// HEAD on the path may run its slow GET handler), then at the path, in
// turn.
//
// # Settling from webhooks
//
// A provider's webhook event can settle what neither a query nor a resend
// may: [Client.Confirm] records it (source and event id, so a redelivery
// changes nothing) and settles the open operation, which is never sent
// again; an event that contradicts a settled outcome is flagged
// ([ReviewConfirmConflict], [ErrConfirmConflict]; one flagged
// [ReviewKeyInUse] or [ReviewMaybeTwice], or open and flagged
// [ReviewMadeTwice] or [ReviewKeyIgnored], keeps that flag), never
// applied; one naming another resource than an open operation's flags
// it so too, and Resume and Run then only query it, even a visit of
// another process sharing the journal whose resend was judged before the
// flag landed, and [Client.Do] answers [ErrNeedsReview] without sending
// it (another payment for the key tells of a server that lost it once);
// one that settles an operation flagged [ReviewKeyIgnored] after more than
// one send that may have executed flags it [ReviewMaybeTwice], whatever
// contradiction came before it. A call's own answer that arrives after an
// event (or [Client.Resolve]) settled the operation is compared the same
// way (one saying the server is still executing the request, or one that
// tells nothing to a resend that may have executed, contradicts a failure
// too); a failure so contradicted, by that answer or by an event, is
// reported to every call as [ErrNeedsReview] and [ErrUnknownOutcome],
// never [ErrFailed]: the request may have executed, and a retry under a
// new key could charge twice. Put the key in the request's metadata so
// that the events carry it back; [Client.LookupResource] finds an open
// operation by the resource id its response named. Confirm only an event that ends the
// operation's own object for good (Stripe's payment_intent.succeeded or
// payment_intent.canceled, never payment_intent.payment_failed, after
// which the customer may still pay the intent, nor a charge's, a
// refund's or a dispute's event): a failure settles at once, and a new
// payment offered then is a second one (see [Confirmation]).
//
// # Concurrency and processes
//
// A Client is safe for concurrent use. Calls for the same (scope, key) in
// one process share one request in flight. One process owns a journal
// file: a second one gets journal.ErrLocked after a bounded wait. Services
// with several replicas give each its own journal, and each replica
// resumes its own.
//
// # Testing
//
// Package idemtest starts a faithful fake idempotent server with fault
// injection and side-effect counters, and provides a manual clock
// (idemtest.NewClock) for [WithClock].
package idem
