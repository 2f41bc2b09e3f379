package idem_test

import (
	"bytes"
	"encoding/json"
	"errors"
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

// windowServer is a server that holds what it did for a key (a token, a
// header, a body member) for window, counted by clock from the work: a
// request under a key it holds is answered held, without the work;
// after the window the same request is new work. Its first answer is
// lost (502 after the work); while down it answers 503 and does nothing.
type windowServer struct {
	*httptest.Server
	mu     sync.Mutex
	done   int
	bodies []string // each request's body
	keys   []string // each request's key
	down   bool
}

// newWindowServer serves POSTs keyed by keyOf; answer writes the answer
// to a request it holds (held) or did now.
func newWindowServer(t testing.TB, clock *idemtest.Clock, window time.Duration, keyOf func(*http.Request, []byte) string,
	answer func(w http.ResponseWriter, held bool)) *windowServer {
	s := &windowServer{}
	at := map[string]time.Time{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Method != http.MethodPost {
			return // a clock probe
		}
		key := keyOf(r, body)
		s.mu.Lock()
		defer s.mu.Unlock()
		s.bodies, s.keys = append(s.bodies, string(body)), append(s.keys, key)
		if s.down {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		now := clock.Now()
		if t0, ok := at[key]; ok && now.Sub(t0) < window {
			answer(w, true)
			return
		}
		at[key] = now
		s.done++
		if s.done == 1 {
			s.down = true
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		answer(w, false)
	}))
	t.Cleanup(s.Close)
	return s
}

// newDynamoTokens models DynamoDB's TransactWriteItems: "A client request
// token is valid for 10 minutes after the first request that uses it is
// completed. After 10 minutes, any request with the same client token is
// treated as a new request"
// (https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_TransactWriteItems.html).
// Its first answer is lost (502 after the write); while down it answers
// 503 without writing.
func newDynamoTokens(t testing.TB, clock *idemtest.Clock) *windowServer {
	t.Helper()
	return newWindowServer(t, clock, 10*time.Minute, func(_ *http.Request, body []byte) string {
		var in struct{ ClientRequestToken string }
		_ = json.Unmarshal(body, &in)
		return in.ClientRequestToken
	}, func(w http.ResponseWriter, _ bool) {
		_, _ = io.WriteString(w, `{}`) // the same result, and nothing written when held
	})
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
			lostThenResumed(t, tt, srv.Server, clock, 12*time.Minute, &srv.mu, &srv.down,
				idem.Request{Key: "k", URL: srv.URL + "/", Body: []byte(dynamoTransaction), Header: dynamoHeader},
				idem.WithKeyInBody(), decodeDynamo())
			srv.mu.Lock()
			defer srv.mu.Unlock()
			require.Equal(t, tt.done, srv.done, "transactions written")
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

// lostThenResumed submits req to srv through a client named as tt says,
// with opts, expecting the answer lost (ErrUnknownOutcome), then resumes
// it d later with the server back up, and asserts the review tt expects.
func lostThenResumed(t testing.TB, tt windowRow, srv *httptest.Server, clock *idemtest.Clock, d time.Duration, mu *sync.Mutex, down *bool, req idem.Request, opts ...idem.Option) {
	t.Helper()
	u, err := url.Parse(srv.URL)
	require.NoError(t, err)
	c := clientFor(t, srv, clock, append(tt.opts(u.Host), opts...)...)
	_, err = c.Submit(t.Context(), req)
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	op := resumeAfter(t, c, clock, d, mu, down, req.Key)
	require.Equal(t, tt.review, op.Review)
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

// newHelcimPayments models the Helcim Payment API's purchase: its
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
func newHelcimPayments(t testing.TB, clock *idemtest.Clock) *windowServer {
	t.Helper()
	return newWindowServer(t, clock, 5*time.Minute, func(r *http.Request, _ []byte) string {
		return r.Header.Get("Idempotency-Key")
	}, func(w http.ResponseWriter, _ bool) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, helcimPurchase)
	})
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
			lostThenResumed(t, tt, srv.Server, clock, 6*time.Minute, &srv.mu, &srv.down, idem.Request{Key: key, URL: srv.URL + "/v2/payment/purchase",
				Body: []byte(`{"ipAddress":"192.168.1.1","currency":"USD","amount":10.99,"cardData":{"cardToken":"5b4aff8e2c3a1d9f7e6b05"}}`)})
			srv.mu.Lock()
			defer srv.mu.Unlock()
			require.Equal(t, tt.done, srv.done, "cards charged")
			for i, k := range srv.keys {
				require.Equalf(t, key, k, "purchase request %d: idempotency-key", i+1)
			}
		})
	}
}

// newAuthorizeNetCharges models Authorize.Net's createTransactionRequest
// (POST /xml/v1/request.api), which keeps no idempotency key: a charge
// with the same card, amount and invoice number as one within its
// duplicate window, 120 seconds by default, is refused in a 200 with
// response code 3, reason 11, "A duplicate transaction has been
// submitted." (Zuora's Authorize.Net response codes: "submitted two
// minutes prior"; drupal commerce_authnet #3615524: "The default window
// is 120 seconds"); after it the same request is a new charge. Its JSON
// answers begin with a byte order mark. Its first answer is lost (502
// after the charge); while down it answers 503 and charges nothing.
func newAuthorizeNetCharges(t testing.TB, clock *idemtest.Clock) *windowServer {
	t.Helper()
	return newWindowServer(t, clock, 120*time.Second, func(_ *http.Request, body []byte) string {
		var in struct {
			CreateTransactionRequest struct {
				TransactionRequest struct {
					Order struct{ InvoiceNumber string }
				}
			}
		}
		_ = json.Unmarshal(body, &in)
		return in.CreateTransactionRequest.TransactionRequest.Order.InvoiceNumber
	}, func(w http.ResponseWriter, held bool) {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		if held {
			_, _ = io.WriteString(w, "\ufeff"+`{"transactionResponse":{"responseCode":"3","authCode":"","transId":"0",`+
				`"errors":[{"errorCode":"11","errorText":"A duplicate transaction has been submitted."}]},"refId":"r1",`+
				`"messages":{"resultCode":"Error","message":[{"code":"E00027","text":"The transaction was unsuccessful."}]}}`)
			return
		}
		_, _ = io.WriteString(w, "\ufeff"+`{"transactionResponse":{"responseCode":"1","authCode":"HW617E","transId":"40000000002",`+
			`"messages":[{"code":"1","description":"This transaction has been approved."}]},"refId":"r1",`+
			`"messages":{"resultCode":"Ok","message":[{"code":"I00001","text":"Successful."}]}}`)
	})
}

// decodeAuthorizeNet reads a createTransactionResponse as Authorize.Net's
// SDKs do, past its byte order mark: response code 1 approved, 2
// declined and 3 an error the transaction's failure.
func decodeAuthorizeNet(a *idem.Answer) (idem.Outcome, error) {
	var v struct {
		TransactionResponse struct {
			ResponseCode string `json:"responseCode"`
			TransID      string `json:"transId"`
			Errors       []struct {
				ErrorText string `json:"errorText"`
			} `json:"errors"`
		} `json:"transactionResponse"`
	}
	if err := json.Unmarshal(bytes.TrimPrefix(a.Body, []byte("\ufeff")), &v); err != nil {
		return idem.Outcome{}, err
	}
	switch tr := v.TransactionResponse; tr.ResponseCode {
	case "1":
		return idem.Outcome{State: idem.StateSucceeded, ResourceID: tr.TransID}, nil
	case "2", "3":
		out := idem.Outcome{State: idem.StateFailed}
		if len(tr.Errors) > 0 {
			out.Reason = tr.Errors[0].ErrorText
		}
		return out, nil
	}
	return idem.Outcome{}, errors.New("authorize.net: no transaction response")
}

const authorizeNetCharge = `{"createTransactionRequest":{"merchantAuthentication":{"name":"5KP3u95bQpv","transactionKey":"346HZ32z3fP4hTG2"},` +
	`"transactionRequest":{"transactionType":"authCaptureTransaction","amount":"5.00","payment":{"opaqueData":` +
	`{"dataDescriptor":"COMMON.ACCEPT.INAPP.PAYMENT","dataValue":"eyJjb2RlIjoiNTBfMl8wNjAwMDUzNkQ3"}},"order":{"invoiceNumber":"inv-7"}}}}`

// A card charge whose answer was lost while Authorize.Net became
// unreachable, resumed 3 minutes later: past its 120-second duplicate
// window the same charge is charged again. KeyRetentionAuthorizeNet stops
// resends before then; DefaultKeyRetention (20 min) does not.
func TestKeyRetentionAuthorizeNet(t *testing.T) {
	for _, tt := range windowRows(idem.KeyRetentionAuthorizeNet, "Authorize.Net") {
		t.Run(tt.name, func(t *testing.T) {
			clock := idemtest.NewClock(epoch)
			srv := newAuthorizeNetCharges(t, clock)
			lostThenResumed(t, tt, srv.Server, clock, 3*time.Minute, &srv.mu, &srv.down, idem.Request{Key: "inv-7",
				URL: srv.URL + "/xml/v1/request.api", Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(authorizeNetCharge)},
				idem.WithKeyInBody(), idem.WithDecoder(decodeAuthorizeNet))
			srv.mu.Lock()
			defer srv.mu.Unlock()
			require.Equal(t, tt.done, srv.done, "cards charged")
			for i, b := range srv.bodies {
				require.Equalf(t, authorizeNetCharge, b, "request %d", i+1)
			}
		})
	}
}
