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
	for _, tt := range []struct {
		name   string
		opts   func(host string) []idem.Option
		writes int
		review string
	}{
		{"KeyRetentionDynamoDB", func(host string) []idem.Option {
			return []idem.Option{idem.WithHostKeyRetention(host, idem.KeyRetentionDynamoDB)}
		}, 1, idem.ReviewKeyExpired},
		// Why DynamoDB needs its window named: the default resends the
		// forgotten token, and the transaction is written twice.
		{"DefaultKeyRetention, longer than DynamoDB's", func(string) []idem.Option { return nil }, 2, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			clock := idemtest.NewClock(epoch)
			srv := newDynamoTokens(t, clock)
			u, err := url.Parse(srv.URL)
			require.NoError(t, err)
			c := clientFor(t, srv.Server, clock, append(tt.opts(u.Host), idem.WithKeyInBody(), decodeDynamo())...)
			_, err = c.Submit(t.Context(), idem.Request{Key: "k", URL: srv.URL + "/", Body: []byte(dynamoTransaction), Header: dynamoHeader})
			require.ErrorIs(t, err, idem.ErrUnknownOutcome)

			clock.Advance(12 * time.Minute)
			srv.mu.Lock()
			srv.down = false
			srv.mu.Unlock()
			_, err = c.Resume(t.Context())
			require.NoError(t, err)

			op, err := c.Lookup(t.Context(), idem.DefaultScope, "k")
			require.NoError(t, err)
			require.Equal(t, tt.review, op.Review)
			srv.mu.Lock()
			defer srv.mu.Unlock()
			require.Equal(t, tt.writes, srv.writes, "transactions written")
			for i, b := range srv.bodies {
				require.Equalf(t, dynamoTransaction, b, "request %d", i+1)
			}
		})
	}
}
