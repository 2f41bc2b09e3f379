package idemtest_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/idemtest"
)

// A loop sleeping on a held Clock stops at its first Sleep once the clock
// reads the hold's time, the clock unmoved, and goes on when released or
// ends with its context: a test sees what the loop did by then, however
// late it looks.
func TestClockHoldFrom(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := idemtest.NewClock(start)
	held, release := clk.HoldFrom(start.Add(time.Minute))
	defer release()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	slept := make(chan error)
	go func() {
		for {
			if err := clk.Sleep(ctx, 25*time.Second); err != nil {
				slept <- err
				return
			}
		}
	}()
	select {
	case <-held:
	case <-time.After(time.Minute): // only a hang meets it
		t.Fatal("no Sleep held")
	}
	require.Equal(t, start.Add(75*time.Second), clk.Now(), "the clock: the first Sleep from a minute on is held before it moves it")
	select {
	case err := <-slept:
		t.Fatalf("the held Sleep returned %v", err)
	default:
	}
	cancel()
	require.ErrorIs(t, <-slept, context.Canceled)
	require.Equal(t, start.Add(75*time.Second), clk.Now())

	// Released, Sleep moves the clock again, the held one included.
	held, release = clk.HoldFrom(clk.Now())
	done := make(chan error)
	go func() { done <- clk.Sleep(context.Background(), time.Second) }()
	<-held
	release()
	release()
	require.NoError(t, <-done)
	require.NoError(t, clk.Sleep(context.Background(), time.Second))
	require.Equal(t, start.Add(77*time.Second), clk.Now())
}
