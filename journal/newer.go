package journal

import (
	"bytes"
	"context"
	"encoding/binary"
	"log/slog"
	"sync"

	bolt "go.etcd.io/bbolt"
)

// RecordVersion is the newest record encoding this build reads (and the
// one it writes). Every version keeps the first three bytes of
// EncodeRecord: two magic bytes and the version, so that a build finds a
// record written by a newer idem from its third byte alone and refuses it
// with ErrVersion rather than misread it. A Store that filters records
// in its database (pgjournal) compares that byte with RecordVersion.
const RecordVersion = recordVersion

// newerSkips remembers the records written by a newer idem (in a record
// version this build does not read, left by a rollback) that a scan of
// open records skipped, so that each is logged once per Store, not on
// every pass of Run.
type newerSkips struct {
	mu   sync.Mutex
	told map[string]bool // by sequence number
}

// skippedNewer logs, through WithLogger's logger, each record of seqs (the
// open records a scan skipped as written by a newer idem) not logged
// before, by its scope and key, which it looks up in tx's key index: once
// per record, so the walk of that index is paid once too.
func (s *Store) skippedNewer(tx *bolt.Tx, seqs [][]byte) {
	if len(seqs) == 0 || s.logger == nil {
		return
	}
	s.newer.mu.Lock()
	defer s.newer.mu.Unlock()
	fresh := make(map[string]bool)
	for _, sk := range seqs {
		if !s.newer.told[string(sk)] {
			fresh[string(sk)] = true
		}
	}
	if len(fresh) == 0 {
		return
	}
	if s.newer.told == nil {
		s.newer.told = make(map[string]bool)
	}
	found := 0
	// A plain cursor: the scan that found the records already read their
	// index entries, and a damaged key index only costs this log its key.
	c := tx.Bucket(bucketKeys).Cursor()
	for k, v := c.First(); k != nil && found < len(fresh); k, v = c.Next() {
		if !fresh[string(v)] {
			continue
		}
		found++
		s.newer.told[string(v)] = true
		scope, key, _ := bytes.Cut(k, []byte{0})
		s.logNewer(slog.String("scope", string(scope)), slog.String("key", string(key)))
	}
	for sk := range fresh {
		if !s.newer.told[sk] {
			s.newer.told[sk] = true
			s.logNewer(slog.Uint64("sequence", binary.BigEndian.Uint64([]byte(sk))))
		}
	}
}

// logNewer logs one open record skipped as written by a newer idem.
func (s *Store) logNewer(id ...slog.Attr) {
	attrs := append(id, slog.String("journal", s.path))
	s.logger.LogAttrs(context.Background(), slog.LevelWarn, "journal: an open record was written by a newer idem, which this build cannot read: "+
		"skipped (nothing sent or settled for it) until that idem runs on this journal again", attrs...)
}
