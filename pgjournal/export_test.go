package pgjournal

// Seams for the committer's tests (package pgjournal_test).

// ErrGoexit is errGoexit.
var ErrGoexit = errGoexit

// CommitterQueued is how many writes wait for the next round.
func CommitterQueued(s *Store) int { return s.committer.q.Len() }

// CommitterRounds is how many transactions the committer has begun.
func CommitterRounds(s *Store) int64 { return s.committer.rounds.Load() }

// UseCallerClock makes s judge leases by the times its callers give, not
// by the database's clock: the conformance suite's clock is fixed, and
// jumps past a lease's end without waiting for it.
func UseCallerClock(s *Store) { s.callerClock = true }

// MigrateLockID is the advisory lock Migrate's transactions take for schema.
func MigrateLockID(schema string) int64 { return lockID(schema) }
