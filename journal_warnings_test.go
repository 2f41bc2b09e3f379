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
		if l["level"] == "WARN" && strings.HasPrefix(l["msg"].(string), "journal: a log segment was removed") {
			warned = append(warned, l)
		}
	}
	require.Len(t, warned, 1)
	require.Equal(t, segs[0], warned[0]["segment"])
}
