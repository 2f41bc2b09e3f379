package idem

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestBudgetHost(t *testing.T) {
	for in, want := range map[string]string{
		"https://api.example.com/v1/orders":          "https://api.example.com",
		"http://127.0.0.1:8080/orders?x=1":           "http://127.0.0.1:8080",
		"https://user:secret@pay.example.com/charge": "https://pay.example.com",
		"https://pay.example.com?k=v":                "https://pay.example.com",
		"https://pay.example.com#frag":               "https://pay.example.com",
		"https://pay.example.com":                    "https://pay.example.com",
		"https://a@b@host.example/x":                 "https://host.example",
	} {
		require.Equal(t, want, budgetHost(in), in)
	}
}

// Past maxBudgetHosts drained hosts, the others share one bucket: it is
// charged and refilled, and never grows the map.
func TestRetryBudgetBeyondItsHosts(t *testing.T) {
	b := newRetryBudget(4, 1)
	for i := range maxBudgetHosts {
		b.failure(fmt.Sprint("h", i))
	}
	require.True(t, b.allowRetry("new"), "the shared bucket starts full")
	b.failure("new")
	b.failure("other")
	require.False(t, b.allowRetry("new"), "4 → 2: at half, retries stop")
	b.success("other")
	require.True(t, b.allowRetry("new"), "the shared bucket refills from its hosts' successes")
	require.Len(t, b.hosts, maxBudgetHosts)
	require.True(t, b.allowRetry("h0"), "3 of 4 tokens")
	b.success("h0")
	require.Len(t, b.hosts, maxBudgetHosts-1, "a full bucket takes no room")
}
