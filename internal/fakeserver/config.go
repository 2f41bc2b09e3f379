package fakeserver

import (
	"fmt"
	"time"

	"github.com/idemkit/idem/internal/httpsyntax"
)

// Defaults for the zero fields of [Config].
const (
	DefaultKeyHeader   = "Idempotency-Key"
	DefaultScopeHeader = "Authorization"
	DefaultRetention   = 24 * time.Hour
	DefaultMaxKeys     = 100_000
	DefaultMaxBody     = 1 << 20
)

const (
	// MaxKeyLen is the longest idempotency key accepted, in bytes, after
	// unquoting.
	MaxKeyLen = 255

	// MaxRequestLog is how many requests [Server.Requests] remembers: the
	// most recent ones.
	MaxRequestLog = 100_000
)

// Config configures a [Server]. The zero value is ready to use: every zero
// field takes its default. [New] returns an error for an invalid field: a
// header name that is not an RFC 9110 token, a negative Retention, MaxKeys
// or MaxBody, an invalid Profile or Behavior, or a Retention that differs
// from the Behavior's.
type Config struct {
	// KeyHeader names the idempotency key header (default
	// "Idempotency-Key"); error messages spell it as given here.
	// Its value is accepted bare (abc) or as an RFC 8941 sf-string ("abc",
	// with \" and \\ escapes); anything else gets 400.
	KeyHeader string

	// ScopeHeader names the header whose value is the caller's scope
	// (default "Authorization"; a missing header is scope ""). Keys are
	// scoped: two callers may use the same key.
	ScopeHeader string

	// Retention is the key window, measured from the first commit with the
	// server's clock (default: Behavior.Retention, else 24h). After it the
	// key is forgotten and the same key executes again, with a new side
	// effect, as on real servers.
	Retention time.Duration

	// MaxKeys caps the keys stored (default 100_000). When full, requests
	// with new keys get 503 {"error":"key store full"} until keys expire.
	MaxKeys int

	// MaxBody caps a request body, in bytes (default 1 MiB); larger bodies
	// get 413.
	MaxBody int64

	// Now is the clock for retention, query lag, slow processing and
	// HTTP-date Retry-After values; default time.Now. The response delay
	// fault waits in real time.
	Now func() time.Time

	// Seed seeds the RNG of the probabilistic faults: the same seed and the
	// same sequence of submits give the same faults.
	Seed int64

	// Profile sets probabilistic faults for soak runs; the zero value has
	// none. New returns an error if it is invalid (see [Profile]).
	Profile Profile

	// Behavior is how the server answers a key it has seen (see
	// [Behavior]); the zero value is the IETF draft.
	Behavior Behavior

	// Webhook, when set, sends an event for every state each committed
	// operation reaches (see [Webhook]). The server then runs delivery
	// goroutines until [Server.Close].
	Webhook *Webhook
}

// validate returns why cfg cannot configure a server, or nil. Zero fields are
// valid: they take their defaults. Its messages say what to change.
func (cfg Config) validate() error {
	for _, h := range []struct{ what, name string }{
		{"key header", cfg.KeyHeader},
		{"scope header", cfg.ScopeHeader},
	} {
		if h.name != "" && !httpsyntax.ValidHeaderName(h.name) {
			return fmt.Errorf("%s %q is not a valid header name (want a token such as Idempotency-Key, with no spaces, colons or other separators)", h.what, h.name)
		}
	}
	switch {
	case cfg.Retention < 0:
		return fmt.Errorf("retention %v is negative (want a positive duration, or 0 for the default %v)", cfg.Retention, DefaultRetention)
	case cfg.MaxKeys < 0:
		return fmt.Errorf("max keys %d is negative (want a positive number, or 0 for the default %d)", cfg.MaxKeys, DefaultMaxKeys)
	case cfg.MaxBody < 0:
		return fmt.Errorf("max body %d is negative (want a positive number of bytes, or 0 for the default %d)", cfg.MaxBody, DefaultMaxBody)
	}
	if err := cfg.Webhook.validate(); err != nil {
		return err
	}
	if err := cfg.Profile.validate(); err != nil {
		return fmt.Errorf("profile: %w", err)
	}
	if err := cfg.Behavior.validate(); err != nil {
		return fmt.Errorf("behavior %s: %w", cfg.Behavior, err)
	}
	if b := cfg.Behavior.Retention; b != 0 && cfg.Retention != 0 && b != cfg.Retention {
		return fmt.Errorf("retention %v and behavior %s's retention %v differ (set one of them)", cfg.Retention, cfg.Behavior, b)
	}
	return nil
}

// withDefaults returns cfg with its zero fields set to their defaults.
func (cfg Config) withDefaults() Config {
	if cfg.KeyHeader == "" {
		cfg.KeyHeader = DefaultKeyHeader
	}
	if cfg.ScopeHeader == "" {
		cfg.ScopeHeader = DefaultScopeHeader
	}
	if cfg.Retention <= 0 {
		cfg.Retention = cfg.Behavior.Retention
	}
	if cfg.Retention <= 0 {
		cfg.Retention = DefaultRetention
	}
	if cfg.MaxKeys <= 0 {
		cfg.MaxKeys = DefaultMaxKeys
	}
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = DefaultMaxBody
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return cfg
}
