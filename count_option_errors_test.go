package idem_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
)

// TestCountOptionErrorsNameTheOption: the count options refuse a count
// under 1 with one message that names the option and the value given, and
// take 1.
func TestCountOptionErrorsNameTheOption(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		bad, good idem.Option
		want      string
	}{
		{idem.WithMaxAttempts(0), idem.WithMaxAttempts(1), "idem: WithMaxAttempts: need at least 1, got 0"},
		{idem.WithMaxResponseBytes(-1), idem.WithMaxResponseBytes(1), "idem: WithMaxResponseBytes: need at least 1, got -1"},
		{idem.WithResumeConcurrency(0), idem.WithResumeConcurrency(1), "idem: WithResumeConcurrency: need at least 1, got 0"},
	} {
		c, err := idem.New(e.replica(), tc.bad)
		require.Nil(t, c)
		require.EqualError(t, err, tc.want)

		c, err = idem.New(e.replica(), tc.good)
		require.NoError(t, err, tc.want)
		require.NoError(t, c.Close())
	}
}
