package main

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/fakeserver"
)

func TestWebhookFlags(t *testing.T) {
	opts, err := parseFlags([]string{
		"-webhook-url", "http://127.0.0.1:8080/hooks", "-webhook-secret", "whsec",
		"-webhook-lose", "0.1", "-webhook-duplicate", "0.2", "-webhook-delay", "3s", "-webhook-retries", "0",
	})
	require.NoError(t, err)
	require.Equal(t, &fakeserver.Webhook{URL: "http://127.0.0.1:8080/hooks", Secret: []byte("whsec"), Lose: 0.1, Duplicate: 0.2, Delay: 3 * time.Second, Retries: -1},
		opts.cfg.Webhook, "-webhook-retries 0: no retries")

	opts, err = parseFlags(nil)
	require.NoError(t, err)
	require.Nil(t, opts.cfg.Webhook, "no events without -webhook-url")

	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"-webhook-lose", "0.5"}, "-webhook-lose without -webhook-url"},
		{[]string{"-webhook-url", "http://127.0.0.1:1/"}, "without -webhook-secret"},
		{[]string{"-webhook-url", "http://127.0.0.1:1/", "-webhook-secret", "s", "-webhook-duplicate", "2"}, "want a probability"},
	} {
		_, err := parseFlags(tt.args)
		require.ErrorContains(t, err, tt.want, "%q", tt.args)
	}

	var stdout, stderr bytes.Buffer
	code := run(t.Context(), []string{"-webhook-url", "http://example.com/hooks", "-webhook-secret", "s"}, &stdout, &stderr)
	require.Equal(t, 2, code, "a webhook URL that is not loopback")
	require.Contains(t, stderr.String(), "not a loopback address")
}
