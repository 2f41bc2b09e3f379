package journaltest

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/journal"
)

// testKeyIgnoring checks idem.KeyIgnoringStore: an endpoint added is read
// back, once however often it is added, in byte order with the others;
// an empty one is refused (journal.ErrInvalid). A new one past
// journal.MaxKeyIgnoringEndpoints is kept, or refused as
// journal.ErrKeyIgnoringFull (the bound is the Store's to keep), never
// said nil and dropped.
func testKeyIgnoring(t *testing.T, s idem.Store) {
	ks, ok := s.(idem.KeyIgnoringStore)
	if !ok {
		t.Skip("the Store does not implement idem.KeyIgnoringStore")
	}
	ctx := context.Background()
	got, err := ks.KeyIgnoringEndpoints(ctx)
	require.NoError(t, err)
	require.Empty(t, got, "a new Store keeps none")
	const charge, refund = "POST https://api.example.com/v1/charge", "POST https://api.example.com/v1/refund"
	for _, e := range []string{refund, charge, refund} {
		require.NoError(t, ks.AddKeyIgnoring(ctx, e), "AddKeyIgnoring(%q)", e)
	}
	require.ErrorIs(t, ks.AddKeyIgnoring(ctx, ""), journal.ErrInvalid, "AddKeyIgnoring of no endpoint")
	got, err = ks.KeyIgnoringEndpoints(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{charge, refund}, got)

	// Past the bound: nil is "recorded" (the Client then clears the last
	// flag telling the next process of the endpoint), so one not kept is
	// refused; one recorded is still nil.
	for i := len(got); i < journal.MaxKeyIgnoringEndpoints; i++ {
		require.NoError(t, ks.AddKeyIgnoring(ctx, fmt.Sprintf("POST https://api.example.com/v1/customers/cus_%d/charges", i)))
	}
	const past = "POST https://api.example.com/v1/customers/cus_new/charges"
	err = ks.AddKeyIgnoring(ctx, past)
	if err != nil {
		require.ErrorIs(t, err, journal.ErrKeyIgnoringFull, "AddKeyIgnoring past journal.MaxKeyIgnoringEndpoints")
	}
	require.NoError(t, ks.AddKeyIgnoring(ctx, charge), "AddKeyIgnoring of one recorded, past the bound")
	got, gerr := ks.KeyIgnoringEndpoints(ctx)
	require.NoError(t, gerr)
	require.Equal(t, err == nil, slices.Contains(got, past), "read back exactly when AddKeyIgnoring past the bound said nil (it said %v)", err)
	want := journal.MaxKeyIgnoringEndpoints
	if err == nil {
		want++
	}
	require.Len(t, got, want)
}
