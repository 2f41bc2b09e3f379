package journal

import (
	"errors"
	"time"

	bolt "go.etcd.io/bbolt"
)

// CheckFile opens the journal at path (which no Store may hold) and runs
// bbolt's consistency check and the journal's own index check.
func CheckFile(path string) error {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second, ReadOnly: true})
	if err != nil {
		return err
	}
	defer db.Close()
	return db.View(func(tx *bolt.Tx) error {
		var errs []error
		for err := range tx.Check() {
			errs = append(errs, err)
		}
		_, _, err := check(tx)
		return errors.Join(append(errs, err)...)
	})
}

// FormatVersion is the format version this build writes.
const FormatVersion = formatVersion

// viewChecked brings the file up to date with the log, then checks its
// indexes against its records.
func (s *Store) viewChecked() error {
	if err := s.flush(); err != nil {
		return err
	}
	return s.db.View(func(tx *bolt.Tx) error {
		_, _, err := check(tx)
		return err
	})
}

// crash abandons s as a killed process would: nothing more is written (no
// apply, no log deletion), and the file's lock is released so that the
// test can open the journal again.
func (s *Store) crash(t interface{ Helper() }) {
	t.Helper()
	s.closed.Store(true)
	close(s.ap.stop)
	<-s.ap.done
	s.log.close()
	s.unregister()
	s.kept.suspend() // db.Close waits for every read transaction to end
	_ = s.db.Close()
}

// withApplyDelay sets how long the applier lets writes gather (a test
// that wants the log left unapplied gives it an hour).
func withApplyDelay(d time.Duration) Option {
	return optionFunc(func(c *config) { c.applyDelay = d })
}

// withFailCommit sets the applier's failCommit before its first pass.
func withFailCommit(fail func(written bool) error) Option {
	return optionFunc(func(c *config) { c.failCommit = fail })
}

// withOverlayMax lowers overlayMax, the overlay's bound.
func withOverlayMax(n int64) Option {
	return optionFunc(func(c *config) { c.overlayMax = n })
}

// WithApplyDelayForTest is withApplyDelay for the tests of package
// journal_test (its child processes): an hour keeps the applier from
// copying the log into the file before the child is killed.
func WithApplyDelayForTest(d time.Duration) Option { return withApplyDelay(d) }

// WithOverlayMaxForTest is withOverlayMax for the tests of package
// journal_test: a low bound makes small segments (a Store's segments are
// at most half of it), so that a child process's few writes rotate.
func WithOverlayMaxForTest(n int64) Option { return withOverlayMax(n) }

// OpenUnapplied opens the journal at path with its log left unapplied (see
// withApplyDelay), for a test that then calls Crash.
func OpenUnapplied(path string) (*Store, error) { return Open(path, withApplyDelay(time.Hour)) }

// Crash is crash, for an external test.
func (s *Store) Crash(t interface{ Helper() }) { s.crash(t) }
