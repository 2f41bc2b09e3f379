package idemtest

import (
	"time"

	"github.com/idemkit/idem/internal/fakeserver"
)

// An Option configures a [Server] started by [NewServer].
type Option interface {
	apply(*fakeserver.Config)
}

type optionFunc func(*fakeserver.Config)

func (f optionFunc) apply(cfg *fakeserver.Config) { f(cfg) }

// WithKeyHeader names the idempotency key header (default
// "Idempotency-Key"), e.g. "PayPal-Request-Id".
func WithKeyHeader(name string) Option {
	return optionFunc(func(cfg *fakeserver.Config) { cfg.KeyHeader = name })
}

// WithScopeHeader names the header whose value scopes keys (default
// "Authorization"): requests with different values may use the same key.
func WithScopeHeader(name string) Option {
	return optionFunc(func(cfg *fakeserver.Config) { cfg.ScopeHeader = name })
}

// WithRetention sets how long the server remembers a key, measured from its
// first commit with the server's clock (default: the behaviour's window,
// else 24h). After it, the same key executes again. [NewServer] returns an
// error if it differs from the window of the [Behavior] given.
func WithRetention(d time.Duration) Option {
	return optionFunc(func(cfg *fakeserver.Config) { cfg.Retention = d })
}

// WithClock sets the server's clock, used for retention, query lag, slow
// processing, HTTP-date Retry-After values and every answer's Date
// (default time.Now). The delay fault waits in real time. Give it the
// clock the idem Client runs on: idem judges the key window of the
// operations an earlier Client left open by the server's Date when it
// reads ahead of the Client's clock, and a server on the wall clock,
// days ahead of a test clock started in the past, has each of them
// flagged "clock stepped back" rather than resent.
func WithClock(now func() time.Time) Option {
	return optionFunc(func(cfg *fakeserver.Config) { cfg.Now = now })
}

// WithSeed seeds the random faults of the profile: the same seed and the
// same sequence of submits give the same faults.
func WithSeed(seed int64) Option {
	return optionFunc(func(cfg *fakeserver.Config) { cfg.Seed = seed })
}

// WithProfile sets the random faults from the start; see [Profile].
// [NewServer] returns an error if p is invalid.
func WithProfile(p Profile) Option {
	return optionFunc(func(cfg *fakeserver.Config) { cfg.Profile = p.internal() })
}

// WithMaxKeys caps the keys stored (default 100,000); when full, a request
// with a new key gets 503 {"error":"key store full"}.
func WithMaxKeys(n int) Option {
	return optionFunc(func(cfg *fakeserver.Config) { cfg.MaxKeys = n })
}

// WithBehavior sets how the server answers a key it has seen, for its whole
// life: one of the presets ([IETFDraft], the default; [StoredErrors],
// [NoBodyCompare], [Conflict417], [ShortWindow]) or a [Behavior] of one's
// own. [NewServer] returns an error if b is invalid.
func WithBehavior(b Behavior) Option {
	return optionFunc(func(cfg *fakeserver.Config) { cfg.Behavior = fakeserver.Behavior(b) })
}
