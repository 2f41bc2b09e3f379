package idem_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
)

// The journal mends a log segment a cleanup job removed, and used to say
// nothing: idem.Open now hands the Client's logger to the journal, and
// Stats counts the segments lost.
func TestClientHearsOfLostLogSegment(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "orders.journal")
	var logged syncBuffer
	c, err := idem.Open(path, idem.WithLogger(slog.New(slog.NewJSONHandler(&logged, nil))))
	require.NoError(t, err)
	defer c.Close()
	req := func(key string) idem.Request {
		return idem.Request{Key: key, URL: "http://127.0.0.1:1/orders", Body: []byte(`{"amount":1}`)}
	}
	_, err = c.Prepare(ctx, req("order-1"))
	require.NoError(t, err)
	segs, err := filepath.Glob(path + ".log.*")
	require.NoError(t, err)
	require.Len(t, segs, 1)
	require.NoError(t, os.Remove(segs[0]))
	_, err = c.Prepare(ctx, req("order-2"))
	require.NoError(t, err)

	// The applier's own pass notices, within its delay.
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := c.Stats(ctx)
		require.NoError(t, err)
		if st.LostLogSegments == 1 {
			break
		}
		require.Zero(t, st.LostLogSegments)
		require.True(t, time.Now().Before(deadline), "no lost segment counted within 10 s")
		time.Sleep(10 * time.Millisecond) // polling a condition with a deadline
	}
	var warned []map[string]any
	for _, l := range logged.lines(t) {
		if msg, _ := l["msg"].(string); l["level"] == "WARN" && strings.HasPrefix(msg, "journal: a log segment was removed") {
			warned = append(warned, l)
		}
	}
	require.Len(t, warned, 1)
	require.Equal(t, segs[0], warned[0]["segment"])
}

// A journal another tool or a umask left readable by every user (0644)
// was opened without a word, though it holds every request's body. Open
// warns, naming the path and the mode, and changes nothing: a group's
// access (0640, which Compact keeps too) is the operator's choice, and
// neither that nor 0600 is warned of.
func TestClientWarnsOfJournalOthersCanRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "orders.journal")
	c, err := idem.Open(path)
	require.NoError(t, err)
	require.NoError(t, c.Close())
	for _, tc := range []struct {
		mode   os.FileMode
		warned bool
	}{{0o644, true}, {0o666, true}, {0o604, true}, {0o640, false}, {0o660, false}, {0o600, false}, {0o601, false}} {
		require.NoError(t, os.Chmod(path, tc.mode))
		var logged syncBuffer
		c, err := idem.Open(path, idem.WithLogger(slog.New(slog.NewJSONHandler(&logged, nil))))
		require.NoError(t, err, "mode %v", tc.mode)
		require.NoError(t, c.Close())
		var warned []map[string]any
		for _, l := range logged.lines(t) {
			if msg, _ := l["msg"].(string); l["level"] == "WARN" && strings.Contains(msg, "read or written by every user") {
				warned = append(warned, l)
			}
		}
		fi, err := os.Stat(path)
		require.NoError(t, err)
		require.Equal(t, tc.mode, fi.Mode().Perm(), "Open changed the mode")
		if !tc.warned {
			require.Empty(t, warned, "mode %v", tc.mode)
			continue
		}
		require.Len(t, warned, 1, "mode %v", tc.mode)
		require.Equal(t, path, warned[0]["path"])
		require.Equal(t, tc.mode.String(), warned[0]["mode"])
		require.Contains(t, warned[0]["msg"], "chmod 600")
	}
}
