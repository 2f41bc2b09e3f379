package admin_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/admin"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

// x went to Solidgate's charge endpoint, which ignores the key ("A value
// of ignored means the endpoint does not",
// https://api-docs.solidgate.com/api/v2/idempotent-requests), and is
// flagged ReviewKeyIgnored; the endpoint was never journaled, the
// journal's endpoints at their bound (paths with ids), so x's flag is its
// one trace and Resolve refuses to clear it until room is made. That is
// the operator's to do, through this handler while the service holds the
// journal file: a 409 conflict that says how, as for any resolution the
// journal's state refuses, not a 500 "internal" that tells them the
// handler is broken. Removing one endpoint (POST /key-ignoring/remove)
// then lets the resolution through, the endpoint journaled first.
func TestResolveOfAKeyIgnoredFlagWithTheStoreFullIsAConflict(t *testing.T) {
	f := chargeFixture(t, journal.ReviewKeyIgnored, func(s *journal.Store) idem.Store { return s })
	ctx := context.Background()
	others := make([]string, journal.MaxKeyIgnoringEndpoints)
	for i := range others {
		others[i] = fmt.Sprintf("POST https://api.solidgate.example/api/v1/customers/cus_%d/charges", i)
		require.NoError(t, f.store.AddKeyIgnoring(ctx, others[i]))
	}

	resolve := `{"key":"x","state":"succeeded","resource_id":"pay_x","reason":"one charge in the dashboard","by":"alice"}`
	var e struct{ Error admin.Error }
	require.Equal(t, http.StatusConflict, f.do(http.MethodPost, "/resolve", resolve, &e), "POST /resolve: %s", e.Error.Message)
	require.Equal(t, "conflict", e.Error.Code)
	require.Contains(t, e.Error.Message, "make room (idem key-ignoring remove")
	x, err := f.store.Get(ctx, idem.DefaultScope, "x")
	require.NoError(t, err)
	require.Equal(t, journal.StateUnknown, x.State, "journal: x resolved by a refused resolution")
	require.Equal(t, journal.ReviewKeyIgnored, x.Review, "journal: x's flag cleared by a refused resolution")

	var removed admin.RemoveKeyIgnoringAnswer
	require.Equal(t, http.StatusOK, f.do(http.MethodPost, "/key-ignoring/remove", `{"endpoint":"`+others[0]+`"}`, &removed))
	var ans admin.ResolveAnswer
	require.Equal(t, http.StatusOK, f.do(http.MethodPost, "/resolve", resolve, &ans))
	require.Equal(t, "succeeded", ans.Operation.State)
	kept, err := f.store.KeyIgnoringEndpoints(ctx)
	require.NoError(t, err)
	require.Contains(t, kept, "POST https://api.solidgate.example/api/v1/charge", "journal: x's endpoint, journaled before its flag was cleared")
	require.NotContains(t, kept, others[0], "journal: the endpoint removed to make room")
}

// chargeFixture is a fixture whose journal holds x, a payment sent once
// to Solidgate's charge endpoint, unknown and flagged review, and whose
// Client's Store is wrap's of that journal.
func chargeFixture(t *testing.T, review string, wrap func(*journal.Store) idem.Store) *fixture {
	t.Helper()
	f := &fixture{t: t, clock: idemtest.NewClock(epoch)}
	var err error
	f.store, err = journal.Open(filepath.Join(t.TempDir(), "idem.journal"), journal.WithUnsafeNoSync())
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.store.Close() })
	body := []byte(`{"amount":500}`)
	_, err = f.store.Create(context.Background(), &journal.Record{
		Scope: idem.DefaultScope, Key: "x", Method: http.MethodPost, URL: "https://api.solidgate.example/api/v1/charge",
		Body: body, BodySHA: sha256.Sum256(body), State: journal.StateUnknown, Review: review,
		Attempts: []journal.Attempt{{Number: 1, Kind: journal.AttemptSubmit, Start: epoch.Add(-time.Hour), Wrote: true}},
		Created:  epoch.Add(-time.Hour), FirstSent: epoch.Add(-time.Hour), Updated: epoch.Add(-time.Hour),
	})
	require.NoError(t, err)
	f.client, err = idem.New(wrap(f.store), idem.WithClock(f.clock))
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.client.Close() })
	f.admin = httptest.NewServer(admin.NewHandler(f.client, admin.WithClock(f.clock)))
	t.Cleanup(f.admin.Close)
	return f
}
