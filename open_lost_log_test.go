package idem_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/journal"
	"github.com/idemkit/idem/journal/journaltest"
)

// A journal file copied alone while the application ran (a backup of the
// file without its *.log* segments, restored on a new host) is refused
// with journal.ErrLogMissing, whose message says to open it once with
// journal.AcceptLostLog: a caller of idem.Open passes journal options
// only through idem.WithJournalOptions, and the error it sees says so.
func TestOpenWithoutLogNamesTheOption(t *testing.T) {
	live := filepath.Join(t.TempDir(), "journal.db")
	s, err := journal.Open(live)
	require.NoError(t, err)
	_, err = s.Create(context.Background(), journaltest.NewRecord(idem.DefaultScope, "k-logged", time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)))
	require.NoError(t, err)
	data, err := os.ReadFile(live) // while open: the file depends on its log
	require.NoError(t, err)
	require.NoError(t, s.Close())
	path := filepath.Join(t.TempDir(), "journal.db")
	require.NoError(t, os.WriteFile(path, data, 0o600))

	c, err := idem.Open(path)
	require.Nil(t, c)
	require.True(t, errors.Is(err, journal.ErrLogMissing), "idem.Open of a journal without its log: %v", err)
	require.Contains(t, err.Error(), "journal.db.log.0000000000000001", "the error names the missing segment")
	require.Contains(t, err.Error(), "idem.WithJournalOptions(journal.AcceptLostLog())", "the error says how a caller of idem.Open goes on knowingly")
	require.Equal(t, 1, strings.Count(err.Error(), "idem.WithJournalOptions"), "the hint, once: %v", err)

	// The option the error names opens it.
	c, err = idem.Open(path, idem.WithJournalOptions(journal.AcceptLostLog()))
	require.NoError(t, err, "idem.Open with the option the error names")
	require.NoError(t, c.Close())
}
