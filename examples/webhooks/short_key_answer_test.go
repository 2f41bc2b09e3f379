package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idem"
)

// A service picks its own idempotency keys ("ord-7", an order number),
// and Stripe echoes whatever metadata the request carried
// (docs.stripe.com/metadata). The handler is code a service copies: a
// key shorter than the log's 8-character prefix must not panic it, since
// a panicked handler answers no 2xx, and the provider redelivers an event
// idem already recorded (or flagged) for three days.
func TestShortKeyEventAnswered(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		name string
		res  *idem.Result
		err  error
	}{
		{"settled", &idem.Result{State: idem.StateSucceeded, ResourceID: "ord_000007", Confirmed: true}, nil},
		{"contradicts", &idem.Result{State: idem.StateFailed}, fmt.Errorf("%w (scope \"\", key \"ord-7\")", idem.ErrConfirmConflict)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rcv, calls := stubReceiver(now, tt.res, tt.err)
			body := `{"id":"evt_7","type":"order.succeeded","state":"succeeded","resourceId":"ord_000007","metadata":{"idem_key":"ord-7"}}`
			req := signedEvent(now, body)
			w := httptest.NewRecorder()
			func() {
				defer func() {
					if p := recover(); p != nil {
						t.Fatalf("handler panicked on key %q: %v", "ord-7", p)
					}
				}()
				rcv.ServeHTTP(w, req)
			}()
			if *calls != 1 || w.Code != http.StatusNoContent {
				t.Errorf("%d Confirm calls, answered %d; want 1 and 204", *calls, w.Code)
			}
			if len(rcv.log) != 1 || !strings.Contains(rcv.log[0], "ord-7") {
				t.Errorf("log = %q; want one line naming the key", rcv.log)
			}
		})
	}
}
