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

// What the receiver answers tells the provider whether to send the event
// again (Stripe retries any non-2xx for up to three days,
// docs.stripe.com/webhooks "Retry behavior"), and tells the person
// reading the provider's dashboard why. An answer must say what is wrong:
// an event too large for the receiver's limit is not a forged one (it
// was cut, so its signature failed, and it was counted as an attack), and
// an event Confirm refuses as invalid will be refused the same way every
// time, so "503 try again" sends the operator looking for an outage.
func TestEventAnswerSaysWhy(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	small := `{"id":"evt_7","type":"order.succeeded","state":"succeeded","resourceId":"ord_000007","metadata":{"idem_key":"ord-7"}}`
	// Providers put the whole object in the event: a cart's lines in its
	// metadata make it larger than the receiver's limit.
	large := `{"id":"evt_8","type":"order.succeeded","state":"succeeded","resourceId":"ord_000008","metadata":{"idem_key":"ord-8","lines":"` +
		strings.Repeat("x", maxEvent) + `"}}`
	for _, tt := range []struct {
		name      string
		body      string
		err       error
		wantCode  int
		wantCalls int
		wantLog   string
	}{
		{"too large", large, nil, http.StatusRequestEntityTooLarge, 0, "larger than"},
		{"refused by Confirm", small, fmt.Errorf("%w: Confirm: EventID \"evt\\x00\" holds a control character", idem.ErrInvalidRequest), http.StatusUnprocessableEntity, 1, "refused"},
		{"journal failed", small, fmt.Errorf("journal: write: no space left on device"), http.StatusServiceUnavailable, 1, "answered 503"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rcv, calls := stubReceiver(now, nil, tt.err)
			w := httptest.NewRecorder()
			rcv.ServeHTTP(w, signedEvent(now, tt.body))
			if w.Code != tt.wantCode || *calls != tt.wantCalls {
				t.Errorf("answered %d after %d Confirm calls; want %d after %d", w.Code, *calls, tt.wantCode, tt.wantCalls)
			}
			if rcv.bad != 0 {
				t.Errorf("%d bad signatures counted; want 0: the event was signed right", rcv.bad)
			}
			if len(rcv.log) != 1 || !strings.Contains(rcv.log[0], tt.wantLog) {
				t.Errorf("log = %q; want one line saying %q", rcv.log, tt.wantLog)
			}
		})
	}
}
