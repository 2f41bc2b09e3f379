package idem_test

import (
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
)

// TestGeneratedKeysAreTimeOrdered: NewKey and the keys Submit makes are
// UUIDv7, each sorting after the one made before it, so that the journal's
// key index grows at its right edge.
func TestGeneratedKeysAreTimeOrdered(t *testing.T) {
	e := newEnv(t)
	var keys []string
	for i := range 20 {
		if i%2 == 0 {
			keys = append(keys, idem.NewKey())
			continue
		}
		res, err := e.client.Submit(e.ctx, idem.Request{URL: e.srv.URL + "/orders", Body: []byte(`{}`)})
		require.NoError(t, err)
		keys = append(keys, res.Key)
	}
	for i, k := range keys {
		u, err := uuid.Parse(k)
		require.NoError(t, err, "key %d %q", i, k)
		require.Equal(t, uuid.Version(7), u.Version(), "key %d %q: version", i, k)
		if i > 0 {
			require.Less(t, keys[i-1], k, "key %d sorts after key %d", i, i-1)
		}
	}
}
