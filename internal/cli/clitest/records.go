package clitest

import (
	"crypto/sha256"
	"net/http"
	"time"

	"github.com/idemkit/idem/journal"
)

const (
	// SecretToken is the Authorization header one of Records carries: no
	// command output may show it.
	SecretToken = "Bearer sk_live_do_not_print"
	// OrderBody is the request body of Records' open operations.
	OrderBody = `{"amount":1250,"currency":"EUR"}`
)

// Records returns operations in every interesting state, times relative to
// now, with BodySHA set, for the journals both commands' tests write:
//
//	scope    key          state       created  settled  notes
//	default  k-pending    pending     1h ago            one attempt with no outcome
//	default  k-unknown    unknown     3d ago            review "key expired", 2 attempts
//	default  k-succeeded  succeeded   60d ago  40d ago  resource ord_1
//	default  k-failed     failed      2h ago   1h ago   402
//	acct-2   k-other      processing  10m ago           resource pay_5
func Records(now time.Time) []*journal.Record {
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	const day = 24 * time.Hour
	hdr := http.Header{"Content-Type": {"application/json"}, "X-Request-Source": {"checkout"}}
	recs := []*journal.Record{
		{
			Scope: "default", Key: "k-pending", Ref: "order-1",
			Method: "POST", URL: "https://api.example.com/v1/orders", Header: hdr,
			Body: []byte(OrderBody), State: journal.StatePending,
			Attempts: []journal.Attempt{{Number: 1, Kind: journal.AttemptSubmit, Start: ago(time.Hour), Wrote: true}},
			Created:  ago(time.Hour), FirstSent: ago(time.Hour), Updated: ago(time.Hour),
		},
		{
			Scope: "default", Key: "k-unknown", Ref: "order-7",
			Method: "POST", URL: "https://api.example.com/v1/orders",
			QueryURL: "https://api.example.com/v1/operations/k-unknown",
			Header:   http.Header{"Content-Type": {"application/json"}, "Authorization": {SecretToken}},
			Body:     []byte(OrderBody), State: journal.StateUnknown, Review: "key expired",
			Attempts: []journal.Attempt{
				{Number: 1, Kind: journal.AttemptSubmit, Start: ago(3 * day), Wrote: true, Done: true,
					Status: 503, RetryAfter: 2 * time.Second, Duration: 120 * time.Millisecond},
				{Number: 2, Kind: journal.AttemptQuery, Start: ago(3*day - time.Minute), Wrote: true, Done: true,
					Err: "read tcp: i/o timeout", Duration: 10 * time.Second},
			},
			Created: ago(3 * day), FirstSent: ago(3 * day), Updated: ago(2 * day), NextDue: ago(day),
		},
		{
			Scope: "default", Key: "k-succeeded", Method: "POST", URL: "https://api.example.com/v1/orders",
			Body: []byte(`{"amount":1}`), State: journal.StateSucceeded,
			Result:  &journal.Result{ResourceID: "ord_1", StatusCode: 201, Body: []byte(`{"id":"ord_1"}`)},
			Created: ago(60 * day), Updated: ago(40 * day), Settled: ago(40 * day),
		},
		{
			Scope: "default", Key: "k-failed", Method: "POST", URL: "https://api.example.com/v1/charges",
			Body: []byte(`{"amount":2}`), State: journal.StateFailed,
			Result:  &journal.Result{StatusCode: 402, Reason: "card declined"},
			Created: ago(2 * time.Hour), Updated: ago(time.Hour), Settled: ago(time.Hour),
		},
		{
			Scope: "acct-2", Key: "k-other", Method: "POST", URL: "https://api.example.com/v1/orders",
			Body: []byte(`{"amount":3}`), State: journal.StateProcessing,
			Result:  &journal.Result{ResourceID: "pay_5", StatusCode: 202},
			Created: ago(10 * time.Minute), Updated: ago(5 * time.Minute),
		},
	}
	for _, r := range recs {
		r.BodySHA = sha256.Sum256(r.Body)
	}
	return recs
}
