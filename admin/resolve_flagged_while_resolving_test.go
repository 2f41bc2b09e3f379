package admin_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/admin"
	"github.com/idemkit/idem/journal"
)

// flaggedAtEachResolve is a journal shared with another replica whose
// drives flag the operation ReviewKeyIgnored (Solidgate's answers marked
// ignored, https://api-docs.solidgate.com/api/v2/idempotent-requests)
// after each read of the resolving Client's and before its write, so
// that each resolution made UnlessFlaggedKeyIgnored writes nothing
// (modelled: the Store refuses it as a shared one would, the record
// left as it was).
type flaggedAtEachResolve struct {
	*journal.Store
}

func (s flaggedAtEachResolve) Resolve(ctx context.Context, scope, key string, m journal.Manual) (*journal.Record, error) {
	return nil, fmt.Errorf("journal: resolution by %q: %w", m.By, journal.ErrFlaggedKeyIgnored)
}

// A resolution refused because the operation was flagged for an endpoint
// that ignores the key while it ran is a race that the next try wins
// (its read finds the flag and journals the endpoint first): a 409
// conflict that says to resolve again, not a 500 "internal" that tells
// the operator the handler is broken.
func TestResolveOfAnOperationFlaggedWhileResolvingIsAConflict(t *testing.T) {
	f := chargeFixture(t, "", func(s *journal.Store) idem.Store { return flaggedAtEachResolve{s} })
	var e struct{ Error admin.Error }
	require.Equal(t, http.StatusConflict, f.do(http.MethodPost, "/resolve",
		`{"key":"x","state":"succeeded","resource_id":"pay_x","reason":"one charge in the dashboard","by":"alice"}`, &e), "POST /resolve: %s", e.Error.Message)
	require.Equal(t, "conflict", e.Error.Code)
	require.Contains(t, e.Error.Message, "resolve it again")
	x, err := f.store.Get(context.Background(), idem.DefaultScope, "x")
	require.NoError(t, err)
	require.Equal(t, journal.StateUnknown, x.State, "journal: x resolved by a refused resolution")
}
