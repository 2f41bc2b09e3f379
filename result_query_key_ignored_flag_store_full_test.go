package idem_test

import (
	"fmt"
	"net/http"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/journal"
)

// As TestResultQueryOfAKeyIgnoredFlagSetWhileItRanJournalsTheEndpoint, on
// a journal whose key-ignoring endpoints are full (MaxKeyIgnoringEndpoints
// other Solidgate endpoints kept), and with b's Resume, not a caller,
// visiting x: its query's settling write, refused over the flag a set
// while the query was out, could not journal the endpoint
// (ErrKeyIgnoringFull). That is the journal working, as a drive that read
// the flag before its query finds it and hands the operation off, flagged
// for a day: the refused write instead failed as a broken journal's, and
// Resume returned "journal write failed" on a journal that works (a
// service that stops on it failed its start-up). x stays open and flagged,
// sent no second time, and Resume succeeds.
func TestResumeOfAKeyIgnoredFlagSetWhileItRanWithTheStoreFullHandsItOff(t *testing.T) {
	s := newKeyIgnoringCharges(t, ignoredCreated)
	charge, orders := s.srv.URL+"/api/v1/charge", s.srv.URL+"/api/v1/orders"
	js, err := journal.Open(filepath.Join(t.TempDir(), "idem.journal"))
	require.NoError(t, err)
	for i := range journal.MaxKeyIgnoringEndpoints {
		require.NoError(t, js.AddKeyIgnoring(t.Context(), fmt.Sprintf("POST https://api.solidgate.example/api/v1/customers/cus_%d/charges", i)))
	}
	b, err := idem.New(js, idem.WithHTTPClient(s.srv.Client()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	_, err = b.Resume(t.Context())
	require.NoError(t, err)

	journalSent(t, js, "x", "", charge, orders, 1)
	var flags atomic.Int32
	s.result = func(n int, w http.ResponseWriter) {
		// Replica a's Confirm (markIgnoredBeforeConfirm), its save
		// refused: the store is full.
		if flagAsReplicaA(t, js, "x") {
			flags.Add(1)
		}
		orderStatus("pay_x", "settled")(w)
	}

	_, err = b.Resume(t.Context())
	require.NoError(t, err, "Resume on a journal that works")
	require.Equal(t, int32(1), flags.Load(), "a's flag committed while b's query was out")
	x, err := js.Get(t.Context(), idem.DefaultScope, "x")
	require.NoError(t, err)
	require.Equal(t, journal.StateUnknown, x.State, "journal: x, its endpoint unjournaled")
	require.Equal(t, idem.ReviewKeyIgnored, x.Review, "journal: x's flag, the endpoint's one trace")
	require.Empty(t, s.charged(), "charges: x sent no second time")
}
