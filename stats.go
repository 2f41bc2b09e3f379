package idem

import (
	"context"
	"fmt"
	"time"

	"github.com/idemkit/idem/journal"
)

// StatsStore is a Store that can count its records by state cheaply; the
// package journal's Store is one. Client.Stats uses it when the Client's
// store provides it, and counts only open operations otherwise.
type StatsStore interface {
	Stats(ctx context.Context) (journal.Stats, error)
}

// NewerOpenCounter is a Store that counts its open records written by a
// newer idem (journal.Stats' NewerOpen) from its open records alone.
// RemoveKeyIgnoring and Client.ForgetKeyIgnoring ask it before they
// remove an endpoint, and fall back to Stats for a Store without it:
// Stats reads every record, settled ones too, so one damaged settled
// page, or a table too large to count within the call's timeout, failed
// every removal, and a journal full of endpoints (ErrKeyIgnoringFull)
// could never make room. The package journal's Store is one.
type NewerOpenCounter interface {
	NewerOpen(ctx context.Context) (int, error)
}

// Stats is a snapshot of the journal and of the Client's retry budget, for
// an admin handler, a metric or an alert.
type Stats struct {
	// ByState counts operations per state. Terminal states are counted
	// only when the store is a StatsStore (Complete).
	ByState map[State]int
	Open    int // pending, processing or unknown
	// Review counts operations flagged for a person: open ones, and,
	// when Complete, settled ones too (a failure the server's word
	// contradicts, a payment made twice: ReviewConfirmConflict,
	// ReviewMaybeTwice, ReviewMadeTwice), which need a person as much
	// and are counted in ByState's succeeded or failed as well.
	Review int
	// Total counts every journaled operation; 0 unless Complete.
	Total int
	// Complete: the store counted terminal operations too.
	Complete bool
	// OldestOpen and OldestUnknown are when the oldest open and the
	// oldest unknown operation were journaled; zero if there is none.
	OldestOpen, OldestUnknown time.Time
	// RetryTokens is what the retry budget of the host that holds least
	// holds, out of RetryTokensMax, the size of each host's budget (both 0
	// when the budget is off: WithRetryBudget(0, 0)). Retries to a host
	// stop while its budget holds RetryTokensMax/2 or less.
	RetryTokens, RetryTokensMax float64
	// RetryTokensByHost holds the budget of each host ("api.example.com",
	// "127.0.0.1:8443": named as Health and WithHostKeyRetention name it)
	// that holds less than RetryTokensMax; a host missing from it has a
	// full budget. Empty while every host's is full.
	RetryTokensByHost map[string]float64
	// LostLogSegments counts the journal's log segments found removed or
	// truncated under it since it was opened (journal.Stats); 0 unless
	// Complete. Above zero, something (a cleanup job, a log rotation)
	// touches <journal>.log.*: exclude them from it.
	LostLogSegments int
	// Newer counts the journal's operations written by a newer idem, in a
	// record version this build does not read (journal.Stats); 0 unless
	// Complete. Above zero, idem was rolled back: Resume and Run skip
	// such an operation (the journal's logger names each once: for the
	// bbolt journal, WithLogger's; pgjournal takes its own WithLogger),
	// and Prepare or Submit of its key fails with
	// journal.ErrVersion, so an open one waits for the newer idem.
	// List leaves them out. Settled ones keep it above zero until the
	// upgrade (Prune keeps them): alert on NewerOpen.
	Newer int
	// NewerOpen counts those of Newer that are open (journal.Stats): no
	// one settles them until the newer idem runs on the journal again.
	// 0 unless Complete.
	NewerOpen int
}

// Stats reads the journal's counts. It visits every open operation (its
// cost grows with their number, as Resume's does) and, when the store is a
// StatsStore, asks it for the rest: it is for an admin page or a metric
// scraped every few seconds, not for a hot path.
func (c *Client) Stats(ctx context.Context) (Stats, error) {
	if err := c.enter(ctx); err != nil {
		return Stats{}, err
	}
	defer c.exit()
	st := Stats{ByState: make(map[State]int)}
	st.RetryTokens, st.RetryTokensMax, st.RetryTokensByHost = c.budget.level()
	err := c.store.ForEachOpen(ctx, func(r *journal.Record) error {
		st.ByState[r.State]++
		st.Open++
		if r.Review != "" {
			st.Review++
		}
		if st.OldestOpen.IsZero() || r.Created.Before(st.OldestOpen) {
			st.OldestOpen = r.Created
		}
		if r.State == StateUnknown && (st.OldestUnknown.IsZero() || r.Created.Before(st.OldestUnknown)) {
			st.OldestUnknown = r.Created
		}
		return nil
	})
	if err != nil {
		return Stats{}, fmt.Errorf("idem: stats: %w", withCause(ctx, err))
	}
	if ss, ok := c.store.(StatsStore); ok {
		js, err := ss.Stats(ctx)
		if err != nil {
			return Stats{}, fmt.Errorf("idem: stats: %w", err)
		}
		for _, s := range []State{StateSucceeded, StateFailed} {
			if n := js.ByState[s]; n > 0 {
				st.ByState[s] = n
			}
		}
		st.Total, st.Complete = js.Total, true
		// The store's count, settled operations included: an alert on
		// flagged operations must fire for a payment that may have been
		// made twice as much as for one whose key expired.
		st.Review = js.Review
		st.LostLogSegments = js.LostLogSegments
		st.Newer, st.NewerOpen = js.Newer, js.NewerOpen
	}
	return st, nil
}

// Record returns a copy of the journaled record of an operation, attempts
// included, for an operator tool; or an error matching ErrNotFound. It
// holds nothing secret: credentials are added at send time and never
// journaled. An empty scope is the client's default (WithScope).
func (c *Client) Record(ctx context.Context, scope, key string) (*journal.Record, error) {
	if err := c.enter(ctx); err != nil {
		return nil, err
	}
	defer c.exit()
	scope = c.scopeOr(scope)
	rec, err := c.store.Get(ctx, scope, key)
	if err != nil {
		return nil, c.lookupErr(scope, key, err)
	}
	return rec, nil
}
