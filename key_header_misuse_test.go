package idem_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/journal"
)

// TestKeyHeaderThatCannotCarryTheKey: WithKeyHeader took any header
// name. In a credential header (Authorization, X-Api-Key, …) the key is
// overwritten by the request hook that adds credentials (the server then
// gets the request without a key, and executes every resend afresh), or
// overwrites them; in a header about the body or a condition
// (Content-Type, If-Match, Expect, a method override) the server reads it
// as that, and result queries leave it off. New refuses each, saying why.
func TestKeyHeaderThatCannotCarryTheKey(t *testing.T) {
	store, err := journal.Open(filepath.Join(t.TempDir(), "idem.journal"), journal.WithUnsafeNoSync())
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	for _, name := range []string{
		"Authorization", "cookie", "Proxy-Authorization", "X-Api-Key", "Api-Key", "X-Auth-Token",
		"Content-Type", "Content-Encoding", "If-Match", "If-None-Match", "Expect", "Range", "X-HTTP-Method-Override",
		"Host", "Content-Length", "Connection",
	} {
		_, err := idem.New(store, idem.WithKeyHeader(name, idem.KeyBare))
		require.Error(t, err, "WithKeyHeader(%q)", name)
		require.Contains(t, err.Error(), "WithKeyHeader", name)
		require.Contains(t, err.Error(), "cannot carry the key", name)
		// What to do, for every refusal: not a connection header's own
		// advice ("put the host in URL", "remove it"), which is about
		// a Request.Header, not the key's.
		require.Contains(t, err.Error(), "name the header the API documents for idempotency keys", name)
	}
	// Named as a credential's, but none of the credential headers a hook
	// sets: AWS's X-Amzn-Client-Token, Twilio's I-Twilio-Idempotency-Token.
	for _, name := range []string{"Idempotency-Key", "PayPal-Request-Id", "X-Idempotency-Key", "Cko-Idempotency-Key", "X-Request-Id",
		"X-Amzn-Client-Token", "I-Twilio-Idempotency-Token"} {
		c, err := idem.New(store, idem.WithKeyHeader(name, idem.KeyBare))
		require.NoError(t, err, "WithKeyHeader(%q)", name)
		require.NoError(t, c.Close())
	}
}
