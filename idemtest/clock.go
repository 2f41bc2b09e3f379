package idemtest

import (
	"context"
	"sync"
	"time"
)

// Clock is a manual clock for tests: Sleep does not block, it moves the
// clock forward by the duration asked and records it, so a test of backoff
// and Retry-After runs in microseconds and can assert every wait. It
// satisfies idem.Clock, and its Now fits the fake server's clock option.
// Safe for concurrent use; time only moves forward.
type Clock struct {
	mu     sync.Mutex
	now    time.Time
	sleeps []time.Duration
	hold   *clockHold // HoldFrom's, until released
}

// clockHold is a HoldFrom: from at on, Sleeps wait for released.
type clockHold struct {
	at       time.Time
	held     chan struct{} // closed by the first Sleep it holds
	released chan struct{}
	once     sync.Once
}

// NewClock returns a Clock set to start.
func NewClock(start time.Time) *Clock { return &Clock{now: start} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Sleep advances the clock by d at once, unless ctx is already done. Under
// a HoldFrom whose time the clock has reached, it first waits, the clock
// unmoved, until ctx ends or the hold is released.
func (c *Clock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	c.sleeps = append(c.sleeps, d)
	if h := c.hold; h != nil && !c.now.Before(h.at) {
		c.mu.Unlock()
		h.once.Do(func() { close(h.held) })
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-h.released:
		}
		c.mu.Lock()
	}
	if d > 0 {
		c.now = c.now.Add(d)
	}
	c.mu.Unlock()
	return nil
}

// HoldFrom stops every loop that sleeps on the clock at its first Sleep
// once the clock reads at or past t: that Sleep waits, the clock unmoved,
// until its context ends or release is called, and held is closed when
// the first one waits. A loop on a Clock (idem's Client.Run) otherwise
// runs on as fast as it can, ahead of a test that polls Now, by as much
// as the test is late to look (a loaded machine): what the loop did by t
// could not be told from what it did later. Release before the next
// HoldFrom; release may be called more than once.
func (c *Clock) HoldFrom(t time.Time) (held <-chan struct{}, release func()) {
	h := &clockHold{at: t, held: make(chan struct{}), released: make(chan struct{})}
	c.mu.Lock()
	c.hold = h
	c.mu.Unlock()
	var once sync.Once
	return h.held, func() {
		once.Do(func() {
			c.mu.Lock()
			if c.hold == h {
				c.hold = nil
			}
			c.mu.Unlock()
			close(h.released)
		})
	}
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if d > 0 {
		c.now = c.now.Add(d)
	}
}

// Sleeps returns every duration passed to Sleep, in order.
func (c *Clock) Sleeps() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.sleeps...)
}
