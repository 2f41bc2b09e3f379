package idem_test

import (
	"context"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

// twoHeaderKey models (modelled) an order API in the middle of moving
// its idempotency header from Idempotency-Key to PayPal's name for it,
// PayPal-Request-Id (https://developer.paypal.com/api/rest/reference/idempotency/),
// taking either and keeping each as it reads it: the header's name and
// its raw value, as a server that does not parse RFC 8941 strings reads
// `"k"` and `k` as two keys. A request under a name or form the key was
// not first sent with is a new order (newKeyReadingServer).
func twoHeaderKey(r *http.Request, _ []byte) string {
	key := ""
	for _, name := range []string{"Idempotency-Key", "Paypal-Request-Id"} {
		if v := r.Header.Get(name); v != "" {
			key = name + ": " + v
		}
	}
	return key
}

// answer has s answer from now on.
func (s *bodyKeyServer) answer() {
	s.mu.Lock()
	s.lose = false
	s.mu.Unlock()
}

// An order journaled by release 1 (the key in Idempotency-Key), its
// every answer lost, is resumed by release 2, deployed with the key's
// header renamed (PayPal-Request-Id) or its form changed (an RFC 8941
// string): the server reads the resend as a new key and orders again.
// It did: 2 orders, settled succeeded with the second. The record now
// says where its key went, and release 2 sends nothing: 1 order,
// unknown, ReviewKeyMoved; its caller's Submit (or Do) of the key is
// ErrInvalidRequest saying to keep the old settings for it. A Client on
// release 1's settings then settles it: the server's replay, 1 order.
func TestKeyHeaderRenamedDeployResendsUnderNoOtherKey(t *testing.T) {
	for _, tc := range []struct {
		name string
		next idem.Option
	}{
		{"renamed", idem.WithKeyHeader("PayPal-Request-Id", idem.KeyBare)},
		{"quoted", idem.WithKeyHeader("Idempotency-Key", idem.KeyQuoted)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			clock := idemtest.NewClock(epoch)
			s := newKeyReadingServer(t, clock, twoHeaderKey)
			path := filepath.Join(t.TempDir(), "idem.journal")
			base := []idem.Option{idem.WithHTTPClient(s.srv.Client()), idem.WithClock(clock)}
			req := idem.Request{Key: "ord-7f3a9c", URL: s.srv.URL + "/v1/orders", Body: []byte(`{"amount":100,"currency":"EUR"}`)}

			release := func(opts ...idem.Option) (*journal.Store, *idem.Client) {
				st, err := journal.Open(path)
				require.NoError(t, err)
				c, err := idem.New(st, append(append([]idem.Option{}, base...), opts...)...)
				require.NoError(t, err)
				return st, c
			}

			st, first := release()
			_, err := first.Submit(ctx, req)
			require.ErrorIs(t, err, idem.ErrUnknownOutcome)
			require.NoError(t, first.Close())
			require.NoError(t, st.Close())
			orders, sent := s.counts()
			require.Equal(t, 1, orders, "release 1's resends were replays of its first order")

			s.answer()
			clock.Advance(time.Minute) // well inside the key window

			st, second := release(tc.next)
			sum, err := second.Resume(ctx)
			require.NoError(t, err)
			orders, posts := s.counts()
			require.Equal(t, 1, orders, "release 2 resent under a key the server never saw")
			require.Equal(t, sent, posts, "nothing sent under release 2's settings")
			require.Equal(t, 1, sum.Review, "%+v", sum)
			rec, err := st.Get(ctx, idem.DefaultScope, req.Key)
			require.NoError(t, err)
			require.Equal(t, journal.StateUnknown, rec.State)
			require.Equal(t, idem.ReviewKeyMoved, rec.Review)
			require.Equal(t, "header Idempotency-Key", rec.KeyPlacement)

			_, err = second.Submit(ctx, req)
			require.ErrorIs(t, err, idem.ErrInvalidRequest)
			require.ErrorIs(t, err, idem.ErrNeedsReview)
			require.ErrorContains(t, err, `WithKeyHeader("Idempotency-Key", idem.KeyBare)`)
			op, err := second.Lookup(ctx, idem.DefaultScope, req.Key)
			require.NoError(t, err)
			_, err = second.Do(ctx, op)
			require.ErrorIs(t, err, idem.ErrInvalidRequest)
			orders, posts = s.counts()
			require.Equal(t, 1, orders)
			require.Equal(t, sent, posts, "nothing sent under release 2's settings")
			require.NoError(t, second.Close())
			require.NoError(t, st.Close())

			// Kept on release 1's settings for it, a caller's retry settles
			// it by the server's replay.
			st, back := release()
			defer func() { _ = st.Close() }()
			defer func() { _ = back.Close() }()
			res, err := back.Submit(ctx, req)
			require.NoError(t, err)
			require.Equal(t, "ord_1", res.ResourceID)
			orders, _ = s.counts()
			require.Equal(t, 1, orders)
		})
	}
}

// An order journaled with its key in the Idempotency-Key header, whose
// body repeats the key's value in a member the server does not read as
// its key (a merchant reference equal to the key), is resumed by a
// Client sending the key in the body (WithKeyInBody). The body holds the
// key's value, so the old check let it go: sent with no key header, a
// new order to the server (bodyKeyServer, which reads client_order_id
// or the header): 2 orders. The record's placement stops it now: 1
// order, unknown, ReviewKeyMoved, and a Submit of the key is
// ErrInvalidRequest.
func TestKeyInBodyClientSendsNoHeaderJournaledBodyRepeatingKey(t *testing.T) {
	ctx := context.Background()
	clock := idemtest.NewClock(epoch)
	s := newBodyKeyServer(t, clock)
	path := filepath.Join(t.TempDir(), "idem.journal")
	base := []idem.Option{idem.WithHTTPClient(s.srv.Client()), idem.WithClock(clock)}
	req := idem.Request{Key: "ord-7f3a9c", URL: s.srv.URL + "/v1/orders", Body: []byte(`{"amount":100,"merchant_reference":"ord-7f3a9c"}`)}

	st, err := journal.Open(path)
	require.NoError(t, err)
	before, err := idem.New(st, base...)
	require.NoError(t, err)
	_, err = before.Submit(ctx, req)
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	require.NoError(t, before.Close())
	require.NoError(t, st.Close())
	orders, sent := s.counts()
	require.Equal(t, 1, orders)

	s.answer()
	clock.Advance(time.Minute)

	st, after := deployKeyInBody(t, path, base)
	sum, err := after.Resume(ctx)
	require.NoError(t, err)
	orders, posts := s.counts()
	require.Equal(t, 1, orders, "sent with no key header: a new order")
	require.Equal(t, sent, posts)
	require.Equal(t, 1, sum.Review, "%+v", sum)
	rec, err := st.Get(ctx, idem.DefaultScope, req.Key)
	require.NoError(t, err)
	require.Equal(t, journal.StateUnknown, rec.State)
	require.Equal(t, idem.ReviewKeyMoved, rec.Review)

	_, err = after.Submit(ctx, req)
	require.ErrorIs(t, err, idem.ErrInvalidRequest)
	require.ErrorContains(t, err, "in the body (WithKeyInBody)")
	orders, posts = s.counts()
	require.Equal(t, 1, orders)
	require.Equal(t, sent, posts)
}
