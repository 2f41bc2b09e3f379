package idem_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// connectPlatform is a provider a platform calls on behalf of its
// merchants with one secret key, naming the merchant's account per
// request in a header, Stripe Connect's Stripe-Account
// (docs.stripe.com/connect/authentication); a request without it acts as
// the platform's own account (""). Keys are scoped per account (modelled;
// Amazon Pay says so of its keys: "the same key can be used for different
// accounts", developer.amazon.com/docs/amazon-pay-api-v2/idempotency.html),
// so two merchants' order "1001" are two charges. The first answer under
// a key is stored and replayed, as Stripe's is. lost drops an account's
// next answer after the charge, calling then first.
type connectPlatform struct {
	mu      sync.Mutex
	answers map[string]string   // account + " " + key → stored answer
	charges map[string]int      // account → charges made
	sentTo  map[string][]string // key → the account of each request
	lost    map[string]func()
}

func newConnectPlatform(t *testing.T) (*connectPlatform, *httptest.Server) {
	p := &connectPlatform{answers: map[string]string{}, charges: map[string]int{},
		sentTo: map[string][]string{}, lost: map[string]func(){}}
	srv := httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(srv.Close)
	return p, srv
}

func (p *connectPlatform) serve(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	if r.Header.Get("Authorization") != "Bearer sk_platform" {
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	account, key := r.Header.Get("Stripe-Account"), r.Header.Get("Idempotency-Key")
	p.mu.Lock()
	p.sentTo[key] = append(p.sentTo[key], account)
	answer, replay := p.answers[account+" "+key]
	if !replay {
		p.charges[account]++
		answer = fmt.Sprintf(`{"id":"ch_%s_%d","object":"charge","status":"succeeded"}`, account, p.charges[account])
		p.answers[account+" "+key] = answer
	}
	then := p.lost[account]
	delete(p.lost, account)
	p.mu.Unlock()
	if then != nil {
		// Stopped first: the answer is lost with the caller gone, before
		// it could resend under its own context.
		then()
		dropConnection(w)
		return
	}
	if replay {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	_, _ = io.WriteString(w, answer)
}

// A platform's two merchants may both have an order "1001": each is its
// own operation when its account is its scope and travels in the
// journaled request. Resume then resends a merchant's lost order to that
// merchant's account, whatever context it runs under; an account the
// request hook took from the caller's context would be missing there,
// and the resend would charge the platform's own account.
func TestConnectedAccountsKeepTheirOrdersApart(t *testing.T) {
	body := []byte(`{"amount":1000,"currency":"eur","description":"order 1001"}`)
	order := func(url, account string) idem.Request {
		return idem.Request{Scope: account, Key: "1001", URL: url + "/v1/charges", Body: body,
			Header: http.Header{"Stripe-Account": {account}}}
	}
	platformKey := idem.WithRequestHook(func(r *http.Request) error {
		r.Header.Set("Authorization", "Bearer sk_platform") // the platform's, whatever the account
		return nil
	})

	t.Run("same key, two accounts, one answer lost", func(t *testing.T) {
		p, srv := newConnectPlatform(t)
		c := clientFor(t, srv, idemtest.NewClock(epoch), platformKey)

		a, err := c.Submit(t.Context(), order(srv.URL, "acct_A"))
		require.NoError(t, err)
		require.Equal(t, "ch_acct_A_1", a.ResourceID)

		// The process stops while B's answer is on its way back: its
		// caller's context ends, and Resume finishes the order.
		ctx, stop := context.WithCancel(t.Context())
		p.mu.Lock()
		p.lost["acct_B"] = stop
		p.mu.Unlock()
		_, err = c.Submit(ctx, order(srv.URL, "acct_B"))
		require.ErrorIs(t, err, idem.ErrUnknownOutcome)

		sum, err := c.Resume(context.Background())
		require.NoError(t, err)
		require.Equal(t, 1, sum.Succeeded)
		b, err := c.Lookup(t.Context(), "acct_B", "1001")
		require.NoError(t, err)
		require.Equal(t, idem.StateSucceeded, b.State)
		require.Equal(t, "ch_acct_B_1", b.Result.ResourceID, "B's order settled with its own charge")
		require.Empty(t, b.Result.Review)

		p.mu.Lock()
		defer p.mu.Unlock()
		require.Equal(t, map[string]int{"acct_A": 1, "acct_B": 1}, p.charges, "one charge per merchant, none on the platform's account")
		require.Equal(t, []string{"acct_A", "acct_B", "acct_B"}, p.sentTo["1001"], "the resend went to B's account")
	})

	t.Run("same key, two accounts, one scope", func(t *testing.T) {
		// Without scopes the journal holds one "1001": the second
		// merchant's order is refused before it is sent, never answered
		// with the first merchant's charge.
		p, srv := newConnectPlatform(t)
		c := clientFor(t, srv, idemtest.NewClock(epoch), platformKey)
		first, second := order(srv.URL, "acct_A"), order(srv.URL, "acct_B")
		first.Scope, second.Scope = "", ""
		_, err := c.Submit(t.Context(), first)
		require.NoError(t, err)
		res, err := c.Submit(t.Context(), second)
		require.ErrorIs(t, err, idem.ErrKeyConflict)
		require.Nil(t, res)
		p.mu.Lock()
		defer p.mu.Unlock()
		require.Equal(t, map[string]int{"acct_A": 1}, p.charges)
	})
}
