package idem_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// dynamoTransaction is a TransactWriteItems call's body, its idempotency
// token "k", and dynamoHeader the headers it goes with.
const dynamoTransaction = `{"ClientRequestToken":"k","TransactItems":[{"Put":{"TableName":"ledger",` +
	`"Item":{"pk":{"S":"debit#42"},"amount":{"N":"100"}}}}]}`

var dynamoHeader = http.Header{"X-Amz-Target": {"DynamoDB_20120810.TransactWriteItems"}, "Content-Type": {"application/x-amz-json-1.0"}}

// decodeDynamo reads TransactWriteItems's answer to a transaction done,
// first time or replayed: 200 and an empty object, which only a Decoder
// of DynamoDB's own can read.
func decodeDynamo() idem.Option {
	return idem.WithDecoder(func(a *idem.Answer) (idem.Outcome, error) {
		if a.StatusCode == http.StatusOK && !a.Query {
			return idem.Outcome{State: idem.StateSucceeded}, nil
		}
		return idem.DecodeJSON(a)
	})
}

// dynamoTokens models DynamoDB's TransactWriteItems: "A client request
// token is valid for 10 minutes after the first request that uses it is
// completed. After 10 minutes, any request with the same client token is
// treated as a new request"
// (https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_TransactWriteItems.html).
// Its first answer is lost (502 after the write); while down it answers
// 503 without writing.
type dynamoTokens struct {
	*httptest.Server
	clock  *idemtest.Clock
	mu     sync.Mutex
	done   map[string]time.Time
	writes int
	bodies []string
	down   bool
}

func newDynamoTokens(t testing.TB, clock *idemtest.Clock) *dynamoTokens {
	t.Helper()
	s := &dynamoTokens{clock: clock, done: map[string]time.Time{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var in struct{ ClientRequestToken string }
		_ = json.Unmarshal(body, &in)
		s.mu.Lock()
		defer s.mu.Unlock()
		s.bodies = append(s.bodies, string(body))
		if s.down {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		now := s.clock.Now()
		if at, ok := s.done[in.ClientRequestToken]; ok && now.Sub(at) < 10*time.Minute {
			_, _ = io.WriteString(w, `{}`) // the same result, nothing written
			return
		}
		s.done[in.ClientRequestToken] = now
		s.writes++
		if s.writes == 1 {
			// Written; the answer lost, and the endpoint out of reach.
			s.down = true
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		_, _ = io.WriteString(w, `{}`)
	}))
	t.Cleanup(s.Close)
	return s
}

// A transaction whose answer was lost while DynamoDB became unreachable,
// resumed 12 minutes later: DynamoDB has forgotten its token, so a resend
// writes it again. KeyRetentionDynamoDB stops resends before then;
// DefaultKeyRetention, longer than DynamoDB's window, does not.
func TestKeyRetentionDynamoDB(t *testing.T) {
	for _, tt := range windowRows(idem.KeyRetentionDynamoDB, "DynamoDB") {
		t.Run(tt.name, func(t *testing.T) {
			clock := idemtest.NewClock(epoch)
			srv := newDynamoTokens(t, clock)
			u, err := url.Parse(srv.URL)
			require.NoError(t, err)
			c := clientFor(t, srv.Server, clock, append(tt.opts(u.Host), idem.WithKeyInBody(), decodeDynamo())...)
			_, err = c.Submit(t.Context(), idem.Request{Key: "k", URL: srv.URL + "/", Body: []byte(dynamoTransaction), Header: dynamoHeader})
			require.ErrorIs(t, err, idem.ErrUnknownOutcome)

			op := resumeAfter(t, c, clock, 12*time.Minute, &srv.mu, &srv.down, "k")
			require.Equal(t, tt.review, op.Review)
			srv.mu.Lock()
			defer srv.mu.Unlock()
			require.Equal(t, tt.done, srv.writes, "transactions written")
			for i, b := range srv.bodies {
				require.Equalf(t, dynamoTransaction, b, "request %d", i+1)
			}
		})
	}
}

// windowRow is one way to name a server's key window, and what a resend
// after the server forgot the key then does: the work done (1: only
// the first send's) and the operation's review.
type windowRow struct {
	name   string
	opts   func(host string) []idem.Option
	done   int
	review string
}

// windowRows are the rows for a provider whose key window, preset, is
// shorter than DefaultKeyRetention: named, nothing is resent past it and
// a person is asked; left to the default, the forgotten key is resent
// and the work done twice (why the window needs naming).
func windowRows(preset time.Duration, provider string) []windowRow {
	return []windowRow{
		{"named", func(host string) []idem.Option {
			return []idem.Option{idem.WithHostKeyRetention(host, preset)}
		}, 1, idem.ReviewKeyExpired},
		{"DefaultKeyRetention, longer than " + provider + "'s", func(string) []idem.Option { return nil }, 2, ""},
	}
}

// resumeAfter brings a server that went down back up (down, under mu)
// after d, resumes c and returns the operation of key.
func resumeAfter(t testing.TB, c *idem.Client, clock *idemtest.Clock, d time.Duration, mu *sync.Mutex, down *bool, key string) *idem.Operation {
	t.Helper()
	clock.Advance(d)
	mu.Lock()
	*down = false
	mu.Unlock()
	_, err := c.Resume(t.Context())
	require.NoError(t, err)
	op, err := c.Lookup(t.Context(), idem.DefaultScope, key)
	require.NoError(t, err)
	return op
}

// helcimPayments models the Helcim Payment API's purchase: its
// idempotency-key header is "cleared after 5 minutes"; while it is held,
// "the payload ... identical to the previous payload received for that
// key" gets "the response from the first successful request", and
// afterwards the request is processed as a new transaction, past its
// Suspected Duplicate check too, which declines the same card and amount
// "within the last five minutes" only
// (https://devdocs.helcim.com/docs/idempotency-keys,
// https://devdocs.helcim.com/docs/suspected-duplicate-transactions).
// Its first answer is lost (502 after the charge); while down it
// answers 503 and charges nothing.
type helcimPayments struct {
	*httptest.Server
	clock     *idemtest.Clock
	mu        sync.Mutex
	keys      map[string]time.Time // when each key was first submitted
	purchases int
	seen      []string // the idempotency-key of every purchase request
	down      bool
}

func newHelcimPayments(t testing.TB, clock *idemtest.Clock) *helcimPayments {
	t.Helper()
	s := &helcimPayments{clock: clock, keys: map[string]time.Time{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		if r.Method != http.MethodPost {
			return // a clock probe
		}
		key := r.Header.Get("Idempotency-Key")
		s.mu.Lock()
		defer s.mu.Unlock()
		s.seen = append(s.seen, key)
		if s.down {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		now := s.clock.Now()
		w.Header().Set("Content-Type", "application/json")
		if at, ok := s.keys[key]; ok && now.Sub(at) < 5*time.Minute {
			_, _ = io.WriteString(w, helcimPurchase)
			return
		}
		s.keys[key] = now
		s.purchases++
		if s.purchases == 1 {
			s.down = true
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		_, _ = io.WriteString(w, helcimPurchase)
	}))
	t.Cleanup(s.Close)
	return s
}

// helcimPurchase is a purchase approved, in Helcim's transaction shape.
const helcimPurchase = `{"transactionId":21071575,"dateCreated":"2026-11-29 12:00:00","cardBatchId":1,"status":"APPROVED",` +
	`"type":"purchase","amount":10.99,"currency":"USD"}`

// A card purchase whose answer was lost while Helcim became unreachable,
// resumed 6 minutes later (a deploy, a crash loop): Helcim has cleared
// the key, so a resend charges the card again. KeyRetentionHelcim stops
// resends before then; DefaultKeyRetention (20 min) does not.
func TestKeyRetentionHelcim(t *testing.T) {
	const key = "k7f1b4c829e3a4e5b93b02ad1" // Helcim's keys: 25 alphanumerics
	for _, tt := range windowRows(idem.KeyRetentionHelcim, "Helcim") {
		t.Run(tt.name, func(t *testing.T) {
			clock := idemtest.NewClock(epoch)
			srv := newHelcimPayments(t, clock)
			u, err := url.Parse(srv.URL)
			require.NoError(t, err)
			c := clientFor(t, srv.Server, clock, tt.opts(u.Host)...)
			_, err = c.Submit(t.Context(), idem.Request{Key: key, URL: srv.URL + "/v2/payment/purchase",
				Body: []byte(`{"ipAddress":"192.168.1.1","currency":"USD","amount":10.99,"cardData":{"cardToken":"5b4aff8e2c3a1d9f7e6b05"}}`)})
			require.ErrorIs(t, err, idem.ErrUnknownOutcome)

			op := resumeAfter(t, c, clock, 6*time.Minute, &srv.mu, &srv.down, key)
			require.Equal(t, tt.review, op.Review)
			srv.mu.Lock()
			defer srv.mu.Unlock()
			require.Equal(t, tt.done, srv.purchases, "cards charged")
			for i, k := range srv.seen {
				require.Equalf(t, key, k, "purchase request %d: idempotency-key", i+1)
			}
		})
	}
}
