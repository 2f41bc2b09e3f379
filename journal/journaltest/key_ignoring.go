package journaltest

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/journal"
)

// testKeyIgnoring checks idem.KeyIgnoringStore: an endpoint added is read
// back, once however often it is added, in byte order with the others;
// an empty one is refused (journal.ErrInvalid), and so is a new one past
// journal.MaxKeyIgnoringEndpoints (journal.ErrKeyIgnoringFull).
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

	// Full: one more is refused, never taken for recorded (the Client
	// would clear the last flag telling the next process of it); one
	// recorded is still nil.
	for i := len(got); i < journal.MaxKeyIgnoringEndpoints; i++ {
		require.NoError(t, ks.AddKeyIgnoring(ctx, fmt.Sprintf("POST https://api.example.com/v1/customers/cus_%d/charges", i)))
	}
	require.ErrorIs(t, ks.AddKeyIgnoring(ctx, "POST https://api.example.com/v1/customers/cus_new/charges"), journal.ErrKeyIgnoringFull,
		"AddKeyIgnoring past journal.MaxKeyIgnoringEndpoints")
	require.NoError(t, ks.AddKeyIgnoring(ctx, charge), "AddKeyIgnoring of one recorded, the Store full")
	got, err = ks.KeyIgnoringEndpoints(ctx)
	require.NoError(t, err)
	require.Len(t, got, journal.MaxKeyIgnoringEndpoints)
}
