package idem_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/journal"
)

// payPalOrders models PayPal's Orders v2 create as far as this test needs:
// a request is de-duplicated by its PayPal-Request-Id header
// (developer.paypal.com/api/rest/reference/idempotency), and one without it
// is a new order; an Idempotency-Key header means nothing to it. The first
// order's answer is lost (the connection closes after it is made). It keeps
// the Authorization each request brought.
type payPalOrders struct {
	mu     sync.Mutex
	orders int
	byID   map[string]bool
	auth   []string
	ids    []string
}

func (p *payPalOrders) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	id := r.Header.Get("PayPal-Request-Id")
	p.auth = append(p.auth, r.Header.Get("Authorization"))
	p.ids = append(p.ids, id)
	replay := id != "" && p.byID[id]
	if !replay {
		p.orders++
		if id != "" {
			p.byID[id] = true
		}
	}
	first := p.orders == 1 && !replay
	p.mu.Unlock()
	if first {
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				_ = conn.Close()
				return
			}
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_, _ = w.Write([]byte(`{"id":"5O190127TN364715T","status":"CREATED"}`))
}

func bearer(token string) idem.Option {
	return idem.WithRequestHook(func(r *http.Request) error {
		r.Header.Set("Authorization", "Bearer "+token)
		return nil
	})
}

// A service calling two providers (Stripe, PayPal) that opens one journal
// and makes a Client per provider on it: each Client's Resume and Run
// drive every operation in the journal with that Client's key header,
// request hook and decoder, so the Stripe Client sent the PayPal order with
// Stripe's secret key and without PayPal-Request-Id. New refuses the
// second Client while the first is open, and takes one once it is closed.
func TestSecondClientOnAStoreIsRefused(t *testing.T) {
	ctx := context.Background()
	pp := &payPalOrders{byID: map[string]bool{}}
	srv := httptest.NewServer(pp)
	defer srv.Close()
	store, err := journal.Open(filepath.Join(t.TempDir(), "idem.journal"))
	require.NoError(t, err)
	defer store.Close()

	stripe, err := idem.New(store, bearer("sk_live_stripe"))
	require.NoError(t, err)
	payPalOpts := []idem.Option{idem.WithKeyHeader("PayPal-Request-Id", idem.KeyBare), bearer("A21AAF-paypal")}
	payPal, err := idem.New(store, payPalOpts...)
	if err == nil {
		// What the second Client let happen: its order, journaled
		// before a crash, is driven by the first Client's start-up.
		_, perr := payPal.Prepare(ctx, idem.Request{Key: payPalKey, URL: srv.URL + "/v2/checkout/orders", Body: []byte(payPalCreate)})
		require.NoError(t, perr)
		_, rerr := stripe.Resume(ctx)
		require.NoError(t, rerr)
		pp.mu.Lock()
		defer pp.mu.Unlock()
		t.Fatalf("a second Client on the Store was accepted: the PayPal host made %d orders, got Authorization %q and PayPal-Request-Id %q",
			pp.orders, pp.auth, pp.ids)
	}
	require.ErrorIs(t, err, idem.ErrInvalidRequest)
	require.ErrorContains(t, err, "another Client")
	// Closing the Stripe Client and then making the PayPal one would be
	// the same defect: the PayPal Client's Resume drives what the Stripe
	// one left open. The error must not offer that as a way out.
	require.ErrorContains(t, err, "those Clients before it left open too")
	require.ErrorContains(t, err, "make it again with the same settings")

	// Closed, the first Client leaves the Store to the next one; this
	// journal holds only the PayPal order, so a PayPal Client may take it.
	require.NoError(t, stripe.Close())
	payPal, err = idem.New(store, payPalOpts...)
	require.NoError(t, err)
	defer payPal.Close()
	res, err := payPal.Submit(ctx, idem.Request{Key: payPalKey, URL: srv.URL + "/v2/checkout/orders", Body: []byte(payPalCreate)})
	require.NoError(t, err)
	require.Equal(t, idem.StateSucceeded, res.State)
	pp.mu.Lock()
	defer pp.mu.Unlock()
	require.Equal(t, 1, pp.orders, "the lost answer's order is replayed under its PayPal-Request-Id")
	require.Equal(t, []string{"Bearer A21AAF-paypal", "Bearer A21AAF-paypal"}, pp.auth)
	require.Equal(t, []string{payPalKey, payPalKey}, pp.ids)
}

// Open's Client holds the journal it opened: New on its Store is a second
// Client.
func TestNewOnAnOpenedClientsStoreIsRefused(t *testing.T) {
	opened, err := idem.Open(filepath.Join(t.TempDir(), "idem.journal"))
	require.NoError(t, err)
	defer opened.Close()
	_, err = idem.New(opened.Store(), idem.WithKeyHeader("PayPal-Request-Id", idem.KeyBare))
	require.ErrorIs(t, err, idem.ErrInvalidRequest)
	require.ErrorContains(t, err, "another Client is open on this Store")
}
