package main

import (
	"context"
	"io"
	"testing"
	"time"
)

func TestRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rep, err := run(ctx, io.Discard)
	if err != nil {
		t.Fatalf("run() error = %v", err)
	}
	if rep.ResourceID == "" || rep.SecondCall != rep.ResourceID {
		t.Errorf("resource ids = %q, then %q; want the same, non-empty", rep.ResourceID, rep.SecondCall)
	}
	if rep.Effects != 1 {
		t.Errorf("payments on the server = %d; want 1", rep.Effects)
	}
	if rep.Replays < 1 || rep.Queries != 0 {
		t.Errorf("replays = %d, queries = %d; want at least 1, 0", rep.Replays, rep.Queries)
	}
	if rep.Attempts < 2 {
		t.Errorf("attempts = %d; want at least 2 (the dropped one and the resend)", rep.Attempts)
	}
	if rep.SecondSends != 0 {
		t.Errorf("requests sent by the repeated Submit = %d; want 0", rep.SecondSends)
	}
}
