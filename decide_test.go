package idem

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/idemkit/idem/journal"
)

// TestJudgeSubmit is the outcome table of the package documentation, row
// by row, with what came before: "fresh" is an operation nothing of which
// can have executed; "maybe" one with an earlier attempt that may have.
func TestJudgeSubmit(t *testing.T) {
	fresh := past{}
	maybe := past{maybeExecuted: true}
	held := past{maybeExecuted: true, held: "ord_1"} // a 202 said the server holds ord_1
	ok := Outcome{State: StateSucceeded, ResourceID: "ord_1"}
	declined := Outcome{State: StateFailed, Reason: "card declined"}
	processing := Outcome{State: StateProcessing, ResourceID: "ord_1"}
	garbage := errors.New("garbage")
	keyBody := []byte(`{"error":"idempotency key reused with a different payload"}`)
	tests := []struct {
		name         string
		p            past
		a            answer
		move         move
		refused      bool
		conflict     bool
		wantState    State  // for moveSettle
		reviewPrefix string // for moveReview; for moveSettle, the whole flag kept beside the outcome
	}{
		{name: "2xx decodes", p: fresh, a: answer{status: 201, verdict: Settled, out: ok}, move: moveSettle, wantState: StateSucceeded},
		{name: "2xx says failed", p: fresh, a: answer{status: 200, verdict: Settled, out: declined}, move: moveSettle, wantState: StateFailed},
		{name: "2xx envelope's refusal, fresh: failed", p: fresh, a: answer{status: 200, verdict: Settled, out: declined, envelopeRefusal: true},
			move: moveSettle, wantState: StateFailed},
		{name: "2xx envelope's refusal after maybe executed: ambiguous", p: maybe, a: answer{status: 200, verdict: Settled, out: declined, envelopeRefusal: true},
			move: moveQuery, refused: true},
		{name: "third 2xx envelope's refusal after maybe executed: review", p: past{maybeExecuted: true, refusals: 2},
			a: answer{status: 200, verdict: Settled, out: declined, envelopeRefusal: true}, move: moveReview, refused: true, reviewPrefix: ReviewRefusedAfterSend},
		{name: "2xx says failed after maybe executed, no envelope's error: failed", p: maybe, a: answer{status: 200, verdict: Settled, out: declined},
			move: moveSettle, wantState: StateFailed},
		{name: "2xx says processing", p: fresh, a: answer{status: 202, verdict: Settled, out: processing}, move: moveProcessing},
		{name: "2xx does not decode: query", p: fresh, a: answer{status: 201, verdict: Settled, decodeErr: garbage}, move: moveQuery},
		{name: "206 a cache's part, however it decodes: query", p: fresh, a: answer{status: 206, verdict: Settled, out: ok}, move: moveQuery},
		{name: "2xx with a state the decoder should not give: query", p: fresh, a: answer{status: 201, verdict: Settled, out: Outcome{State: StateUnknown}}, move: moveQuery},

		{name: "409 with nothing of ours executed: someone else's, resend", p: fresh, a: answer{status: 409, verdict: Processing}, move: moveResend, refused: true},
		{name: "409 after ours may have executed: ours in flight", p: maybe, a: answer{status: 409, verdict: Processing}, move: moveProcessing, refused: true},

		{name: "422 key conflict saying the request differs, on a fresh operation: failed, conflict", p: fresh,
			a:    answer{status: 422, verdict: Conflict, keyConflict: true, differs: true, body: keyBody},
			move: moveSettle, refused: true, conflict: true, wantState: StateFailed},
		{name: "422 saying only that the key was used, on a fresh operation: maybe a copy of ours, review", p: fresh,
			a:    answer{status: 422, verdict: Conflict, keyConflict: true, body: []byte(`{"errors":{"id":["has already been taken"]}}`)},
			move: moveReview, refused: true, conflict: true, reviewPrefix: ReviewKeyInUse},
		{name: "422 validation error: failed, no conflict", p: fresh, a: answer{status: 422, verdict: Conflict, body: []byte(`{"error":"amount"}`)},
			move: moveSettle, refused: true, wantState: StateFailed},
		{name: "422 after maybe executed: ambiguous", p: maybe, a: answer{status: 422, verdict: Conflict, keyConflict: true}, move: moveQuery, refused: true},
		{name: "third refusal after maybe executed: review", p: past{maybeExecuted: true, refusals: 2}, a: answer{status: 422, verdict: Conflict, keyConflict: true},
			move: moveReview, refused: true, reviewPrefix: ReviewRefusedAfterSend},

		{name: "422 saying the key's request is in progress, fresh: someone else's, review", p: fresh, a: answer{status: 422, verdict: Conflict, inFlight: true},
			move: moveReview, refused: true, conflict: true, reviewPrefix: ReviewKeyInUse},
		{name: "422 saying the key's request is in progress, after maybe executed: ours in flight", p: maybe, a: answer{status: 422, verdict: Conflict, inFlight: true},
			move: moveProcessing, refused: true},
		{name: "400 saying the key's request is in progress, net/http sent twice: ours in flight", p: fresh, a: answer{status: 400, verdict: Rejected, inFlight: true, resent: true},
			move: moveProcessing},

		{name: "429 throttled: resend, did not execute", p: maybe, a: answer{status: 429, verdict: Throttled}, move: moveResend, refused: true},
		{name: "503 unavailable: resend, may have executed", p: fresh, a: answer{status: 503, verdict: Throttled}, move: moveResend},

		{name: "408 ambiguous", p: fresh, a: answer{status: 408, verdict: Ambiguous}, move: moveQuery},
		{name: "500 ambiguous", p: fresh, a: answer{status: 500, verdict: Ambiguous}, move: moveQuery},
		// Cloudflare's own 521 too: its load balancer's failover may have
		// passed the request to an origin that took it (TestEdge521AfterFailover*).
		{name: "521 ambiguous", p: fresh, a: answer{status: 521, verdict: Ambiguous}, move: moveQuery},
		{name: "502 ambiguous", p: fresh, a: answer{status: 502, verdict: Ambiguous}, move: moveQuery},
		{name: "504 ambiguous", p: fresh, a: answer{status: 504, verdict: Ambiguous}, move: moveQuery},

		{name: "400 saying the key was reused with other parameters, fresh: failed, conflict", p: fresh, a: answer{status: 400, verdict: Rejected, keyConflict: true, differs: true},
			move: moveSettle, refused: true, conflict: true, wantState: StateFailed},
		{name: "400 saying only that the key was used, fresh: maybe a copy of ours, review", p: fresh, a: answer{status: 400, verdict: Rejected, keyConflict: true},
			move: moveReview, refused: true, conflict: true, reviewPrefix: ReviewKeyInUse},
		{name: "400 saying the key was reused, after maybe executed: ambiguous", p: maybe, a: answer{status: 400, verdict: Rejected, keyConflict: true}, move: moveQuery, refused: true},
		{name: "other 4xx on a fresh operation: failed", p: fresh, a: answer{status: 403, verdict: Rejected}, move: moveSettle, refused: true, wantState: StateFailed},
		{name: "other 4xx after maybe executed: ambiguous", p: maybe, a: answer{status: 401, verdict: Rejected}, move: moveQuery, refused: true},

		{name: "transport error, never sent: resend", p: fresh, a: answer{unsent: true}, move: moveResend, refused: true},
		{name: "transport error after writing: query", p: fresh, a: answer{}, move: moveQuery},

		{name: "replayed 2xx after maybe executed: settled", p: maybe, a: answer{status: 201, verdict: Settled, replayed: true, out: ok}, move: moveSettle, refused: true, wantState: StateSucceeded},
		{name: "replayed 2xx to a fresh operation: someone else's", p: fresh, a: answer{status: 201, verdict: Settled, replayed: true, out: ok},
			move: moveReview, refused: true, conflict: true, reviewPrefix: ReviewKeyInUse},
		{name: "replayed 2xx that net/http sent twice: ours", p: fresh, a: answer{status: 201, verdict: Settled, replayed: true, resent: true, out: ok}, move: moveSettle, wantState: StateSucceeded},
		{name: "replayed 2xx that does not decode: review", p: maybe, a: answer{status: 201, verdict: Settled, replayed: true, decodeErr: garbage},
			move: moveReview, refused: true, reviewPrefix: ReviewFinalAnswer},
		{name: "replayed 2xx cut in transit: query", p: maybe, a: answer{status: 201, verdict: Settled, replayed: true, cut: true, decodeErr: garbage}, move: moveQuery, refused: true},
		{name: "replayed 4xx: failed", p: maybe, a: answer{status: 409, verdict: Processing, replayed: true}, move: moveSettle, refused: true, wantState: StateFailed},
		{name: "replayed 4xx to a fresh operation: failed", p: fresh, a: answer{status: 400, verdict: Rejected, replayed: true}, move: moveSettle, refused: true, wantState: StateFailed},
		{name: "replayed 5xx: review", p: maybe, a: answer{status: 500, verdict: Ambiguous, replayed: true}, move: moveReview, refused: true, reviewPrefix: "server replayed a stored 500"},
		{name: "replayed 503: review, not throttling", p: maybe, a: answer{status: 503, verdict: Throttled, replayed: true}, move: moveReview, refused: true, reviewPrefix: "server replayed a stored 503"},
		{name: "409 naming the resource the key created, after maybe executed: settled", p: maybe, a: answer{status: 409, verdict: Processing, created: "PM1"},
			move: moveSettle, refused: true, wantState: StateSucceeded},
		{name: "409 naming the resource the key created, fresh: someone else's", p: fresh, a: answer{status: 409, verdict: Processing, created: "PM1"},
			move: moveReview, refused: true, conflict: true, reviewPrefix: ReviewKeyInUse},
		{name: "409 naming the resource the key created, after the key was contested: not ours", p: past{maybeExecuted: true, contested: true},
			a: answer{status: 409, verdict: Processing, created: "PM1"}, move: moveReview, refused: true, conflict: true, reviewPrefix: ReviewKeyInUse},
		{name: "replayed 202 still running, after the key was contested: not ours", p: past{maybeExecuted: true, contested: true},
			a: answer{status: 202, verdict: Settled, replayed: true, out: Outcome{State: StateProcessing, ResourceID: "pay_theirs"}}, move: moveReview, refused: true, conflict: true, reviewPrefix: ReviewKeyInUse},
		{name: "429 that net/http sent twice: may have executed", p: fresh, a: answer{status: 429, verdict: Throttled, resent: true}, move: moveResend},
		{name: "500 from a server that ignores the key: review, never resent", p: fresh, a: answer{status: 500, verdict: Ambiguous, keyIgnored: true}, move: moveReview, reviewPrefix: ReviewKeyIgnored},
		{name: "refusal from a server that ignores the key, after maybe executed: review", p: maybe, a: answer{status: 401, verdict: Rejected, keyIgnored: true},
			move: moveReview, refused: true, reviewPrefix: ReviewKeyIgnored},
		{name: "429 from a server that ignores the key, nothing executed: resend", p: fresh, a: answer{status: 429, verdict: Throttled, keyIgnored: true}, move: moveResend, refused: true},
		{name: "2xx from a server that ignores the key, nothing else executed: settled", p: fresh, a: answer{status: 201, verdict: Settled, out: ok, keyIgnored: true}, move: moveSettle, wantState: StateSucceeded},
		{name: "2xx from a server that ignores the key, after maybe executed: settled, flagged", p: maybe, a: answer{status: 201, verdict: Settled, out: ok, keyIgnored: true},
			move: moveSettle, wantState: StateSucceeded, reviewPrefix: ReviewMaybeTwice},
		{name: "2xx from a server that ignores the key, sent twice by net/http: settled, flagged", p: fresh, a: answer{status: 201, verdict: Settled, out: ok, keyIgnored: true, resent: true},
			move: moveSettle, wantState: StateSucceeded, reviewPrefix: ReviewMaybeTwice},
		{name: "422 that net/http sent twice: ambiguous", p: fresh, a: answer{status: 422, verdict: Conflict, keyConflict: true, resent: true}, move: moveQuery},

		{name: "2xx processing, naming the resource the server holds: processing", p: held, a: answer{status: 202, verdict: Settled, out: processing}, move: moveProcessing},
		{name: "2xx naming the resource the server holds: settled", p: held, a: answer{status: 200, verdict: Settled, out: ok}, move: moveSettle, wantState: StateSucceeded},
		{name: "2xx processing, naming another than the server holds: made twice, review", p: held,
			a: answer{status: 202, verdict: Settled, out: Outcome{State: StateProcessing, ResourceID: "ord_2"}}, move: moveReview, reviewPrefix: ReviewMadeTwice},
		{name: "2xx naming another than the server holds: settled, flagged", p: held,
			a: answer{status: 201, verdict: Settled, out: Outcome{State: StateSucceeded, ResourceID: "ord_2"}}, move: moveSettle, wantState: StateSucceeded, reviewPrefix: ReviewMadeTwice},
		{name: "2xx failed naming another than the server holds: settled, flagged", p: held,
			a: answer{status: 200, verdict: Settled, out: Outcome{State: StateFailed, ResourceID: "ord_2", Reason: "declined"}}, move: moveSettle, wantState: StateFailed, reviewPrefix: ReviewMadeTwice},
		{name: "replayed 2xx naming another than the server holds: an earlier resend made it, review", p: held,
			a: answer{status: 202, verdict: Settled, replayed: true, out: Outcome{State: StateProcessing, ResourceID: "ord_2"}}, move: moveReview, refused: true, reviewPrefix: ReviewMadeTwice},
		{name: "replayed 2xx naming the resource the server holds: settled", p: held,
			a: answer{status: 200, verdict: Settled, replayed: true, out: ok}, move: moveSettle, refused: true, wantState: StateSucceeded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := judgeSubmit(tt.p, tt.a)
			if j.move != tt.move {
				t.Fatalf("judgeSubmit() move = %d (%s); want %d", j.move, j.label, tt.move)
			}
			if j.refused != tt.refused {
				t.Errorf("judgeSubmit() refused = %v; want %v", j.refused, tt.refused)
			}
			if j.conflict != tt.conflict {
				t.Errorf("judgeSubmit() conflict = %v; want %v", j.conflict, tt.conflict)
			}
			if tt.move == moveSettle && j.out.State != tt.wantState {
				t.Errorf("judgeSubmit() state = %s; want %s", j.out.State, tt.wantState)
			}
			if tt.a.created != "" && tt.move == moveSettle && j.out.ResourceID != tt.a.created {
				t.Errorf("judgeSubmit() resource = %q; want the one the key created, %q", j.out.ResourceID, tt.a.created)
			}
			if tt.move == moveReview && (len(j.review) < len(tt.reviewPrefix) || j.review[:len(tt.reviewPrefix)] != tt.reviewPrefix) {
				t.Errorf("judgeSubmit() review = %q; want it to start %q", j.review, tt.reviewPrefix)
			}
			if tt.move == moveSettle && j.review != tt.reviewPrefix {
				t.Errorf("judgeSubmit() settled with review %q; want %q", j.review, tt.reviewPrefix)
			}
			if j.label == "" {
				t.Errorf("judgeSubmit() has no log label")
			}
		})
	}
}

func TestJudgeQuery(t *testing.T) {
	tests := []struct {
		name     string
		a        answer
		move     move
		notFound bool
	}{
		{"succeeded", answer{status: 200, out: Outcome{State: StateSucceeded, ResourceID: "r"}}, moveSettle, false},
		{"failed", answer{status: 200, out: Outcome{State: StateFailed}}, moveSettle, false},
		{"processing", answer{status: 200, out: Outcome{State: StateProcessing}}, moveProcessing, false},
		{"undecodable", answer{status: 200, decodeErr: errUndecodable}, moveInconclusive, false},
		{"undecodable, naming the key the body carries: the order exists", answer{status: 200, decodeErr: errUndecodable, foundOrder: true}, moveProcessing, false},
		{"succeeded, describing another request", answer{status: 200, out: Outcome{State: StateSucceeded, ResourceID: "r"}, otherRequest: `side "SELL"`}, moveReview, false},
		{"failed, describing another request", answer{status: 200, out: Outcome{State: StateFailed}, otherRequest: `side "SELL"`}, moveReview, false},
		{"processing, describing another request", answer{status: 200, out: Outcome{State: StateProcessing}, otherRequest: `side "SELL"`}, moveReview, false},
		{"found unread, describing another request", answer{status: 200, decodeErr: errUndecodable, foundOrder: true, otherRequest: `side "SELL"`}, moveReview, false},
		{"206 a cache's part, however it decodes", answer{status: 206, out: Outcome{State: StateSucceeded, ResourceID: "r"}}, moveInconclusive, false},
		{"404 is not never-happened", answer{status: 404}, moveInconclusive, true},
		{"410 is a forgotten key: review, never resend", answer{status: 410}, moveReview, false},
		{"404 saying the key expired is a 410", answer{status: 404, body: []byte(`{"error":"Idempotency key expired"}`)}, moveReview, false},
		{"404 saying the key is not found is not", answer{status: 404, body: []byte(`{"error":"Idempotency key not found"}`)}, moveInconclusive, true},
		{"a cache's 410 that does not name the key: maybe another key's", answer{status: 410, otherCache: true, cached: "Age: 4"}, moveInconclusive, false},
		{"a cache's expired 404 that does not name the key: maybe another key's",
			answer{status: 404, otherCache: true, cached: "Age: 4", body: []byte(`{"error":"Idempotency key expired"}`)}, moveInconclusive, true},
		// Midtrans's "Transaction doesn't exist." to a status query, 200
		// OK, whatever a decoder made of it; its number form too. Only
		// the top-level member is the API's own status: a resource's
		// member that holds another call's (a webhook delivery's, a
		// nested object's) or a word "404" elsewhere is no not found.
		{"2xx whose status_code is 404 is the endpoint's 404", answer{status: 200, out: Outcome{State: StateFailed},
			body: []byte(`{"status_code":"404","status_message":"Transaction doesn't exist.","id":"8d6b1e4a-0f7e-4b8c-9a59-3c2d1f6e7a10"}`)}, moveInconclusive, true},
		{"2xx whose status_code is the number 404, decoded succeeded", answer{status: 200, out: Outcome{State: StateSucceeded, ResourceID: "r"},
			body: []byte(`{"status_code":404}`)}, moveInconclusive, true},
		{"2xx with a nested status_code 404 settles", answer{status: 200, out: Outcome{State: StateSucceeded, ResourceID: "r"},
			body: []byte(`{"id":"r","status":"succeeded","last_attempt":{"status_code":404}}`)}, moveSettle, false},
		{"2xx with 404 in another member settles", answer{status: 200, out: Outcome{State: StateSucceeded, ResourceID: "r"},
			body: []byte(`{"id":"r","status_code":"200","status_message":"404 items","code":"404"}`)}, moveSettle, false},
		{"429 waits", answer{status: 429}, moveResend, false},
		{"503 waits", answer{status: 503}, moveResend, false},
		{"500 inconclusive", answer{status: 500}, moveInconclusive, false},
		{"transport error inconclusive", answer{}, moveInconclusive, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := judgeQuery(past{maybeExecuted: true}, tt.a)
			if j.move != tt.move || j.notFound != tt.notFound {
				t.Fatalf("judgeQuery() = move %d notFound %v; want %d %v", j.move, j.notFound, tt.move, tt.notFound)
			}
		})
	}
}

// TestJudgeQueryOtherRequestOfTheHeldResource: an answer describing
// another request is ours when it names the resource our own processing
// answer named (a resting order amended in place), not when that name came
// from a replay of what the server stored for the key, nor when it names
// another resource.
func TestJudgeQueryOtherRequestOfTheHeldResource(t *testing.T) {
	a := answer{status: 200, out: Outcome{State: StateSucceeded, ResourceID: "r"}, otherRequest: `price "60100"`}
	for _, tt := range []struct {
		name string
		p    past
		move move
	}{
		{"held by our own answer", past{maybeExecuted: true, held: "r", heldOwn: true}, moveSettle},
		{"held by a replay", past{maybeExecuted: true, held: "r"}, moveReview},
		{"another resource than the held one", past{maybeExecuted: true, held: "q", heldOwn: true}, moveReview},
		{"none held", past{maybeExecuted: true}, moveReview},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if j := judgeQuery(tt.p, a); j.move != tt.move {
				t.Fatalf("judgeQuery() = move %d; want %d", j.move, tt.move)
			}
		})
	}
	// A side no amendment changes: the held resource is another order.
	side := answer{status: 200, out: Outcome{State: StateSucceeded, ResourceID: "r"}, otherRequest: `side "SELL"`, otherFixed: true}
	if j := judgeQuery(past{maybeExecuted: true, held: "r", heldOwn: true}, side); j.move != moveReview {
		t.Fatalf("judgeQuery() of the held resource, another side = move %d; want review", j.move)
	}
}

// TestJudgeQueryHeldResource: the outcome table's rows for a result query
// after the server said it holds a resource for the key (a processing
// answer's): an answer naming another is the key made twice, flagged
// ReviewMadeTwice as a submit's is; one naming the held one, or none,
// reads as it would with nothing held.
func TestJudgeQueryHeldResource(t *testing.T) {
	held := past{maybeExecuted: true, held: "ord_1"}
	for _, tt := range []struct {
		name   string
		p      past
		out    Outcome
		move   move
		review string
	}{
		{"processing, naming the held one", held, Outcome{State: StateProcessing, ResourceID: "ord_1"}, moveProcessing, ""},
		{"processing, naming none", held, Outcome{State: StateProcessing}, moveProcessing, ""},
		{"processing, naming another: review", held, Outcome{State: StateProcessing, ResourceID: "ord_2"}, moveReview, ReviewMadeTwice},
		{"succeeded, naming the held one", held, Outcome{State: StateSucceeded, ResourceID: "ord_1"}, moveSettle, ""},
		{"succeeded, naming another: settled, flagged", held, Outcome{State: StateSucceeded, ResourceID: "ord_2"}, moveSettle, ReviewMadeTwice},
		{"failed, naming another: settled, flagged", held, Outcome{State: StateFailed, ResourceID: "ord_2"}, moveSettle, ReviewMadeTwice},
		{"succeeded, another, the key contested: another request's", past{maybeExecuted: true, contested: true, held: "ord_1"},
			Outcome{State: StateSucceeded, ResourceID: "ord_2"}, moveReview, ReviewKeyInUse},
	} {
		t.Run(tt.name, func(t *testing.T) {
			j := judgeQuery(tt.p, answer{status: 200, out: tt.out})
			if j.move != tt.move || j.review != tt.review {
				t.Fatalf("judgeQuery() = move %d review %q; want %d %q", j.move, j.review, tt.move, tt.review)
			}
		})
	}
}

// TestFoundOrder: a result query's answer names the order a client order
// id in the request's body asked about only when it holds the id as a
// member's value and carries no error.
func TestFoundOrder(t *testing.T) {
	for _, tt := range []struct {
		name, body string
		want       bool
	}{
		{"Binance's order", `{"symbol":"BTCUSDT","orderId":28,"clientOrderId":"ord-9","status":"FILLED"}`, true},
		{"OKX's list of one", `{"code":"0","msg":"","data":[{"ordId":"312","clOrdId":"ord-9","state":"filled"}]}`, true},
		{"KuCoin's envelope", "\ufeff" + `{"code":"200000","data":{"id":"5c35","clientOid":"ord-9","isActive":false}}`, true},
		{"a bare list holding it among others", `[{"clientOrderId":"other"},{"clientOrderId":"ord-9"}]`, true},
		{"an escaped id", `{"clientOrderId":"ord\u002d9"}`, true},
		{"OKX's empty list", `{"code":"0","msg":"","data":[]}`, false},
		{"others' orders", `[{"clientOrderId":"ord-10"},{"clientOrderId":"xord-9"}]`, false},
		{"the id as a member's name", `{"ord-9":null}`, false},
		{"the id in a list of strings", `{"ids":["ord-9"]}`, false},
		{"an error naming it", `{"error":{"code":"not_found","clientOrderId":"ord-9"}}`, false},
		{"an errors list naming it", `{"errors":[{"detail":"no order","clientOrderId":"ord-9"}]}`, false},
		{"success false", `{"success":false,"clientOrderId":"ord-9"}`, false},
		{"Bybit's list of one", `{"retCode":0,"retMsg":"OK","result":{"list":[{"orderId":"1f0e","orderLinkId":"ord-9","orderStatus":"Filled"}]}}`, true},
		{"Bitget's envelope", `{"code":"00000","msg":"success","data":[{"orderId":"1","clientOid":"ord-9","status":"filled"}]}`, true},
		{"HTX's envelope", `{"status":"ok","data":{"id":3580,"client-order-id":"ord-9","state":"filled"}}`, true},
		{"an error envelope naming it", `{"code":"51000","msg":"Parameter clOrdId error","data":[{"clOrdId":"ord-9"}]}`, false},
		{"an HTML page", `<input name="id" value="ord-9">`, false},
		{"a form", `clientOrderId=ord-9`, false},
		{"empty", ``, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := foundOrder([]byte(tt.body), "ord-9"); got != tt.want {
				t.Fatalf("foundOrder(%s) = %v; want %v", tt.body, got, tt.want)
			}
		})
	}
}

// TestQueryFailed: a result query's answer that says nothing of the
// operation, which with the key in the body is asked again, never
// followed by a resend; a 404, a 2xx, or a 400 saying the order does not
// exist is an answer about it.
func TestQueryFailed(t *testing.T) {
	for _, tt := range []struct {
		name   string
		a      answer
		failed bool
	}{
		{"no answer", answer{}, true},
		{"500", answer{status: 500, body: []byte(`{"code":-1001,"msg":"Internal error; unable to process your request. Please try again."}`)}, true},
		{"a redirect to a login page", answer{status: 302}, true},
		{"401", answer{status: 401, body: []byte(`{"code":-2015,"msg":"Invalid API-key, IP, or permissions for action."}`)}, true},
		{"400, a bad signature", answer{status: 400, body: []byte(`{"code":-1022,"msg":"Signature for this request is not valid."}`)}, true},
		{"422, a parameter missing", answer{status: 422, body: []byte(`{"code":40010001,"message":"order_id is missing"}`)}, true},
		{"400, the order does not exist", answer{status: 400, body: []byte(`{"code":-2013,"msg":"Order does not exist."}`)}, false},
		{"422, not found", answer{status: 422, body: []byte(`{"message":"Order not found"}`)}, false},
		{"404", answer{status: 404, body: []byte(`{"code":40410000,"message":"order not found"}`)}, false},
		{"a proxy's HTML 404", answer{status: 404, body: []byte(`<html><head><title>404 Not Found</title></head><body><center><h1>404 Not Found</h1></center><hr><center>nginx</center></body></html>`)}, true},
		{"an empty 404", answer{status: 404}, true},
		{"Kong's 404", answer{status: 404, body: []byte(`{"message":"no Route matched with those values"}`)}, true},
		{"Stripe's 404 for a path it does not route", answer{status: 404, body: []byte(`{"error":{"message":"Unrecognized request URL (GET: /v1/orders/by_key/k). Please see https://stripe.com/docs or we can help at https://support.stripe.com/.","type":"invalid_request_error"}}`)}, true},
		{"Stripe's 404 for a resource it does not have", answer{status: 404, body: []byte(`{"error":{"code":"resource_missing","message":"No such payment_intent: 'pi_1'","param":"intent","type":"invalid_request_error"}}`)}, false},
		{"Spring's 404 for a path no handler maps", answer{status: 404, body: []byte(`{"type":"about:blank","title":"Not Found","status":404,"detail":"No endpoint GET /orders/k.","instance":"/orders/k"}`)}, true},
		{"Laravel's 404 for a path it does not route", answer{status: 404, body: []byte(`{"message":"The route api/v1/orders/k could not be found."}`)}, true},
		{"Laravel's 404 for a model it does not have", answer{status: 404, body: []byte(`{"message":"No query results for model [App\\Models\\Order] k"}`)}, false},
		{"an order that could not be found", answer{status: 404, body: []byte(`{"message":"The order could not be found."}`)}, false},
		{"Spring Boot's 404 for a path no resource serves", answer{status: 404, body: []byte(`{"type":"about:blank","title":"Not Found","status":404,"detail":"No static resource orders/k.","instance":"/orders/k"}`)}, true},
		{"a 2xx naming no order", answer{status: 200, decodeErr: errUndecodable, body: []byte(`{"code":"51603","msg":"Order does not exist","data":[]}`)}, false},
		{"a 2xx empty list", answer{status: 200, decodeErr: errUndecodable, body: []byte(`{"retCode":0,"retMsg":"OK","result":{"list":[]}}`)}, false},
		{"a 2xx bare empty list", answer{status: 200, decodeErr: errUndecodable, body: []byte(`[]`)}, false},
		{"a 2xx error saying not found", answer{status: 200, decodeErr: errUndecodable, body: []byte(`{"error":"Order not found"}`)}, false},
		{"a 2xx error", answer{status: 200, decodeErr: errUndecodable, body: []byte(`{"success":false,"msg":"Invalid signature"}`)}, true},
		{"a 2xx envelope's limit reached", answer{status: 200, decodeErr: errUndecodable, body: []byte(`{"retCode":10006,"retMsg":"Too many visits","result":{},"retExtInfo":{},"time":1693924869139}`)}, true},
		{"a 2xx envelope's timestamp refused", answer{status: 200, decodeErr: errUndecodable,
			body: []byte(`{"retCode":10002,"retMsg":"invalid request, please check your server timestamp or recv_window param","result":{}}`)}, true},
		{"a 2xx envelope's string code", answer{status: 200, decodeErr: errUndecodable, body: []byte(`{"code":"50011","msg":"Too Many Requests","data":[]}`)}, true},
		{"a 2xx envelope's error status", answer{status: 200, decodeErr: errUndecodable,
			body: []byte(`{"status":"error","err-code":"api-signature-not-valid","err-msg":"Signature not valid: Verification failure","data":null}`)}, true},
		{"a 2xx envelope's success, empty", answer{status: 200, decodeErr: errUndecodable, body: []byte(`{"code":"200000","data":null}`)}, false},
		{"a WAF's empty 202 challenge", answer{status: 202, decodeErr: errUndecodable}, true},
		{"a cache's stored 404 of another key", answer{status: 404, otherCache: true, cached: "X-Cache: Hit from cloudfront", body: []byte(`{"code":40410000,"message":"order not found"}`)}, true},
		{"a cache's stale 404 of the key's own path", answer{status: 404, cached: "X-Cache-Status: STALE", body: []byte(`{"code":40410000,"message":"order not found"}`)}, true},
		{"a cache's stored empty list", answer{status: 200, otherCache: true, cached: "Age: 4", decodeErr: errUndecodable, body: []byte(`{"retCode":0,"retMsg":"OK","result":{"list":[]}}`)}, true},
		{"an HTML page", answer{status: 200, decodeErr: errUndecodable, body: []byte(`<!doctype html><title>Just a moment...</title>`)}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if j := judgeQuery(past{maybeExecuted: true}, tt.a); j.failed != tt.failed {
				t.Fatalf("judgeQuery() failed = %v; want %v", j.failed, tt.failed)
			}
		})
	}
}

func TestPastOf(t *testing.T) {
	sub := func(n, status int, wrote, done, refused, replayed bool) journal.Attempt {
		return journal.Attempt{Number: n, Kind: journal.AttemptSubmit, Status: status, Wrote: wrote, Done: done, Refused: refused, Replayed: replayed}
	}
	cut := sub(2, 200, true, true, true, false)
	cut.Err = "unexpected EOF"
	// A 409 counts only when refusedAfterMaybeSent marked it: one the
	// judge read as the key's request still running (Stripe's
	// idempotency_key_in_use) is journaled refused too, with no error, or
	// with its read's when the body was cut, and is only waited for.
	used := func(n int) journal.Attempt {
		a := sub(n, 409, true, true, true, false)
		a.Err = conflictAfterSend + ": 409: DUPLICATE_ERROR"
		return a
	}
	// One the judge read as the key's request still running, after a send,
	// is marked so (inFlightOurs): Adyen's 422 704, DynamoDB's 400
	// TransactionInProgressException, Shopify's 200 userError.
	inFlight := func(n, status int) journal.Attempt {
		a := sub(n, status, true, true, true, false)
		a.Err = inFlightAfterSend + ": 422: request already processed or in progress"
		return a
	}
	// One refusing the request for its object's state (Increase's
	// invalid_operation_error) is marked in words of its own.
	state := func(n int) journal.Attempt {
		a := sub(n, 409, true, true, true, false)
		a.Err = stateAfterSend + ": 409: There's an insufficient balance in the account."
		return a
	}
	inFlightCut := sub(4, 409, true, true, true, false)
	inFlightCut.Err = "unexpected EOF: " + conflictAfterSend
	tests := []struct {
		name     string
		attempts []journal.Attempt
		before   int
		want     past
	}{
		{"nothing", nil, 10, past{}},
		{"409 then 422: nothing executed", []journal.Attempt{sub(1, 409, true, true, true, false), sub(2, 422, true, true, true, false)}, 10, past{contested: true}},
		{"lost response", []journal.Attempt{sub(1, 0, true, true, false, false)}, 10, past{maybeExecuted: true}},
		{"no recorded outcome: a crash mid-attempt", []journal.Attempt{sub(1, 0, false, false, false, false)}, 10, past{maybeExecuted: true}},
		{"the attempt being judged is left out", []journal.Attempt{sub(1, 0, false, false, false, false)}, 1, past{}},
		{"refusals counted after the maybe-executed one", []journal.Attempt{sub(1, 401, true, true, true, false), sub(2, 502, true, true, false, false),
			sub(3, 422, true, true, true, false), sub(4, 429, true, true, true, false), sub(5, 403, true, true, true, false)}, 10, past{maybeExecuted: true, refusals: 2}},
		{"a 503 between refusals does not reset them", []journal.Attempt{sub(1, 502, true, true, false, false), sub(2, 400, true, true, true, false),
			sub(3, 503, true, true, false, false), sub(4, 400, true, true, true, false)}, 10, past{maybeExecuted: true, refusals: 2}},
		{"a 200 duplicate refusal counts, a replayed 200 does not", []journal.Attempt{sub(1, 0, true, true, false, false), sub(2, 200, true, true, true, false),
			sub(3, 200, true, true, true, true)}, 10, past{maybeExecuted: true, refusals: 1, final: true}},
		{"a replay cut in transit does not count", []journal.Attempt{sub(1, 502, true, true, false, false), cut}, 10, past{maybeExecuted: true}},
		{"a 409 saying the key was used counts, one in flight does not", []journal.Attempt{sub(1, 502, true, true, false, false), used(2),
			sub(3, 409, true, true, true, false), inFlightCut, used(5)}, 10, past{maybeExecuted: true, refusals: 2}},
		{"a 409 refusing the object's state counts", []journal.Attempt{sub(1, 502, true, true, false, false), state(2),
			sub(3, 409, true, true, true, false), state(4)}, 10, past{maybeExecuted: true, refusals: 2}},
		{"a 422, 400 or 200 saying the key's request still runs does not count", []journal.Attempt{sub(1, 502, true, true, false, false),
			inFlight(2, 422), inFlight(3, 400), inFlight(4, 200), sub(5, 422, true, true, true, false)}, 10, past{maybeExecuted: true, refusals: 1}},
		{"a 409 saying the key was used before anything of ours may have run contests it", []journal.Attempt{used(1)}, 10, past{contested: true}},
		{"a query never counts", []journal.Attempt{{Number: 1, Kind: journal.AttemptQuery, Wrote: true, Done: true, Status: 200}}, 10, past{}},
		{"replayed", []journal.Attempt{sub(1, 502, true, true, false, false), sub(2, 500, true, true, true, true)}, 10, past{maybeExecuted: true, final: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := pastOf(&journal.Record{Attempts: tt.attempts}, tt.before); got != tt.want {
				t.Fatalf("pastOf() = %+v; want %+v", got, tt.want)
			}
		})
	}
}

func TestKeyWindow(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	const window = 20 * time.Minute
	maybe := past{maybeExecuted: true}
	tests := []struct {
		name string
		rec  journal.Record
		p    past
		want windowState
	}{
		{"never executed: no window", journal.Record{FirstSent: now.Add(-time.Hour)}, past{}, windowOpen},
		{"inside", journal.Record{FirstSent: now.Add(-window + time.Second)}, maybe, windowOpen},
		{"at the edge", journal.Record{FirstSent: now.Add(-window)}, maybe, windowExpired},
		{"past", journal.Record{FirstSent: now.Add(-2 * window)}, maybe, windowExpired},
		{"first send in the future: clock stepped back", journal.Record{FirstSent: now.Add(2 * time.Hour)}, maybe, windowUntrusted},
		{"within the slack", journal.Record{FirstSent: now.Add(time.Second)}, maybe, windowOpen},
		{"an attempt in the future", journal.Record{FirstSent: now.Add(-time.Minute),
			Attempts: []journal.Attempt{{Number: 2, Start: now.Add(time.Hour)}}}, maybe, windowUntrusted},
		{"flagged once, untrusted for ever", journal.Record{FirstSent: now.Add(-time.Minute), Review: ReviewClockStepped}, maybe, windowUntrusted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := keyWindow(&tt.rec, tt.p, now, window); got != tt.want {
				t.Fatalf("keyWindow() = %d; want %d", got, tt.want)
			}
		})
	}
}

// Servers answer 400 both to a key used with other parameters and to a
// key missing or malformed: only the first is a key conflict.
func TestReusesKey(t *testing.T) {
	for body, want := range map[string]bool{
		`{"error":{"type":"idempotency_error","message":"Keys for idempotent requests can only be used with the same parameters they were first used with."}}`: true,
		`{"errors":[{"code":"IDEMPOTENCY_KEY_REUSED"}]}`:                      true,
		`{"error":{"code":"idempotency_key_mismatch"}}`:                       true,
		`{"error":"Transaction request already exists with idempotency key"}`: true,
		`{"error_code":"DUPLICATE_TRANSACTION_ERROR","message":"Idempotency key has been used before. Use a unique idempotency key and try again."}`: true,
		`{"error":"duplicate idempotency key"}`:                      true,
		`{"title":"Idempotency-Key is missing"}`:                     false,
		`{"error":"Idempotency-Key must be at most 255 characters"}`: false,
		`{"error":"amount differs from the order total"}`:            false,
		``: false,
	} {
		if got := reusesKey([]byte(body), "Idempotency-Key"); got != want {
			t.Errorf("reusesKey(%s) = %v; want %v", body, got, want)
		}
	}
}

// A key conflict says this request differs only in words about the
// request; "already used", and a "different" about the key a new request
// should take, say nothing of it.
func TestSaysRequestDiffers(t *testing.T) {
	for _, tt := range []struct {
		body, name string
		want       bool
	}{
		{`{"error":{"message":"Keys for idempotent requests can only be used with the same parameters they were first used with. ` +
			`Try using a key other than 'k' if you meant to execute a different request."}}`, "Idempotency-Key", true},
		{`{"errors":[{"code":"IDEMPOTENCY_KEY_REUSED","detail":"The idempotency key can only be retried with the same request data."}]}`, "Idempotency-Key", true},
		{`{"details":["Idempotency-Key exists and the request does not match"]}`, "Idempotency-Key", true},
		{`<Message>The request uses the same client token as a previous, but non-identical request.</Message>`, "", true},
		{`{"message":"you retried a request with a different payload but with an idempotent token that was already used."}`, "", true},
		{`{"errorName":"SAME_IDEMPOTENCY_KEY_WAS_ALREADY_IN_USE_WITH_PREVIOUS_DIFFERENT_REQUEST"}`, "Idempotency-Key", true},
		{`{"description":"The PayPal-Request-Id has already been used for another request."}`, "Paypal-Request-Id", true},
		{`{"message":"A transaction with the supplied idempotency-key already exists with a conflicting payload"}`, "Idempotency-Key", true},
		{`{"code":"idempotency_key_mismatch"}`, "Idempotency-Key", true},
		{`{"message":"A request with this X-Idempotency-Key already exists"}`, "X-Idempotency-Key", false},
		{`{"code":"duplicate_request","message":"The same request ID has already been used. Please try again with a different request ID."}`, "request_id", false},
		{`{"message":"Idempotency key already used: send a different idempotency key"}`, "Idempotency-Key", false},
		{`{"message":"The PayPal-Request-Id has already been used. Use a different PayPal-Request-Id."}`, "Paypal-Request-Id", false},
		{`{"message":"Duplicated reference id. Please use a different reference id."}`, "X-Reference-Id", false},
		{`{"message":"Duplicated reference id for a different payee"}`, "X-Reference-Id", true},
		{`{"type":"idempotency_key_already_used_error","resource_id":"ach_1"}`, "Idempotency-Key", false},
		{`{"errors":{"id":["has already been taken"]}}`, "id", false},
		{``, "Idempotency-Key", false},
	} {
		if got := saysRequestDiffers([]byte(tt.body), tt.name); got != tt.want {
			t.Errorf("saysRequestDiffers(%s, %q) = %v; want %v", tt.body, tt.name, got, tt.want)
		}
	}
}

// Only a refusal that names the resource its key created is the key's
// final answer; any other 409 is still a key in flight.
func TestCreatedResource(t *testing.T) {
	const conflict = `{"error":{"type":"invalid_state","errors":[{"reason":"idempotent_creation_conflict","links":{"conflicting_resource_id":"PM1"}}]}}`
	const primer = `{"error":{"errorId":"IdempotencyKeyAlreadyExists","paymentId":"gg3r3tsa3","paymentStatus":"SETTLED"}}`
	// https://docs.moov.io/guides/money-movement/manage-transfers/: the key's transfer, whole.
	const moov = `{"transferID":"ec7e1848","createdOn":"2026-11-29T12:00:00Z","status":"pending","amount":{"currency":"USD","value":1000}}`
	for _, tt := range []struct {
		status      int
		body        string
		want, state string
	}{
		{409, conflict, "PM1", ""},
		{409, `{"error":{"errors":[{"reason":"other"},{"reason":"idempotent_creation_conflict","links":{"conflicting_resource_id":"PM2"}}]}}`, "PM2", ""},
		{422, conflict, "", ""},
		{409, `{"error":{"errors":[{"reason":"idempotent_creation_conflict"}]}}`, "", ""},
		{409, `{"error":{"errors":[{"reason":"idempotent_creation_conflict","links":{"conflicting_resource_id":7}}]}}`, "", ""},
		{409, `{"error":{"errors":[{"reason":"idempotency_key_in_use","links":{"conflicting_resource_id":"PM1"}}]}}`, "", ""},
		{409, `idempotent_creation_conflict`, "", ""},
		{409, ``, "", ""},
		{409, primer, "gg3r3tsa3", "SETTLED"},
		{400, `{"error":{"errorId":"TransactionRequestIdempotencyKeyAlreadyExists","paymentId":"6gHJtooK6","paymentStatus":"DECLINED"}}`, "6gHJtooK6", "DECLINED"},
		{422, primer, "", ""},
		{409, `{"error":{"errorId":"IdempotencyKeyAlreadyExists","paymentStatus":"SETTLED"}}`, "", ""},
		{409, `{"error":{"errorId":"PaymentIdempotencyKeyAlreadyExistsNot","paymentId":"p1"}}`, "", ""},
		{400, `{"error":{"errorId":"ValidationError","description":"IdempotencyKeyAlreadyExists","paymentId":"p1"}}`, "", ""},
		{400, `{"error":{"id":"e1","code":400,"message":"IdempotencyKey k was already used at 2026-11-29T12:00:00Z creating entity 0e7b8f7e.","details":[]}}`, "0e7b8f7e", ""},
		{409, `{"error":{"message":"IdempotencyKey k was already used at 2026-11-29T12:00:00Z creating entity 0e7b8f7e."}}`, "", ""},
		{400, `{"error":{"message":"Mandate k was already used at 2026-11-29T12:00:00Z creating entity 0e7b8f7e."}}`, "", ""},
		{400, `{"error":{"message":"IdempotencyKey k was already used at 2026-11-29T12:00:00Z creating entity an order."}}`, "", ""},
		{400, `{"error":{"message":"IdempotencyKey k was already used at 2026-11-29T12:00:00Z creating entity ."}}`, "", ""},
		{409, moov, "ec7e1848", "pending"},
		{409, `{"transferID":"ec7e1848","createdOn":"2026-11-29T12:00:00Z","status":"failed"}`, "ec7e1848", "failed"},
		{201, moov, "", ""},
		{422, moov, "", ""},
		{409, `{"transferID":"ec7e1848","status":"pending"}`, "", ""},
		{409, `{"transferID":"ec7e1848","createdOn":"2026-11-29T12:00:00Z"}`, "", ""},
		{409, `{"error":"duplicate transfer","transferID":"ec7e1848","createdOn":"2026-11-29T12:00:00Z","status":"pending"}`, "", ""},
		{409, `{"transferID":7,"createdOn":"2026-11-29T12:00:00Z","status":"pending"}`, "", ""},
	} {
		if got, state, _ := createdResource(tt.status, []byte(tt.body)); got != tt.want || state != tt.state {
			t.Errorf("createdResource(%d, %s) = %q, %q; want %q, %q", tt.status, tt.body, got, state, tt.want, tt.state)
		}
	}
}

// A server whose key header does not say "idempotency" names the header,
// or spells it in an error code.
func TestNamesKey(t *testing.T) {
	for _, tt := range []struct {
		body, header string
		want         bool
	}{
		{`{"description":"The PayPal-Request-Id has already been used for another request."}`, "Paypal-Request-Id", true},
		{`{"issue":"PAYPAL_REQUEST_ID_PREVIOUSLY_USED"}`, "Paypal-Request-Id", true},
		{`{"message":"the paypal request id was used"}`, "Paypal-Request-Id", true},
		{`{"issue":"INSTRUMENT_DECLINED"}`, "Paypal-Request-Id", false},
		{`{"issue":"PAYPAL_REQUEST"}`, "Paypal-Request-Id", false},
		{`{"error":"Idempotency-Key reused"}`, "Paypal-Request-Id", true},
		{`{"error":"Idempotency-Key reused"}`, "", true},
		{`{"field":"PayPal-Request-Id"}`, "", false},
		{`Paypal+Request+Id`, "Paypal-Request-Id", false},
		{``, "Paypal-Request-Id", false},
		// A body member's name, from keyField: a word of its own.
		{`{"code":"duplicate_request","message":"The same request ID has already been used."}`, "request_id", true},
		{`{"code":"request_id_duplicate"}`, "request_id", true},
		{`{"message":"invalid amount"}`, "id", false},
		{`{"message":"the id was used before"}`, "id", true},
		// A header with the "X-" prefix, named without it (MTN MoMo's
		// 409 for its X-Reference-Id), but not by one common word.
		{`{"code":"RESOURCE_ALREADY_EXIST","message":"Duplicated reference id. Creation of resource failed."}`, "X-Reference-Id", true},
		{`{"code":"RESOURCE_ALREADY_EXIST","message":"Duplicated reference id."}`, "Reference-Id", true},
		{`{"message":"reference_id: \"r_1\" already exists"}`, "X-Reference-Id", true},
		{`{"error":"conflict","reference_id":"r_1"}`, "X-Reference-Id", false},
		{`{"message":"the key was revoked"}`, "X-Key", false},
		{`{"message":"the key was revoked"}`, "X-", false},
	} {
		if got := namesKey([]byte(tt.body), tt.header); got != tt.want {
			t.Errorf("namesKey(%s, %q) = %v; want %v", tt.body, tt.header, got, tt.want)
		}
	}
}

// A 409 is a key used by another request only when it says the request
// differs, and never when it says one is still running.
func TestReusedElsewhere(t *testing.T) {
	for body, want := range map[string]bool{
		`{"error":{"code":"IDEMPOTENCY_KEY_REUSED","details":["Idempotency-Key exists and the request does not match"]}}`: true,
		`{"type":"idempotency_key_already_used_error","resource_id":"ach_1"}`:                                             true,
		`{"message":"Idempotency-Key was previously used with a different request body"}`:                                 true,
		`{"code":"idempotency_key_mismatch"}`:                                                                             true,
		`{"message":"A transaction with the supplied idempotency-key already exists with a conflicting payload"}`:         true,
		`{"error_code":"DUPLICATE_ERROR","message":"duplicate value on idempotency_key, try again with a new key"}`:       true,
		`{"message":"A transaction with the supplied idempotency-key is already in progress"}`:                            false,
		`{"error":"duplicate request: the idempotency key's first request is still processing"}`:                          false,
		`{"error":"There is currently another in-progress request using this Stripe API key and idempotency key."}`:       false,
		`{"error":"Idempotency key already in use"}`:                                                                      false,
		`{"error":"idempotency key reused while the first request is still processing"}`:                                  false,
		`{"code":"idempotency_request_in_progress"}`:                                                                      false,
		`{"error":"A resource has already been created with this idempotency key"}`:                                       false,
		`{"error":"order differs from the cart"}`:                                                                         false,
		``: false,
	} {
		if got := reusedElsewhere([]byte(body), "Idempotency-Key"); got != want {
			t.Errorf("reusedElsewhere(%s) = %v; want %v", body, got, want)
		}
	}
}

// A message that is "Request in progress" alone (WPG's error 9) says the
// key's request runs; one that names another request does not.
func TestSaysKeyRunningBare(t *testing.T) {
	for body, want := range map[string]bool{
		`<error code="9"><![CDATA[Request in progress]]></error>`:                       true,
		`<error code="9">Request in progress</error>`:                                   true,
		`{"message":"Request in progress."}`:                                            true,
		`{"message":"REQUEST IN PROGRESS"}`:                                             true,
		`{"message":"A refund request in progress blocks this one"}`:                    false,
		`{"message":"Another request in progress"}`:                                     false,
		`{"message":"Request in progress for order 7"}`:                                 false,
		`<error code="9"><![CDATA[Invalid idempotency-key]]></error>`:                   false,
		`<title>Payment request in progress</title>`:                                    false,
		`{"error":"REFUND_IN_PROGRESS","message":"There is a pending refund request."}`: false,
	} {
		if got := saysKeyRunning([]byte(body), "Idempotency-Key"); got != want {
			t.Errorf("saysKeyRunning(%s) = %v; want %v", body, got, want)
		}
	}
}

func TestMentionsKey(t *testing.T) {
	for body, want := range map[string]bool{
		`{"error":"Idempotency-Key reused with a different payload"}`: true,
		`{"type":"https://example.com/errors/idempotency"}`:           true,
		`{"error":"amount must be positive"}`:                         false,
		``:                                                            false,
	} {
		if got := mentionsKey([]byte(body)); got != want {
			t.Errorf("mentionsKey(%s) = %v; want %v", body, got, want)
		}
	}
}

// After a 409 that came before anything of ours could have executed,
// another request holds the key: a result read by key or replayed may be
// that request's.
func TestContestedKey(t *testing.T) {
	rec := &journal.Record{Attempts: []journal.Attempt{
		{Number: 1, Kind: journal.AttemptSubmit, Wrote: true, Done: true, Status: 409, Refused: true},
		{Number: 2, Kind: journal.AttemptSubmit, Wrote: true, Done: true, Status: 502},
	}}
	p := pastOf(rec, 3)
	if !p.contested || !p.maybeExecuted {
		t.Fatalf("pastOf() = %+v; want contested and maybe executed", p)
	}
	ok := Outcome{State: StateSucceeded, ResourceID: "ord_1"}
	if j := judgeQuery(p, answer{status: 200, out: ok}); j.move != moveReview || !j.conflict {
		t.Errorf("judgeQuery(contested, succeeded) = %+v; want review as a key conflict", j)
	}
	if j := judgeSubmit(p, answer{status: 201, verdict: Settled, replayed: true, out: ok}); j.move != moveReview || !j.conflict {
		t.Errorf("judgeSubmit(contested, replayed 201) = %+v; want review as a key conflict", j)
	}
	if j := judgeSubmit(p, answer{status: 201, verdict: Settled, out: ok}); j.move != moveSettle {
		t.Errorf("judgeSubmit(contested, fresh 201) = %+v; want settled: the server executed ours", j)
	}
	other := answer{status: 200, verdict: Settled, out: ok, otherRequest: `amount "55.00", not the request's amount "123.45"`}
	if j := judgeSubmit(p, other); j.move != moveReview || !j.conflict || j.review != ReviewKeyInUse {
		t.Errorf("judgeSubmit(contested, unmarked 200 describing another request) = %+v; want review as a key conflict", j)
	}
	accepted := answer{status: 202, verdict: Processing, otherRequest: other.otherRequest}
	if j := judgeSubmit(p, accepted); j.move != moveReview || !j.conflict || j.review != ReviewKeyInUse {
		t.Errorf("judgeSubmit(contested, classifier's 202 accepted describing another request) = %+v; want review as a key conflict", j)
	}
	if j := judgeSubmit(p, answer{status: 202, verdict: Processing}); j.move != moveProcessing {
		t.Errorf("judgeSubmit(contested, classifier's 202 accepted) = %+v; want processing: ours, or nothing to compare", j)
	}
	// Our own request in flight (a 409 after ours may have executed) is no contest.
	rec.Attempts[0], rec.Attempts[1] = journal.Attempt{Number: 1, Kind: journal.AttemptSubmit, Wrote: true, Done: true, Status: 502},
		journal.Attempt{Number: 2, Kind: journal.AttemptSubmit, Wrote: true, Done: true, Status: 409, Refused: true}
	if p := pastOf(rec, 3); p.contested {
		t.Errorf("pastOf(502 then 409) = %+v; want not contested", p)
	}
}

// A failure stored for a contested key is safe to take: whoever ran first
// failed, and nothing ran after it.
func TestContestedKeyFailureSettles(t *testing.T) {
	p := past{maybeExecuted: true, contested: true}
	failed := Outcome{State: StateFailed, Reason: "order already exists"}
	if j := judgeQuery(p, answer{status: 200, out: failed}); j.move != moveSettle || j.out.State != StateFailed {
		t.Errorf("judgeQuery(contested, failed) = %+v; want settled failed", j)
	}
	if j := judgeSubmit(p, answer{status: 200, verdict: Settled, replayed: true, out: failed}); j.move != moveSettle {
		t.Errorf("judgeSubmit(contested, replayed 200 failed) = %+v; want settled failed", j)
	}
}

// FuzzMentionsKey holds mentionsKey to the plain definition it speeds up:
// a lower-cased copy of the body contains "idempot".
func FuzzMentionsKey(f *testing.F) {
	for _, s := range []string{"", "idempot", "IDEMPOTENCY key reused", `{"error":"Idempotency-Key in use"}`,
		"idempo", "xidEmPoTx", "\u0130dempotency", "\xffidempot", "validation failed", "ıdempot"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		want := bytes.Contains(bytes.ToLower(body), []byte("idempot"))
		if got := mentionsKey(body); got != want {
			t.Fatalf("mentionsKey(%q) = %v; want %v", body, got, want)
		}
	})
}

// keyField finds the member that holds the key, however the body writes
// it, at any depth, and in a form.
func TestKeyField(t *testing.T) {
	for _, tt := range []struct {
		key, body, want string
	}{
		{"k1", `{"request_id":"k1","amount":100}`, "request_id"},
		{"k1", `{"amount":"k0","nested":{"ClientToken" : "k1"}}`, "ClientToken"},
		{"k1", `{"list":["k1"],"idempotency_key":"k1"}`, "idempotency_key"},
		{"k1", `{"k1":"x","ref":"k1"}`, "ref"},
		{"a<b>", `{"token":"a\u003cb\u003e"}`, "token"},
		{"k1", `{"request_id":"k2"}`, ""},
		{"k1", `{"request_id":"k1"`, "request_id"},
		{"k 1", "amount=5&reference=k+1", "reference"},
		{"k1", "order%5Bexternal_id%5D=k1&order%5Bqty%5D=1", "external_id"},
		{"k1", "refs[]=k1", "refs"},
		{"k1", "order[lines][][ref]=k1", "ref"},
		{"k1", "amount=5", ""},
		{"k1", "%zz", ""},
	} {
		if got := keyField(tt.key, []byte(tt.body)); got != tt.want {
			t.Errorf("keyField(%q, %s) = %q; want %q", tt.key, tt.body, got, tt.want)
		}
	}
}

// TestObjectStateRefusalReadsTheTypeOnly: only a problem whose own type
// is Increase's invalid_operation_error refuses for the object's state
// (https://increase.com/documentation/errors); the words elsewhere (a
// detail quoting them, a type URI or envelope of another API, a body cut
// in transit) leave a 409 read as the key in flight, which is never
// failed.
func TestObjectStateRefusalReadsTheTypeOnly(t *testing.T) {
	const title = `"title":"The action you specified can't be performed on the object in its current state."`
	for _, tt := range []struct {
		name, body string
		want       bool
	}{
		{"increase", `{"type":"invalid_operation_error","status":409,` + title + `,"detail":"There's an insufficient balance in the account."}`, true},
		{"the key's own 409", `{"type":"idempotency_key_already_used_error","status":409,"detail":"not an invalid_operation_error","resource_id":"ach_transfer_1"}`, false},
		{"in an envelope", `{"error":{"type":"invalid_operation_error"}}`, false},
		{"a type URI", `{"type":"https://errors.example.com/invalid_operation_error","status":409}`, false},
		{"not a string", `{"type":["invalid_operation_error"],"status":409}`, false},
		{"an HTML page", `<html><body>invalid_operation_error</body></html>`, false},
		{"cut in transit", `{"type":"invalid_operation_error","status":409,` + title[:40], false},
	} {
		if got := objectStateRefusal([]byte(tt.body)); got != tt.want {
			t.Errorf("%s: objectStateRefusal(%s) = %v; want %v", tt.name, tt.body, got, tt.want)
		}
	}
}

// TestJudgeQueryCutDocumentIsAFailedQuery: a query's answer whose body
// begins as JSON and does not parse is what arrived of a document (its
// connection's close ended it, RFC 9112 6.3; or it passed the cap), with
// no read error to say so: whatever its status, it says nothing of the
// order, and a resend of a client order id must not go on it. A whole
// document, or plain words, still says what it says.
func TestJudgeQueryCutDocumentIsAFailedQuery(t *testing.T) {
	tests := []struct {
		name   string
		a      answer
		failed bool
	}{
		{"2xx over the cap", answer{status: 200, decodeErr: errUndecodable,
			body: []byte(`{"orders":[{"orderId":1,"clientOrderId":"other-1","status":"FILLED"},{"orderId":2,`)}, true},
		{"404 cut in its words", answer{status: 404, body: []byte(`{"code":-2013,"msg":"Order does`)}, true},
		{"400 cut after its words", answer{status: 400, body: []byte(`{"code":-2013,"msg":"Order does not exist."`)}, true},
		{"2xx list cut", answer{status: 200, decodeErr: errUndecodable, body: []byte(`[{"orderId":1},`)}, true},
		{"whole 404", answer{status: 404, body: []byte(`{"code":-2013,"msg":"Order does not exist."}`)}, false},
		{"whole 400", answer{status: 400, body: []byte(`{"code":-2013,"msg":"Order does not exist."}`)}, false},
		{"whole 2xx search that found nothing", answer{status: 200, decodeErr: errUndecodable, body: []byte(`{"orders":[]}`)}, false},
		{"plain words", answer{status: 400, body: []byte("Order not found")}, false},
		{"a Python dict's repr, whole", answer{status: 404, body: []byte(`{'error': 'Order not found'}`)}, false},
		{"cut mid-literal", answer{status: 404, body: []byte(`{"found":fal`)}, true},
		{"cut mid-rune", answer{status: 404, body: []byte("{\"msg\":\"Auftrag nicht gefunden \xe2\x80")}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := judgeQuery(past{maybeExecuted: true}, tt.a)
			if j.move != moveInconclusive || j.failed != tt.failed {
				t.Fatalf("judgeQuery() = move %d failed %v; want %d %v", j.move, j.failed, moveInconclusive, tt.failed)
			}
		})
	}
}
