package journal

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestLogBoundedWhileFileFails: while the file cannot take the log's
// writes, the log, not only the overlay, stays bounded: a few records
// updated again and again keep the overlay small while every update
// appends the whole record to the log, whose segments cannot be deleted;
// past four times the overlay's bound, writes are refused unwritten. (The
// next Open reads the whole log into memory.)
func TestLogBoundedWhileFileFails(t *testing.T) {
	ctx := context.Background()
	const bound = 256 << 10
	s, path := rvOpen(t, WithUnsafeNoSync(), withApplyDelay(time.Millisecond), withOverlayMax(bound))
	diskFull := errors.New("no space left on device (injected)")
	s.ap.mu.Lock()
	s.ap.failApply = func() error { return diskFull }
	s.ap.mu.Unlock()
	t.Cleanup(func() {
		s.ap.mu.Lock()
		s.ap.failApply = nil
		s.ap.mu.Unlock()
	})

	big := make([]byte, 16<<10)
	for i := range 4 {
		r := rvRecord(fmt.Sprint("k", i), rvT0)
		r.Body, r.BodySHA = big, sha256.Sum256(big)
		_, err := s.Create(ctx, r)
		require.NoError(t, err)
	}
	refused := 0
	for i := range 400 { // 400 updates of 16 KiB records: 6.4 MiB of log
		_, err := s.Update(ctx, "s", fmt.Sprint("k", i%4), func(r *Record) error {
			r.Ref = fmt.Sprint(i)
			return nil
		})
		if err != nil {
			require.ErrorIs(t, err, diskFull)
			refused++
		}
	}
	var logBytes int64
	for _, p := range segmentsOf(t, path) {
		fi, err := os.Stat(p)
		require.NoError(t, err)
		logBytes += fi.Size()
	}
	n, b := s.ov.size()
	t.Logf("overlay: %d records, %d bytes; log: %d bytes; refused writes: %d", n, b, logBytes, refused)
	require.LessOrEqual(t, logBytes, int64(4*bound+len(big)+4096), // a round past the bound at most
		"the log grew to %d bytes while the file took nothing (overlay bound %d, %d writes refused)", logBytes, bound, refused)
}
