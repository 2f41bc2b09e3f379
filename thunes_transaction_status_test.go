package idem_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// thunesTransactions is Thunes' Money Transfer API v2
// (docs.thunes.com/money-transfer/v2): POST
// /v2/money-transfer/quotations/{id}/transactions creates a transaction
// whose external_id, in the body, is the caller's and unique, and GET
// /v2/money-transfer/transactions/ext-{external_id} reads it back, or
// answers 404 with Thunes' {"errors":[{"code","message"}]} for one it
// has not (the envelope integrations read, errors[0]'s code and message,
// 404 mapped to not found; the code and words here are stand-ins, as
// are those of the refusal of an external_id it holds, which no test
// here reaches). A transaction's "status" is a five-digit code; its word is
// "status_message", and its class "status_class" with the class's word
// "status_class_message": 1 CREATED, 2 CONFIRMED, 3 REJECTED, 4
// CANCELLED, 5 SUBMITTED, 6 AVAILABLE, 7 COMPLETED, 8 REVERSED, 9
// DECLINED (by the payer), as integrations switch on them (a Thunes
// provider's "case 3, 4, 9: failed; case 7: succeeded"). The first
// create's connection drops after Thunes took it; the transaction then
// reached the status it is given.
type thunesTransactions struct {
	mu     sync.Mutex
	posts  int
	made   map[string]bool // external_id: created
	status string          // the created transaction's status, class and words: "90000 DECLINED 9 DECLINED"
	// lostFirst drops the first create's connection before Thunes took
	// it, not after.
	lostFirst bool
}

func (s *thunesTransactions) serve(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	w.Header().Set("Content-Type", "application/json")
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.Method == http.MethodGet {
		ext, _ := strings.CutPrefix(r.URL.Path, "/v2/money-transfer/transactions/ext-")
		if !s.made[ext] {
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, `{"errors":[{"code":"1000404","message":"Transaction not found"}]}`)
			return
		}
		_, _ = io.WriteString(w, s.transaction(ext))
		return
	}
	s.posts++
	var req struct {
		ExternalID string `json:"external_id"`
	}
	_ = json.Unmarshal(b, &req)
	if s.made[req.ExternalID] {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"errors":[{"code":"1007003","message":"External ID already used"}]}`)
		return
	}
	if s.posts == 1 && s.lostFirst {
		s.mu.Unlock()
		dropConnection(w)
		s.mu.Lock()
		return
	}
	s.made[req.ExternalID] = true
	if s.posts == 1 {
		s.mu.Unlock()
		dropConnection(w)
		s.mu.Lock()
		return
	}
	w.WriteHeader(http.StatusCreated)
	_, _ = io.WriteString(w, s.transaction(req.ExternalID))
}

// transaction is a Thunes transaction with external_id ext, trimmed.
func (s *thunesTransactions) transaction(ext string) string {
	f := strings.Fields(s.status)
	return fmt.Sprintf(`{"id":2237039,"status":%q,"status_message":%q,"status_class":%q,"status_class_message":%q,`+
		`"external_id":%q,"transaction_type":"B2C","payer_transaction_reference":"","creation_date":"2026-11-29T12:00:00Z"}`,
		f[0], f[1], f[2], f[3], ext)
}

// A Thunes transaction's "status" is a code ("90000"), not a word: read
// as any word that is none of the failed ones, a transaction the payer
// declined (class 9) or Thunes rejected (class 3) was settled as
// succeeded, a payout that never reached its beneficiary reported made.
// Its word beside the code, "status_class_message", is read now: the
// declined transaction fails with that word, and the others stay what
// they were (a created, submitted or completed one made; a cancelled or
// reversed one made, then undone: no failure of the call).
func TestThunesTransactionStatusCodeReadsItsWord(t *testing.T) {
	for _, tt := range []struct {
		status string
		state  idem.State
		reason string
	}{
		{"90000 DECLINED 9 DECLINED", idem.StateFailed, "DECLINED"},
		{"90201 DECLINED-INVALID-BENEFICIARY 9 DECLINED", idem.StateFailed, "DECLINED"},
		{"30000 REJECTED 3 REJECTED", idem.StateFailed, "REJECTED"},
		{"70000 COMPLETED 7 COMPLETED", idem.StateSucceeded, ""},
		{"50000 SUBMITTED 5 SUBMITTED", idem.StateSucceeded, ""},
		{"40000 CANCELLED 4 CANCELLED", idem.StateSucceeded, ""},
		{"80000 REVERSED 8 REVERSED", idem.StateSucceeded, ""},
	} {
		t.Run(tt.status, func(t *testing.T) {
			s := &thunesTransactions{made: map[string]bool{}, status: tt.status}
			srv := httptest.NewServer(http.HandlerFunc(s.serve))
			t.Cleanup(srv.Close)
			c := clientFor(t, srv, idemtest.NewClock(epoch), idem.WithKeyInBody(),
				idem.WithResultEndpoint(srv.URL+"/v2/money-transfer/transactions/ext-{key}"))
			body := `{"external_id":"k","sender":{"lastname":"Doe","firstname":"John"},"beneficiary":{"lastname":"Roe","firstname":"Jane"},"purpose_of_remittance":"FAMILY_SUPPORT"}`

			res, err := c.Submit(t.Context(), idem.Request{Key: "k", URL: srv.URL + "/v2/money-transfer/quotations/42/transactions", Body: []byte(body)})
			if tt.state == idem.StateFailed {
				require.ErrorIs(t, err, idem.ErrFailed)
			} else {
				require.NoError(t, err)
			}
			require.Equal(t, tt.state, res.State)
			require.Equal(t, "2237039", res.ResourceID)
			require.Equal(t, tt.reason, res.Reason)
			op, err := c.Lookup(t.Context(), idem.DefaultScope, "k")
			require.NoError(t, err)
			require.Equal(t, tt.state, op.State, "journaled")

			s.mu.Lock()
			defer s.mu.Unlock()
			require.Equal(t, 1, s.posts, "one create: the lost one settled by its read-back")
		})
	}
}

// Thunes' 404 for an external_id it has no transaction for, {"errors":
// [{"code":…,"message":"Transaction not found"}]}, is its read-back's
// word that the create it answers for never arrived: once the result lag
// has passed, Resume sends the create again, once, and the one
// transaction settles it.
func TestThunesTransactionNotFoundResendsAfterTheLag(t *testing.T) {
	s := &thunesTransactions{made: map[string]bool{}, status: "10000 CREATED 1 CREATED", lostFirst: true}
	srv := httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(srv.Close)
	clock := idemtest.NewClock(epoch)
	c := clientFor(t, srv, clock, idem.WithKeyInBody(),
		idem.WithResultEndpoint(srv.URL+"/v2/money-transfer/transactions/ext-{key}"))
	body := `{"external_id":"k","sender":{"lastname":"Doe","firstname":"John"},"beneficiary":{"lastname":"Roe","firstname":"Jane"},"purpose_of_remittance":"FAMILY_SUPPORT"}`

	res, err := c.Submit(t.Context(), idem.Request{Key: "k", URL: srv.URL + "/v2/money-transfer/quotations/42/transactions", Body: []byte(body)})
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	require.NotErrorIs(t, err, idem.ErrFailed)
	require.Equal(t, idem.StateUnknown, res.State)

	requireResumeSucceeds(t, c, clock, "k", "2237039")
	s.mu.Lock()
	defer s.mu.Unlock()
	require.Equal(t, 2, s.posts, "the lost create and one resend")
}

// requireResumeSucceeds asserts that one Resume once the result lag has
// passed settles operation key, the only one open, as succeeded with
// resource id.
func requireResumeSucceeds(t testing.TB, c *idem.Client, clock *idemtest.Clock, key, id string) {
	t.Helper()
	clock.Advance(idem.DefaultResultLag)
	sum, err := c.Resume(t.Context())
	require.NoError(t, err)
	require.Equal(t, idem.Summary{Visited: 1, Succeeded: 1}, sum)
	op, err := c.Lookup(t.Context(), idem.DefaultScope, key)
	require.NoError(t, err)
	require.Equal(t, idem.StateSucceeded, op.State)
	require.Equal(t, id, op.Result.ResourceID)
}
